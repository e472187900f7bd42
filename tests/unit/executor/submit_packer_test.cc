// The client's job packs (executor/client/submit_packer.h), over a fake master: who gets
// which answer, and how many packs go. The real master's side: tests/e2e/nexec_test.cc.
#include "executor/client/submit_packer.h"

#include <atomic>
#include <chrono>
#include <catch2/catch.hpp>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace jc::nexec {
namespace {

namespace pb = ::nexec::v1;

pb::SubmitRequest Named(const std::string& name) {
  pb::SubmitRequest r;
  r.mutable_spec()->set_name(name);
  r.mutable_spec()->set_command("true");
  return r;
}

TEST_CASE("a pack's answer goes to each submission at its index, a refusal to its own submission, a failed call or a "
          "miscounted answer to all of them [B11]") {
  pb::SubmitPackResponse answer;
  answer.add_results()->set_job_id(7);
  auto* refused = answer.add_results();
  refused->set_code(static_cast<int>(absl::StatusCode::kPermissionDenied));
  refused->set_message("may not submit jobs as root");
  auto results = PackResults(grpc::Status::OK, answer, 2);
  REQUIRE(results.size() == 2);
  CHECK(*results[0] == 7);
  CHECK(results[1].status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(results[1].status().message() == "may not submit jobs as root");

  for (const auto& r : PackResults(grpc::Status(grpc::StatusCode::UNAVAILABLE, "standing by"), answer, 3)) {
    CHECK(r.status().code() == absl::StatusCode::kUnavailable);
    CHECK(r.status().message() == "standing by");
  }
  for (const auto& r : PackResults(grpc::Status::OK, answer, 3)) {  // two results for three: none is believed
    CHECK(r.status().code() == absl::StatusCode::kInternal);
  }
}

TEST_CASE("submissions made while a pack is in flight go together in the next one, each caller gets its own job, "
          "and no pack is larger than asked [B11][B12]") {
  std::atomic<int> packs{0};
  std::atomic<int> largest{0};
  std::atomic<int64_t> next_id{1};
  absl::Notification first_in_flight, release_first;
  auto master = [&](const pb::SubmitPackRequest& req, pb::SubmitPackResponse* resp) {
    if (packs.fetch_add(1) == 0) {
      first_in_flight.Notify();
      release_first.WaitForNotification();  // the others queue up meanwhile
    }
    largest = std::max(largest.load(), req.submissions_size());
    for (const auto& s : req.submissions()) {
      auto* r = resp->add_results();
      if (s.spec().name().rfind("bad", 0) == 0) {
        r->set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
        r->set_message("refused: " + s.spec().name());
      } else {
        r->set_job_id(next_id.fetch_add(1));
      }
    }
    return grpc::Status::OK;
  };
  SubmitPacker packer(master, /*max_pack=*/4);
  std::vector<absl::StatusOr<int64_t>> got(10, absl::UnknownError("none"));
  std::thread first([&] { got[0] = packer.Submit(Named("job0")); });
  first_in_flight.WaitForNotification();
  std::vector<std::thread> rest;
  for (int i = 1; i < 10; ++i) {
    rest.emplace_back([&, i] { got[i] = packer.Submit(Named(i == 5 ? "bad5" : "job" + std::to_string(i))); });
  }
  // Every one of the nine is queued behind the first pack before it is let go.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (packer.queued() < 9 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(packer.queued() == 9);
  CHECK(packer.packs_sent() == 1);
  release_first.Notify();
  first.join();
  for (auto& t : rest) t.join();
  std::set<int64_t> ids;
  for (int i = 0; i < 10; ++i) {
    INFO(i);
    if (i == 5) {
      CHECK(got[i].status().code() == absl::StatusCode::kInvalidArgument);
      CHECK(got[i].status().message() == "refused: bad5");
      continue;
    }
    REQUIRE(got[i].ok());
    ids.insert(*got[i]);
  }
  CHECK(ids.size() == 9);
  CHECK(packs.load() == 4);  // the first alone, then the nine in packs of 4, 4 and 1
  CHECK(largest.load() == 4);
  CHECK(packer.packs_sent() == 4);
}

TEST_CASE("submissions are split into packs a master takes: at most 1,000 and 2 MiB each, a lone large one alone "
          "[B11]") {
  std::vector<pb::SubmitRequest> many(2500, Named("x"));
  auto packs = SplitIntoPacks(many);
  REQUIRE(packs.size() == 3);
  CHECK(packs[0].submissions_size() == 1000);
  CHECK(packs[2].submissions_size() == 500);
  // Jobs of 900 kB each (their environment): two a pack, under gRPC's 4 MiB a message,
  // and one of 3 MB goes alone.
  std::vector<pb::SubmitRequest> large(5, Named("big"));
  for (auto& r : large) (*r.mutable_spec()->mutable_env())["BIG"] = std::string(900000, 'x');
  (*large[2].mutable_spec()->mutable_env())["BIG"] = std::string(3000000, 'x');
  packs = SplitIntoPacks(large);
  std::vector<int> sizes;
  for (const auto& p : packs) {
    sizes.push_back(p.submissions_size());
    if (p.submissions_size() > 1) CHECK(p.ByteSizeLong() <= kMaxPackBytes + 100);
  }
  CHECK(sizes == std::vector<int>{2, 1, 2});
  CHECK(SplitIntoPacks({}).empty());

  // The packer keeps to the same budget: five callers of 900 kB each, never three in a pack.
  std::atomic<int> most{0};
  SubmitPacker packer([&](const pb::SubmitPackRequest& req, pb::SubmitPackResponse* resp) {
    most = std::max(most.load(), req.submissions_size());
    for (int i = 0; i < req.submissions_size(); ++i) resp->add_results()->set_job_id(1);
    return grpc::Status::OK;
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&] {
      pb::SubmitRequest r = Named("big");
      (*r.mutable_spec()->mutable_env())["BIG"] = std::string(900000, 'x');
      CHECK(packer.Submit(std::move(r)).ok());
    });
  }
  for (auto& t : threads) t.join();
  CHECK(most.load() <= 2);
}

TEST_CASE("a pack whose call throws answers each of its callers and lets the next pack go [B11]") {
  std::atomic<int> calls{0};
  SubmitPacker packer([&](const pb::SubmitPackRequest& req, pb::SubmitPackResponse* resp) -> grpc::Status {
    if (calls.fetch_add(1) == 0) throw std::runtime_error("boom");
    for (int i = 0; i < req.submissions_size(); ++i) resp->add_results()->set_job_id(9);
    return grpc::Status::OK;
  });
  auto first = packer.Submit(Named("a"));
  CHECK(first.status().code() == absl::StatusCode::kInternal);
  auto second = packer.Submit(Named("b"));
  REQUIRE(second.ok());
  CHECK(*second == 9);
}

}  // namespace
}  // namespace jc::nexec
