#pragma once

// The nexec master (SPEC B1, B3, B5, B6, B11): keeps hosts, queues and jobs in memory,
// persists every job change through the common store before acknowledging it, runs the
// scheduling core in batches, and drives the agents. Domain logic only: the gRPC edge is
// master_service.cc, and agents are reached through the AgentDialer interface.
//
// Threading model (docs/executor.md, "Threads of the master"): every piece of state below
// (jobs, hosts, the scheduler, timed jobs) is owned by one event loop (`loop_`, the
// control plane's common/event_loop.h). Request handlers, the launch senders and the
// housekeeping thread only post messages to it and wait, if at all, on a reply. The loop
// applies a burst of messages to memory through the job state machine (job_state.h), runs
// a scheduling cycle when something asked for one, commits everything the burst changed in
// one transaction (commit or stop: retried, then the master exits), and only then acts:
// replies, events, launches, agent calls. It never waits on an agent or on another thread.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/event_loop.h"
#include "common/event_log.h"
#include "common/outbox.h"
#include "common/store/store.h"
#include "common/thread_pool.h"
#include "executor/sensor/sensor.h"
#include "executor/master/access.h"
#include "executor/master/agent_dialer.h"
#include "executor/master/config.h"
#include "executor/master/host_book.h"
#include "executor/master/job_state.h"
#include "executor/master/launcher.h"
#include "executor/master/master_metrics.h"
#include "executor/master/timed_jobs.h"
#include "executor/policy/scheduler.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

struct MasterOptions {
  absl::Duration host_timeout = absl::Seconds(10);  // silence before a host is unavailable
  std::string log_dir = "/tmp/nexec-logs";          // default task output directory
  // Where ress.master is (RESS, B1): the master runs it for cluster resources, which
  // apply to the hosts of each record's locale, or to every host. Empty: none.
  std::string sensor_dir;
  absl::Duration sensor_restart_delay = absl::Seconds(5);
  // Where run windows' hours are read (B6): the master's local time by default.
  absl::TimeZone time_zone = absl::LocalTimeZone();
  // How long an ended job stays in the master's memory (LSF's CLEAN_PERIOD, Slurm's
  // MinJobAge): after it, its record moves to the store's history, where `nexec job`,
  // logs and the adapters still find it, but lists and the master's memory do not hold it.
  // Zero: no time limit (max_ended_jobs still bounds how many are held).
  absl::Duration clean_period = absl::Hours(1);
  // At most this many ended jobs in memory: past it, the oldest go to the history before
  // their clean period is over (thousands of jobs a second would otherwise hold millions
  // for an hour). Zero: no bound.
  int64_t max_ended_jobs = 100'000;
  // Leadership (several masters on one store, docs/executor.md "High availability"): the
  // term this master leads in, sent in every launch, signal, input and command so that an
  // agent that has seen a later leader refuses them; and the fence every write checks in
  // its transaction first (the lease still held), so a master that lost the lease writes
  // nothing and stops (commit or stop). 0 and none: a master alone, as in unit tests.
  int64_t term = 0;
  std::function<absl::Status(store::Transaction&)> fence;
};

struct MasterStats {
  int64_t cycles = 0;
  int64_t placements = 0;
  double last_cycle_seconds = 0;
};

class Master {
 public:
  // The most bytes a job's spec may take (its command, arguments and environment): a launch
  // carries it whole in one gRPC message (BuildRequest).
  static constexpr size_t kMaxJobSpecBytes = 1 << 20;
  Master(store::Store* store, const Clock* clock, AgentDialer* dialer, ExecutorConfig config,
         MasterOptions options);
  ~Master();

  // Rebuilds the in-memory state from the store (hosts, pending and running jobs).
  // Running jobs keep their resources and are not launched again.
  absl::Status Recover();
  // The store's identity, sent in every launch and signal (empty before Recover).
  const std::string& identity() const { return identity_; }
  int64_t term() const { return options_.term; }

