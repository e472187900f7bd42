#pragma once

// The job manager (standard 6.4, SPEC A7) and the scheduling pipeline around the
// scheduler's decisions (A8, A11): jobs are committed before they are acknowledged, queue
// in FCFS order (higher priority first), are placed replica by replica (or as a gang),
// dispatched to the centers' adapters, followed through the adapters' event streams (with
// polling as fallback), retried by the retry policy and ended by the status policy. After
// a restart it reloads every job not ended and reconciles with the adapters: a replica
// whose submit was not acknowledged is submitted again under the same key, which the
// adapter answers with the replica it already has, so nothing is lost or run twice.
// Domain logic: no gRPC types here.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/outbox.h"
#include "common/periodic_task.h"
#include "common/store/lease.h"
#include "common/thread_pool.h"
#include "services/southbound/adapter_client.h"
#include "services/jobs/data_mover.h"
#include "services/jobs/job_state.h"
#include "services/jobs/job_store.h"
#include "services/registry/center_directory.h"
#include "services/scheduler/scheduler.h"

namespace jc::jobs {

namespace apb = ::jointcloud::adapter::v1;

struct JobManagerOptions {
  absl::Duration cycle_interval = absl::Milliseconds(200);  // scheduling cycle and retries
  absl::Duration poll_interval = absl::Seconds(5);          // fallback polls of replicas
  int dispatch_threads = 16;  // submits in flight at once (each waits on an adapter)
  int64_t max_log_bytes = 16 << 20;
  // Instances sharing a store take turns through the "jobs" lease: one leads (places and
  // dispatches), the others stand by. The same id re-takes its own lease at once after a
  // restart; two instances on one host need different ids. Empty: the host name.
  std::string instance_id;
  absl::Duration lease_ttl = absl::Seconds(10);
};

// Appendix A.1-2 / A.1-3 limits.
inline constexpr size_t kMaxJobNameLength = 31;
inline constexpr size_t kMaxTaskNameLength = 31;
inline constexpr int kMaxRetries = 10;

// Checks what a create carries by itself (names, commands, counts, policies).
absl::Status ValidateCreate(const v1::CreateTrainJobRequest& req);

class JobManager {
 public:
  // `mover` brings tasks' datasets to their centers before dispatch; null: replicas are
  // dispatched without staging.
  JobManager(store::Store* store, scheduler::Scheduler* scheduler, registry::CenterDirectory* centers,
             southbound::AdapterClient* adapters, DataMover* mover, const Clock* clock, JobManagerOptions options);
  ~JobManager();

  // Takes the jobs lease and leads: reloads the jobs not ended, resumes their dispatches
  // and watches, starts the loops. When another instance holds the lease, stands by (in
  // the background) until it ends; meanwhile creates and stops are refused Unavailable.
  absl::Status Start();
  void Stop();

  // OK while this instance leads; otherwise Unavailable saying why (standing by behind
  // another instance, or stepped down after a failed write and trying to lead again).
  absl::Status Ready();

  // Acknowledged only once committed. A create whose idempotency key was seen returns
  // the job that key created. The answer carries the centers of the first scheduling
  // attempt (empty while the job waits).
  absl::StatusOr<v1::CreateTrainJobResponse> Create(v1::CreateTrainJobRequest request);
  absl::Status StopJob(const std::string& job_id);
  absl::StatusOr<v1::TrainJob> Get(const std::string& job_id);
  absl::StatusOr<v1::ListTrainJobsResponse> List(const v1::ListTrainJobsRequest& request);
  // Where the replica's log downloads (relative to the REST base); NotFound for an index
  // out of range.
  absl::StatusOr<std::string> LogUrl(const std::string& job_id, int task_index, int replica_index);
  // The replica's log as its center has it (stdout, then stderr).
  absl::StatusOr<std::string> ReadLog(const std::string& job_id, int task_index, int replica_index);

  void EnableMetrics(prometheus::Registry& registry);
  // The store identity this instance's new jobs carry in their replica keys (set by Start).
  const std::string& origin() const { return origin_; }

 private:
  // One scheduling cycle (the cycle thread runs it every cycle_interval): places what
  // waits, resends what failed for a passing reason, renews the lease.
  void RunCycle();
  struct Active {
    v1::JobRecord record;
    int64_t version = 0;
  };
  struct Metrics;
  struct Dispatch {
    std::string job_id;
    int replica = 0;  // index into record.replicas
    int attempt = 0;
    std::string center_id;
    bool stage = false;  // copy the task's missing datasets first
  };

