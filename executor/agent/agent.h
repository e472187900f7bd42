#pragma once

// The nexec agent (one per host): reports the host's resources and its tasks to the
// master in heartbeats, and runs, signals and serves the logs of tasks the master
// launches here (SPEC B1, B8, B11).

#include <sys/types.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "executor/agent/gpu_watch.h"
#include "executor/agent/task_book.h"
#include "executor/container/image_store.h"
#include "executor/sensor/sensor.h"
#include "executor/agent/task_journal.h"
#include "executor/agent/task_runner.h"
#include "executor/agent/master_stream.h"
#include "executor/auth/munge_auth.h"
#include "executor/client/master_list.h"
#include "executor/agent/user_files.h"
#include "nexec/v1/nexec.pb.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc
namespace prometheus {
class Counter;
class Gauge;
class Registry;
}  // namespace prometheus

namespace jc::nexec {

namespace pb = ::nexec::v1;

struct AgentOptions {
  std::string host;            // the host name the master knows it by
  // host:port of the master, or of several ("a:6800,b:6800": one leads, the others stand
  // by); heartbeats go to the one that leads.
  std::string master_address;
  std::string listen_address = "127.0.0.1:0";
  // Declared resources ("cpus=64,gpus=8,mem=512G"); what is not declared is measured.
  std::string declared;
  std::map<std::string, std::string> resources;  // static extra resources
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // Resource sensors: executables named ress.host or ress.<host> in this directory.
  std::string sensor_dir;
  absl::Duration sensor_restart_delay = absl::Seconds(5);
  // Where the agent records the process group of every task it starts, so that an agent
  // restarted after a crash kills what its predecessor left running (a rerun must never
  // run beside the first attempt). Empty: <temp dir>/nexec-agent-<host>.
  std::string state_dir;
  // GPUs (B6, B8): nvidia-smi (a path, or a name on $PATH) is asked every heartbeat for
  // each GPU's model, memory and utilisation and the processes on it. A task's process
  // on a GPU not given to its job is misuse: killed (the default), or only reported;
  // either way the job's history says so.
  std::string nvidia_smi = "nvidia-smi";
  // The device node of GPU {index}: a contained task may open only those of the GPUs it
  // holds (its cgroup denies the others, whatever CUDA_VISIBLE_DEVICES says).
  std::string gpu_device = "/dev/nvidia{index}";
  // Tasks in OCI images (container_bundle.h): where images are kept (default
  // <state_dir>/images), registry credentials (Docker's config.json form) and CAs (a
  // directory of *.crt), and the runner script (default: nexec-image-run beside the agent).
  std::string image_store;
  std::string registry_auth_file;
  std::string registry_cert_dir;
  std::string image_runner;
  int64_t image_store_limit_mb = 0;  // least recently used images not in use go past it; 0: none
  absl::Duration image_pull_timeout = absl::Minutes(10);  // a longer pull ends its task, saying so
  // The uid images are unpacked as (nexec-image-run): one no account has (checked at start).
  uint32_t image_unpack_uid = 2147483646;
  // What a container needs for its GPUs (gpu_container_edits.h): CDI specs looked for in
  // these directories, else the driver's directory bound at /usr/local/nvidia.
  std::vector<std::string> cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};
  std::string gpu_driver_dir = "/usr/local/nvidia";
  bool kill_gpu_misuse = true;
  // How calls are signed and checked (B9): heartbeats are signed; launches, signals and
  // log reads are taken only from `master_uid` (the master's account) or root.
  MungeAuth auth = MungeAuth::Munge("");
  uid_t master_uid = 0;
  // Containment (task_cgroup.h): "auto" contains tasks in cgroups where the host lets the
  // agent make them (and says so at start when it cannot), "on" refuses to start
  // without, "off" leaves tasks in process groups only.
  std::string cgroups = "auto";
  // A command without shell syntax runs as its program, with no /bin/sh between
  // (direct_exec.h); false: every command through /bin/sh -c.
  bool direct_exec = true;
  // Heartbeats and launches on one stream held open with the leading master (issue 48,
  // master_stream.h); false, or a master that serves none: a call each.
  bool master_stream = true;
};