  absl::StatusOr<int64_t> Submit(pb::JobSpec spec);
  // The same without waiting (the gRPC edge's form: no handler thread blocks on the loop):
  // `done` gets the job's id or why not once the submission is committed, on the loop's
  // thread, or at once on this one for a spec refused before it; UNAVAILABLE if the master
  // stops first.
  void SubmitThen(pb::JobSpec spec, std::function<void(absl::StatusOr<int64_t>)> done);
  // Several submissions (a job pack) the same way, as one message to the loop: they are
  // taken in one burst and committed together, and `done` gets each one's id or why not,
  // in their order, once committed (or UNAVAILABLE for all if the master stops first).
  void SubmitAllThen(std::vector<pb::JobSpec> specs,
                     std::function<void(std::vector<absl::StatusOr<int64_t>>)> done);
  absl::StatusOr<pb::Job> GetJob(int64_t id);
  std::vector<pb::Job> ListJobs(const pb::ListJobsRequest& req);
  // Ends the job; `reason` (empty: "killed by user") is what its record says.
  // `only_if_pending`: only a job that never started (pending, first attempt) is killed;
  // another is answered as it is, unchanged (the control plane's withdrawal of a replica
  // that waits: decided on the loop, so no start comes between the check and the kill).
  // `taken_back`, when given, says whether this call killed a job that never started.
  absl::StatusOr<pb::Job> Kill(int64_t id, const std::string& reason = "", bool only_if_pending = false,
                               bool* taken_back = nullptr);
  // Suspends a running job (USUSP). A job the system suspended (SSUSP: its run window
  // closed) becomes the user's: it no longer resumes by itself.
  absl::StatusOr<pb::Job> Suspend(int64_t id);
  // Resumes a job a user suspended; FAILED_PRECONDITION for one the system suspended.
  absl::StatusOr<pb::Job> Resume(int64_t id);
  absl::StatusOr<pb::Job> Requeue(int64_t id);
  absl::StatusOr<pb::Job> Rerun(int64_t id);
  std::vector<pb::Host> ListHosts();
  std::vector<pb::Queue> ListQueues();
  // Every limit (B7) with its values in force now and what each bucket holds.
  std::vector<pb::Limit> ListLimits();
  // The share trees of fair-share queues (all, or `queue`'s), depth first.
  std::vector<pb::ShareNode> ListShares(const std::string& queue);
  // When a job of each probe's shape, submitted now, would start by the backfill
  // planner's reckoning (Scheduler::EstimateStart); nothing is submitted.
  pb::EstimateStartResponse EstimateStart(const pb::EstimateStartRequest& req);
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(const pb::HeartbeatRequest& req);
  // The jobs the master remembers, by state name and queue: what /metrics exports as
  // nexec_jobs. Kept as jobs are written, not counted per call.
  std::map<std::pair<std::string, std::string>, int> JobCounts();
  // Heartbeat without waiting (the gRPC callback method): `done` gets the answer once what
  // it reported is committed, or UNAVAILABLE from a stopping master. `req` must stay
  // valid until `done` is called.
  void HeartbeatThen(const pb::HeartbeatRequest& req, std::function<void(absl::StatusOr<pb::HeartbeatResponse>)> done);
  // A heartbeat on an agent's stream (agent_streams.cc): HeartbeatThen, and whether the
  // master now holds the heartbeat's host, available and not refusing it, at the address it
  // reported: the stream takes that host's launches only then.
  struct StreamedHeartbeat {
    pb::HeartbeatResponse response;
    bool host_at_address = false;
  };
  void StreamedHeartbeatThen(const pb::HeartbeatRequest& req,
                             std::function<void(absl::StatusOr<StreamedHeartbeat>)> done);
  absl::StatusOr<std::string> ReadLog(const pb::ReadLogRequest& req, int64_t max_bytes);
  // Remote tasks (B10, nexec-run): starts `req.command` on a host of the running job's
  // allocation through its agent and answers the task (its index names its logs).
  // InvalidArgument for a host outside the allocation; FailedPrecondition for a job not
  // running; the agent's error when it cannot start it (the task is then recorded as
  // exited 127).
  absl::StatusOr<pb::Task> RunTask(const pb::RunTaskRequest& req);
  // Interactive jobs (submit -I): input for the running job's command, through its agent;
  // answers the bytes taken. UNAVAILABLE while it has not started (the caller retries).
  absl::StatusOr<int64_t> SendInput(pb::InputRequest req);
  // A command in a running task (nexec exec, SPEC A17): the address of the agent that runs
  // task `start->task_index()` of the job, with `start->attempt` set to the job's. Who may
  // is MayExec's to say. FailedPrecondition for a job not RUNNING (pending, suspended,
  // ended) or a task that ended; InvalidArgument for a task that runs no command.
  absl::StatusOr<std::string> ExecTarget(pb::ExecStart* start);
  // Forwards `signal` to a task's process group.
  absl::StatusOr<pb::Job> SignalTask(const pb::SignalTaskRequest& req);