  // Reloads every job not ended from the store (the only source of truth), resumes their
  // dispatches and watches, and reconciles every live replica with its adapter.
  absl::Status Lead();
  // Standing by: takes the lease when it is free or ours, then leads.
  void TryLead();
  // Renews the lease every quarter of its TTL; steps down when it was lost. False when
  // this instance no longer leads.
  bool RenewLease();
  // Commit or stop (docs/adr/0006): a write that failed leaves memory ahead of the store,
  // so this instance stops acting on it: it places, dispatches and writes nothing more,
  // refuses creates and stops (Unavailable), keeps answering reads from what it last
  // knew, and tries to lead again, which reloads every job from the store. Any thread.
  void StepDown(const std::string& why);
  // The stops at centers that the mutations under this hold of mu_ decided; sent only
  // once the write that records them has committed. Caller holds mu_.
  std::vector<std::pair<std::string, apb::ReplicaKey>> TakeStopsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendStops(const std::vector<std::pair<std::string, apb::ReplicaKey>>& stops);
  // Ended jobs leave memory once their final write has committed (until then reads see
  // them there, and a failed write steps down with them still in memory).
  void ForgetEnded(const std::vector<std::pair<v1::JobRecord, int64_t>>& written);
  // Asks the adapters for replicas whose state may be behind: those on centers whose
  // event stream is down, or every live one (`all`, after taking over).
  void Reconcile(bool all);
  absl::Status StandbyError() const;
  // Places the waiting replicas of one job; returns the dispatches to send. Caller holds mu_.
  std::vector<Dispatch> ScheduleLocked(Active& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the dispatches in their centers' outboxes (staging ones go to the pool) and
  // starts senders as needed; dropped when `term` is not the current one.
  void SendDispatches(std::vector<Dispatch> dispatches, uint64_t term);
  // Sends the center's outbox, as many replicas a call as have queued, until it is empty.
  void SendBatches(const std::string& center_id);
  // The adapter request for a dispatch still current; nullopt when it moved on. Caller holds mu_.
  std::optional<apb::SubmitReplicaRequest> SubmitRequestLocked(const Dispatch& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the adapter's answer to one submit, adding what must be written to `writes`.
  // Returns true when the replica was accepted but its job moved on (stop it). Caller holds mu_.
  bool CompleteSubmitLocked(const Dispatch& d, const absl::StatusOr<apb::Replica>& result,
                            std::vector<std::pair<v1::JobRecord, int64_t>>* writes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies the task's datasets to the replica's center, then submits it.
  void Stage(const Dispatch& d, uint64_t term);
  // Carries out what the state machine (job_state.h) decided for the job: reservations
  // reported and released in the scheduler's view, stops queued for after the write
  // (TakeStopsLocked), the queue, the metrics.
  void ApplyEffectsLocked(Active& job, const JobEffects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An adapter's view of a replica through the state machine. True when the job changed.
  bool ApplyReportLocked(Active& job, int index, const apb::Replica& replica) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::string> AdapterAddress(const std::string& center_id);
  void EnsureWatcher(const std::string& center_id);
  void WatchLoop(const std::string& center_id);
  v1::TrainJob ToTrainJob(const v1::JobRecord& r) const;
  apb::ReplicaKey KeyOf(const v1::JobRecord& r, int index) const;
  int IndexOf(const v1::JobRecord& r, int task, int replica) const;
  // Sets the gauges from the jobs in memory; at most once a second (it visits every job).
  void UpdateGauges() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* store_;
  JobStore jobs_;
  scheduler::Scheduler* scheduler_;
  registry::CenterDirectory* centers_;
  southbound::AdapterClient* adapters_;
  DataMover* mover_;
  std::mutex staging_mu_;  // one copy at a time: two replicas never copy the same data at once
  const Clock* clock_;
  JobManagerOptions options_;
  ThreadPool dispatch_pool_;

  // Guards every job-state field below (see "Threads of the job manager" in
  // docs/architecture.md): held only to change memory, never across a store call or an RPC.
  mutable std::mutex mu_;
  std::map<std::string, Active> active_ ABSL_GUARDED_BY(mu_);
  std::set<std::tuple<int, int64_t, std::string>> queue_ ABSL_GUARDED_BY(mu_);  // (-priority, seq, id) with waiting replicas
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, uint64_t> cursors_ ABSL_GUARDED_BY(mu_);
  static constexpr absl::Duration kAddressTtl = absl::Seconds(5);
  // Adapter address by center, and when it was read from the registry.
  std::map<std::string, std::pair<std::string, absl::Time>> addresses_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> watched_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> watch_connected_ ABSL_GUARDED_BY(mu_);
  static constexpr int kSendersPerCenter = 4;
  static constexpr size_t kSubmitBatch = 256;
  Outboxes<Dispatch> outboxes_{kSubmitBatch, kSendersPerCenter};  // by center; locks itself
  std::set<std::pair<std::string, int>> resubmit_ ABSL_GUARDED_BY(mu_);  // (job, replica) whose submit failed for a passing reason
  std::vector<std::pair<std::string, apb::ReplicaKey>> stops_ ABSL_GUARDED_BY(mu_);  // (center, key) decided, not yet committed
  std::string not_leading_ ABSL_GUARDED_BY(mu_);  // why this instance does not lead; empty while it does
  std::condition_variable creates_done_;  // creates_in_flight_ fell to 0
  int creates_in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // creates between their leading check and their commit's outcome
  std::vector<std::thread> watchers_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Metrics> metrics_;
  absl::Time gauges_updated_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  std::unique_ptr<store::Lease> lease_;
  std::string origin_;  // the store's identity, in every replica key
  std::atomic<bool> leading_{false};
  // Every Lead and StepDown starts a new term; work begun in an earlier term (an answer,
  // an event, a dispatch) is dropped instead of applied to the state of another.
  std::atomic<uint64_t> term_{0};
  absl::Time lease_renewed_;   // by the cycle thread only
  absl::Time next_lead_try_;   // by the cycle thread only

  PeriodicTask cycle_;
  PeriodicTask poller_;
};

}  // namespace jc::jobs
