// The conformance kit's test cases. Every test talks to the adapter through its gRPC
// server, as the control plane does.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <set>

#include <catch2/catch.hpp>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/sdk/adapter_core.h"
#include "adapters/sdk/conformance/conformance.h"
#include "adapters/sdk/readiness.h"
#include "adapters/sdk/run_adapter.h"
#include "common/exec/exec_stream.h"
#include "common/store/doc.h"
#include "common/store/store.h"
#include "common/timestamp.h"
#include "jointcloud/adapter/v1/adapter.grpc.pb.h"
#include "tests/testing/test_account.h"

namespace jc::adapter::conformance {
namespace {

std::string UniqueJobId() {
  static std::atomic<int> n{0};
  return absl::StrCat("kit", getpid(), "x", absl::ToUnixMillis(absl::Now()) % 100000000, "x", n++);
}

// Every call the kit makes has a deadline: an adapter that hangs fails the test with the
// call's name instead of hanging it.
void SetDeadline(grpc::ClientContext* ctx, absl::Duration d) { ctx->set_deadline(absl::ToChronoTime(absl::Now() + d)); }

class Kit {
 public:
  // `customize` may change the center's configuration before the adapter starts.
  explicit Kit(const std::function<void(CenterConfig&)>& customize = {}) : target_(MakeConformanceTarget()) {
    if (!target_.unavailable.empty()) FAIL(target_.name << " cannot be tested here: " << target_.unavailable);
    if (customize) customize(target_.center);
    state_dir_ = std::filesystem::temp_directory_path() / ("jc-kit-" + UniqueJobId());
    std::filesystem::create_directories(state_dir_);
    StartAdapter();
  }
  ~Kit() {
    server_.reset();
    backend_.reset();
    std::filesystem::remove_all(state_dir_);
  }

  void StartAdapter() {
    backend_ = target_.make_backend();
    AdapterOptions o;
    o.listen = "127.0.0.1:0";
    o.metrics_address = "127.0.0.1:0";
    o.state_dir = state_dir_.string();
    o.poll_interval = absl::Milliseconds(100);
    o.center = target_.center;
    auto s = AdapterServer::Start(backend_.get(), o);
    REQUIRE(s.ok());
    server_ = std::move(*s);
    stub_ = pb::Adapter::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                     grpc::InsecureChannelCredentials()));
  }
  // Stops the adapter (the center's scheduler keeps running) and starts a new one over
  // the same state.
  void RestartAdapter() {
    server_->Shutdown();
    server_.reset();
    backend_.reset();
    StartAdapter();
  }

  // Stops the adapter, writes its stored replicas and events back as an adapter before ADR
  // 0002's amendment for them wrote them (protobuf JSON), and starts a new one over them.
  void RestartOnJsonRows() {
    server_->Shutdown();
    server_.reset();
    backend_.reset();
    {
      auto db = store::OpenStore("sqlite://" + (state_dir_ / "adapter.db").string());
      REQUIRE(db.ok());
      auto replicas = (*db)->Query("SELECT name, doc FROM adapter_replicas");
      REQUIRE(replicas.ok());
      REQUIRE_FALSE(replicas->empty());
      for (const auto& row : *replicas) {
        REQUIRE_FALSE(absl::StartsWith(*row[1], "{"));  // written as protobuf now
        auto r = store::DecodeAnyDoc<pb::Replica>(row[1]);
        REQUIRE(r.ok());
        auto json = store::EncodeDoc(*r);
        REQUIRE(json.ok());
        REQUIRE((*db)->Exec("UPDATE adapter_replicas SET doc = $1 WHERE name = $2", {*json, *row[0]}).ok());
      }
      auto events = (*db)->Query("SELECT seq, doc FROM adapter_events");
      REQUIRE(events.ok());
      REQUIRE_FALSE(events->empty());
      for (const auto& row : *events) {
        auto e = store::DecodeAnyDoc<pb::ReplicaEvent>(row[1]);
        REQUIRE(e.ok());
        auto json = store::EncodeDoc(*e);
        REQUIRE(json.ok());
        REQUIRE((*db)->Exec("UPDATE adapter_events SET doc = $1 WHERE seq = $2",
                            {*json, static_cast<int64_t>(e->cursor())}).ok());
      }
    }
    StartAdapter();
  }

  pb::SubmitReplicaRequest Request(const std::string& command, const std::string& job = "") {
    pb::SubmitReplicaRequest r;
    r.mutable_key()->set_job_id(job.empty() ? UniqueJobId() : job);
    r.set_command(command);
    r.set_resource_spec_id(target_.spec_id);
    return r;
  }
  grpc::Status Submit(const pb::SubmitReplicaRequest& req, pb::Replica* out) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, target_.timeout);
    return stub_->SubmitReplica(&ctx, req, out);
  }
  pb::Replica MustSubmit(const std::string& command) {
    pb::Replica r;
    grpc::Status s = Submit(Request(command), &r);
    INFO(s.error_message());
    REQUIRE(s.ok());
    return r;
  }
  grpc::Status Get(const pb::ReplicaKey& key, pb::Replica* out) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, target_.timeout);
    pb::ReplicaRef ref;
    *ref.mutable_key() = key;
    return stub_->GetReplica(&ctx, ref, out);
  }
  grpc::Status Stop(const pb::ReplicaKey& key, pb::Replica* out) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, target_.timeout);
    pb::ReplicaRef ref;
    *ref.mutable_key() = key;
    return stub_->StopReplica(&ctx, ref, out);
  }
  // Waits until the replica is in `state` (or ended otherwise) and returns it.
  pb::Replica WaitFor(const pb::ReplicaKey& key, pb::ReplicaState state) {
    absl::Time deadline = absl::Now() + target_.timeout;
    pb::Replica r;
    while (absl::Now() < deadline) {
      REQUIRE(Get(key, &r).ok());
      if (r.state() == state) return r;
      bool ended = r.state() == pb::REPLICA_SUCCEEDED || r.state() == pb::REPLICA_FAILED ||
                   r.state() == pb::REPLICA_STOPPED;
      if (ended && state != pb::REPLICA_RUNNING) break;
      if (ended) break;
      absl::SleepFor(absl::Milliseconds(50));  // polling interval, bounded by the deadline
    }
    INFO(target_.name << ": replica " << r.name() << " is " << pb::ReplicaState_Name(r.state())
                      << " (" << r.message() << "), expected " << pb::ReplicaState_Name(state));
    REQUIRE(r.state() == state);
    return r;
  }
  // Waits until the replica's first endpoint is ready, with `endpoints` of them (or the
  // deadline); returns the replica as last read.
  pb::Replica WaitForReady(const pb::ReplicaKey& key, int endpoints) {
    pb::Replica seen;
    const absl::Time deadline = absl::Now() + target_.timeout;
    while (absl::Now() < deadline) {
      REQUIRE(Get(key, &seen).ok());
      if (seen.endpoints_size() == endpoints && seen.endpoints(0).ready()) break;
      absl::SleepFor(absl::Milliseconds(100));  // the adapter probes about every 250 ms
    }
    return seen;
  }
  std::string Log(const pb::ReplicaKey& key, int64_t offset = 0, bool stderr = false) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, target_.timeout);
    pb::ReadLogRequest req;
    *req.mutable_key() = key;
    req.set_offset(offset);
    req.set_stderr(stderr);
    auto reader = stub_->ReadLog(&ctx, req);
    std::string out;
    pb::LogChunk chunk;
    while (reader->Read(&chunk)) out += chunk.data();
    grpc::Status s = reader->Finish();
    INFO(s.error_message());
    REQUIRE(s.ok());
    return out;
  }
  // Events after `since` until `until` returns true for one of them (or the deadline).
  std::vector<pb::ReplicaEvent> Watch(uint64_t since,
                                      const std::function<bool(const pb::ReplicaEvent&)>& until) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + target_.timeout));
    pb::WatchRequest req;
    req.set_since_cursor(since);
    auto reader = stub_->Watch(&ctx, req);
    std::vector<pb::ReplicaEvent> out;
    pb::ReplicaEvent e;
    while (reader->Read(&e)) {
      out.push_back(e);
      if (until(e)) {
        ctx.TryCancel();
        break;
      }
    }
    reader->Finish().IgnoreError();
    return out;
  }

  // WatchBatches' messages after `since` until `until` returns true for an event of one
  // (or the deadline); `status` gets how the stream ended when asked.
  std::vector<pb::ReplicaEvents> WatchBatches(uint64_t since, const std::function<bool(const pb::ReplicaEvent&)>& until,
                                              grpc::Status* status = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + target_.timeout));
    pb::WatchRequest req;
    req.set_since_cursor(since);
    auto reader = stub_->WatchBatches(&ctx, req);
    std::vector<pb::ReplicaEvents> out;
    pb::ReplicaEvents batch;
    bool done = false;
    while (!done && reader->Read(&batch)) {
      out.push_back(batch);
      for (const auto& e : batch.events()) done = done || until(e);
    }
    if (done) ctx.TryCancel();
    grpc::Status s = reader->Finish();
    if (status != nullptr) *status = s;
    return out;
  }

  ConformanceTarget target_;
  std::filesystem::path state_dir_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<AdapterServer> server_;
  std::unique_ptr<pb::Adapter::Stub> stub_;
};

}  // namespace

