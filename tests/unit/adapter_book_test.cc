// The adapter SDK's book of replicas (AdapterCore), over a scheduler in memory: what it
// finds through its indexes (a gang's replicas, the queued ones) is what a walk of every
// replica found, and stays so across a restart. The index of replicas serving an endpoint
// (the prober's) is proven by the conformance case whose endpoint becomes ready.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "adapters/sdk/adapter_core.h"
#include "adapters/sdk/center_config.h"
#include "common/store/schema.h"
#include "common/store/store.h"
#include "tests/testing/memory_scheduler.h"

namespace {

namespace pb = jc::adapter::pb;

pb::SubmitReplicaRequest Replica(const std::string& job, int index) {
  pb::SubmitReplicaRequest r;
  r.mutable_key()->set_job_id(job);
  r.mutable_key()->set_replica_index(index);
  r.set_command("sleep 600");
  r.set_resource_spec_id("cpu-4");
  return r;
}

pb::ReplicaKey Key(const std::string& job, int index) { return Replica(job, index).key(); }

struct Book {
  Book() : dir(std::filesystem::temp_directory_path() / absl::StrCat("jc-adapter-book-test-", getpid())) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto opened = jc::store::OpenStore("sqlite://" + (dir / "adapter.db").string());
    REQUIRE(opened.ok());
    store = *std::move(opened);
    REQUIRE(jc::store::Migrate(*store).ok());
    auto parsed = jc::adapter::ParseCenterConfig("center_id: book\nspecs:\n  - {id: cpu-4, cpu: 4, memory: 1Gi}\n");
    REQUIRE(parsed.ok());
    center = *parsed;
    Open();
  }
  ~Book() {
    if (core) core->Stop();
    std::filesystem::remove_all(dir);
  }
  // The adapter (again, as after a restart: its book read back from the store).
  void Open() {
    if (core) core->Stop();
    jc::adapter::CoreOptions options;
    options.poll_interval = absl::Hours(1);  // the test polls
    core = std::make_unique<jc::adapter::AdapterCore>(&scheduler, center, store.get(), options);
    REQUIRE(core->Start().ok());
  }
  pb::Replica Get(const pb::ReplicaKey& key) {
    auto r = core->Get(key);
    REQUIRE(r.ok());
    return *r;
  }
  int QueuedCpu() {
    auto usage = core->Usage();
    REQUIRE(usage.ok());
    return usage->used().cpu();
  }

  std::filesystem::path dir;
  std::unique_ptr<jc::store::Store> store;
  jc::adapter::CenterConfig center;
  jc::testing::MemoryScheduler scheduler{pb::REPLICA_PENDING};
  std::unique_ptr<jc::adapter::AdapterCore> core;
};

}  // namespace

TEST_CASE("an adapter stops and withdraws a gang's replicas together and no other job's, counts only its queued "
          "replicas in its usage, and does so after a restart as before [A14][A8][A16]",
          "[A14][A8][A16]") {
  Book book;
  pb::SubmitGangRequest gang_a, gang_b;
  *gang_a.add_replicas() = Replica("gang-a", 0);
  *gang_a.add_replicas() = Replica("gang-a", 1);
  *gang_b.add_replicas() = Replica("gang-b", 0);
  *gang_b.add_replicas() = Replica("gang-b", 1);
  *gang_b.add_replicas() = Replica("gang-b", 2);
  auto a = book.core->SubmitGang(gang_a);
  auto b = book.core->SubmitGang(gang_b);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  pb::SubmitReplicasRequest singles;
  *singles.add_replicas() = Replica("single-1", 0);
  *singles.add_replicas() = Replica("single-2", 0);
  for (const auto& answer : book.core->SubmitMany(singles)) REQUIRE(answer.ok());
  const std::string a_id = (*a)[0].external_id(), b_id = (*b)[0].external_id();
  CHECK((*a)[1].external_id() == a_id);
  CHECK((*b)[2].external_id() == b_id);
  CHECK(a_id != b_id);

  // Queued: 2 + 3 + 2 replicas of 4 CPUs; gang-a starts, and leaves the queue.
  CHECK(book.QueuedCpu() == 7 * 4);
  book.scheduler.Set(a_id, pb::REPLICA_RUNNING);
  REQUIRE(book.core->PollOnce().ok());
  CHECK(book.Get(Key("gang-a", 1)).state() == pb::REPLICA_RUNNING);
  CHECK(book.QueuedCpu() == 5 * 4);

  SECTION("as first started") {}
  SECTION("after a restart") { book.Open(); }

  // A stop of one replica of gang-a stops both, and the scheduler's job once per stop asked.
  auto stopped = book.core->StopReplica(Key("gang-a", 0));
  REQUIRE(stopped.ok());
  CHECK(stopped->state() == pb::REPLICA_STOPPED);
  CHECK(book.Get(Key("gang-a", 1)).state() == pb::REPLICA_STOPPED);
  CHECK(book.scheduler.stopped() == std::vector<std::string>{a_id});
  for (const std::string job : {"gang-b", "single-1", "single-2"}) {
    INFO(job);
    CHECK(book.Get(Key(job, 0)).state() == pb::REPLICA_PENDING);
  }
  CHECK(book.QueuedCpu() == 5 * 4);

  // A withdrawal of gang-b's middle replica takes all three back, and only them.
  auto withdrawn = book.core->WithdrawReplica(Key("gang-b", 1));
  REQUIRE(withdrawn.ok());
  CHECK(withdrawn->withdrawn());
  for (int i = 0; i < 3; ++i) {
    pb::Replica r = book.Get(Key("gang-b", i));
    CHECK(r.state() == pb::REPLICA_STOPPED);
    CHECK(r.withdrawn());
  }
  CHECK(book.Get(Key("single-1", 0)).state() == pb::REPLICA_PENDING);
  CHECK(book.QueuedCpu() == 2 * 4);

  // A single replica stops alone, and a stop of what ended changes nothing.
  REQUIRE(book.core->StopReplica(Key("single-2", 0)).ok());
  CHECK(book.Get(Key("single-1", 0)).state() == pb::REPLICA_PENDING);
  CHECK(book.QueuedCpu() == 1 * 4);
  REQUIRE(book.core->StopReplica(Key("gang-a", 1)).ok());
  CHECK(book.scheduler.stopped().size() == 2);

  // What the book knows survives another restart: the one replica left is the one queued.
  book.Open();
  CHECK(book.QueuedCpu() == 1 * 4);
  CHECK(book.Get(Key("gang-b", 2)).withdrawn());
}

