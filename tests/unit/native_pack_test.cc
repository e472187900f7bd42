// The native adapter's batch of replicas as one nexec job pack (issue 48), against an
// in-process master that counts its calls (a fake: the real master's side is the
// conformance kit's batch case over real nexec processes, tests/adapters).
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "adapters/native/nexec_backend.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::adapter {
namespace {

namespace npb = ::nexec::v1;

// Answers Submit with job ids from 100, and SubmitPack the same way, submission by
// submission (one whose command is "refuse" refused), or UNIMPLEMENTED as a master of an
// earlier release does.
class CountingMaster final : public npb::Master::Service {
 public:
  explicit CountingMaster(bool packs) : packs_(packs) {}
  grpc::Status Submit(grpc::ServerContext*, const npb::SubmitRequest* req, npb::SubmitResponse* resp) override {
    submits++;
    keys.push_back(req->spec().submit_key());
    resp->set_job_id(next_++);
    return grpc::Status::OK;
  }
  grpc::Status SubmitPack(grpc::ServerContext*, const npb::SubmitPackRequest* req,
                          npb::SubmitPackResponse* resp) override {
    packs++;
    if (!packs_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no SubmitPack here");
    for (const auto& s : req->submissions()) {
      keys.push_back(s.spec().submit_key());
      auto* r = resp->add_results();
      if (s.spec().command() == "refuse") {
        r->set_code(grpc::StatusCode::INVALID_ARGUMENT);
        r->set_message("refused here");
      } else {
        r->set_job_id(next_++);
      }
    }
    return grpc::Status::OK;
  }
  std::atomic<int> submits{0}, packs{0};
  std::vector<std::string> keys;

 private:
  const bool packs_;
  int64_t next_ = 100;
};

struct FakeMaster {
  explicit FakeMaster(bool packs) : service(packs) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~FakeMaster() { server->Shutdown(); }
  CountingMaster service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

std::vector<ReplicaLaunch> Launches(const std::vector<std::string>& commands) {
  std::vector<ReplicaLaunch> out;
  for (size_t i = 0; i < commands.size(); ++i) {
    ReplicaLaunch l;
    l.name = "job-" + std::to_string(i) + "-r0";
    l.command = commands[i];
    l.user = "root";
    out.push_back(l);
  }
  return out;
}

TEST_CASE("native adapter: a batch of replicas goes to nexec as one job pack, keyed by the replicas' names, each "
          "answered or refused on its own [A14]",
          "[A14]") {
  FakeMaster master(/*packs=*/true);
  REQUIRE(master.port > 0);
  NexecBackend backend("127.0.0.1:" + std::to_string(master.port), "", nexec::MungeAuth::Disabled());
  auto ids = backend.SubmitEach(Launches({"true", "refuse", "true"}));
  REQUIRE(ids.size() == 3);
  CHECK(*ids[0] == "100");
  CHECK(ids[1].status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ids[1].status().message() == "nexec master: refused here");
  CHECK(*ids[2] == "101");
  CHECK(master.service.packs == 1);
  CHECK(master.service.submits == 0);
  CHECK(master.service.keys == std::vector<std::string>{"job-0-r0", "job-1-r0", "job-2-r0"});
}

TEST_CASE("native adapter: a master without job packs (an earlier release) gets a Submit per replica, and is not "
          "asked for a pack again [A14]",
          "[A14]") {
  FakeMaster master(/*packs=*/false);
  REQUIRE(master.port > 0);
  NexecBackend backend("127.0.0.1:" + std::to_string(master.port), "", nexec::MungeAuth::Disabled());
  auto ids = backend.SubmitEach(Launches({"true", "true"}));
  REQUIRE(ids.size() == 2);
  CHECK(*ids[0] == "100");
  CHECK(*ids[1] == "101");
  CHECK(master.service.packs == 1);
  CHECK(master.service.submits == 2);
  ids = backend.SubmitEach(Launches({"true", "true", "true"}));
  REQUIRE(ids.size() == 3);
  for (const auto& id : ids) CHECK(id.ok());
  CHECK(master.service.packs == 1);
  CHECK(master.service.submits == 5);
}

}  // namespace
}  // namespace jc::adapter
