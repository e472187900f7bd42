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
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <prometheus/registry.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/event_loop.h"
#include "common/one_shot.h"
#include "common/periodic_task.h"
#include "common/thread_pool.h"
#include "jointcloud/v1/identity.pb.h"
#include "services/jobs/adapter_addresses.h"
#include "services/jobs/admission.h"
#include "services/jobs/admission_reads.h"
#include "services/jobs/data_mover.h"
#include "services/jobs/dispatcher.h"
#include "services/jobs/duration_learning.h"
#include "services/jobs/endpoint_activity.h"
#include "services/jobs/job_events.h"
#include "services/jobs/job_metrics.h"
#include "services/estimator/shared_estimator.h"
#include "services/jobs/job_state.h"
#include "services/jobs/job_store.h"
#include "services/jobs/burst_writer.h"
#include "common/store/leadership.h"
#include "services/jobs/move_planner.h"
#include "services/jobs/replica_tracker.h"
#include "services/jobs/stager.h"
#include "services/jobs/validate_create.h"
#include "services/jobs/queue_reestimation.h"
#include "services/jobs/waiting_queue.h"
#include "services/registry/center_directory.h"
#include "services/scheduler/job_queue.h"
#include "services/scheduler/scheduler.h"
#include "services/southbound/adapter_client.h"

namespace jc::jobs {

namespace apb = ::jointcloud::adapter::v1;

struct JobManagerOptions {
  absl::Duration cycle_interval = absl::Milliseconds(200);  // scheduling cycle and retries
  absl::Duration poll_interval = absl::Seconds(5);          // fallback polls of replicas
  int dispatch_threads = 16;  // submits in flight at once (each waits on an adapter)
  // Active jobs a walk over every one takes in one turn of the loop: the reconcile pass at
  // every poll (ContinueReconcile), the limits, moves and gauges every second (ContinueSweep).
  int walk_slice = 2000;
  int64_t max_log_bytes = 16 << 20;
  // Instances sharing a store take turns through the "jobs" lease: one leads (places and
  // dispatches), the others stand by. The same id re-takes its own lease at once after a
  // restart; two instances on one host need different ids. Empty: the host name.
  std::string instance_id;
  absl::Duration lease_ttl = absl::Seconds(10);
  // How often project quotas are read from the store (beside the decisions, never in one).
  absl::Duration quota_refresh = absl::Seconds(2);
  // Which waiting job is tried first (services/scheduler/queue_order.h): FCFS with
  // priorities, shortest expected first (sef), highest response ratio next (hrrn), least
  // attained service (las), each with or
  // without fair share between projects by their dominant share of the federation.
  scheduler::QueueSettings queue;
  // How many job events memory and the store keep for watchers (job_events.h).
  JobEventsOptions events;
  // A usage record for each attempt that ran (issue 31); false: none is written (the
  // attempts' history is kept all the same).
  bool metering = true;
  // How long an attempt the control plane stopped waits for its center's report of the
  // end before the control plane's own times stand in for it.
  absl::Duration usage_report_grace = absl::Hours(24);
  // How long a waiting job that no registered center could run any more (a center left,
  // a spec offer was withdrawn) waits for one that can before it fails with the reason.
  absl::Duration unsatisfiable_grace = absl::Minutes(10);
  // How long a center may be lost (gone from the registry or unavailable there, and its
  // adapter's event stream down) before the long-running and interactive replicas it held
  // are given up (SPEC A17): services start again elsewhere, interactive jobs fail saying so.
  absl::Duration center_lost_grace = absl::Minutes(5);
  // Moves (SPEC A16): a replica placed where the control plane expected it to start at
  // once that still waits at that center after `move_after` is taken back (only if it has
  // not started: WithdrawReplica) and placed again, when another center can start it now
  // and finish it sooner by more than `move_margin` (a fraction). At most `max_moves` per
  // replica; 0: replicas never move. A gang moves whole.
  int max_moves = 2;
  absl::Duration move_after = absl::Minutes(2);
  double move_margin = 0.25;
  // A replica a scale takes away from a task with ports leaves its endpoint's rotation when
  // the scale is written, and is stopped this much later, so that the requests it is
  // answering finish (SPEC A17).
  absl::Duration scale_down_drain = absl::Seconds(5);
  // How long a create, stop or scale waits for its write to commit before it answers
  // DEADLINE_EXCEEDED (the REST gateway's own deadline): a store that hangs keeps no
  // caller's thread for ever. The change may still be written later (with its audit row).
  absl::Duration write_wait = absl::Seconds(30);
};




// Threading model (docs/architecture.md, "Threads of the job manager"): all job state is
// owned by one event loop (`loop_`); every other thread (request handlers, the dispatcher's
// senders, the stager, the replica tracker's watchers, the cycle) only posts messages to
// it and waits, if at all, on a reply. No lock is shared with them. The loop applies a
// burst of messages to memory, commits what the burst changed in one transaction, and
// only then acts on it (dispatches, stops, replies). It never waits on an adapter.
class JobManager {
 public:
  // `mover` brings tasks' datasets to their centers before dispatch; null: replicas are
  // dispatched without staging.
  JobManager(store::Store* store, scheduler::Scheduler* scheduler, registry::CenterDirectory* centers,
             southbound::AdapterClient* adapters, DataMover* mover, const Clock* clock, JobManagerOptions options);
  ~JobManager();