TEST_CASE("an adapter's walks of its replicas, a few hundred at a time so that submits need not wait for them, "
          "still count every queued replica of thousands and see a change on any of them [A14][A8]",
          "[A14][A8]") {
  // Usage and the poller walk every replica not ended, letting go of the book's lock
  // between chunks (AdapterCore::kLiveChunk); the walk resumes where it stopped.
  Book book;
  constexpr int kReplicas = 3 * jc::adapter::AdapterCore::kLiveChunk - 236;  // three chunks, the last partial
  pb::SubmitReplicasRequest many;
  for (int i = 0; i < kReplicas; ++i) *many.add_replicas() = Replica(absl::StrCat("walk-", i), 0);
  std::vector<std::string> ids;
  for (const auto& answer : book.core->SubmitMany(many)) {
    REQUIRE(answer.ok());
    ids.push_back(answer->external_id());
  }
  CHECK(book.QueuedCpu() == kReplicas * 4);

  // Replicas in the second chunk and the last start: the poll sees both, and they leave
  // the queued count; nothing else changes.
  const int second = jc::adapter::AdapterCore::kLiveChunk + 7, last = kReplicas - 1;
  std::vector<std::string> names;
  for (int i = 0; i < kReplicas; ++i) names.push_back(absl::StrCat("walk-", i));
  for (int i : {second, last}) book.scheduler.Set(ids[i], pb::REPLICA_RUNNING);
  REQUIRE(book.core->PollOnce().ok());
  int running = 0;
  for (int i = 0; i < kReplicas; ++i) {
    if (book.Get(Key(names[i], 0)).state() == pb::REPLICA_RUNNING) ++running;
  }
  CHECK(running == 2);
  CHECK(book.Get(Key(names[second], 0)).state() == pb::REPLICA_RUNNING);
  CHECK(book.Get(Key(names[last], 0)).state() == pb::REPLICA_RUNNING);
  CHECK(book.QueuedCpu() == (kReplicas - 2) * 4);
}

TEST_CASE("a batch of replicas that name datasets is taken, each told where its dataset is, and the adapter answers "
          "everything else meanwhile [A6][A7]",
          "[A6][A7]") {
  Book book;
  pb::Dataset corpus;
  corpus.set_data_name("corpus");
  corpus.set_data_version("v1");
  corpus.set_url("file:///data/corpus/v1");
  book.center.datasets.push_back(corpus);
  book.Open();
  // The sender's batch: what queued for this center while its last call was out. Until the
  // fix, the batch held the book's lock while a replica's datasets were looked up under the
  // same lock, and the adapter hung for good: this submit, and every usage read and poll.
  pb::SubmitReplicasRequest batch;
  for (int i = 0; i < 2; ++i) {
    pb::SubmitReplicaRequest r = Replica("staged", i);
    r.add_datasets("corpus:v1");
    *batch.add_replicas() = r;
  }
  *batch.add_replicas() = Replica("plain", 0);
  auto answered = std::make_shared<std::promise<std::vector<absl::StatusOr<pb::Replica>>>>();
  auto answers = answered->get_future();
  std::thread([answered, core = book.core.get(), batch] { answered->set_value(core->SubmitMany(batch)); }).detach();
  if (answers.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    FAIL_CHECK("SubmitMany did not answer within 20 s: the adapter is deadlocked");
    std::abort();  // a thread holds the book's lock for good: nothing after this could end
  }
  for (const auto& answer : answers.get()) CHECK(answer.ok());
  auto environments = book.scheduler.environments();
  REQUIRE(environments.size() == 3);
  CHECK(environments[0]["JC_DATASETS"] == "corpus:v1=/data/corpus/v1");
  CHECK(environments[1]["JC_DATASETS"] == "corpus:v1=/data/corpus/v1");
  CHECK(environments[2].count("JC_DATASETS") == 0);
  CHECK(book.core->Usage().ok());
}
