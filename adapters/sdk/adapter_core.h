#pragma once

// The SDK's domain logic, shared by every adapter: validates requests, keeps the replica
// book (name -> external id and state) in a store so submits are idempotent across
// restarts, polls the backend for state changes and turns them into a persisted event
// log whose cursors survive restarts. No gRPC types here; adapter_service.cc is the edge.

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/sdk/backend.h"
#include "adapters/sdk/center_config.h"
#include "adapters/sdk/image_mirror.h"
#include "adapters/sdk/port_book.h"
#include "adapters/sdk/staged_images.h"
#include "common/event_log.h"
#include "common/store/group_commit.h"
#include "common/store/store.h"

namespace prometheus {
class Registry;
}

namespace jc::adapter {

// What a backend said of its queue (Backend::StartEstimates), kept only where it is an
// estimate: one per spec the center offers (the first valid), a finite wait of at least zero.
std::vector<pb::SpecStartEstimate> CheckedStartEstimates(const CenterConfig& center,
                                                         std::vector<pb::SpecStartEstimate> estimates);

struct CoreOptions {
  absl::Duration poll_interval = absl::Milliseconds(200);
  size_t event_window = 100000;  // events kept for watchers (and in the store)
};

class AdapterCore {
 public:
  AdapterCore(Backend* backend, CenterConfig center, store::Store* store, CoreOptions options);
  ~AdapterCore();

  // Loads the replica book and the event log from the store and starts polling.
  absl::Status Start();
  void Stop();

  absl::StatusOr<pb::CenterInfo> Info();
  absl::StatusOr<pb::Usage> Usage();
  // The center's own accounting of the replicas this adapter ran that ended in [from, to)
  // (by this adapter's clock): the backend is asked about each afresh.
  absl::StatusOr<pb::ListAccountingResponse> Accounting(absl::Time from, absl::Time to);
  absl::StatusOr<pb::Replica> Submit(const pb::SubmitReplicaRequest& req);
  absl::StatusOr<std::vector<pb::Replica>> SubmitGang(const pb::SubmitGangRequest& req);
  // Independent submits, answered in order as Submit would answer each, recorded in one
  // transaction. A replica whose submit is under way in another call is answered
  // Unavailable (retry) rather than waited for, so two batches never wait on each other.
  std::vector<absl::StatusOr<pb::Replica>> SubmitMany(const pb::SubmitReplicasRequest& req);
  absl::StatusOr<pb::Replica> StopReplica(const pb::ReplicaKey& key);
  // Takes the replica back if it has not started (Backend::Withdraw): the answer is the
  // replica ended with `withdrawn` set, or as it is when it started (it runs on). Replicas
  // of one gang go together.
  absl::StatusOr<pb::Replica> WithdrawReplica(const pb::ReplicaKey& key);
  absl::StatusOr<pb::Replica> Get(const pb::ReplicaKey& key);
  // Get, as the control plane asks it (GetReplica): once the book has forgotten replicas
  // (ForgetEnded), a key not in it may be one of them, and is answered FAILED_PRECONDITION,
  // not NOT_FOUND (which makes the control plane submit the replica again: it would run twice).
  absl::StatusOr<pb::Replica> Read(const pb::ReplicaKey& key);
  // Forgets replicas whose end the adapter learned longer than the center's replica_retention
  // before `now`, at most a batch of them, in the store first (with the bound of what was
  // forgotten), then in memory: a failed write forgets nothing. How many it forgot; the poller
  // calls it once a minute, and again a second later while batches come full.
  absl::StatusOr<size_t> ForgetEnded(absl::Time now);
  // Where a tunnel to the replica's port `port_name` connects (SPEC A17): its host and port.
  // NotFound for a replica or port not here, FailedPrecondition for a replica not running.
  absl::StatusOr<std::pair<std::string, int>> TunnelTarget(const pb::ReplicaKey& key, const std::string& port_name);
  // What a command run in the replica needs to know of it (backend.h ExecRequest, the
  // command not yet filled in). NotFound for a replica not here, FailedPrecondition for one
  // not running.
  absl::StatusOr<ExecRequest> ExecTarget(const pb::ReplicaKey& key);
  Backend* backend() const { return backend_; }
  absl::StatusOr<std::string> ReadLog(const pb::ReadLogRequest& req, int64_t max_bytes);
  // Copies the dataset in from the first source a mover copies (file:// built in, other
  // schemes by the center's data_movers), and says which it was and how long it took.
  absl::StatusOr<pb::StageDatasetResponse> StageDataset(const pb::StageDatasetRequest& req);
  // Fetches an image the center lacks with its image_mover (staged_images.h).
  // The images the center declares, then those its image mover staged.
  std::vector<pb::Image> Images() const;
  // An image the center declares or staged before is answered at once.
  absl::StatusOr<pb::StageImageResponse> StageImage(const pb::StageImageRequest& req);
  const CenterConfig& center() const { return center_; }
  // Replaces the center's project and user mapping (SIGHUP reloads it): replicas submitted
  // from now on get accounts from it; running ones keep theirs.
  void SetRunAs(RunAs run_as);