TEST_CASE("conformance: a replica runs to completion and its events say so [A14]", "[A14][conformance]") {
  Kit kit;
  pb::Replica r = kit.MustSubmit("echo hello from the kit");
  CHECK(r.name() == ReplicaName(r.key()));
  CHECK_FALSE(r.external_id().empty());
  pb::Replica done = kit.WaitFor(r.key(), pb::REPLICA_SUCCEEDED);
  CHECK(done.exit_code() == 0);
  CHECK(done.has_ended_at());
  auto events = kit.Watch(0, [&](const pb::ReplicaEvent& e) {
    return e.replica().name() == r.name() && e.replica().state() == pb::REPLICA_SUCCEEDED;
  });
  std::vector<pb::ReplicaState> seen;
  for (const auto& e : events) {
    if (e.replica().name() == r.name()) seen.push_back(e.replica().state());
  }
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.front() == pb::REPLICA_PENDING);
  CHECK(seen.back() == pb::REPLICA_SUCCEEDED);
  for (size_t i = 1; i < events.size(); ++i) CHECK(events[i].cursor() > events[i - 1].cursor());
  CHECK(absl::StrContains(kit.Log(r.key()), "hello from the kit"));
}

TEST_CASE("conformance: a replica runs as the account run_as maps its project to, and an unmapped project is "
          "refused [A14][C6]",
          "[A14][C6][conformance]") {
  if (geteuid() != 0) {
    WARN("not run: running replicas as another account needs root (CI runs as root)");
    return;
  }
  jc::testing::TestAccount account("jc-kit-run-as");
  Kit kit([&](CenterConfig& c) {
    c.run_as.configured = true;
    c.run_as.projects["kit"] = account.name;
  });
  pb::SubmitReplicaRequest req = kit.Request("echo ran as $(id -un) $(id -u) $(id -g)");
  req.set_project("kit");
  req.set_job_user("someone");
  pb::Replica r;
  grpc::Status s = kit.Submit(req, &r);
  INFO(s.error_message());
  REQUIRE(s.ok());
  kit.WaitFor(r.key(), pb::REPLICA_SUCCEEDED);
  // Its group too is the account's, not the adapter's.
  CHECK(absl::StrContains(kit.Log(r.key()), absl::StrCat("ran as ", account.name, " ", account.uid, " ", account.gid)));

  pb::SubmitReplicaRequest other = kit.Request("id");
  other.set_project("elsewhere");
  pb::Replica refused;
  s = kit.Submit(other, &refused);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(s.error_message(), "maps no local account for project \"elsewhere\""));
  pb::Replica none;
  CHECK(kit.Get(other.key(), &none).error_code() == grpc::StatusCode::NOT_FOUND);

  // A caller cannot pick the account, neither another ordinary one nor root.
  for (const std::string& pick : {std::string("nobody"), std::string("root")}) {
    pb::SubmitReplicaRequest chosen = kit.Request("id");
    chosen.set_project("kit");
    chosen.set_user(pick);
    s = kit.Submit(chosen, &refused);
    INFO(pick << ": " << s.error_message());
    CHECK(s.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(absl::StrContains(s.error_message(), "chooses the accounts its replicas run as"));
    CHECK(kit.Get(chosen.key(), &none).error_code() == grpc::StatusCode::NOT_FOUND);
  }
}

TEST_CASE("conformance: a replica that ran reports what it used: its start, its end and the wall time between, "
          "by the center's clock [A14]",
          "[A14][conformance]") {
  // What the federation meters and bills (issue 31): the center's own measure.
  Kit kit;
  pb::Replica r = kit.MustSubmit("sleep 2");
  pb::Replica done = kit.WaitFor(r.key(), pb::REPLICA_SUCCEEDED);
  INFO(done.DebugString());
  REQUIRE(done.has_started_at());
  REQUIRE(done.has_ended_at());
  absl::Duration ran = absl::FromUnixSeconds(done.ended_at().seconds()) + absl::Nanoseconds(done.ended_at().nanos()) -
                       absl::FromUnixSeconds(done.started_at().seconds()) - absl::Nanoseconds(done.started_at().nanos());
  // Slurm says times to the second.
  CHECK(ran >= absl::Seconds(1));
  CHECK(ran <= absl::Seconds(30));
  CHECK(done.usage().wall_seconds() >= 1);
  CHECK(done.usage().wall_seconds() <= 30);
}