  // Where admission reads the projects' quotas and budgets and what they spent (not owned;
  // set before Start). None: no quota or budget applies.
  void SetAdmissionReads(AdmissionReads* reads) { admission_reads_ = reads; }

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
  // `audit`, when given, is written in the transaction that records the create (or stop).
  absl::StatusOr<v1::CreateTrainJobResponse> Create(v1::CreateTrainJobRequest request,
                                                    std::optional<v1::AuditRecord> audit = std::nullopt);
  absl::Status StopJob(const std::string& job_id, std::optional<v1::AuditRecord> audit = std::nullopt);
  // Scales task `task_index` of a running service or streaming job to `replicas` (SPEC
  // A17): answered once committed, with the count before. Refused, writing nothing, for
  // other kinds, ended or stopping jobs, counts out of 1..1000 and (scaling up) a hard budget
  // the added replicas do not fit.
  absl::StatusOr<v1::ScaleTrainJobResponse> ScaleJob(const std::string& job_id, int task_index, int replicas,
                                                     std::optional<v1::AuditRecord> audit = std::nullopt);
  absl::StatusOr<v1::TrainJob> Get(const std::string& job_id);
  // With `projects`, only jobs of those projects (what the caller may see).
  absl::StatusOr<v1::ListTrainJobsResponse> List(const v1::ListTrainJobsRequest& request,
                                                 const std::optional<std::vector<std::string>>& projects = std::nullopt);
  // Where the replica's log downloads (relative to the REST base); NotFound for an index
  // out of range.
  absl::StatusOr<std::string> LogUrl(const std::string& job_id, int task_index, int replica_index);
  // The replica's log as its center has it (stdout, then stderr).
  absl::StatusOr<std::string> ReadLog(const std::string& job_id, int task_index, int replica_index);
  // Where a running replica's named port is reached (SPEC A17): its center's adapter and
  // the replica's key there, and the job's project. With kAllReplicas, the task's endpoint:
  // every replica running now whose port is ready (its rotation). NotFound for a replica or
  // port the job does not have (or a replica scaled away); FailedPrecondition while the job
  // has ended or is stopping, the replica is not running, or no replica is ready. Reads the
  // committed record (the store's on a follower). An empty `port_name`: the replica itself,
  // for a command run in it (`jcctl job exec`; one replica, ports or none).
  static constexpr int kAllReplicas = -1;
  struct EndpointRoute {
    southbound::AdapterAt adapter;
    apb::ReplicaKey key;
    std::string project;
    int replica_index = 0;
    std::string token;  // this port's token for the replica's attempt (endpoint_token.h); empty: none
  };
  absl::StatusOr<std::vector<EndpointRoute>> RoutesToEndpoint(const std::string& job_id, int task_index,
                                                              int replica_index, const std::string& port_name);
  southbound::AdapterClient* adapters() const { return adapters_; }
  // The endpoint listener, which counts interactive jobs' use (idle limits); set once, before
  // jobs with an idleTimeout are created. Without one such jobs are refused.
  void SetEndpointActivity(EndpointActivity* activity) { activity_ = activity; }
  // Ports whose replicas report their own use, of the running jobs with an idleTimeout:
  // the listener asks them (refreshed about once a second).
  std::vector<ActivityProbe> ActivityProbes() const {
    if (!leading_) return {};  // a standby (or a leader that stepped down) asks nothing
    std::lock_guard<std::mutex> lock(probes_mu_);
    return activity_probes_;
  }