  // Timed jobs (B5): a spec submitted on a schedule. Add checks the spec as a submission
  // would, the schedule, overlap and retries, and answers once the timed job is stored.
  absl::StatusOr<pb::TimedJob> AddTimedJob(pb::TimedJob tj);
  std::vector<pb::TimedJob> ListTimedJobs();
  // Removes it (stored first); its current run, if any, goes on.
  absl::StatusOr<pb::TimedJob> RemoveTimedJob(int64_t id);
  absl::Status MayControlTimedJob(const Principal& caller, int64_t id);
  // Submits the runs that are due, retries failed ones, kills runs that did not start in
  // time or that an overlap kill replaces; every second. A timed job's record is written
  // with the burst that changed it (commit or stop); runs are submitted with keys, so a
  // step repeated after a crash finds the jobs it already made.
  absl::Status CheckTimedJobs();

  // Applies a new configuration without losing jobs: queue parameters, new queues, host
  // types and static host attributes, user groups. A queue that still holds jobs cannot
  // be removed; then nothing changes and the error says why.
  absl::Status Reconfigure(ExecutorConfig config);

  // Authorization on the caller's proven account (access.h), against the configuration
  // in force: submitting as `user`, and acting on job `id` (NOT_FOUND when there is none).
  absl::Status MaySubmitAs(const Principal& caller, const std::string& user);
  absl::Status MayControl(const Principal& caller, int64_t id);
  // Running a command in job `id` as its account: its owner, root and the administrators
  // (who may submit as anyone), never a group's administrators (who may stop a member's
  // job, not act as them).
  absl::Status MayExec(const Principal& caller, int64_t id);
  // Root, or an administrator named in the configuration in force.
  bool Administers(const Principal& caller) const;
  // What a job shows to someone who may not control it: its command lines and
  // environment (which may hold secrets) are left out, as Slurm's PrivateData=jobs does.
  void HidePrivate(const Principal& viewer, pb::Job* job);
  // A host as `viewer` may see it: the images its agent holds only for root and the
  // administrators (issue 44: which digests a host holds is no other account's business).
  void HidePrivate(const Principal& viewer, pb::Host* host);

  // One scheduling pass: decide in a batch, persist the decisions in one transaction,
  // launch the tasks. Returns the number of jobs started.
  absl::StatusOr<int> ScheduleOnce();
  // Hosts silent longer than host_timeout become unavailable; their jobs rerun (queue
  // setting) or fail.
  absl::Status CheckHosts();
  // What the system suspends and resumes (B5, B6): running jobs of queues whose run
  // window is closed, and jobs on a host past a stop load threshold (killed instead when
  // the queue says threshold_action: kill), are suspended; they resume when the window
  // opens and the load is back under the scheduling threshold. Returns the jobs changed.
  absl::StatusOr<int> CheckRunWindows();

  // From now on the loop runs a scheduling cycle after each burst that asked for one
  // (submission, resources freed, host change) and every second, and the housekeeping
  // thread checks hosts, timed jobs and run windows every second, until Stop(). Before
  // Start, cycles run only when ScheduleOnce is called (tests drive them so).
  void Start();
  void Stop();
  // Asks for a scheduling cycle after the current burst (from any thread).
  void Wake();

  // Moves the jobs that ended more than clean_period ago out of memory and the live table
  // into the store's history (in one burst's transaction, commit or stop); answers how
  // many. The housekeeping thread calls it every second; tests call it directly.
  int CleanEnded();

  EventLog<pb::JobEvent>& events() { return events_; }
  // Exports metrics to `registry` from now on (updated every loop iteration).
  void EnableMetrics(prometheus::Registry& registry);
  MasterStats stats();

 private:
  // Everything below that is not static runs on the loop, unless it says otherwise.