TEST_CASE("conformance: a non-zero exit fails the replica with its exit code [A14]", "[A14][conformance]") {
  Kit kit;
  pb::Replica r = kit.MustSubmit("echo failing >&2; exit 3");
  pb::Replica failed = kit.WaitFor(r.key(), pb::REPLICA_FAILED);
  CHECK(failed.exit_code() == 3);
  CHECK(absl::StrContains(kit.Log(r.key(), 0, /*stderr=*/true) + kit.Log(r.key()), "failing"));
}

TEST_CASE("conformance: stopping a running replica ends it and it stays stopped [A14]", "[A14][conformance]") {
  Kit kit;
  pb::Replica r = kit.MustSubmit("sleep 300");
  kit.WaitFor(r.key(), pb::REPLICA_RUNNING);
  pb::Replica stopped;
  grpc::Status s = kit.Stop(r.key(), &stopped);
  INFO(s.error_message());
  REQUIRE(s.ok());
  CHECK(stopped.state() == pb::REPLICA_STOPPED);
  // Polls after the stop do not turn it into something else.
  REQUIRE(kit.server_->core().PollOnce().ok());
  pb::Replica again;
  REQUIRE(kit.Get(r.key(), &again).ok());
  CHECK(again.state() == pb::REPLICA_STOPPED);
  // Stopping it twice is harmless.
  REQUIRE(kit.Stop(r.key(), &again).ok());
  CHECK(again.state() == pb::REPLICA_STOPPED);
}

TEST_CASE("conformance: a withdrawal takes back a replica that has not started, or leaves one that started running, "
          "never both, or is unimplemented [A14][A16]",
          "[A14][A16][conformance]") {
  Kit kit;
  pb::Replica r = kit.MustSubmit("sleep 2; echo ran");
  pb::ReplicaRef ref;
  *ref.mutable_key() = r.key();
  pb::Replica answer;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, absl::Seconds(30));
  grpc::Status s = kit.stub_->WithdrawReplica(&ctx, ref, &answer);
  INFO(s.error_message());
  if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) return;  // the control plane never moves its replicas
  REQUIRE(s.ok());
  if (answer.withdrawn()) {
    CHECK(answer.state() == pb::REPLICA_STOPPED);
    CHECK_FALSE(answer.has_started_at());
    // It never starts: polls after the withdrawal leave it withdrawn, and it wrote nothing.
    for (int i = 0; i < 3; ++i) REQUIRE(kit.server_->core().PollOnce().ok());
    pb::Replica again;
    REQUIRE(kit.Get(r.key(), &again).ok());
    CHECK(again.withdrawn());
    CHECK(again.state() == pb::REPLICA_STOPPED);
    CHECK_FALSE(again.has_started_at());
  } else {
    // It started first: it runs on, to its end, as if never asked.
    CHECK(answer.state() != pb::REPLICA_STOPPED);
    pb::Replica done = kit.WaitFor(r.key(), pb::REPLICA_SUCCEEDED);
    CHECK_FALSE(done.withdrawn());
    CHECK(kit.Log(r.key()) == "ran\n");
  }
}

TEST_CASE("conformance: logs can be read while the replica runs and after, from an offset [A14]",
          "[A14][conformance]") {
  Kit kit;
  pb::Replica r = kit.MustSubmit("echo first; sleep 3; echo second");
  kit.WaitFor(r.key(), pb::REPLICA_RUNNING);
  std::string early;
  absl::Time deadline = absl::Now() + kit.target_.timeout;
  while (!absl::StrContains(early, "first") && absl::Now() < deadline) {
    early = kit.Log(r.key());
    absl::SleepFor(absl::Milliseconds(50));  // polling interval, bounded by the deadline
  }
  CHECK(absl::StrContains(early, "first"));
  CHECK_FALSE(absl::StrContains(early, "second"));
  kit.WaitFor(r.key(), pb::REPLICA_SUCCEEDED);
  std::string all = kit.Log(r.key());
  CHECK(all == "first\nsecond\n");
  CHECK(kit.Log(r.key(), 6) == "second\n");
}

TEST_CASE("conformance: a repeated submit returns the replica already there [A14]", "[A14][conformance]") {
  Kit kit;
  pb::SubmitReplicaRequest req = kit.Request("sleep 1");
  pb::Replica first, second, other;
  REQUIRE(kit.Submit(req, &first).ok());
  REQUIRE(kit.Submit(req, &second).ok());
  CHECK(second.external_id() == first.external_id());
  // Also after a restart of the adapter.
  kit.RestartAdapter();
  REQUIRE(kit.Submit(req, &second).ok());
  CHECK(second.external_id() == first.external_id());
  // Another attempt of the same replica is another replica.
  req.mutable_key()->set_attempt(1);
  REQUIRE(kit.Submit(req, &other).ok());
  CHECK(other.external_id() != first.external_id());
  kit.WaitFor(first.key(), pb::REPLICA_SUCCEEDED);
  kit.WaitFor(other.key(), pb::REPLICA_SUCCEEDED);
}