  // What watchers read (WatchTrainJobs, the REST event streams).
  JobEvents& events() { return events_; }

  // Call before Start.
  void EnableMetrics(prometheus::Registry& registry);
  // The estimator this job manager teaches (SPEC A16): every attempt that ran to its end is
  // observed, its rows written with the burst that closed it and read back at leadership.
  // Null (the default): nothing is learned. Call before Start; it outlives the job manager.
  void SetDurationEstimator(estimator::SharedEstimator* estimator) {
    estimator_ = estimator;
    learning_.SetEstimator(estimator);
  }
  // The store identity this instance's new jobs carry in their replica keys (set by Start).
  const std::string& origin() const { return origin_; }

 private:
  using Snapshot = std::shared_ptr<const v1::JobRecord>;
  using CreateReply = std::shared_ptr<OneShot<absl::StatusOr<v1::CreateTrainJobResponse>>>;
  // nullopt: the job is not in memory (the store says whether it ended or never was).
  using StopReply = std::shared_ptr<OneShot<std::optional<absl::Status>>>;

  struct Active {
    v1::JobRecord record;
    int64_t version = 0;
    std::string request_doc;  // the request's protobuf encoding, once (again after a scale)
  };
  struct NewJob {
    Active job;
    Snapshot snapshot;  // what the insert writes
    std::vector<Dispatch> dispatches;
    CreateReply reply;
    std::optional<v1::AuditRecord> audit;
    v1::TrainJobEvent event;  // CREATED, numbered when the burst is written
    uint64_t estimated_at = 0;  // reestimation_.generation() when its estimate was taken
  };
  // What one burst of messages decided: its writes, and what follows once they commit.
  struct Burst {
    std::vector<NewJob> creates;
    std::vector<std::pair<Snapshot, int64_t>> saves;
    std::map<std::string, uint64_t> cursors;
    std::vector<Dispatch> dispatches;
    std::vector<std::pair<std::string, apb::ReplicaKey>> stops;
    // Stops sent only after scale_down_drain (replicas a scale took out of a rotation).
    std::vector<std::pair<std::string, apb::ReplicaKey>> drained_stops;
    std::vector<StopReply> stop_replies;  // and scales'
    std::vector<v1::AuditRecord> audits;  // of the stops and scales
    std::vector<v1::TrainJobEvent> events;  // of the saves (each create carries its own)
    std::vector<v1::UsageRecord> usage;     // of the attempts the saves closed
    // What the duration estimator learned from those attempts: its changed rows by key.
    std::map<std::string, std::string> durations;
    // Withdrawals to ask of centers (moves), once the asks are written.
    std::vector<Withdrawal> withdrawals;
    bool empty() const {
      return creates.empty() && saves.empty() && cursors.empty() && dispatches.empty() && stops.empty() &&
             drained_stops.empty() &&
             stop_replies.empty() && audits.empty() && usage.empty() && durations.empty() && withdrawals.empty();
    }
  };
  // What a new term starts from, read from the store behind every earlier write.
  struct Reload {
    std::vector<std::pair<v1::JobRecord, int64_t>> active;
    int64_t max_seq = 0;
    std::map<std::string, uint64_t> cursors;
    std::vector<estimator::DurationEstimator::Row> durations;
  };