  // A job as the master keeps it: the state machine's view (job_state.h) and the request
  // the scheduler holds for it.
  struct JobRecord : job_state::Tracked {
    JobRequest request;
    // What the jobs-by-state-and-queue count holds it as (Recount), once counted.
    std::optional<std::pair<pb::JobState, std::string>> counted;
    // When it ended, as filed in ended_by_time_ (Recount) for the clean period.
    std::optional<absl::Time> filed_ended_at;
    // Its row is in nexec_jobs (a job loaded, or whose first write committed): written by
    // UPDATE; a job submitted since is INSERTed, without an UPDATE that finds no row first.
    bool stored = true;
  };
  // The job a submit key made, and whose it is (submit_keys_).
  struct KeyedJob {
    int64_t id = 0;
    std::string user;
  };
  // The host is unavailable (`why`): nothing more is placed there, and its jobs' host
  // rules apply (rerun or fail).
  void LoseHost(const std::string& name, HostBook::Host& host, const std::string& why);
  struct Launch {
    std::string address;
    pb::LaunchRequest request;
  };
  // A call to an agent decided on the loop and made, off it, after the decision is stored.
  struct AgentCall {
    std::string address;
    pb::SignalRequest request;
  };
  struct PreemptionCall {
    Preemption preemption;
    job_state::Effects effects;
  };
  // What a scheduling cycle leaves to do once its decisions are stored, off the loop
  // (calls that wait on agents).
  struct CycleCalls {
    int started = 0;
    std::vector<AgentCall> agent_calls;
    std::vector<PreemptionCall> preemptions;
    std::vector<int64_t> resumes;
    bool empty() const { return agent_calls.empty() && preemptions.empty() && resumes.empty(); }
  };
  // What the messages of one burst changed, and what follows once that is committed.
  struct Burst {
    std::set<int64_t> jobs;                    // written as memory has them at the commit
    std::vector<pb::Job> events_before;        // job events from before the burst's cycle
    std::map<std::string, std::string> hosts;  // host documents
    std::vector<std::function<absl::Status(store::Transaction&)>> writes;  // other rows
    std::vector<std::function<void()>> after;  // replies, launches, agent calls
    // Jobs submitted in the burst, by account: pending, and not yet in pending_by_user_
    // (Recount counts them once committed).
    std::map<std::string, int> submitted_by_user;
    bool writes_nothing() const { return jobs.empty() && hosts.empty() && writes.empty(); }
  };

  // ---- The loop's edge: the only ways in from other threads. ----
  // Runs `fn` on the loop and answers what it returned once what the burst changed is
  // committed. Must not be called on the loop (it would wait on itself).
  template <class F>
  std::invoke_result_t<F> OnLoop(F fn);
  // OnLoop without waiting: `done` gets what `fn` returned once the burst is committed, or
  // UNAVAILABLE if the loop drops the message or its answer (the master stopping).
  template <class F>
  void OnLoopThen(F fn, std::function<void(std::invoke_result_t<F>)> done);
  // A caller about to wait for the loop's answer is not the loop (it would wait on itself:
  // a defect, not a state; aborts saying so).
  void MustNotWaitOnLoop() const;
  // A submission's checks that need no state (and a terminal made interactive), then its
  // taking on the loop: the job made and marked for the burst's write, or why not.
  static absl::Status Presubmit(pb::JobSpec& spec);
  absl::StatusOr<int64_t> SubmitOnLoop(pb::JobSpec spec);
  // After each burst: a scheduling cycle when one was asked for, then the commit of the
  // burst's writes in one transaction (commit or stop), then what waited on it.
  void Flush();
  void Commit(Burst& burst);
  // The job is written (and its event published) with the burst.
  void MarkDirty(int64_t id) { burst_.jobs.insert(id); }
  // `fn` runs after the burst's commit.
  void AfterCommit(std::function<void()> fn) { burst_.after.push_back(std::move(fn)); }

  // An entry of the allocation the job holds now: not a remote task, not an allocation
  // an elastic job gave back.
  static Placement HeldPlacement(const pb::Job& job, const JobRequest& request, int* grown);
  static bool HeldAllocation(const pb::Task& t) {
    return !t.remote() && !(t.grown() && t.state() == pb::TASK_EXITED);
  }
  // An allocation as a task entry: host, slots, GPUs and reservations.
  static void DescribeAllocation(const HostAllocation& a, pb::Task* t);
  // One scheduling cycle's decisions applied to memory and marked for the burst's write;
  // launches go out after the commit, and what waits on agents is returned.
  CycleCalls Cycle();
  // Elastic jobs (master_elastic.cc): what a cycle grew or shrank written to the jobs'
  // records, and the calls to make once they are stored: the resize events for each job's
  // event file, and kills of remote tasks on hosts a job gave back.
  void ApplyResizes(const std::vector<Resize>& resizes, std::vector<AgentCall>* calls);
  // Off the loop: makes them; a notification that does not arrive is sent again on a
  // heartbeat.
  void CarryOutAgentCalls(const std::vector<AgentCall>& calls);
  // Off the loop: carries out what a cycle decided to preempt (suspend, or SIGTERM then
  // requeue) and resumes preempted jobs whose slots are free again.
  void CarryOutPreemptions(const std::vector<PreemptionCall>& preemptions, const std::vector<int64_t>& resumes);
  void CarryOut(const CycleCalls& calls);  // off the loop: both

