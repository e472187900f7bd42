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

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/periodic_task.h"
#include "common/store/lease.h"
#include "common/thread_pool.h"
#include "services/southbound/adapter_client.h"
#include "services/jobs/data_mover.h"
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

  absl::Status Lead();
  // Renews the lease every quarter of its TTL; exits the process when it was lost.
  void RenewLease();
  absl::Status StandbyError() const;
  // Places the waiting replicas of one job; returns the dispatches to send. Caller holds mu_.
  std::vector<Dispatch> ScheduleLocked(Active& job);
  // Queues the dispatches in their centers' outboxes (staging ones go to the pool) and
  // starts senders as needed.
  void SendDispatches(std::vector<Dispatch> dispatches);
  // Sends the center's outbox, as many replicas a call as have queued, until it is empty.
  void SendBatches(const std::string& center_id);
  // The adapter request for a dispatch still current; nullopt when it moved on. Caller holds mu_.
  std::optional<apb::SubmitReplicaRequest> SubmitRequestLocked(const Dispatch& d);
  // Applies the adapter's answer to one submit, adding what must be written to `writes`.
  // Returns true when the replica was accepted but its job moved on (stop it). Caller holds mu_.
  bool CompleteSubmitLocked(const Dispatch& d, const absl::StatusOr<apb::Replica>& result,
                            std::vector<std::pair<v1::JobRecord, int64_t>>* writes);
  // Copies the task's datasets to the replica's center, then submits it.
  void Stage(const Dispatch& d);
  // Ends an attempt that could not start (refused submit, failed staging): retried by the
  // retry policy or failed. A gang's other replicas are stopped and requeued with it (a
  // new attempt each), so the gang starts whole. Caller holds mu_.
  void FailAttemptLocked(Active& job, int index, const std::string& why);
  // Stops the replica's current attempt at its center (in the background) and releases
  // its reservation. Caller holds mu_.
  void StopAtCenterLocked(const v1::JobRecord& r, int index);
  // Applies an adapter's view of a replica. Caller holds mu_. Returns true when it changed.
  bool ApplyReplica(Active& job, int index, const apb::Replica& replica);
  // Records t_s and T once every replica of the job has reached its center. Caller holds mu_.
  void NoteHandedOverLocked(Active& job);
  // Ends the job if its status policy says so, stopping what still runs. Caller holds mu_.
  void SettleLocked(Active& job);
  // Persists the job (and a watch cursor). Caller must not hold mu_.
  void Persist(const std::string& job_id, const std::string& cursor_center = "", uint64_t cursor = 0);
  absl::StatusOr<std::string> AdapterAddress(const std::string& center_id);
  void EnsureWatcher(const std::string& center_id);
  void WatchLoop(const std::string& center_id);
  void PollFallback();
  v1::TrainJob ToTrainJob(const v1::JobRecord& r) const;
  apb::ReplicaKey KeyOf(const v1::JobRecord& r, int index) const;
  int IndexOf(const v1::JobRecord& r, int task, int replica) const;
  // Sets the gauges from the jobs in memory; at most once a second (it visits every job).
  void UpdateGauges();

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

  std::mutex mu_;
  std::map<std::string, Active> active_;
  std::set<std::tuple<int, int64_t, std::string>> queue_;  // (-priority, seq, id) with waiting replicas
  int64_t next_seq_ = 1;
  std::map<std::string, uint64_t> cursors_;
  std::map<std::string, std::string> addresses_;
  std::set<std::string> watched_;
  std::set<std::string> watch_connected_;
  struct Outbox {
    std::deque<Dispatch> pending;  // submits not yet sent
    int senders = 0;               // SendBatches running for the center
  };
  static constexpr int kSendersPerCenter = 4;
  static constexpr size_t kSubmitBatch = 256;
  std::map<std::string, Outbox> outboxes_;  // by center
  std::set<std::pair<std::string, int>> resubmit_;  // (job, replica) whose submit failed for a passing reason
  std::vector<std::thread> watchers_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Metrics> metrics_;
  absl::Time gauges_updated_ = absl::InfinitePast();

  std::unique_ptr<store::Lease> lease_;
  std::atomic<bool> leading_{false};
  absl::Time lease_renewed_;  // by the cycle thread only
  std::thread standby_;

  PeriodicTask cycle_;
  PeriodicTask poller_;
};

}  // namespace jc::jobs
