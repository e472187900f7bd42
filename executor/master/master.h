#pragma once

// The nexec master (SPEC B1, B3, B5, B6, B11): keeps hosts, queues and jobs in memory,
// persists every job change through the common store before acknowledging it, runs the
// scheduling core in batches, and drives the agents. Domain logic only: the gRPC edge is
// master_service.cc, and agents are reached through the AgentDialer interface.

#include <condition_variable>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/event_log.h"
#include "common/outbox.h"
#include "common/store/group_commit.h"
#include "common/store/store.h"
#include "common/thread_pool.h"
#include "executor/agent/sensor.h"
#include "executor/master/access.h"
#include "executor/master/config.h"
#include "executor/master/job_state.h"
#include "executor/master/master_metrics.h"
#include "executor/master/timed_jobs.h"
#include "executor/policy/scheduler.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

// How the master reaches an agent.
class AgentDialer {
 public:
  virtual ~AgentDialer() = default;
  // Starts a task; AlreadyExists (the same task attempt already runs) counts as success.
  virtual absl::StatusOr<int> Launch(const std::string& address, const pb::LaunchRequest& req) = 0;
  // Several launches to one agent; one result per request, in order. By default one
  // Launch each.
  virtual std::vector<absl::StatusOr<int>> LaunchBatch(const std::string& address,
                                                       const std::vector<pb::LaunchRequest>& reqs) {
    std::vector<absl::StatusOr<int>> out;
    for (const auto& r : reqs) out.push_back(Launch(address, r));
    return out;
  }
  virtual absl::Status Signal(const std::string& address, const pb::SignalRequest& req) = 0;
  // Input for an interactive task; answers the bytes the agent took.
  virtual absl::StatusOr<int64_t> SendInput(const std::string& address, const pb::InputRequest& req) {
    return absl::UnimplementedError("this dialer passes no input");
  }
  // Reads a task's output from `offset`, at most `max_bytes`.
  virtual absl::StatusOr<std::string> ReadLog(const std::string& address,
                                              const pb::ReadLogRequest& req, int64_t max_bytes) = 0;
};

struct MasterOptions {
  absl::Duration host_timeout = absl::Seconds(10);  // silence before a host is unavailable
  std::string log_dir = "/tmp/nexec-logs";          // default task output directory
  // Where ress.master is (RESS, B1): the master runs it for cluster resources, which
  // apply to the hosts of each record's locale, or to every host. Empty: none.
  std::string sensor_dir;
  absl::Duration sensor_restart_delay = absl::Seconds(5);
  // Where run windows' hours are read (B6): the master's local time by default.
  absl::TimeZone time_zone = absl::LocalTimeZone();
};

struct MasterStats {
  int64_t cycles = 0;
  int64_t placements = 0;
  double last_cycle_seconds = 0;
};

class Master {
 public:
  Master(store::Store* store, const Clock* clock, AgentDialer* dialer, ExecutorConfig config,
         MasterOptions options);
  ~Master();

  // Rebuilds the in-memory state from the store (hosts, pending and running jobs).
  // Running jobs keep their resources and are not launched again.
  absl::Status Recover();

  absl::StatusOr<int64_t> Submit(pb::JobSpec spec);
  absl::StatusOr<pb::Job> GetJob(int64_t id);
  std::vector<pb::Job> ListJobs(const pb::ListJobsRequest& req);
  // Ends the job; `reason` (empty: "killed by user") is what its record says.
  absl::StatusOr<pb::Job> Kill(int64_t id, const std::string& reason = "");
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
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(const pb::HeartbeatRequest& req);
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
  // time or that an overlap kill replaces; every second. A timed job's record changes in
  // memory only once its store write committed; runs are submitted with keys, so a step
  // repeated after a failed write or a crash finds the jobs it already made.
  absl::Status CheckTimedJobs();

  // Applies a new configuration without losing jobs: queue parameters, new queues, host
  // types and static host attributes, user groups. A queue that still holds jobs cannot
  // be removed; then nothing changes and the error says why.
  absl::Status Reconfigure(ExecutorConfig config);