TEST_CASE("conformance: a key sent again with another spec is refused, and keys of two origins are two replicas "
          "[A14][C7]",
          "[A14][C7][conformance]") {
  Kit kit;
  pb::SubmitReplicaRequest req = kit.Request("true");
  req.mutable_key()->set_origin("aaaa1111");
  pb::Replica first, again, other;
  REQUIRE(kit.Submit(req, &first).ok());
  CHECK(first.key().origin() == "aaaa1111");
  // The same key from a control plane that has another job under it (another command):
  // answering with the first replica would report that job done without running it.
  pb::SubmitReplicaRequest collision = req;
  collision.set_command("echo another job");
  grpc::Status refused = kit.Submit(collision, &again);
  INFO(refused.error_message());
  CHECK(refused.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK(refused.error_message().find("different spec") != std::string::npos);
  // Also after the adapter restarted (the digest is kept in the replica book).
  kit.RestartAdapter();
  CHECK(kit.Submit(collision, &again).error_code() == grpc::StatusCode::ALREADY_EXISTS);
  // The same job id from another origin is another replica.
  pb::SubmitReplicaRequest elsewhere = collision;
  elsewhere.mutable_key()->set_origin("bbbb2222");
  REQUIRE(kit.Submit(elsewhere, &other).ok());
  CHECK(other.name() != first.name());
  CHECK(other.external_id() != first.external_id());
  // An identical repeat is still answered with the replica already there.
  REQUIRE(kit.Submit(req, &again).ok());
  CHECK(again.external_id() == first.external_id());
  kit.WaitFor(first.key(), pb::REPLICA_SUCCEEDED);
  kit.WaitFor(other.key(), pb::REPLICA_SUCCEEDED);
}

TEST_CASE("conformance: a batch of submits is answered replica by replica, in order [A14][C5]",
          "[A14][conformance]") {
  Kit kit;
  pb::SubmitReplicasRequest batch;
  *batch.add_replicas() = kit.Request("true");
  auto bad = kit.Request("true");
  bad.set_resource_spec_id("no-such-spec");
  *batch.add_replicas() = bad;
  *batch.add_replicas() = kit.Request("exit 3");
  pb::SubmitReplicasResponse first, again;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kit.target_.timeout);
    grpc::Status s = kit.stub_->SubmitReplicas(&ctx, batch, &first);
    INFO(s.error_message());
    REQUIRE(s.ok());
  }
  REQUIRE(first.results_size() == 3);
  CHECK(first.results(0).code() == 0);
  CHECK(first.results(0).replica().key().job_id() == batch.replicas(0).key().job_id());
  CHECK(first.results(1).code() == static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  CHECK(absl::StrContains(first.results(1).message(), "no-such-spec"));
  CHECK(first.results(2).code() == 0);
  pb::Replica r;
  CHECK(kit.Get(bad.key(), &r).error_code() == grpc::StatusCode::NOT_FOUND);
  // Repeated, the batch gets the replicas already there.
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kit.target_.timeout);
    REQUIRE(kit.stub_->SubmitReplicas(&ctx, batch, &again).ok());
  }
  REQUIRE(again.results_size() == 3);
  CHECK(again.results(0).replica().external_id() == first.results(0).replica().external_id());
  CHECK(again.results(2).replica().external_id() == first.results(2).replica().external_id());
  kit.WaitFor(first.results(0).replica().key(), pb::REPLICA_SUCCEEDED);
  CHECK(kit.WaitFor(first.results(2).replica().key(), pb::REPLICA_FAILED).exit_code() == 3);

  // More than a call may carry is refused whole.
  pb::SubmitReplicasRequest huge;
  for (int i = 0; i < 1001; ++i) *huge.add_replicas() = kit.Request("true");
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kit.target_.timeout);
  pb::SubmitReplicasResponse none;
  grpc::Status s = kit.stub_->SubmitReplicas(&ctx, huge, &none);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(s.error_message(), "at most 1000"));
  CHECK(kit.Get(huge.replicas(0).key(), &r).error_code() == grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("conformance: WatchBatches sends the events of a batch of submits in one message, in cursor order, the "
          "same events Watch sends, and resumes from a cursor [A14][C5]",
          "[A14][conformance]") {
  Kit kit;
  pb::SubmitReplicasRequest submit;
  for (int i = 0; i < 4; ++i) *submit.add_replicas() = kit.Request("true");
  pb::SubmitReplicasResponse accepted;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kit.target_.timeout);
    grpc::Status s = kit.stub_->SubmitReplicas(&ctx, submit, &accepted);
    INFO(s.error_message());
    REQUIRE(s.ok());
  }
  std::set<std::string> names, ended;
  for (const auto& r : accepted.results()) {
    REQUIRE(r.code() == 0);
    names.insert(r.replica().name());
  }
  auto all_ended = [&](const pb::ReplicaEvent& e) {
    const auto state = e.replica().state();
    if (names.contains(e.replica().name()) &&
        (state == pb::REPLICA_SUCCEEDED || state == pb::REPLICA_FAILED || state == pb::REPLICA_STOPPED)) {
      ended.insert(e.replica().name());
    }
    return ended.size() == names.size();
  };
  auto messages = kit.WatchBatches(0, all_ended);
  REQUIRE(ended.size() == names.size());
  std::vector<pb::ReplicaEvent> events;
  for (const auto& m : messages) {
    CHECK(m.events_size() > 0);  // no empty message
    events.insert(events.end(), m.events().begin(), m.events().end());
  }
  for (size_t i = 1; i < events.size(); ++i) CHECK(events[i].cursor() > events[i - 1].cursor());
  // The batch was committed at once: the message that tells of one of its replicas first
  // tells of all four.
  size_t first = 0;
  while (first < messages.size() &&
         std::none_of(messages[first].events().begin(), messages[first].events().end(),
                      [&](const pb::ReplicaEvent& e) { return names.contains(e.replica().name()); })) {
    ++first;
  }
  REQUIRE(first < messages.size());
  std::set<std::string> together;
  for (const auto& e : messages[first].events()) {
    if (names.contains(e.replica().name())) together.insert(e.replica().name());
  }
  CHECK(together == names);
  // Watch sends the same events, one a message.
  const uint64_t last = events.back().cursor();
  auto single = kit.Watch(0, [&](const pb::ReplicaEvent& e) { return e.cursor() >= last; });
  REQUIRE(single.size() == events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(single[i].cursor() == events[i].cursor());
    CHECK(single[i].replica().name() == events[i].replica().name());
    CHECK(single[i].replica().state() == events[i].replica().state());
  }
  // From a cursor: what came after it; past the last event: refused.
  REQUIRE(events.size() >= 2);
  auto rest = kit.WatchBatches(events[0].cursor(), [&](const pb::ReplicaEvent& e) { return e.cursor() >= last; });
  REQUIRE_FALSE(rest.empty());
  CHECK(rest.front().events(0).cursor() == events[1].cursor());
  grpc::Status beyond;
  CHECK(kit.WatchBatches(last + 1000, all_ended, &beyond).empty());
  CHECK(beyond.error_code() == grpc::StatusCode::OUT_OF_RANGE);
}

TEST_CASE("conformance: the event stream resumes from a cursor after the adapter restarts [A14]",
          "[A14][conformance]") {
  Kit kit;
  pb::Replica r = kit.MustSubmit("sleep 2");
  auto before = kit.Watch(0, [&](const pb::ReplicaEvent& e) {
    return e.replica().name() == r.name() && e.replica().state() == pb::REPLICA_RUNNING;
  });
  REQUIRE_FALSE(before.empty());
  uint64_t cursor = before.back().cursor();
  REQUIRE(before.back().replica().state() == pb::REPLICA_RUNNING);
  kit.RestartAdapter();
  auto after = kit.Watch(cursor, [&](const pb::ReplicaEvent& e) {
    return e.replica().name() == r.name() && e.replica().state() == pb::REPLICA_SUCCEEDED;
  });
  REQUIRE_FALSE(after.empty());
  CHECK(after.front().cursor() > cursor);
  CHECK(after.back().replica().state() == pb::REPLICA_SUCCEEDED);
  for (const auto& e : after) CHECK(e.cursor() > cursor);
}

