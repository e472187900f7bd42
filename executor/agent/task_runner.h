#pragma once

// Runs a job's tasks on this host as real processes (SPEC B1, B8, B9, B10, B11): each task
// in its own process group, as the job's user when the agent runs as root, with its GPUs
// in CUDA_VISIBLE_DEVICES and the job's host list in the environment and a hostfile; its
// stdout and stderr go to files. Suspend, resume and kill act on the whole process group;
// usage is sampled from /proc.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/exec/attached_command.h"
#include "executor/container/gpu_container_edits.h"
#include "executor/agent/direct_exec.h"
#include "executor/agent/task_cgroup.h"
#include "executor/agent/user_files.h"

namespace jc::nexec {

struct TaskLaunch {
  std::string key;      // unique per task attempt, e.g. "42.0.1" (job.task.attempt)
  std::string command;  // run with /bin/sh -c
  std::string user;     // "" = the agent's own user
  std::map<std::string, std::string> env;
  std::string cwd;      // "" = the user's home, or / when it has none
  std::vector<int> gpus;
  std::vector<int> cpus;  // cores the task is bound to (sched_setaffinity); empty: not bound
  std::vector<std::string> hosts;  // the job's host list, one entry per slot
  std::string stdout_path;
  std::string stderr_path;
  std::string hostfile_path;  // written when hosts span more than this host
  // The master's default output directory (LaunchRequest.output_root): files directly in
  // it are opened by a root agent for the user; every other path, and every path of a
  // non-root agent's, as the user.
  std::string output_root;
  std::string job_id;
  // Interactive (nexec submit -I): stdin is a pipe fed by WriteInput instead of
  // /dev/null; with `tty` (-Ip) the task runs in its own session on a pseudo-terminal
  // whose output goes to stdout_path (stderr included).
  bool stdin_pipe = false;
  bool tty = false;
  int tty_rows = 0, tty_cols = 0;  // the terminal's first size; 0: 24x80
  int64_t memory_limit_mb = 0;     // rusage[mem=...] here: the task's cgroup's memory limit; 0: none
  int64_t pids_limit = 0;          // the queue's: its cgroup's pids.max; 0: none
  // The GPUs of this host the task does not hold: its cgroup denies their device nodes.
  std::vector<CharDevice> denied_devices;
  // The OCI image to run in (registry/repository@sha256:...; container_bundle.h); empty:
  // on the host. `gpu_uuids`: the held GPUs' UUIDs, where nvidia-smi told them (inside,
  // CUDA_VISIBLE_DEVICES names them so: only their nodes exist there, renumbered from 0).
  std::string image;
  std::vector<std::string> gpu_uuids;
  std::vector<std::string> read_only_dirs;  // bound read-only at their own paths (datasets)
};

// How tasks run in their images: the runner script and where images and bundles are kept.
struct ImageRunning {
  std::string runner;     // nexec-image-run
  std::string store;      // the agent's image store (the agent's account's, 0700)
  std::string auth_file;  // registry credentials (Docker's config.json form); may be empty
  std::string cert_dir;   // CAs for registries (*.crt); may be empty
  int64_t store_limit_mb = 0;  // least recently used images go past it; 0: no limit
  int64_t pull_timeout_s = 600;  // a pull that takes longer ends its task
  uint32_t unpack_uid = 2147483646;  // umoci runs as it (nexec-image-run)
  std::string munge_socket;          // the agent's munged (its directory is bound for nexec-run); "": munge's own
  // nexec-run inside images: the host's binary (empty: not offered), run by the host's
  // dynamic loader from `host_lib_dir` (its libraries are the host's, whatever the image
  // has) through `nexec_run_wrapper`, a script the agent writes; all bound under /tmp/.jc.
  std::string nexec_run;
  std::string host_lib_dir;
  std::string nexec_run_wrapper;
  GpuContainerSetup gpus;      // what a container needs for the GPUs its task holds
  // An agent that is not root (one run as an account, `--agent_uid` at its master) runs its
  // containers rootless, as the Slurm adapter runs an account's: runc in a user namespace
  // of the account's, where this helper (nexec-userns-exec) gives the command the account's
  // own ids. Empty: the agent is root.
  std::string userns_helper;
};

struct TaskUsage {
  double cpu_seconds = 0;
  int64_t rss_kb = 0;
  int64_t swap_kb = 0;
  int threads = 0;
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
  int processes = 0;
  int64_t memory_peak_kb = 0;  // from its cgroup; 0 without one
};

struct TaskExit {
  std::string key;
  int exit_code = 0;  // 128 + signal when a signal ended it
  // Why the kernel ended it, when it did: "memory limit 4 GiB exceeded (OOM)".
  std::string killed_because;
  // What it used in all, read from its cgroup as it ended (contained tasks only): the
  // figures its job's metering keeps, even when it ended between two heartbeats.
  std::optional<TaskUsage> usage;
};

class TaskRunner {
 public:
  // Ignores SIGPIPE in this process (a write to the input of a command that exited must
  // fail, not kill the agent); tasks start with it at its default.
  TaskRunner();
  ~TaskRunner();  // kills every task still running