  // ---- Messages: run on the event loop only. ----
  // `received`: when the create reached the job service (t_r), before it waited for the loop.
  void OnCreate(v1::CreateTrainJobRequest req, CreateReply reply, std::optional<v1::AuditRecord> audit,
                absl::Time received);
  void OnStop(const std::string& job_id, StopReply reply, std::optional<v1::AuditRecord> audit);
  // The job a stop or scale changes; null when there is none to change, `reply` answered
  // (standing by, being recorded, or not in memory: nullopt).
  Active* ActiveToChange(const std::string& job_id, const StopReply& reply);
  // Stops an attempt at its center, again and again with a back-off (2 s doubling, at most
  // a minute) until the adapter confirms it stopped it or does not know it: a stop lost on
  // the way would leave a service's replica running for good, unmetered. Loop thread.
  void SendStop(const std::string& center, const apb::ReplicaKey& key);
  // A stop sent once scale_down_drain has passed (a replica a scale took from a rotation).
  void StopAfterDrain(const std::string& center, const apb::ReplicaKey& key);
  void OnStopAnswer(const std::string& center, const apb::ReplicaKey& key, const absl::Status& answer,
                    uint64_t term);
  // A center reports alive (pending, running) an attempt of the replica at `index` that
  // the record has stopped: the stop is sent again.
  void StopIfStopped(const v1::JobRecord& r, int index, const std::string& center, const apb::Replica& report);
  // Stops not confirmed whose back-off has passed are sent again (OnTick).
  void ResendStops(absl::Time now);
  // `previous` gets the task's replica count before the scale, before `reply` is answered.
  void OnScale(const std::string& job_id, int task_index, int replicas, std::shared_ptr<int> previous,
               StopReply reply, std::optional<v1::AuditRecord> audit);
  // One scheduling cycle: places what waits, resends what failed for a passing reason.
  void OnTick();
  // `answered_at`: when the adapter's answers arrived (the hand-over's time, t_s, whatever
  // the loop was doing then).
  void OnSubmitAnswers(const std::string& center, std::vector<SubmitItem> items,
                       std::vector<absl::StatusOr<apb::Replica>> results, absl::Time answered_at);
  void OnStaged(const Dispatch& d, uint64_t term, const absl::Status& staged);
  void OnEvent(const std::string& center, uint64_t term, const apb::ReplicaEvent& e);
  void OnReplicaRead(uint64_t term, const ReplicaTracker::Ask& ask, const absl::StatusOr<apb::Replica>& replica);
  // Asks the adapters for replicas whose state may be behind: those on centers whose
  // event stream is down, or every live one (`all`, after taking over or a resync).
  // Services' and interactive jobs' replicas at centers lost past --center_lost_grace are
  // given up (ApplyCenterLost).
  // Whether it gave any replica up. `holding`: the centers that hold services' or
  // interactive replicas now (NoteHolding over every active job).
  bool GiveUpLostCenters(const std::set<std::string>& holding, const std::set<std::string>& connected,
                         absl::Time now);
  static void NoteHolding(const v1::JobRecord& job, std::set<std::string>* holding);
  // The replicas of `job` to ask their adapters about (OnReconcile).
  static void AsksOf(const std::string& id, const v1::JobRecord& job, bool all, const std::set<std::string>& connected,
                     std::vector<ReplicaTracker::Ask>* asks);
  void OnReconcile(bool all, const std::set<std::string>& connected);
  // One pass of OnReconcile, over the active jobs in id order. The poller's pass goes
  // walk_slice jobs a turn of the loop, then posts the rest behind what queued
  // meanwhile: in one turn, 25,000 active jobs held the loop 13 ms every poll, and every
  // create and answer waited (docs/benchmarks.md, session 64). A takeover's pass is one turn.
  struct ReconcilePass {
    bool all = false;
    std::set<std::string> connected;
    uint64_t term = 0;
    absl::Time now;
    std::optional<std::string> after;        // the last job id done; none: from the first
    std::set<std::string> holding;           // centers holding services' or interactive replicas
    std::vector<ReplicaTracker::Ask> asks;   // replicas to ask their adapters about
  };
  void ContinueReconcile(ReconcilePass pass, bool one_turn);
  // A new term: memory becomes what the store has; dispatches and watches resume.
  void OnLead(absl::StatusOr<Reload> reload, std::shared_ptr<std::promise<absl::Status>> led);
  // Commit or stop (docs/adr/0006): a write that failed leaves memory ahead of the store,
  // so this instance stops acting on it: it places, dispatches and writes nothing more,
  // refuses creates and stops (Unavailable), keeps answering reads from what it last
  // knew, and tries to lead again, which reloads every job from the store.
  void StepDown(const std::string& why);
  // After each burst of messages: commits the burst's writes (burst_writer.h), then acts.
  void Flush();
  // Acts on a burst once its writes committed: answers, view, dispatches, stops; or
  // steps down when they failed.
  void AfterCommit(Burst& burst, const WriteOutcome& outcome);