TEST_CASE("conformance: an adapter restarted over replicas and events an older adapter stored as JSON takes them up "
          "[A14]",
          "[A14][conformance]") {
  Kit kit;
  pb::SubmitReplicaRequest req = kit.Request("sleep 2");
  pb::Replica first, again;
  REQUIRE(kit.Submit(req, &first).ok());
  auto before = kit.Watch(0, [&](const pb::ReplicaEvent& e) {
    return e.replica().name() == first.name() && e.replica().state() == pb::REPLICA_RUNNING;
  });
  REQUIRE_FALSE(before.empty());
  kit.RestartOnJsonRows();
  // The replica is the one stored (a repeated submit returns it), its events replay from
  // the start with their cursors, and it ends as it would have.
  REQUIRE(kit.Submit(req, &again).ok());
  CHECK(again.external_id() == first.external_id());
  auto replayed = kit.Watch(0, [&](const pb::ReplicaEvent& e) {
    return e.replica().name() == first.name() && e.replica().state() == pb::REPLICA_SUCCEEDED;
  });
  REQUIRE(replayed.size() > before.size());
  for (size_t i = 0; i < before.size(); ++i) CHECK(replayed[i].cursor() == before[i].cursor());
  CHECK(replayed.back().replica().state() == pb::REPLICA_SUCCEEDED);
}