  const QueueConfig* QueueConfigOf(const std::string& name) const;
  // A scheduler call that can fail only when its model and the records disagree: logged.
  static void LogInconsistency(int64_t job_id, const char* what, const absl::Status& status);
  // Off the loop: suspend and resume, by a user (`system_reason` empty) or by the system.
  absl::StatusOr<pb::Job> SuspendJob(int64_t id, const std::string& system_reason);
  absl::StatusOr<pb::Job> ResumeJob(int64_t id, bool by_system);
  // A job as clients see it: a pending job in a closed queue says so.
  pb::Job ViewOf(const JobRecord& rec) const;
  // Opens and closes queues in the scheduler by their run windows at `now`.
  void ApplyWindows(absl::Time now);
  std::string Stamp() const;  // the time for a history line
  // Fair share: a job's usage from its record (Recover).
  void CountPastUsage(const pb::Job& job, const JobRequest& request, absl::Time now, absl::Time forgotten_before);
  // A job's spec as it goes to the scheduler; InvalidArgument for one no host could run
  // (its environment, image, directories, or a spec past kMaxJobSpecBytes).
  absl::StatusOr<JobRequest> BuildRequest(const pb::JobSpec& spec, int64_t id);
  absl::Status Persist(store::Transaction& txn, const pb::Job& job, bool stored);
  // Appends `e` (its job set) to the event log, stamped.
  void Publish(pb::JobEvent e);
  // Carries out what a transition of the job's state machine asks of the scheduler's model
  // and the master's tables, and marks the job for the burst's write when it asks for one.
  void ApplyEffects(JobRecord& rec, const job_state::Effects& fx);
  job_state::At Now() const { return {clock_->Now(), options_.time_zone}; }
  int PreExecRetries(const JobRecord& rec) const;
  bool RerunsOnHostFailure(const JobRecord& rec) const;
  // The host half of a heartbeat: the host book, its resources and sensors; true when
  // something was freed or changed that a cycle should look at.
  absl::StatusOr<bool> HostHeartbeat(const pb::AgentInfo& info);
  // A heartbeat's work, on the loop: the host book, the tasks reported, relaunches.
  absl::StatusOr<pb::HeartbeatResponse> HeartbeatOnLoop(const pb::HeartbeatRequest& req);
  // A heartbeat from an agent serving another master's store: its reports are not ours;
  // the host is shown "refused" with why, and loses what this master ran there.
  void RefuseHeartbeat(const pb::HeartbeatRequest& req);
  // jobs_by_state_ told of the job's state and queue now (after its write), and a job
  // that ended filed for the clean period; by name.
  void Recount(JobRecord& rec);
  // Off the loop: a job cleaned out of memory (CleanEnded), from the store's history;
  // NOT_FOUND when there is none.
  absl::StatusOr<pb::Job> CleanedJob(int64_t id);
  // Off the loop: `status` of an action on job `id` that the loop did not find, unless the
  // job was cleaned: then FAILED_PRECONDITION (it ended long ago; `action` cannot apply).
  absl::Status UnlessCleaned(absl::Status status, int64_t id, absl::string_view action);
  // Off the loop (Recover): what the history keeps that memory needs — the next job id,
  // the submit keys, and fair share's usage of jobs that ended since `forgotten_before`.
  struct History {
    int64_t max_id = 0;
    std::vector<std::pair<std::string, KeyedJob>> submit_keys;
    std::vector<pb::Job> recent;  // for fair share
  };
  absl::StatusOr<History> ReadHistory(std::optional<absl::Time> forgotten_before);
  int CleanEndedOnLoop(absl::Time ended_before);
  int64_t EndedHeld() const;  // ended jobs in memory now
  std::map<std::pair<std::string, std::string>, int> JobCountsOnLoop() const;
  absl::Status AddHostRecord(const pb::AgentInfo& info);
  pb::LaunchRequest MakeLaunch(const pb::Job& job) const;
  // NEXEC_ASSIGNED_<RESOURCE>=units for the units of `assign` resources the job holds on
  // `host` (RESS assign), in the launch's environment.
  static void AddAssignedUnits(const pb::Job& job, const std::string& host, pb::LaunchRequest* l);
  std::string AddressOf(const std::string& host) const;
  // Off the loop: sends `action` to every task of the job with a process (task 0 and the
  // remote ones not ended) at `addresses` (by host); task 0's answer is returned, the
  // others' failures are logged (a remote task that ended meanwhile is no error).
  struct SignalTargets {
    pb::Job job;
    std::map<std::string, std::string> addresses;
  };
  SignalTargets TargetsOf(const pb::Job& job) const;
  absl::Status SignalTasks(const SignalTargets& targets, pb::SignalRequest::Action action);
  // The launch of a remote task.
  pb::LaunchRequest MakeRemoteLaunch(const pb::Job& job, const pb::Task& task, const pb::RunTaskRequest& req) const;
  // A leader tells each agent that heartbeats its term once (Agent.Lead, a signed call), so
  // that the agent refuses the requests of a master of an earlier term from then on.
  void TellTermTo(const pb::AgentInfo& info);
  // Queues a launch for its agent (the launcher: one sender per agent, in batches).
  void StartLaunch(Launch launch);
  // A sender's answers, posted to the loop.
  void OnLaunched(std::vector<pb::LaunchRequest> batch, std::vector<absl::StatusOr<int>> pids);
  void UpdateMetrics();  // off the loop
  // A capacity queue's virtual clusters as `nexec queues` and /metrics show them.
  void AddClusters(const QueueConfig& queue, pb::Queue* out);
  // The housekeeping thread: every second, a cycle, host checks, timed jobs, run windows,
  // sensors, the clean period and metrics (each through the loop's edge).
  void Housekeeping();
  // Applies one sensor record to the scheduler's hosts (its locale, else `reporter`, else
  // every host); true when a value changed.
  bool ApplySensor(const pb::SensorResource& r, const std::string& reporter);