  // ---- Helpers of the loop. ----
  // Places the waiting replicas of one job; returns the dispatches to send. `estimates`:
  // its tasks', where the caller has just asked the estimator (a create).
  std::vector<Dispatch> Schedule(Active& job, const estimator::TaskEstimates* estimates = nullptr);
  // An overdue job that fits nowhere: a center drains for it (Scheduler::Drain), and its
  // waiting reason says which.
  void DrainFor(v1::JobRecord& r);
  bool found_no_fit_ = false;  // the last Schedule asked the scheduler and nothing fit (loop)
  // The job has waited past the queue's longest wait (QueueSettings::max_wait_s).
  bool Overdue(const v1::JobRecord& r, absl::Time now) const;
  // The service the job's ended attempts received (GPU-seconds, else CPU-seconds): the las
  // order's rank.
  double Attained(const v1::JobRecord& r) const;
  // Sends (after their commit) replicas to their centers, staging first where needed.
  void SendDispatches(const std::vector<Dispatch>& dispatches);
  // The adapter request for a dispatch still current; nullopt when it moved on.
  std::optional<apb::SubmitReplicaRequest> SubmitRequest(const Dispatch& d);
  // Applies the adapter's answer to one submit, which arrived at `answered_at`. True when
  // the replica was accepted but its job moved on (stop it).
  bool CompleteSubmit(const Dispatch& d, const absl::StatusOr<apb::Replica>& result, absl::Time answered_at);
  // Carries out what the state machine (job_state.h) decided for the job: reservations
  // reported and released in the scheduler's view, stops for after the write, the queue,
  // the metrics.
  void ApplyEffects(Active& job, const JobEffects& fx);
  void ForgetReservations(const v1::JobRecord& r, const std::vector<Dispatch>& dispatches);
  // The usage record of an attempt that ran and ended: what its center measured, priced
  // at the spec's price at its center in force when it started (the scheduler's view of
  // the catalog, in memory: no store read on the loop).
  v1::UsageRecord UsageRecordOf(const v1::JobRecord& r, const MeteredAttempt& m, absl::Time now) const;
  // The job's stored document: the record, with its request encoded once per job and
  // spliced in (the request is most of a record, and never changes).
  absl::StatusOr<std::string> Encode(Active& job);
  void MarkDirty(const std::string& job_id) { dirty_.insert(job_id); }
  void SetNotLeading(const std::string& why);
  // Sets the gauges: the queue's length, and the jobs pending and running.
  void UpdateGauges(int pending, int running);
  // The walk over every active job once a second (OnTick): time and idle limits, moves,
  // the gauges; walk_slice jobs a turn of the loop, the rest posted behind what queued
  // meanwhile, from the first job after the move planner's cursor round to it (moves weigh
  // every job in turn). At 25,000 active jobs the four walks in one turn held the loop
  // 25-30 ms every second, and the creates that came meanwhile waited: T's p99
  // (docs/benchmarks.md, session 65).
  struct SweepPass {
    uint64_t term = 0;
    absl::Time now;
    std::string from;                   // where it started; it ends there, having gone round
    std::optional<std::string> after;   // the last job id done; none: from the first
    bool wrapped = false;               // gone round past the last job
    int pending = 0, running = 0;       // the gauges
    EndpointActivity* activity = nullptr;
    std::vector<ActivityProbe> probes;  // EnforceIdleLimit's
    absl::flat_hash_map<std::string, absl::Time> ready_now;
  };
  void ContinueSweep(SweepPass pass);
  std::optional<uint64_t> sweep_term_;  // the term of the walk under way; none: no walk
  // Places queued jobs through `schedule_one` in the queue order (options_.queue: sef, las,
  // with or without fair share): ranks from each job's expected run time and the service
  // its attempts received; with fair share, what each project's placed and unfinished
  // replicas hold is recounted, and shares are compared again after every placement. Loop
  // thread.
  // Returns, for each job offered, in the order offered, why it stood there (the order's
  // explanation).
  std::vector<std::pair<std::string, std::string>> ScheduleQueue(
      const std::function<void(const std::string&)>& schedule_one);
  // After a pass, at most once a second: each job still waiting gets its place in the queue
  // ("2nd of 7 waiting (sef): expected 4m, waited 1m"), for readers (ToTrainJob). Loop thread.
  void NoteQueuePositions(const std::vector<std::pair<std::string, std::string>>& offered, absl::Time now);
  absl::Time positions_noted_ = absl::InfinitePast();