TEST_CASE("conformance: a replica ended longer ago than the center's replica_retention is forgotten, restarts "
          "included: asked for, it is answered as one that may have been forgotten, never as one never had [A14]",
          "[A14][conformance]") {
  Kit kit([](CenterConfig& c) { c.replica_retention = absl::Hours(24); });
  auto accounting = [&](absl::Time from, absl::Time to, pb::ListAccountingResponse* out) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kit.target_.timeout);
    pb::ListAccountingRequest req;
    *req.mutable_from() = ToTimestamp(from);
    *req.mutable_to() = ToTimestamp(to);
    return kit.stub_->ListAccounting(&ctx, req, out);
  };
  pb::SubmitReplicaRequest ended_req = kit.Request("true");
  pb::Replica ended;
  REQUIRE(kit.Submit(ended_req, &ended).ok());
  ended = kit.WaitFor(ended.key(), pb::REPLICA_SUCCEEDED);
  pb::Replica running = kit.MustSubmit("sleep 300");
  kit.WaitFor(running.key(), pb::REPLICA_RUNNING);
  pb::ReplicaKey never = kit.Request("true").key();
  pb::Replica out;
  // Nothing forgotten yet: a key never submitted is not found, and the one that ended is
  // still answered half a day on.
  CHECK(kit.Get(never, &out).error_code() == grpc::StatusCode::NOT_FOUND);
  REQUIRE(kit.server_->core().ForgetEnded(absl::Now() + absl::Hours(12)).ok());
  REQUIRE(kit.Get(ended.key(), &out).ok());
  pb::ListAccountingResponse listed;
  REQUIRE(accounting(absl::Now() - absl::Hours(1), absl::Now() + absl::Hours(1), &listed).ok());
  CHECK(listed.entries_size() == 1);

  // A write that fails forgets nothing: with the bound's table gone from under the adapter,
  // the replica past its retention stays answered, in memory and in the store, and a key
  // never had is still not found.
  auto db = store::OpenStore("sqlite://" + (kit.state_dir_ / "adapter.db").string());
  REQUIRE(db.ok());
  REQUIRE((*db)->Exec("ALTER TABLE adapter_forgotten RENAME TO adapter_forgotten_away").ok());
  CHECK_FALSE(kit.server_->core().ForgetEnded(absl::Now() + absl::Hours(25)).ok());
  REQUIRE(kit.Get(ended.key(), &out).ok());
  CHECK(out.state() == pb::REPLICA_SUCCEEDED);
  CHECK(kit.Get(never, &out).error_code() == grpc::StatusCode::NOT_FOUND);
  auto kept = (*db)->Query("SELECT name FROM adapter_replicas WHERE name = $1", {ended.name()});
  REQUIRE(kept.ok());
  CHECK(kept->size() == 1);
  REQUIRE((*db)->Exec("ALTER TABLE adapter_forgotten_away RENAME TO adapter_forgotten").ok());

  // Past its retention it is forgotten: in memory, in the store and across a restart, while
  // the running one stays, however long it has run.
  auto forgot = kit.server_->core().ForgetEnded(absl::Now() + absl::Hours(25));
  REQUIRE(forgot.ok());
  CHECK(*forgot == 1);
  for (int restarted = 0; restarted < 2; ++restarted) {
    INFO("restarted " << restarted);
    grpc::Status asked = kit.Get(ended.key(), &out);
    CHECK(asked.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(asked.error_message().find("replica_retention") != std::string::npos);
    // A key it never had reads the same: it cannot tell the two apart any more, and a
    // NOT_FOUND would make the control plane submit a replica that ran once again.
    CHECK(kit.Get(never, &out).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    REQUIRE(kit.Get(running.key(), &out).ok());
    CHECK(out.state() == pb::REPLICA_RUNNING);
    // The center's accounts of a period reaching back to what it forgot are refused, not short;
    // a later period is answered.
    grpc::Status short_period = accounting(absl::Now() - absl::Hours(1), absl::Now() + absl::Hours(1), &listed);
    CHECK(short_period.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(short_period.error_message().find("replica_retention") != std::string::npos);
    listed.Clear();
    REQUIRE(accounting(absl::Now() + absl::Minutes(1), absl::Now() + absl::Hours(1), &listed).ok());
    CHECK(listed.entries_size() == 0);
    kit.RestartAdapter();
  }
  auto rows = (*db)->Query("SELECT name FROM adapter_replicas");
  REQUIRE(rows.ok());
  std::set<std::string> stored;
  for (const auto& row : *rows) stored.insert(*row[0]);
  CHECK_FALSE(stored.count(ended.name()));
  CHECK(stored.count(running.name()));
  REQUIRE(kit.Stop(running.key(), &out).ok());
}

TEST_CASE("conformance: center info and usage are sane [A14][A3]", "[A14][conformance]") {
  Kit kit;
  grpc::ClientContext c1, c2;
  SetDeadline(&c1, kit.target_.timeout);
  SetDeadline(&c2, kit.target_.timeout);
  pb::CenterInfo info;
  REQUIRE(kit.stub_->GetCenterInfo(&c1, {}, &info).ok());
  CHECK(info.ai_center_id() == kit.target_.center.center_id);
  CHECK_FALSE(info.scheduler().empty());
  CHECK(info.capacity().cpu() > 0);
  bool offered = false;
  for (const auto& s : info.specs()) offered |= s.resource_spec_id() == kit.target_.spec_id;
  CHECK(offered);
  // The images its YAML lists are reported, so the scheduler knows they are here (A4).
  for (const auto& image : kit.target_.center.images) {
    CHECK(std::find(info.image_ids().begin(), info.image_ids().end(), image.image_id()) != info.image_ids().end());
  }
  pb::Usage usage;
  REQUIRE(kit.stub_->GetUsage(&c2, {}, &usage).ok());
  CHECK(usage.running_task_num() >= 0);
  CHECK(usage.waiting_task_num() >= 0);
  CHECK(usage.used().cpu() + usage.free().cpu() <= info.capacity().cpu());
  CHECK(usage.free().cpu() > 0);
  CHECK(usage.has_at());
}

TEST_CASE("conformance: usage says per offered spec how long a replica would wait to start, or leaves the spec "
          "out as unknown [A16]",
          "[A16][conformance]") {
  // What the center's scheduler knows of its queue (SPEC A16): each estimate names a spec the
  // center offers, once, with a wait in seconds (never negative, never NaN) and its source.
  Kit kit;
  auto usage_now = [&] {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kit.target_.timeout);
    pb::Usage usage;
    grpc::Status s = kit.stub_->GetUsage(&ctx, {}, &usage);
    INFO(s.error_message());
    REQUIRE(s.ok());
    return usage;
  };
  auto check = [&](const pb::Usage& usage) {
    INFO(usage.DebugString());
    std::set<std::string> seen;
    for (const auto& e : usage.start_estimates()) {
      CHECK(kit.target_.center.FindSpec(e.resource_spec_id()) != nullptr);
      CHECK(seen.insert(e.resource_spec_id()).second);
      CHECK(std::isfinite(e.wait_seconds()));
      CHECK(e.wait_seconds() >= 0);
      CHECK_FALSE(e.source().empty());
    }
  };
  pb::Usage idle = usage_now();
  check(idle);
  // A replica that fits the center at once waits little when the center is quiet (what
  // other kit tests left behind may still be ending).
  for (const auto& e : idle.start_estimates()) {
    if (e.resource_spec_id() == kit.target_.spec_id) CHECK(e.wait_seconds() < 3600);
  }
  // With one of its replicas running, the report stays well formed.
  pb::Replica r = kit.MustSubmit("sleep 5");
  kit.WaitFor(r.key(), pb::REPLICA_RUNNING);
  check(usage_now());
  pb::Replica stopped;
  REQUIRE(kit.Stop(r.key(), &stopped).ok());
}

TEST_CASE("conformance: a replica whose image has content runs in it or is refused, never bare, as the center "
          "says it runs images [A14][A4]",
          "[A14][A4][conformance]") {
  Kit kit;
  grpc::ClientContext c1;
  SetDeadline(&c1, kit.target_.timeout);
  pb::CenterInfo info;
  REQUIRE(kit.stub_->GetCenterInfo(&c1, {}, &info).ok());
  CHECK(info.runs_images() == kit.backend_->RunsImages());
  pb::SubmitReplicaRequest req = kit.Request("true");
  req.set_image("registry.example.test/demo/app@sha256:" + std::string(64, 'b'));
  pb::Replica r;
  grpc::Status s = kit.Submit(req, &r);
  if (info.runs_images()) {
    INFO(s.error_message());
    CHECK(s.ok());  // handed to the backend, which runs it in its image (or fails it with the pull's reason)
  } else {
    CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(absl::StrContains(s.error_message(), "runs commands on its hosts, not in images"));
    pb::Replica none;
    CHECK(kit.Get(req.key(), &none).error_code() == grpc::StatusCode::NOT_FOUND);
  }
  // A reference that is not by digest is bad input, whatever the center runs.
  pb::SubmitReplicaRequest tagged = kit.Request("true");
  tagged.set_image("registry.example.test/demo/app:v1");
  CHECK(kit.Submit(tagged, &r).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("conformance: bad input gets a clear gRPC error and changes nothing [A14][C5]",
          "[A14][conformance]") {
  Kit kit;
  pb::Replica r;
  auto unknown_spec = kit.Request("true");
  unknown_spec.set_resource_spec_id("no-such-spec");
  grpc::Status s = kit.Submit(unknown_spec, &r);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(s.error_message(), "no-such-spec"));
  CHECK(kit.Get(unknown_spec.key(), &r).error_code() == grpc::StatusCode::NOT_FOUND);

  auto empty = kit.Request("   ");
  s = kit.Submit(empty, &r);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(s.error_message(), "command"));

  auto no_job = kit.Request("true");
  no_job.mutable_key()->clear_job_id();
  CHECK(kit.Submit(no_job, &r).error_code() == grpc::StatusCode::INVALID_ARGUMENT);

  auto negative_limit = kit.Request("true");
  negative_limit.set_time_limit_seconds(-1);
  s = kit.Submit(negative_limit, &r);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(s.error_message(), "time_limit_seconds"));

  pb::ReplicaKey missing;
  missing.set_job_id("never-submitted");
  s = kit.Get(missing, &r);
  CHECK(s.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(absl::StrContains(s.error_message(), "never-submitted"));
  CHECK(kit.Stop(missing, &r).error_code() == grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext ctx;
  SetDeadline(&ctx, kit.target_.timeout);
  pb::ReadLogRequest log;
  *log.mutable_key() = missing;
  auto reader = kit.stub_->ReadLog(&ctx, log);
  pb::LogChunk chunk;
  while (reader->Read(&chunk)) {
  }
  CHECK(reader->Finish().error_code() == grpc::StatusCode::NOT_FOUND);
}

// SPEC A17, issue 46 item 2: a replica's named ports.
TEST_CASE("conformance: a replica's named ports are each given one of the center's range, none held twice, passed as "
          "JC_PORT_<NAME>, reported as its endpoints and ready once they answer, and a center without a range refuses "
          "them [A17][A14][C5]",
          "[A17][A14][conformance]") {
  // A range of 40 of this process's own (suites run side by side).
  // Test ranges stay below the kernel's ephemeral ports (32768 up), each suite in its own band:
  // 20000-23999 here, 24000-25999 tunnels, 26000-27999 squatters, 28000-29599 job_kinds_test,
  // 29600-29699 the demo center, 29700-31999 endpoint_test, 32000-32099 notebook_test.
  const int first = 20000 + static_cast<int>(getpid() % 100) * 40, last = first + 39;
  Kit kit([&](CenterConfig& c) {
    c.port_first = first;
    c.port_last = last;
  });
  {
    // It says how many ports it gives, for the scheduler's ports_offered filter.
    grpc::ClientContext c;
    SetDeadline(&c, kit.target_.timeout);
    pb::CenterInfo info;
    REQUIRE(kit.stub_->GetCenterInfo(&c, {}, &info).ok());
    CHECK(info.port_range_size() == 40);
  }
  auto req = kit.Request("echo port=$JC_PORT_HTTP other=$JC_PORT_OTHER_ONE; exec python3 -m http.server "
                         "$JC_PORT_HTTP --bind 127.0.0.1");
  auto* http = req.add_ports();
  http->set_name("http");
  http->set_readiness_path("/");
  req.add_ports()->set_name("other-one");  // nothing listens there: never ready
  pb::Replica r;
  grpc::Status s = kit.Submit(req, &r);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(r.endpoints_size() == 2);
  const int port = r.endpoints(0).port(), other = r.endpoints(1).port();
  CHECK(r.endpoints(0).name() == "http");
  CHECK(r.endpoints(1).name() == "other-one");
  CHECK((port >= first && port <= last));
  CHECK((other >= first && other <= last));
  CHECK(port != other);
  // Ready once its server answers the readiness path; the other port never is.
  pb::Replica seen = kit.WaitForReady(r.key(), 2);
  INFO(seen.DebugString());
  REQUIRE(seen.endpoints_size() == 2);
  CHECK(seen.endpoints(0).ready());
  CHECK_FALSE(seen.endpoints(1).ready());
  CHECK_FALSE(seen.endpoints(0).host().empty());
  CHECK(absl::StrContains(kit.Log(r.key()), absl::StrCat("port=", port, " other=", other)));

  // Its port, asked for by another replica: held, refused while it runs.
  auto fixed = kit.Request("exec sleep 60");
  auto* want = fixed.add_ports();
  want->set_name("http");
  want->set_port(port);
  pb::Replica second;
  s = kit.Submit(fixed, &second);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(s.error_message(), absl::StrCat("port ", port, " is held by another replica")));
  // A port outside the range, a name twice, a bad name: refused.
  auto outside = kit.Request("true");
  auto* o = outside.add_ports();
  o->set_name("http");
  o->set_port(last + 1);
  s = kit.Submit(outside, &second);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(s.error_message(), "outside this center's port range"));
  auto twice = kit.Request("true");
  twice.add_ports()->set_name("http");
  twice.add_ports()->set_name("http");
  CHECK(kit.Submit(twice, &second).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  auto bad = kit.Request("true");
  bad.add_ports()->set_name("HTTP\r\nX");
  s = kit.Submit(bad, &second);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(s.error_message(), "ports[0].name"));
  auto injected = kit.Request("true");
  auto* path = injected.add_ports();
  path->set_name("http");
  path->set_readiness_path("/ HTTP/1.0\r\nHost: evil");
  CHECK(kit.Submit(injected, &second).error_code() == grpc::StatusCode::INVALID_ARGUMENT);

  // Once it ends, its ports go back to the range: the fixed one is given.
  REQUIRE(kit.Stop(r.key(), &seen).ok());
  kit.WaitFor(r.key(), pb::REPLICA_STOPPED);
  s = kit.Submit(fixed, &second);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(second.endpoints_size() == 1);
  CHECK(second.endpoints(0).port() == port);
  // After a restart of the adapter the book is as it was: the port is still held.
  kit.RestartAdapter();
  auto third = kit.Request("true");
  auto* again = third.add_ports();
  again->set_name("http");
  again->set_port(port);
  CHECK(kit.Submit(third, &seen).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  REQUIRE(kit.Stop(second.key(), &seen).ok());
}

TEST_CASE("conformance: a center with no port range refuses a replica that asks for a port, and runs one that asks "
          "for none [A17][A14][C5]",
          "[A17][A14][conformance]") {
  Kit kit;  // its configuration has no ports:
  {
    // It says so, and the scheduler places no task with ports there.
    grpc::ClientContext c;
    SetDeadline(&c, kit.target_.timeout);
    pb::CenterInfo info;
    REQUIRE(kit.stub_->GetCenterInfo(&c, {}, &info).ok());
    CHECK(info.port_range_size() == 0);
  }
  auto req = kit.Request("true");
  req.add_ports()->set_name("http");
  pb::Replica r;
  grpc::Status s = kit.Submit(req, &r);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(s.error_message(), "offers no ports"));
  CHECK(kit.Get(req.key(), &r).error_code() == grpc::StatusCode::NOT_FOUND);
  pb::Replica plain = kit.MustSubmit("true");
  CHECK(plain.endpoints_size() == 0);
  kit.WaitFor(plain.key(), pb::REPLICA_SUCCEEDED);
}