  struct TimedRecord {
    pb::TimedJob tj;
    Schedule schedule;
  };
  // The current run's state for a timed job's step.
  TimedRunState RunState(const pb::TimedJob& tj) const;
  absl::Status RecoverTimedJobs();

  store::Store* store_;
  const Clock* clock_;
  // Every call to an agent carries this master's store identity (signals stamped here;
  // launches in MakeLaunch).
  class StampedDialer;
  std::unique_ptr<AgentDialer> stamped_;
  AgentDialer* dialer_;
  std::string identity_;  // the store's nexec_master identity (Recover reads or makes it)
  std::unique_ptr<SensorRunner> sensors_;  // ress.master, when there is one (set by Start)
  MasterOptions options_;
  EventLog<pb::JobEvent> events_{16384};

  // ---- State of the event loop: touched only by closures running on loop_. ----
  ExecutorConfig config_;
  Scheduler scheduler_;
  std::map<int64_t, JobRecord> jobs_;
  // JobSpec.submit_key -> the job it created, and whose it is; kept when the job is
  // cleaned (a small index), so a keyed submission retried however late is answered with
  // its job, and never with another user's.
  std::map<std::string, KeyedJob> submit_keys_;  // by SubmitKeyIndex
  // Ended jobs in memory by when they ended (CleanEnded takes the oldest); an entry whose
  // job ran again since no longer matches its filed_ended_at and is skipped.
  std::set<std::pair<absl::Time, int64_t>> ended_by_time_;
  // Where a job's submit key is filed: its submitter's own keys.
  static std::string SubmitKeyIndex(const pb::JobSpec& spec);
  std::set<int64_t> active_;  // running or suspended: what heartbeats and host checks scan
  // Jobs by state and queue, kept as each job's write is committed (Recount), so /metrics
  // does not walk every job the master remembers each second.
  std::map<std::pair<pb::JobState, std::string>, int> jobs_by_state_;
  // Pending jobs by the account they run as, kept as jobs_by_state_ is (Recount), for
  // max_pend_jobs_per_user.
  std::map<std::string, int> pending_by_user_;
  // A submission as `user` past max_pend_jobs_per_user: RESOURCE_EXHAUSTED saying so.
  absl::Status MayQueueAnother(const std::string& user) const;
  // The hosts, and the agents that refuse this master (Host state "refused").
  HostBook hosts_;
  std::set<std::string> told_term_;  // hosts whose agent was told this master's term
  int64_t next_id_ = 1;
  std::map<int64_t, TimedRecord> timed_jobs_;
  int64_t next_timed_id_ = 1;
  MasterStats stats_;
  std::unique_ptr<MasterMetrics> metrics_;
  Burst burst_;
  bool cycle_wanted_ = false;  // something a cycle should look at changed
  bool cycling_ = false;       // Start() was called: cycles run by themselves