  // ---- The cycle thread: leadership, and the tick of the loop. ----
  void RunCycle();
  // Reads the store on the loop (after every write it made), then leads from it; `led`
  // says how that went.
  std::shared_ptr<std::promise<absl::Status>> BeginLead();

  absl::Status StandbyError();
  // The job as clients see it; `with_history` adds every replica attempt (GetTrainJob).
  v1::TrainJob ToTrainJob(const v1::JobRecord& r, bool with_history = false) const;
  v1::CreateTrainJobResponse ResponseOf(const v1::JobRecord& r) const;
  int IndexOf(const v1::JobRecord& r, int task, int replica) const;
  // The last committed record of a job in memory (any thread); null when not there.
  Snapshot Committed(const std::string& job_id);
  // The job's record as committed: this process's copy, or the store's (a follower).
  absl::StatusOr<v1::JobRecord> CommittedRecord(const std::string& job_id);

  store::Store* store_;
  JobStore jobs_;
  scheduler::Scheduler* scheduler_;
  southbound::AdapterClient* adapters_;
  DataMover* mover_;
  const Clock* clock_;
  JobManagerOptions options_;
  AdapterAddresses addresses_;
  std::unique_ptr<JobMetrics> metrics_;  // set before Start, read-only after
  std::string origin_;                   // the store's identity, in every replica key
  estimator::SharedEstimator* estimator_ = nullptr;
  // What the attempts that ran to their end teach estimator_ (duration_learning.h); loop thread.
  DurationLearning learning_{[this](const std::string& center) { return scheduler_->PerformanceOf(center); }};
  // Stops the job when an attempt of it ran past its time limit; loop thread.
  void EnforceTimeLimit(Active& job, absl::Time now);
  // Stops an interactive job idle past its idleTimeout, and adds the ports the listener
  // asks for its replicas' own word (activity_probes_ at the walk's end); loop thread.
  void EnforceIdleLimit(const std::string& id, Active& job, SweepPass& pass);
  std::atomic<EndpointActivity*> activity_{nullptr};
  absl::Time leading_since_ = absl::InfiniteFuture();  // loop thread
  // Jobs with an idle timeout and ports: when one of their endpoints was first seen ready
  // (EnforceIdleLimit; loop thread). Rebuilt every round from the jobs that still run.
  absl::flat_hash_map<std::string, absl::Time> ready_since_;
  mutable std::mutex probes_mu_;
  std::vector<ActivityProbe> activity_probes_ ABSL_GUARDED_BY(probes_mu_);
  // Stops `job` for `reason` (a budget, a time limit), not by its user; loop thread.
  void StopFor(Active& job, std::string reason, absl::Time now);
  // The scheduler's in-memory view of prices and specs, as admission asks for it.
  class CatalogView final : public AdmissionCatalog {
   public:
    explicit CatalogView(const scheduler::Scheduler* scheduler) : scheduler_(scheduler) {}
    double HighestPrice(const std::string& spec_id) const override;
    std::optional<double> PriceAt(const std::string& center_id, const std::string& spec_id,
                                  absl::Time at) const override;
    std::optional<std::pair<double, double>> Quantity(const std::string& spec_id) const override;

   private:
    const scheduler::Scheduler* scheduler_;
  };
  CatalogView catalog_view_{scheduler_};
  // The jobs in memory, the scheduler and the burst, as moves (move_planner.h) reach them;
  // loop thread.
  class MoveView final : public MoveHost {
   public:
    explicit MoveView(JobManager* manager) : manager_(manager) {}
    v1::JobRecord* Find(const std::string& job_id) override;
    std::vector<scheduler::Scheduler::MoveAnswer> MoveTargets(
        const std::vector<scheduler::Scheduler::MoveQuestion>& questions, double margin) override;
    void Apply(const std::string& job_id, const JobEffects& fx) override;
    void Send(const Withdrawal& w) override;

   private:
    JobManager* manager_;
  };
  MoveView move_view_{this};
  // Moves (SPEC A16), weighed once a second on the loop; what they remember is theirs.
  MovePlanner moves_{&move_view_, MoveOptions{options_.max_moves, options_.move_after, options_.move_margin}};