  // Authorization on the caller's proven account (access.h), against the configuration
  // in force: submitting as `user`, and acting on job `id` (NOT_FOUND when there is none).
  absl::Status MaySubmitAs(const Principal& caller, const std::string& user);
  absl::Status MayControl(const Principal& caller, int64_t id);
  // What a job shows to someone who may not control it: its command lines and
  // environment (which may hold secrets) are left out, as Slurm's PrivateData=jobs does.
  void HidePrivate(const Principal& viewer, pb::Job* job);

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

  // Runs ScheduleOnce when woken (submission, resources freed, host change) or every
  // second, and CheckHosts every second, until Stop().
  void Start();
  void Stop();
  void Wake();

  EventLog<pb::JobEvent>& events() { return events_; }
  // Exports metrics to `registry` from now on (updated every loop iteration).
  void EnableMetrics(prometheus::Registry& registry);
  MasterStats stats();

 private:
  // A job as the master keeps it: the state machine's view (job_state.h) and the request
  // the scheduler holds for it.
  struct JobRecord : job_state::Tracked {
    JobRequest request;
  };
  struct HostRecord {
    pb::AgentInfo info;
    absl::Time last_seen;
    bool available = false;
  };
  struct Launch {
    std::string address;
    pb::LaunchRequest request;
  };
  // A call to an agent decided under mu_ and made after the decision is stored.
  struct AgentCall {
    std::string address;
    pb::SignalRequest request;
  };
  // An entry of the allocation the job holds now: not a remote task, not an allocation
  // an elastic job gave back.
  static Placement HeldPlacement(const pb::Job& job, const JobRequest& request, int* grown);
  static bool HeldAllocation(const pb::Task& t) {
    return !t.remote() && !(t.grown() && t.state() == pb::TASK_EXITED);
  }
  // An allocation as a task entry: host, slots, GPUs and reservations.
  static void DescribeAllocation(const HostAllocation& a, pb::Task* t);
  // Elastic jobs (master_elastic.cc): what a cycle grew or shrank written to the jobs'
  // records (`changed`), and the calls to make once they are stored: the resize events
  // for each job's event file, and kills of remote tasks on hosts a job gave back.
  // Caller holds mu_.
  void ApplyResizesLocked(const std::vector<Resize>& resizes, std::vector<pb::Job>* changed,
                          std::vector<AgentCall>* calls);
  // Makes them; a notification that does not arrive is sent again on a heartbeat.
  void CarryOutAgentCalls(const std::vector<AgentCall>& calls);