  // ---- Shared with other threads. ----
  // The configuration in force, for the checks of who may do what that request handlers
  // make without a trip through the loop (replaced whole by Reconfigure).
  std::shared_ptr<const ExecutorConfig> AccessConfig() const;
  mutable std::mutex access_mu_;
  std::shared_ptr<const ExecutorConfig> access_config_;  // under access_mu_
  std::mutex housekeeping_mu_;
  std::condition_variable housekeeping_cv_;
  bool stopping_ = false;  // under housekeeping_mu_
  std::thread housekeeping_;

  // ---- Threads. The loop is stopped before the state it touches is destroyed (Stop, from
  // the destructor); the pool is declared last so that it is destroyed (and joined) first.
  EventLoop loop_;
  // Launches waiting for their agent (made by the constructor); its senders run on the pool
  // below, which is destroyed (joined) before it.
  std::unique_ptr<Launcher> launcher_;
  // Launch RPCs and the calls a cycle leaves (signals, preemptions) run here, several at
  // once, so the loop never waits on agents.
  std::unique_ptr<ThreadPool> launchers_ = std::make_unique<ThreadPool>(8);
};

template <class F>
std::invoke_result_t<F> Master::OnLoop(F fn) {
  using Result = std::invoke_result_t<F>;
  MustNotWaitOnLoop();
  auto reply = std::make_shared<std::promise<Result>>();
  std::future<Result> answer = reply->get_future();
  loop_.Post([this, reply, fn = std::move(fn)]() mutable {
    if constexpr (std::is_void_v<Result>) {
      fn();
      AfterCommit([reply] { reply->set_value(); });
    } else {
      auto result = std::make_shared<Result>(fn());
      AfterCommit([reply, result] { reply->set_value(std::move(*result)); });
    }
  });
  try {
    return answer.get();
  } catch (const std::future_error&) {
    // The loop stopped before it answered (the master is shutting down).
    if constexpr (std::is_constructible_v<Result, absl::Status>) {
      return Result(absl::UnavailableError("the nexec master is stopping"));
    } else if constexpr (!std::is_void_v<Result>) {
      return Result{};
    }
  }
}

// Calls `done` once: with the answer, or with UNAVAILABLE when dropped unanswered.
template <class Result>
class LoopAnswer {
 public:
  explicit LoopAnswer(std::function<void(Result)> done) : done_(std::move(done)) {}
  LoopAnswer(const LoopAnswer&) = delete;
  LoopAnswer& operator=(const LoopAnswer&) = delete;
  ~LoopAnswer() {
    if (!done_) return;
    if constexpr (std::is_constructible_v<Result, absl::Status>) {
      done_(Result(absl::UnavailableError(kStopping)));
    } else {
      done_(Result());  // a batch's answers (SubmitAllThen): none, each UNAVAILABLE to its caller
    }
  }
  static constexpr char kStopping[] = "the nexec master is stopping";
  void Give(Result result) {
    auto done = std::move(done_);
    done_ = nullptr;
    done(std::move(result));
  }

 private:
  std::function<void(Result)> done_;
};

template <class F>
void Master::OnLoopThen(F fn, std::function<void(std::invoke_result_t<F>)> done) {
  using Result = std::invoke_result_t<F>;
  auto answer = std::make_shared<LoopAnswer<Result>>(std::move(done));
  loop_.Post([this, answer, fn = std::move(fn)]() mutable {
    auto result = std::make_shared<Result>(fn());
    AfterCommit([answer, result] { answer->Give(std::move(*result)); });
  });
}

}  // namespace jc::nexec