  // Polls the backend once for every replica not yet ended (the poller does this every
  // poll_interval; tests may call it to not wait).
  absl::Status PollOnce();
  // The most replicas a walk of the book visits under its lock at a time (ForEachLive).
  static constexpr int kLiveChunk = 512;

  EventLog<pb::ReplicaEvent>& events() { return events_; }
  void EnableMetrics(prometheus::Registry& registry);

 private:
  // Takes mu_ (a replica's datasets are looked up in the book): never call it holding mu_.
  absl::StatusOr<ReplicaLaunch> Validate(const pb::SubmitReplicaRequest& req) const;
  // The adapter's record of a replica the backend accepted as `external_id`.
  // The answer to a submit of a key already in the book: the replica, or AlreadyExists
  // when it was submitted with a different spec (a key collision). Caller holds mu_.
  absl::StatusOr<pb::Replica> Repeated(const pb::Replica& known, const ReplicaLaunch& launch);
  static pb::Replica Accepted(const ReplicaLaunch& launch, const std::string& external_id);
  // Records replicas and their events (concurrent callers share a transaction), then
  // publishes the events; returns once they are durable.
  absl::Status Record(const std::vector<pb::Replica>& changed);
  // Within Record's transaction: the replica rows and their events with the next cursors.
  absl::Status WriteRecords(store::Transaction& txn, const std::vector<pb::Replica>& changed);
  void AfterRecords();
  void PollLoop();
  // Calls `visit` with every replica not ended, in name order, under mu_, but holding mu_ for
  // at most kLiveChunk of them at a time: a walk of tens of thousands of queued replicas
  // (Usage at every monitor poll, the poller) held it for 10 ms and more while every
  // SubmitReplicas waited. A replica added during the walk behind where it is is not visited
  // (it was not there when the walk began); one that changes is seen as it is when the walk
  // gets to it.
  void ForEachLive(const std::function<void(const pb::Replica&)>& visit);
  // Gives `launch` its ports from the center's range (PortBook), each also in its env as
  // JC_PORT_<NAME>; ReleasePorts frees them (a submit the backend refused). Caller holds mu_.
  absl::Status AssignPorts(ReplicaLaunch& launch);
  void ReleasePorts(const ReplicaLaunch& launch);
  // Readiness (SPEC A17): the running replicas' endpoints probed where they run, at most
  // once a second each; those whose answer changed are returned to be recorded.
  std::vector<pb::Replica> ProbeEndpoints();
  // Probes about every 250 ms, on a thread of its own (a slow endpoint never holds up the
  // poller's state changes), each pass bounded to 2 s, the longest unprobed first.
  void ProbeLoop();

  std::shared_ptr<const RunAs> CurrentRunAs() const;
  // The book's indexes kept with replicas_ (caller holds mu_): Book puts `r` in, replacing
  // what was there under its name (`learned`: when the adapter learned it ended, for an ended
  // one that was not already); Unindex takes a replica out of the indexes.
  void Book(const pb::Replica& r, absl::Time learned);
  void Unindex(const pb::Replica& r);
  // The live replicas of the scheduler's job `external_id` (a gang's replicas share one; they
  // stop and are withdrawn together). Caller holds mu_.
  std::vector<std::string> LiveOfJob(const std::string& external_id) const;
  // When the adapter learned that `name` ended: as booked, else `now` (caller holds mu_).
  absl::Time EndLearned(const std::string& name, absl::Time now) const;