  // Contains every task started from now on in a cgroup of its own under `layout`
  // (task_cgroup.h): kill, suspend and resume then reach every process it started,
  // setsid or not, and its memory is limited.
  void ContainIn(CgroupLayout layout) { cgroups_layout_ = std::move(layout); }
  void RunImagesWith(ImageRunning images) { images_ = std::move(images); }
  // Why it runs none (what a task with an image ends with), when it does not.
  void RunNoImages(std::string why) { no_images_ = std::move(why); }
  // Commands without shell syntax run as their program, no /bin/sh between (the default);
  // false: every command through /bin/sh -c.
  void ExecDirectly(bool direct) { direct_exec_ = direct; }
  bool contains() const { return cgroups_layout_.has_value(); }

  // Starts the task; returns its pid (= its process group id). Errors (unknown user,
  // unusable cwd, output file not writable, exec failure) come back as a status, not as
  // a task that dies at once.
  absl::StatusOr<pid_t> Launch(const TaskLaunch& launch);

  absl::Status Suspend(const std::string& key);  // SIGSTOP to the process group
  absl::Status Resume(const std::string& key);   // SIGCONT
  // The task `key`, not started yet (its launch is being set up), is killed as soon as it
  // has a process. A key that never starts leaves an entry; the set is bounded.
  void KillWhenStarted(const std::string& key);
  // Whether a kill waits for `key` to start (KillWhenStarted), taking it: for a start that
  // will not happen after all (the agent's queued next phase of a killed task).
  bool TakeKillWhenStarted(const std::string& key);
  absl::Status Kill(const std::string& key);     // SIGKILL to the process group
  // Any other signal to the process group (nexec-run forwards what it gets).
  absl::Status Signal(const std::string& key, int signal) { return SignalGroup(key, signal); }

  // Interactive tasks: writes `data` to the task's stdin (or terminal), waiting at most
  // `wait` for the command to read; answers how much it took. FailedPrecondition when the
  // task takes no input (not interactive, not started yet, or its input is closed).
  absl::StatusOr<size_t> WriteInput(const std::string& key, const std::string& data, absl::Duration wait);
  // End of input: the pipe is closed; a terminal gets ^D (EOF to a reading program).
  absl::Status CloseInput(const std::string& key);
  absl::Status SetTerminalSize(const std::string& key, int rows, int cols);

  // How to run `command` in the running task `launch` (nexec exec, SPEC A17): in its
  // container (runc exec: the container's account, environment and directory) when it runs
  // in its image; else as its account, with its environment, in its working directory (or
  // /tmp where the task's own was refused), its cgroup and cores. FailedPrecondition when
  // the task does not run (yet) or its container is not up.
  absl::StatusOr<exec_stream::CommandPlan> PlanExec(const TaskLaunch& launch, const std::vector<std::string>& command,
                                                    bool tty);

  // Collects tasks that ended since the last call (non-blocking).
  std::vector<TaskExit> Reap();

  absl::StatusOr<TaskUsage> Usage(const std::string& key) const;
  // Usage of every running task: a contained task's from its cgroup, the others' from one
  // pass over /proc.
  std::map<std::string, TaskUsage> UsageAll() const;
  std::optional<pid_t> Pid(const std::string& key) const;
  std::vector<std::string> Running() const;