  // ---- State of the event loop: touched only by closures running on loop_. ----
  std::map<std::string, Active> active_;
  // Waiting jobs that no registered center could run any more, and since when (in memory:
  // a restart gives them the grace again).
  std::map<std::string, absl::Time> unsatisfiable_since_;
  // Centers holding replicas that the registry says are gone while their adapter's stream is
  // down, since when (this term: a new leader starts the grace again, the safe way).
  std::map<std::string, absl::Time> lost_since_;
  // Created, its insert not yet committed: what a second create with its key is told.
  std::map<std::string, Snapshot> creating_;
  std::map<std::string, std::vector<CreateReply>> key_waiters_;  // by job id: creates with its key
  // Stops sent and not confirmed, by the attempt's key (loop thread; cleared at a
  // step-down: the next term sends the stops its reload finds again).
  struct PendingStop {
    std::string center;
    apb::ReplicaKey key;
    absl::Duration backoff = absl::Seconds(2);
    absl::Time next = absl::InfiniteFuture();  // in flight until answered
    absl::Time since;
  };
  std::map<std::string, PendingStop> pending_stops_;
  std::map<std::string, std::string> keys_;                      // idempotency key -> job id in memory
  WaitingQueue waiting_{options_.queue};  // the jobs with waiting replicas, in line and in queue order
  QueueReestimation reestimation_;         // which waiting jobs' estimates to ask again (sef, hrrn)
  int64_t next_seq_ = 1;
  std::set<std::pair<std::string, int>> resubmit_;  // (job, replica) whose submit failed for a passing reason
  std::map<std::string, uint64_t> cursors_;         // applied watch cursor by center
  std::map<std::string, std::pair<uint64_t, absl::Time>> cursor_written_;  // by center: what was written, when
  AdmissionReads* admission_reads_ = nullptr;   // quotas, budgets, spend (not owned)
  std::set<std::string> dirty_;                     // jobs changed in this burst
  Burst burst_;
  absl::Time gauges_updated_ = absl::InfinitePast();
  // Quotas and budgets (admission.h): fed the jobs once a cycle, asked once per create.
  Admission admission_{&catalog_view_};
  std::vector<prometheus::Gauge*> budget_gauges_;
  // jc_project_budget_used_ratio by project: removed with the project's budget, so that its
  // alert stops firing.
  std::map<std::string, prometheus::Gauge*> budget_ratio_gauges_;
  // Puts the budgets read from the store in force and on /metrics.
  void SetBudgets(std::string month, std::map<std::string, v1::ProjectBudget> budgets,
                  std::map<std::string, double> ended);
  // Once a cycle, with quotas or budgets: recounts them from the jobs in memory, says the
  // budget thresholds crossed (once), and stops the jobs a hard budget stops.
  void RecountAdmission();
  std::vector<prometheus::Gauge*> quota_gauges_;
  // Puts new quotas in force and on /metrics.
  void SetQuotas(std::map<std::string, v1::ProjectQuota> quotas);

  // ---- Shared with other threads. ----
  // Every Lead and StepDown starts a new term (written by the loop only); work begun in an
  // earlier term (an answer, an event, a write) is dropped instead of applied to another.
  std::atomic<uint64_t> term_{0};
  std::atomic<bool> leading_{false};     // written by the loop only
  std::atomic<bool> leading_soon_{false};  // a reload is under way (the cycle thread's)
  std::atomic<bool> tick_posted_{false};
  std::atomic<bool> stopping_{false};
  std::mutex status_mu_;
  std::string not_leading_ ABSL_GUARDED_BY(status_mu_);  // why this instance does not lead
  // The last committed record of each job in memory, for reads from any thread (the loop
  // replaces entries as their writes commit).
  std::mutex view_mu_;
  std::map<std::string, Snapshot> view_ ABSL_GUARDED_BY(view_mu_);
  // Waiting jobs' places in the queue (NoteQueuePositions), replaced whole each second.
  mutable std::mutex positions_mu_;
  std::map<std::string, std::string> queue_positions_ ABSL_GUARDED_BY(positions_mu_);

  // ---- Collaborators. The pool is declared last so that it is destroyed first, while
  // what its work refers to still exists. ----
  std::unique_ptr<store::Leadership> leadership_;  // the cycle thread's
  JobEvents events_;
  EventLoop loop_;
  PeriodicTask cycle_;
  PeriodicTask poller_;
  PeriodicTask quota_reader_;
  Dispatcher dispatcher_;
  Stager stager_;
  ReplicaTracker tracker_;
  ThreadPool pool_;  // senders, stops, staging copies, replica reads
};

}  // namespace jc::jobs