  Backend* backend_;
  CenterConfig center_;
  StagedImages images_;
  ImageMirror mirror_;  // images with content, copied into the center's registry
  std::vector<std::unique_ptr<DatasetMover>> movers_;  // file:// first, then data_movers  // its run_as is only the initial one: run_as_ is current
  mutable std::mutex run_as_mu_;
  std::shared_ptr<const RunAs> run_as_;
  store::Store* store_;
  CoreOptions options_;
  EventLog<pb::ReplicaEvent> events_;

  mutable std::mutex mu_;
  // A project's staged datasets (data_dir/.projects/<project>/<name>/<version>), by
  // "<project>/<name>:<version>": apart from the federation's of that name (center_.datasets),
  // as dataset names are unique only within a project (issue 44). Under mu_.
  std::map<std::string, pb::Dataset> project_datasets_;
  std::condition_variable submitted_cv_;
  std::map<std::string, pb::Replica> replicas_;  // by name
  // The replicas not ended, by name, each with its entry in replicas_ (what the poller, Usage
  // and the metrics walk: never the ended ones, however many, and without a lookup per name; a
  // map's entries stay where they are until erased, and only ended ones are erased). Of them,
  // by the scheduler's job (a gang's replicas share one: what a stop or withdrawal takes
  // together, found without a walk of every live replica), and the running ones that serve
  // an endpoint (the prober's walk, four times a second: a center with thousands queued and
  // no service probes nothing). The ended ones by when they ended (what ForgetEnded and
  // Accounting walk), ordered by when the adapter learned of the end
  // (adapter_replicas.ended_us), never by the center's ended_at: the retention counts from
  // it, so a scheduler whose clock or outage puts an end far back has it kept as long as any.
  std::map<std::string, const pb::Replica*> live_;
  absl::flat_hash_map<std::string, std::set<std::string>> live_by_job_;
  std::map<std::string, const pb::Replica*> serving_;
  std::set<std::pair<absl::Time, std::string>> ended_;
  std::map<std::string, absl::Time> end_learned_;
  std::map<int, int64_t> ended_by_state_;  // the gauge's ended states, without a walk
  // Every replica forgotten ended at or before forgotten_through_ (adapter_forgotten).
  absl::Time forgotten_through_ = absl::InfinitePast();
  int64_t forgotten_replicas_ = 0;
  std::mutex forget_mu_;  // one ForgetEnded at a time (the poller's, a test's)
  std::set<std::string> submitting_;             // names whose submit is under way
  std::set<std::string> withdrawing_;            // external ids being withdrawn (the poller skips them)
  PortBook ports_;                               // the center's port range: who holds which
  std::map<std::string, absl::Time> probed_;     // replicas' last readiness probe (prober thread only)
  // Record's group commit: the store's own (common/store/group_commit.h). Its committing
  // thread alone touches the txn_ fields: the prologue resets them, each write adds its
  // replicas and events with the next cursors, the epilogue (after the commit, in commit
  // order) moves the cursor on, updates the book and publishes the events.
  store::GroupCommitter committer_;
  uint64_t next_cursor_ = 1;
  uint64_t txn_cursor_ = 1;
  std::vector<pb::Replica> txn_changed_;
  std::vector<absl::Time> txn_learned_;  // txn_changed_'s: when each ended one's end was learned
  // Where each name's latest write in txn_changed_ is: a burst of thousands of replicas in one
  // transaction looks each up once, never by a walk of those before it.
  absl::flat_hash_map<std::string, size_t> txn_latest_;
  std::vector<pb::ReplicaEvent> txn_events_;

  struct Metrics;
  std::unique_ptr<Metrics> metrics_;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stopping_ = false;
  std::thread poller_;
  std::thread prober_;
};

}  // namespace jc::adapter