  // Carries out what a cycle decided to preempt (suspend, or SIGTERM then requeue) and
  // resumes preempted jobs whose slots are free again. Must not be called holding mu_.
  const QueueConfig* QueueConfigOf(const std::string& name) const;  // caller holds mu_
  // A scheduler call that can fail only when its model and the records disagree: logged.
  static void LogInconsistency(int64_t job_id, const char* what, const absl::Status& status);
  struct PreemptionCall {
    Preemption preemption;
    job_state::Effects effects;
  };
  void CarryOutPreemptions(const std::vector<PreemptionCall>& preemptions, const std::vector<int64_t>& resumes);
  // Suspend and resume, by a user (`system_reason` empty) or by the system.
  absl::StatusOr<pb::Job> SuspendJob(int64_t id, const std::string& system_reason);
  absl::StatusOr<pb::Job> ResumeJob(int64_t id, bool by_system);
  // A job as clients see it: a pending job in a closed queue says so. Caller holds mu_.
  pb::Job ViewLocked(const JobRecord& rec) const;
  // Opens and closes queues in the scheduler by their run windows at `now`. Caller holds mu_.
  void ApplyWindowsLocked(absl::Time now);
  std::string Stamp() const;  // the time for a history line
  // Fair share: a job's usage from its record (Recover).
  void CountPastUsage(const pb::Job& job, const JobRequest& request, absl::Time now, absl::Time forgotten_before);
  absl::StatusOr<JobRequest> BuildRequest(const pb::JobSpec& spec, int64_t id);
  absl::Status Persist(store::Transaction& txn, const pb::Job& job);
  void Publish(const pb::Job& job);
  // Carries out under mu_ what a transition of the job's state machine asks of the
  // scheduler's model and the master's tables; `changed` (may be null when the caller
  // writes the job itself) gets the record when it must be written.
  void ApplyLocked(JobRecord& rec, const job_state::Effects& fx, std::vector<pb::Job>* changed);
  job_state::At Now() const { return {clock_->Now(), options_.time_zone}; }
  int PreExecRetries(const JobRecord& rec) const;
  bool RerunsOnHostFailure(const JobRecord& rec) const;
  absl::StatusOr<bool> HostHeartbeatLocked(const pb::AgentInfo& info, std::string* host_doc);
  absl::Status AddHostLocked(const pb::AgentInfo& info);
  pb::LaunchRequest MakeLaunch(const pb::Job& job) const;
  // NEXEC_ASSIGNED_<RESOURCE>=units for the units of `assign` resources the job holds on
  // `host` (RESS assign), in the launch's environment.
  static void AddAssignedUnits(const pb::Job& job, const std::string& host, pb::LaunchRequest* l);
  std::string AddressOf(const std::string& host) const;
  // Sends `action` to every task of the job with a process (task 0 and the remote ones
  // not ended); task 0's answer is returned, the others' failures are logged (a remote
  // task that ended meanwhile is no error).
  absl::Status SignalTasks(const pb::Job& job, pb::SignalRequest::Action action);
  // The launch of a remote task. Caller holds mu_.
  pb::LaunchRequest MakeRemoteLaunch(const pb::Job& job, const pb::Task& task, const pb::RunTaskRequest& req) const;
  absl::Status PersistAll(const std::vector<pb::Job>& jobs);
  // Commit or stop: PersistAll, retried with backoff for about a second and a half; when
  // the store still refuses, the master exits (status 3) rather than act on a state the
  // store does not have. Must not be called holding mu_.
  void MustPersist(const std::vector<pb::Job>& jobs);
  void MustWriteHost(const std::string& host, const std::string& doc);
  // Queues a launch for its agent; one sender per agent drains the queue in batches.
  void StartLaunch(Launch launch);
  void DrainLaunches(const std::string& address);
  void OnLaunched(const pb::LaunchRequest& req, const absl::StatusOr<int>& pid);
  void UpdateMetrics();
  // A capacity queue's virtual clusters as `nexec queues` and /metrics show them. Caller holds mu_.
  void AddClustersLocked(const QueueConfig& queue, pb::Queue* out);
  void Loop();
  // Applies one sensor record to the scheduler's hosts (its locale, else `reporter`, else
  // every host); true when a value changed. Caller holds mu_.
  bool ApplySensorLocked(const pb::SensorResource& r, const std::string& reporter);

  struct TimedRecord {
    pb::TimedJob tj;
    Schedule schedule;
  };
  // The current run's state for a timed job's step. Caller holds mu_.
  TimedRunState RunStateLocked(const pb::TimedJob& tj) const;
  absl::Status RecoverTimedJobs();

  store::Store* store_;
  const Clock* clock_;
  AgentDialer* dialer_;
  std::unique_ptr<SensorRunner> sensors_;  // ress.master, when there is one
  ExecutorConfig config_;
  MasterOptions options_;
  EventLog<pb::JobEvent> events_{16384};

  std::mutex mu_;
  Scheduler scheduler_;
  std::map<int64_t, JobRecord> jobs_;
  // JobSpec.submit_key -> the job it created; keys whose submission is being committed.
  std::map<std::string, int64_t> submit_keys_;  // by SubmitKeyIndex
  // Where a job's submit key is filed: its submitter's own keys.
  static std::string SubmitKeyIndex(const pb::JobSpec& spec);
  std::set<std::string> keys_in_flight_;
  std::set<int64_t> active_;  // running or suspended: what heartbeats and host checks scan
  std::map<std::string, HostRecord> hosts_;
  int64_t next_id_ = 1;
  std::map<int64_t, TimedRecord> timed_jobs_;
  int64_t next_timed_id_ = 1;
  MasterStats stats_;

  store::GroupCommitter committer_{store_};
  std::unique_ptr<MasterMetrics> metrics_;
  // Launches waiting for their agent, by agent address: one sender per agent, a batch of
  // whatever queued per call.
  Outboxes<pb::LaunchRequest> launches_{0, 1};
  // Launch RPCs run here, several at once, so a cycle never waits on agents. Declared
  // after what its tasks touch, so it is destroyed (and joined) first.
  std::unique_ptr<ThreadPool> launchers_ = std::make_unique<ThreadPool>(8);

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool wake_ = false;
  bool stopping_ = false;
  std::thread loop_;
};

}  // namespace jc::nexec