// SPEC A17, issue 46 item 2: the control plane's only way to a replica's port.
TEST_CASE("conformance: a tunnel carries bytes to a running replica's named port and back, and one to a replica or "
          "port not there, or not running, is refused [A17][A14][C5]",
          "[A17][A14][conformance]") {
  const int first = 24000 + static_cast<int>(getpid() % 100) * 20;
  Kit kit([&](CenterConfig& c) {
    c.port_first = first;
    c.port_last = first + 19;
  });
  auto req = kit.Request("exec python3 -m http.server $JC_PORT_HTTP --bind 127.0.0.1");
  auto* http = req.add_ports();
  http->set_name("http");
  http->set_readiness_path("/");
  pb::Replica r;
  REQUIRE(kit.Submit(req, &r).ok());
  pb::Replica seen = kit.WaitForReady(r.key(), 1);
  REQUIRE(seen.endpoints(0).ready());
  // Sends `payload` through a tunnel to `key`'s port `port` (its end marked), reads until
  // the endpoint closes; the status and what came back.
  auto tunnel = [&](const pb::ReplicaKey& key, const std::string& port, const std::string& payload, bool named = true) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kit.target_.timeout);
    auto stream = kit.stub_->OpenTunnel(&ctx);
    if (named) {
      pb::TunnelFrame hello;
      *hello.mutable_key() = key;
      hello.set_port_name(port);
      stream->Write(hello);
      pb::TunnelFrame body;
      body.set_data(payload);
      body.set_close(true);
      stream->Write(body);
    } else {
      stream->WritesDone();  // a stream that names nothing
    }
    std::string back;
    pb::TunnelFrame frame;
    bool first = true;
    while (stream->Read(&frame)) {
      // The adapter says first that the endpoint took the connection, with no data.
      if (first) CHECK((frame.connected() && frame.data().empty()));
      first = false;
      back += frame.data();
      if (frame.close()) break;
    }
    if (named) stream->WritesDone();
    grpc::Status s = stream->Finish();
    return std::make_pair(s, back);
  };
  auto [ok, answer] = tunnel(r.key(), "http", "GET / HTTP/1.0\r\nHost: replica\r\n\r\n");
  INFO(ok.error_message());
  CHECK(ok.ok());
  CHECK(absl::StartsWith(answer, "HTTP/1.0 200"));
  // Two at once, each its own connection.
  auto [a, first_answer] = tunnel(r.key(), "http", "GET /nope HTTP/1.0\r\n\r\n");
  CHECK(absl::StartsWith(first_answer, "HTTP/1.0 404"));

  auto [no_port, unused1] = tunnel(r.key(), "admin", "x");
  CHECK(no_port.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(absl::StrContains(no_port.error_message(), "has no port named \"admin\" (it has: http)"));
  pb::ReplicaKey other = r.key();
  other.set_job_id("never-submitted");
  CHECK(tunnel(other, "http", "x").first.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(tunnel(r.key(), "http", "", /*named=*/false).first.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(kit.Stop(r.key(), &seen).ok());
  kit.WaitFor(r.key(), pb::REPLICA_STOPPED);
  auto [stopped, unused2] = tunnel(r.key(), "http", "GET / HTTP/1.0\r\n\r\n");
  CHECK(stopped.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(stopped.error_message(), "not running"));
}

// Attacker's review, session 34 (high): any tenant's process at a center could bind a port of
// the range first; the replica given it then showed ready, and a tunnel reached the squatter.
TEST_CASE("conformance: a port of the range held by another account's process is not the replica's: it is never "
          "ready there and no tunnel reaches it [A17][A14][C6]",
          "[A17][A14][conformance]") {
  REQUIRE(geteuid() == 0);  // a squatter of another account is made with setpriv
  jc::testing::TestAccount squatter("jc-squat");
  const int port = 26000 + static_cast<int>(getpid() % 2000);
  Kit kit([&](CenterConfig& c) {
    c.port_first = port;  // one port: the replica is given the one the squatter holds
    c.port_last = port;
  });
  const std::string pid_file = kit.state_dir_.string() + "/squatter.pid";
  // Debian's python3 (the account cannot read a root's own interpreter), from a directory it can.
  REQUIRE(std::system(absl::StrCat("cd / && setpriv --reuid=", squatter.uid, " --regid=", squatter.gid,
                                   " --clear-groups /usr/bin/python3 -m http.server ", port,
                                   " --bind 127.0.0.1 --directory /tmp >/dev/null 2>&1 & echo $! > ", pid_file)
                          .c_str()) == 0);
  struct Kill {
    std::string file;
    ~Kill() { std::system(("kill $(cat " + file + ") 2>/dev/null").c_str()); }
  } kill_squatter{pid_file};
  const absl::Time deadline = absl::Now() + kit.target_.timeout;
  while (absl::Now() < deadline && !EndpointReady("127.0.0.1", port, "/", absl::Milliseconds(200))) {
    absl::SleepFor(absl::Milliseconds(50));  // until the squatter listens
  }
  REQUIRE(EndpointReady("127.0.0.1", port, "/", absl::Milliseconds(200)));
  // The replica is given that port; it listens nowhere itself (its bind would fail).
  auto req = kit.Request("exec sleep 60");
  auto* http = req.add_ports();
  http->set_name("http");
  http->set_readiness_path("/");
  pb::Replica r;
  REQUIRE(kit.Submit(req, &r).ok());
  REQUIRE(r.endpoints_size() == 1);
  REQUIRE(r.endpoints(0).port() == port);
  kit.WaitFor(r.key(), pb::REPLICA_RUNNING);
  // A tunnel is refused, naming why, rather than reaching the squatter.
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kit.target_.timeout);
  auto stream = kit.stub_->OpenTunnel(&ctx);
  pb::TunnelFrame hello;
  *hello.mutable_key() = r.key();
  hello.set_port_name("http");
  stream->Write(hello);
  stream->WritesDone();
  pb::TunnelFrame frame;
  std::string got;
  while (stream->Read(&frame)) got += frame.data();
  grpc::Status s = stream->Finish();
  CHECK(s.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(absl::StrContains(s.error_message(), "account listens on its port"));
  CHECK(got.empty());
  // And it never counts as ready (probed about every 250 ms: a few passes).
  for (int i = 0; i < 10; ++i) {
    pb::Replica seen;
    REQUIRE(kit.Get(r.key(), &seen).ok());
    REQUIRE(seen.endpoints_size() == 1);
    CHECK_FALSE(seen.endpoints(0).ready());
    absl::SleepFor(absl::Milliseconds(200));
  }
  pb::Replica stopped;
  REQUIRE(kit.Stop(r.key(), &stopped).ok());
}

// SPEC A17, issue 46 item 4: `jcctl job exec`. A center whose scheduler cannot run a
// command in a replica says UNIMPLEMENTED and nothing else changes; one that can runs it and
// carries its output and exit status in the exec stream.
TEST_CASE("conformance: a command runs in a running replica, its output and exit status come back, and one in a "
          "replica not running, or with a bad argv, is refused [A17][A14][C5]",
          "[A17][A14][conformance]") {
  namespace es = jc::exec_stream;
  Kit kit;
  pb::Replica r = kit.MustSubmit("exec sleep 600");
  kit.WaitFor(r.key(), pb::REPLICA_RUNNING);
  // Runs `command` in `key`'s replica with `input` (then its end): the call's status, what
  // came out and the exit status.
  struct Ran {
    grpc::Status status;
    std::string out, err;
    std::optional<int> exit;
  };
  auto exec = [&](const pb::ReplicaKey& key, std::vector<std::string> command, const std::string& input) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kit.target_.timeout);
    auto stream = kit.stub_->OpenTunnel(&ctx);
    pb::TunnelFrame hello;
    *hello.mutable_key() = key;
    hello.mutable_exec();  // a command, empty or not
    for (auto& a : command) hello.mutable_exec()->add_command(a);
    stream->Write(hello);
    pb::TunnelFrame in;
    in.set_data(es::EncodeData(es::Type::kStdin, input) + es::Encode(es::Type::kStdinEnd, ""));
    stream->Write(in);
    Ran out;
    es::Decoder decoder;
    pb::TunnelFrame frame;
    // Every frame up to the adapter's `close` (gRPC's Finish waits on frames left unread).
    while (stream->Read(&frame)) {
      decoder.Feed(frame.data());
      while (auto f = decoder.Next()) {
        if (f->type == es::Type::kStdout) out.out += f->payload;
        if (f->type == es::Type::kStderr) out.err += f->payload;
        if (f->type == es::Type::kExit) out.exit = es::ParseExit(f->payload);
      }
      if (frame.close()) break;
    }
    stream->WritesDone();
    out.status = stream->Finish();
    return out;
  };
  Ran ran = exec(r.key(), {"sh", "-c", "read line; echo \"got $line\"; echo to-err >&2; exit 4"}, "hello\n");
  INFO(ran.status.error_message() << "\nstdout: " << ran.out << "\nstderr: " << ran.err);
  if (ran.status.error_code() == grpc::StatusCode::UNIMPLEMENTED && !kit.target_.runs_commands) {
    WARN("this center runs no commands in replicas: " << ran.status.error_message());
  } else {
    CHECK(ran.status.ok());
    CHECK(ran.out == "got hello\n");
    // A center's own tool may say more on stderr (srun: "task 0: Exited with exit code 4").
    CHECK(absl::StrContains(ran.err, "to-err\n"));
    CHECK(ran.exit == 4);
  }
  // Refusals, whether the center runs commands or not.
  CHECK(exec(r.key(), {}, "").status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(exec(r.key(), {std::string("a\0b", 3)}, "").status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  pb::ReplicaKey other = r.key();
  other.set_job_id("never-submitted");
  CHECK(exec(other, {"true"}, "").status.error_code() == grpc::StatusCode::NOT_FOUND);
  pb::Replica seen;
  REQUIRE(kit.Stop(r.key(), &seen).ok());
  kit.WaitFor(r.key(), pb::REPLICA_STOPPED);
  Ran stopped = exec(r.key(), {"true"}, "");
  CHECK(stopped.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(stopped.status.error_message(), "not running"));
}

}  // namespace jc::adapter::conformance