// Parses "cpus=64,gpus=8,mem=512G,swap=16G" into the info fields it names.
absl::Status ApplyDeclaredResources(const std::string& declared, pb::AgentInfo* info);
// Measures cpus, memory, swap, load and GPUs (nvidia-smi when present).
pb::AgentInfo MeasureHost();

class Agent {
 public:
  explicit Agent(AgentOptions options);
  ~Agent();

  // Starts the gRPC server and the heartbeat loop; returns the bound port.
  absl::StatusOr<int> Start() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // The gRPC handlers (agent_service.h) call these.
  absl::StatusOr<int> Launch(const pb::LaunchRequest& req) ABSL_LOCKS_EXCLUDED(mu_);
  // A batch, answered in its order: the tasks admitted are journaled in one write, then started.
  std::vector<absl::StatusOr<int>> LaunchBatch(const std::vector<const pb::LaunchRequest*>& requests)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Signal(const pb::SignalRequest& req) ABSL_LOCKS_EXCLUDED(mu_);
  // A new leader of the store served says its term (a signed call): answers the newest term
  // kept. Aborted for another store; FailedPrecondition for an older term.
  absl::StatusOr<int64_t> Lead(const pb::LeadRequest& req) ABSL_LOCKS_EXCLUDED(mu_);
  // Interactive jobs: input for a task's command; answers the bytes it took.
  absl::StatusOr<int64_t> SendInput(const pb::InputRequest& req) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> ReadLog(const pb::ReadLogRequest& req, int64_t max_bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // A command in a running task (nexec exec, SPEC A17), started on pipes or a terminal
  // (TaskRunner::PlanExec says how); `key` gets the task's. FailedPrecondition when the
  // task does not run here, Unavailable while its pre-exec runs.
  absl::StatusOr<exec_stream::AttachedCommand> StartExec(const pb::ExecStart& start, std::string* key)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the task `key` still runs (a command in it ends when it does not).
  bool TaskRuns(const std::string& key) const { return runner_.Pid(key).has_value(); }

  // nexec_agent_heartbeats_total{result}, nexec_agent_launches_total{result},
  // nexec_agent_tasks (running here), nexec_agent_last_heartbeat_timestamp_seconds.
  // Call before Start.
  void EnableMetrics(prometheus::Registry& registry);
  // Ready while the master took a heartbeat lately (three intervals, at least 5 s);
  // Unavailable saying since when otherwise (/readyz).
  absl::Status Ready() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Metrics {
    prometheus::Counter* heartbeats_ok;
    prometheus::Counter* heartbeats_failed;
    prometheus::Counter* launches_ok;
    prometheus::Counter* launches_refused;
    prometheus::Gauge* tasks;
    prometheus::Gauge* last_heartbeat;
  };
  using TaskInfo = TaskBook::Task;
  // Appends to the job's event file the resize events `req` lists that it does not hold
  // yet (NOTIFY, from a Signal call or a heartbeat's answer).
  absl::Status NotifyLocked(const pb::SignalRequest& req) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job-control action for the task at `key`, as a launch of its own (started by the
  // caller without mu_: RunAction).
  absl::StatusOr<TaskLaunch> ActionLaunch(const std::string& key, TaskInfo& t, const std::string& action)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RunAction(const TaskLaunch& action) ABSL_LOCKS_EXCLUDED(mu_);
  // What the end of one phase of a task means: the next phase starts (true: queued for the
  // phase starter), or the task ended and `report` says how (false).
  bool NextPhase(const std::string& key, TaskInfo& t, int exit_code, pb::TaskReport* report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The phase starter's thread: starts each queued phase (a command after its pre-exec, a
  // post-exec after its command) without mu_ and off the heartbeat loop, so a start that
  // takes long (up to --task_start_timeout: a working directory on a file system that does
  // not answer) holds neither heartbeats nor any call (attacker helper-82); one that fails
  // ends its task as a failed start did in NextPhase.
  void PhaseStarterLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // A task whose next phase could not start: ended with `report` (journaled, reported).
  void EndTaskLocked(const std::string& key, const pb::TaskReport& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A launch checked against the store and term served and put in the book: what runs
  // first (its pre-exec or its command); `*known` set instead when the attempt already ran
  // or runs (its pid, 0 when no longer running).
  absl::StatusOr<TaskLaunch> AdmitLaunch(const pb::LaunchRequest& req, const std::string& key,
                                         std::optional<int>* known) ABSL_LOCKS_EXCLUDED(mu_);
  // An admitted launch, journaled, started; a failure takes it out of the book again.
  absl::StatusOr<int> StartAdmitted(const std::string& key, const TaskLaunch& first) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts `launch` under its key; its process group is recorded for a successor agent by
  // the heartbeat loop's next round (RecordStartsLocked). With or without mu_.
  absl::StatusOr<pid_t> StartProcess(const TaskLaunch& launch) ABSL_LOCKS_EXCLUDED(starts_mu_);
  // One nvidia-smi sample applied to the tasks (GpuWatch::Assess): their GPU usage, and
  // misuse (killed or reported, as configured). Takes mu_.
  void WatchGpus() ABSL_LOCKS_EXCLUDED(mu_);
  // A watch that failed at start tried again; the host's GPUs become its resources when
  // nvidia-smi answers. Takes mu_.
  void ProbeGpusAgain() ABSL_LOCKS_EXCLUDED(mu_);
  // What the task runner starts for a launch (Launch's first step).
  TaskLaunch TaskOf(const pb::LaunchRequest& req, const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  void HeartbeatLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // HeartbeatLoop's steps; *Locked: with mu_ held.
  void EnforceDeadlinesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordExitsLocked(const std::vector<TaskExit>& exits) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The process groups started before the last round whose tasks still run, with their
  // leaders' start times, into the journal.
  void RecordStartsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) ABSL_LOCKS_EXCLUDED(starts_mu_);
  pb::HeartbeatRequest HeartbeatLocked(bool periodic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each running task's usage and GPU figures, and the notes not yet acknowledged. Takes
  // mu_ for the GPU figures only.
  void AddUsage(bool periodic, pb::HeartbeatRequest* req) ABSL_LOCKS_EXCLUDED(mu_);
  // Releases mu_ around each kill the master asks for.
  void HeartbeatAnsweredLocked(const pb::HeartbeatResponse& resp, const std::string& sent_as, uint64_t sent_epoch,
                               size_t sent_exits, size_t sent_notes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Contains tasks in cgroups as options_.cgroups says (at start).
  absl::Status SetUpContainment();
  // Tasks in images where runc, skopeo and umoci are installed (said at start otherwise).
  void SetUpImages();
  // Kills the process groups of the tasks a previous agent on this host started and did
  // not see end (it died), as its journal says; returns how many were still running. Each
  // is marked ended in the journal once reported, so an error here stops the start.
  absl::StatusOr<int> KillPredecessorTasks() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether requests of the master of store `identity` may act here: the store served, or
  // (with none of its tasks running) a new one to serve from now on, kept on disk first.
  // Aborted, naming both stores, while another store's tasks run here.
  absl::Status ServeMasterLocked(const std::string& identity) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a request of the master of store `identity` (signals, input, exec, log reads)
  // is for the store served: Aborted, naming both, when not. Empty: a caller of its own
  // (root, tests), not a master.
  // `term` is the calling master's leadership term: one older than the newest seen is
  // refused (FailedPrecondition: a master that lost its lease acts on nothing here), a
  // newer one is the newest from now on.
  absl::Status CheckServedLocked(const std::string& identity, int64_t term) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The newest leadership term of the served store's masters is `term` when that is newer
  // (kept on disk with the store served).
  void RaiseTermLocked(int64_t term) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // <state_dir>/master.identity: the store served and its newest term.
  absl::Status RecordServedLocked(const std::string& identity, int64_t term) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  pb::AgentInfo CurrentInfo() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The device numbers of this host's GPUs that `held` leaves out (those with a node).
  std::vector<CharDevice> GpuDevicesNotHeld(const std::vector<int>& held) ABSL_LOCKS_EXCLUDED(mu_);
  // `n` cores for a task, the least used by bound tasks first.
  std::vector<int> ChooseCpus(int n) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Set before the server and the heartbeat loop start (Start), read-only after.
  AgentOptions options_;
  std::unique_ptr<TaskJournal> journal_;  // set in Start, before any task
  TaskRunner runner_;                     // its own lock
  std::unique_ptr<SensorRunner> sensors_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::string image_store_;  // where tasks' images are kept; empty: this agent runs none
  std::unique_ptr<Metrics> metrics_;
  // nvidia-smi at start, then each periodic heartbeat (its own lock for the GPUs' UUIDs).
  GpuWatch gpu_watch_{options_.nvidia_smi};

  absl::Mutex mu_;
  // The host as measured and declared, with the GPUs nvidia-smi showed.
  pb::AgentInfo base_info_ ABSL_GUARDED_BY(mu_);
  // The heartbeat loop's: what the last periodic one read.
  std::optional<pb::AgentInfo> last_info_ ABSL_GUARDED_BY(mu_);
  TaskBook book_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<int>> bound_cpus_ ABSL_GUARDED_BY(mu_);  // by task key, while it runs
  absl::CondVar cv_;  // with mu_: stopping_
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // NextPhase's starts, for PhaseStarterLoop (with mu_: cv_).
  struct PhaseStart {
    std::string key;
    TaskLaunch launch;
    TaskBook::Task::Phase phase;
  };
  std::deque<PhaseStart> phase_starts_ ABSL_GUARDED_BY(mu_);
  // An exit was added outside the heartbeat loop's own rounds: its next round sends it.
  bool exits_added_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_accepted_heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // The master store this agent serves (kept in <state_dir>/master.identity): its tasks,
  // journal and reports are that store's. Empty: none yet.
  std::string master_identity_ ABSL_GUARDED_BY(mu_);
  std::string refused_identity_ ABSL_GUARDED_BY(mu_);  // the last master refused and why, said once
  // The newest leadership term seen of the store served's masters (0: none yet).
  int64_t master_term_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stale_term_said_ ABSL_GUARDED_BY(mu_) = 0;  // the last stale master's term, logged once
  // Counts the store changes: a heartbeat answered after one acknowledges and acts on
  // nothing (its exits, kills and notices were of the store it was sent for).
  uint64_t serving_epoch_ ABSL_GUARDED_BY(mu_) = 0;

  // Processes started and not yet in the journal's "P" lines, by task key: the heartbeat
  // loop records those still running (own mutex: StartProcess runs with and without mu_).
  absl::Mutex starts_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::map<std::string, pid_t> unrecorded_starts_ ABSL_GUARDED_BY(starts_mu_);
  // Those a round has seen: recorded at the next if they still run then.
  std::map<std::string, pid_t> aging_starts_ ABSL_GUARDED_BY(mu_);

  std::unique_ptr<MasterList> masters_;  // from master_address (Start)
  // The heartbeat loop's alone: its stream to the master (options_.master_stream), and the
  // masters that answered it has no streams (they are called instead): until when, and
  // the term of the master that then answered the call (a later term's is asked again).
  std::unique_ptr<MasterStream> stream_;
  struct Unstreamed {
    absl::Time until;
    std::optional<int64_t> term;  // of the first call answered there (a master may say 0)
  };
  std::map<std::string, Unstreamed> unstreamed_;
  bool followed_leader_name_ = false;  // the last failed heartbeat was retried at once, to the leader named
  std::thread heartbeat_;
  std::thread phase_starter_;
};

}  // namespace jc::nexec