 private:
  absl::StatusOr<pid_t> Start(const TaskLaunch& launch);
  // Start's steps.
  static absl::StatusOr<std::map<std::string, std::string>> TaskEnvironment(const TaskLaunch& t,
                                                                            const Account& user);
  struct ImageLaunch {
    std::vector<std::string> args, env_strings;
    std::vector<char*> argv, envp;  // into args and env_strings, null-terminated
    std::string note;               // for the task's stderr (a working directory refused)
    // Directories the user named, opened as the user, for the child to attach at these
    // paths (below the bundle) in the task's own mount namespace; empty when the agent is
    // not root (it binds paths: its tasks are its own account's).
    std::vector<OwnedFd> attach_dirs;
    std::vector<int> attach_fds;  // theirs
    std::vector<std::string> attach_targets;
    std::vector<const char*> attach_paths;  // into attach_targets
  };
  absl::Status PrepareImage(const TaskLaunch& t, const Account& user, std::map<std::string, std::string>& env,
                            ImageLaunch* out);
  absl::StatusOr<std::shared_ptr<TaskCgroup>> TakeCgroup(const TaskLaunch& t, bool in_image);
  struct Input;
  struct TaskOutputs {
    std::string out_path, err_path;  // "/dev/null" for none
    bool same_file = false;
    OwnedFd out_file, err_file;      // opened here; else the child opens them as the user
    std::string out_dirs, err_dirs;  // the child's mkdir -p buffers
    int out_fd() const { return out_file.get(); }
    int err_fd() const { return same_file ? out_file.get() : err_file.get(); }
    bool child_opens_out() const { return out_path != "/dev/null" && out_fd() < 0; }
    bool child_opens_err() const { return !same_file && err_path != "/dev/null" && err_fd() < 0; }
  };
  absl::Status OpenOutputs(const TaskLaunch& t, const Account& user, bool child_opens, TaskOutputs* out);
  // The account a task runs as: one this host knows, and one this agent may act for.
  absl::StatusOr<Account> TaskAccount(const std::string& name);
  // `step` and `err`: what a child that failed before exec reported (task_runner.cc).
  static absl::Status ChildFailure(int step, int err, const std::string& key, const std::string& user,
                                   const TaskOutputs& outputs);
  void KeepInput(const std::string& key, Input input);
  absl::Status OpenInput(const TaskLaunch& t, const Account& user, bool switch_user, const std::string& out_path,
                         Input* input, int* child_in);
  absl::Status SignalGroup(const std::string& key, int signal);
  // A task in its image with no cgroup around it (an agent that is not root, or
  // --cgroups=off): SIGKILL, SIGSTOP and SIGCONT, which runc cannot pass on, sent to the
  // container's process groups too (runc starts the container's first process in a session
  // of its own). runc is stopped meanwhile, so that it reaps none of the children whose
  // groups are named (their pids stay theirs: attacker helper-98 had a root agent signal
  // another account's group through a pid runc had reaped and the kernel had given out
  // again). Called under signal_mu_, never under mu_ (it reads /proc).
  void SignalContainer(const std::string& key, int signal);
  // What a terminal copier and the runner share: the copier may outlive its Input (given up
  // while it waits in a write that does not return: CloseInputNow).
  struct CopierState {
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::condition_variable ended_cv;
    bool ended = false;  // under mu
  };
  // Copies a pseudo-terminal's output to the task's output file until `state->stop` and no
  // more comes. Owns (closes) both descriptors, its own duplicates. Never waits on a write
  // that cannot go on: the file is the account's choice (a FIFO it holds full, attacker
  // helper-83) and non-blocking; a write waits at most until `stop`.
  static void CopyTerminal(int master_fd, int out_fd, std::shared_ptr<CopierState> state);

  // An interactive task's input: the write end of its stdin pipe, or its terminal's
  // master side (with the thread that copies the terminal's output).
  struct Input {
    int fd = -1;
    bool tty = false;
    int out_fd = -1;
    std::shared_ptr<CopierState> copier_state;
    std::unique_ptr<std::thread> copier;
  };
  // Closes `input`; its terminal's copier, if any, is waited for until `give_up`, then left.
  static void CloseInputNow(Input& input,
                            std::chrono::steady_clock::time_point give_up = std::chrono::steady_clock::now() +
                                                                            std::chrono::seconds(1));

  // Every process of the task's cgroup, `signal` each (after freezing it, so none forks
  // meanwhile). NotFound when the task has no cgroup.
  absl::Status SignalCgroup(const std::string& key, int signal);

  std::optional<CgroupLayout> cgroups_layout_;
  std::optional<ImageRunning> images_;
  std::string no_images_ = "it found no runc, skopeo or umoci";
  bool direct_exec_ = true;
  ProgramCache programs_;  // what DirectArgv found, for the next task with the command
  // The bundle directory of task `key` (in images_->store).
  std::string BundleDir(const std::string& key) const { return images_->store + "/.bundles/" + key; }
  mutable std::mutex mu_;
  // One signal to a task's groups at a time (SignalContainer stops runc and continues it).
  std::mutex signal_mu_;
  std::map<std::string, pid_t> tasks_;  // pid 0 while starting
  AccountCache accounts_;  // the accounts tasks run as
  std::set<std::string> image_tasks_;        // those of tasks_ that run in their image (a bundle to remove)
  std::set<std::string> kill_when_started_;  // of tasks_ still starting (pid 0): killed once they start
  std::map<std::string, std::shared_ptr<TaskCgroup>> cgroups_;  // by key, while the task runs
  // Cgroups of ended tasks, empty, for the next ones: made once (mkdir and rmdir of a v1
  // memory cgroup cost milliseconds), reset for each task.
  std::vector<std::shared_ptr<TaskCgroup>> idle_cgroups_;
  // Cgroups of ended tasks whose last processes are still going (killed, not yet gone):
  // looked at again at each Reap, never waited for under the lock.
  std::vector<std::shared_ptr<TaskCgroup>> draining_cgroups_;
  int cgroups_made_ = 0;
  std::map<std::string, Input> inputs_;
};

// The fields of /proc/<pid>/stat after the command name, from field 3 (state) on: [0] is
// field 3, so field N is [N - 3]. Empty when the process is gone. Read with read(2): a
// process exiting during the read must not throw.
std::vector<std::string> ProcStatFields(pid_t pid);

// Samples /proc for every process in process group `pgid`.
TaskUsage SampleProcessGroup(pid_t pgid);
// Samples /proc once for all the given process groups.
std::map<pid_t, TaskUsage> SampleProcessGroups(const std::set<pid_t>& pgids);

}  // namespace jc::nexec
