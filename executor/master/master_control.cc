// What users ask of a job once it exists (SPEC B5, B10, B11): kill, requeue, rerun, a signal
// to a task, input for an interactive one, its output, and remote tasks (nexec-run). Each is
// a message to the loop (the state machine's transition, committed before the answer),
// then, off the loop, the agent call it needs, then another message with the agent's answer
// where the job must record it.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "executor/master/master.h"

namespace jc::nexec {

Master::SignalTargets Master::TargetsOf(const pb::Job& job) const {
  SignalTargets targets{job, {}};
  for (const pb::Task& t : job.tasks()) targets.addresses[t.host()] = AddressOf(t.host());
  return targets;
}

absl::Status Master::SignalTasks(const SignalTargets& targets, pb::SignalRequest::Action action) {
  const pb::Job& job = targets.job;
  if (job.tasks().empty()) return absl::FailedPreconditionError("the job has no tasks");
  auto address = [&](const std::string& host) {
    auto it = targets.addresses.find(host);
    return it == targets.addresses.end() ? std::string() : it->second;
  };
  // Task 0 first (its answer is the caller's), then one call per host that runs the job's
  // remote tasks (task_index -1: every task of the job there but task 0), not one per task.
  pb::SignalRequest s;
  s.set_job_id(job.id());
  s.set_task_index(0);
  s.set_action(action);
  std::set<std::string> hosts;
  for (const pb::Task& t : job.tasks()) {
    if (t.remote() && t.state() != pb::TASK_EXITED && t.state() != pb::TASK_LOST) hosts.insert(t.host());
  }
  absl::Status first = dialer_->Signal(address(job.tasks(0).host()), s);
  s.set_task_index(-1);
  for (const auto& h : hosts) {
    absl::Status sent = dialer_->Signal(address(h), s);
    if (!sent.ok() && !absl::IsNotFound(sent)) {
      spdlog::warn("job {}: {} of its tasks on {} failed: {}", job.id(), pb::SignalRequest::Action_Name(action), h,
                   sent.ToString());
    }
  }
  return first;
}

pb::LaunchRequest Master::MakeRemoteLaunch(const pb::Job& job, const pb::Task& task,
                                           const pb::RunTaskRequest& req) const {
  pb::LaunchRequest l = MakeLaunch(job);
  l.set_host(task.host());
  l.set_task_index(task.index());
  l.clear_event_file();  // the job's events go to task 0's host only
  l.set_command(req.command());
  *l.mutable_env() = req.env();
  if (!req.cwd().empty()) l.set_cwd(req.cwd());
  *l.mutable_gpus() = task.gpus();
  AddAssignedUnits(job, task.host(), &l);
  // Its own output: the job's -o/-e pattern when it names the task (%I), else one file
  // per task beside the default logs.
  auto path = [&](const std::string& pattern, const char* suffix) {
    const bool given = pattern.find("%I") != std::string::npos;
    if (!given) l.set_output_root(options_.log_dir);
    std::string p = given ? pattern : absl::StrCat(options_.log_dir, "/%J.%I.", suffix);
    return absl::StrReplaceAll(p, {{"%J", absl::StrCat(job.id())}, {"%I", absl::StrCat(task.index())}});
  };
  l.set_stdout_path(path(job.spec().stdout_path(), "out"));
  l.set_stderr_path(path(job.spec().stderr_path(), "err"));
  if (req.torch()) {
    // torch.distributed's env:// rendezvous: rank 0's store listens on the allocation's
    // first host (its agent's address), on a port derived from the job and attempt.
    const std::string first = AddressOf(job.tasks(0).host());
    std::string addr = first.substr(0, first.rfind(':'));
    if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
    int world = 0, local = 0;
    for (const pb::Task& t : job.tasks()) {
      if (HeldAllocation(t)) world += t.slots();
      if (t.remote() && t.rank() >= 0 && t.host() == task.host() && t.index() != task.index()) ++local;
    }
    auto& env = *l.mutable_env();
    env["MASTER_ADDR"] = addr;
    if (!env.contains("MASTER_PORT")) env["MASTER_PORT"] = absl::StrCat(20000 + (job.id() * 31 + job.attempt()) % 40000);
    env["WORLD_SIZE"] = absl::StrCat(world);
    env["RANK"] = absl::StrCat(task.rank());
    env["LOCAL_RANK"] = absl::StrCat(local);
  }
  return l;
}

absl::StatusOr<pb::Task> Master::RunTask(const pb::RunTaskRequest& req) {
  if (absl::StripAsciiWhitespace(req.command()).empty()) return absl::InvalidArgumentError("no command to run");
  pb::Task task;
  pb::LaunchRequest launch;
  std::string address;
  int32_t attempt = 0;
  // Recorded before it starts (the answer comes after the commit): a master that restarts
  // knows the task, and its agent's reports find it.
  JC_RETURN_IF_ERROR(UnlessCleaned(OnLoop([&]() -> absl::Status {
    auto it = jobs_.find(req.job_id());
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", req.job_id()));
    JobRecord& rec = it->second;
    if (rec.job.state() != pb::RUNNING) {
      return absl::FailedPreconditionError(absl::StrCat("job ", req.job_id(), " is ",
                                                        pb::JobState_Name(rec.job.state()), ", not RUNNING"));
    }
    std::vector<std::string> hosts;
    std::vector<int32_t> gpus;
    int torch_ranks = 0;
    for (const pb::Task& t : rec.job.tasks()) {
      if (t.remote()) {
        torch_ranks += t.rank() >= 0;
        continue;
      }
      if (!HeldAllocation(t)) continue;  // given back by an elastic job
      if (std::find(hosts.begin(), hosts.end(), t.host()) == hosts.end()) hosts.push_back(t.host());
      if (t.host() == req.host()) gpus.insert(gpus.end(), t.gpus().begin(), t.gpus().end());
    }
    if (std::find(hosts.begin(), hosts.end(), req.host()) == hosts.end()) {
      return absl::InvalidArgumentError(absl::StrCat("host \"", req.host(), "\" is not in job ", req.job_id(),
                                                     "'s allocation (", absl::StrJoin(hosts, " "), ")"));
    }
    if (!hosts_.Available(req.host())) {
      return absl::UnavailableError(absl::StrCat("host ", req.host(), " is unavailable"));
    }
    address = hosts_.AddressOf(req.host());
    task.set_index(rec.job.tasks_size());
    task.set_host(req.host());
    for (int32_t g : gpus) task.add_gpus(g);
    task.set_state(pb::TASK_STARTING);
    task.set_remote(true);
    task.set_command(req.command());
    task.set_rank(req.torch() ? torch_ranks : -1);
    *rec.job.add_tasks() = task;
    launch = MakeRemoteLaunch(rec.job, task, req);
    attempt = rec.job.attempt();
    MarkDirty(rec.job.id());
    return absl::OkStatus();
  }), req.job_id(), "given a task"));
  absl::StatusOr<int> pid = dialer_->Launch(address, launch);
  JC_RETURN_IF_ERROR(OnLoop([&]() -> absl::Status {
    auto it = jobs_.find(req.job_id());
    if (it == jobs_.end() || it->second.job.attempt() != attempt ||
        it->second.job.tasks_size() <= task.index()) {
      return absl::AbortedError(absl::StrCat("job ", req.job_id(), " ended or was requeued meanwhile"));
    }
    pb::Task* t = it->second.job.mutable_tasks(task.index());
    if (pid.ok()) {
      // In memory only: the agent's heartbeats report it running, with its pid, and
      // those are written; one commit per task, not two.
      if (t->state() == pb::TASK_STARTING) t->set_state(pb::TASK_RUNNING);
      if (*pid != 0) t->set_pid(*pid);
    } else {
      t->set_state(pb::TASK_EXITED);
      t->set_exit_code(127);
      MarkDirty(req.job_id());
    }
    task = *t;
    return absl::OkStatus();
  }));
  if (!pid.ok()) {
    return absl::Status(pid.status().code(),
                        absl::StrCat("cannot start the task on ", req.host(), ": ", pid.status().message()));
  }
  return task;
}

absl::StatusOr<pb::Job> Master::SignalTask(const pb::SignalTaskRequest& req) {
  if (req.signal() <= 0 || req.signal() >= 65) return absl::InvalidArgumentError(absl::StrCat("no signal ", req.signal()));
  std::string address;
  pb::Job job;
  JC_RETURN_IF_ERROR(UnlessCleaned(OnLoop([&]() -> absl::Status {
    auto it = jobs_.find(req.job_id());
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", req.job_id()));
    job = it->second.job;
    if (req.task_index() < 0 || req.task_index() >= job.tasks_size()) {
      return absl::NotFoundError(absl::StrCat("job ", req.job_id(), " has no task ", req.task_index()));
    }
    address = AddressOf(job.tasks(req.task_index()).host());
    return absl::OkStatus();
  }), req.job_id(), "signalled"));
  pb::SignalRequest s;
  s.set_job_id(req.job_id());
  s.set_task_index(req.task_index());
  s.set_action(pb::SignalRequest::SIGNAL);
  s.set_signal(req.signal());
  JC_RETURN_IF_ERROR(dialer_->Signal(address, s));
  return job;
}

absl::StatusOr<pb::Job> Master::Kill(int64_t id, const std::string& reason, bool only_if_pending, bool* taken_back) {
  if (taken_back != nullptr) *taken_back = false;
  bool signal = false;
  SignalTargets targets;
  JC_RETURN_IF_ERROR(UnlessCleaned(OnLoop([&]() -> absl::Status {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
    JobRecord& rec = it->second;
    if (only_if_pending && (rec.job.state() != pb::PENDING || rec.job.attempt() != 0)) {
      targets.job = rec.job;  // it started (or ran before, or ended): left as it is
      return absl::OkStatus();
    }
    if (only_if_pending && taken_back != nullptr) *taken_back = true;
    bool host_available = false;
    if (!rec.job.tasks().empty()) {
      host_available = hosts_.Available(rec.job.tasks(0).host());
    }
    JC_ASSIGN_OR_RETURN(job_state::Effects fx, job_state::AskKill(rec, reason, host_available, Now()));
    ApplyEffects(rec, fx);
    signal = fx.signal.has_value();
    targets = TargetsOf(rec.job);
    return absl::OkStatus();
  }), id, "killed"));
  if (signal) {
    // FAILED_PRECONDITION: its agent does not run the task (it ended meanwhile, or its
    // launch was never confirmed). The kill stands: the job ends with the agent's next
    // heartbeat, which reports the end or shows the task never started (NotReported).
    absl::Status sent = SignalTasks(targets, pb::SignalRequest::KILL);
    if (!sent.ok() && !absl::IsFailedPrecondition(sent)) return sent;
  }
  return targets.job;
}

absl::StatusOr<pb::Job> Master::Rerun(int64_t id) {
  bool running = false;  // running or suspended: as requeue
  absl::StatusOr<pb::Job> rerun = OnLoop([&]() -> absl::StatusOr<pb::Job> {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
    JobRecord& rec = it->second;
    if (rec.job.state() == pb::PENDING) return job_state::Rerun(rec, Now()).status();  // has not run yet
    if (!job_state::Ended(rec.job.state())) {
      running = true;
      return rec.job;
    }
    // Pending again: as a submission, within its account's max_pend_jobs_per_user (else
    // rerunning its ended jobs would queue past it).
    JC_RETURN_IF_ERROR(MayQueueAnother(rec.job.spec().user()));
    // Its request was not kept once it ended (nor after a restart): built again from the spec.
    auto request = BuildRequest(rec.job.spec(), id);
    if (!request.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " cannot run again: ", request.status().message()));
    }
    rec.request = *request;
    JC_RETURN_IF_ERROR(scheduler_.Submit(rec.request));
    JC_ASSIGN_OR_RETURN(job_state::Effects fx, job_state::Rerun(rec, Now()));
    ApplyEffects(rec, fx);
    MarkDirty(id);
    ++burst_.submitted_by_user[rec.job.spec().user()];
    cycle_wanted_ = true;
    return rec.job;
  });
  if (!rerun.ok()) return UnlessCleaned(rerun.status(), id, "run again (submit it anew)");
  if (running) return Requeue(id);
  return rerun;
}

absl::StatusOr<pb::Job> Master::Requeue(int64_t id) {
  absl::StatusOr<SignalTargets> targets_or = OnLoop([&]() -> absl::StatusOr<SignalTargets> {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
    // Pending again once its tasks end: asked for by a user (or `rerun` of a running job),
    // within its account's max_pend_jobs_per_user (attacker helper-79). The master's own
    // requeues (a preemption, a failed pre-exec, a failed host) are not refused: at most the
    // jobs the account was running.
    if (it->second.job.state() != pb::PENDING) JC_RETURN_IF_ERROR(MayQueueAnother(it->second.job.spec().user()));
    JC_RETURN_IF_ERROR(job_state::AskRequeue(it->second).status());
    return TargetsOf(it->second.job);
  });
  if (!targets_or.ok()) return UnlessCleaned(targets_or.status(), id, "requeued");
  SignalTargets targets = *std::move(targets_or);
  JC_RETURN_IF_ERROR(SignalTasks(targets, pb::SignalRequest::KILL));
  return targets.job;
}

absl::StatusOr<int64_t> Master::SendInput(pb::InputRequest req) {
  absl::StatusOr<std::string> address = OnLoop([&]() -> absl::StatusOr<std::string> {
    auto it = jobs_.find(req.job_id());
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", req.job_id()));
    const pb::Job& job = it->second.job;
    if (!job.spec().interactive()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job.id(), " is not interactive (nexec submit -I takes input)"));
    }
    if (req.task_index() != 0) return absl::InvalidArgumentError("only the job's command (task 0) takes input");
    if (job.state() == pb::DONE || job.state() == pb::EXIT) {
      return absl::FailedPreconditionError(absl::StrCat("job ", job.id(), " has ended"));
    }
    if (job.state() == pb::PENDING || job.tasks().empty() || it->second.launch_in_flight) {
      return absl::UnavailableError(absl::StrCat("job ", job.id(), " has not started yet"));
    }
    req.set_attempt(job.attempt());
    return AddressOf(job.tasks(0).host());
  });
  if (!address.ok()) return UnlessCleaned(address.status(), req.job_id(), "given input");
  return dialer_->SendInput(*address, req);
}

absl::StatusOr<std::string> Master::ExecTarget(pb::ExecStart* start) {
  absl::StatusOr<std::string> address = OnLoop([&]() -> absl::StatusOr<std::string> {
    auto it = jobs_.find(start->job_id());
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", start->job_id()));
    const pb::Job& job = it->second.job;
    if (job.state() == pb::PENDING) {
      return absl::FailedPreconditionError(absl::StrCat("job ", job.id(), " has not started: nothing runs to exec in"));
    }
    if (job.state() != pb::RUNNING) {
      // A suspended job's processes are stopped: a command beside them would run on
      // resources the job gave up while it waits.
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job.id(), " is ", pb::JobState_Name(job.state()), ", not RUNNING"));
    }
    if (job.tasks().empty() || it->second.launch_in_flight) {
      return absl::UnavailableError(absl::StrCat("job ", job.id(), " is starting; ask again"));
    }
    const int index = start->task_index();
    if (index < 0 || index >= job.tasks_size() || (index != 0 && !job.tasks(index).remote())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job ", job.id(), " has no task ", index,
          " to exec in: task 0 runs the job's command, and tasks started by nexec-run their own"));
    }
    const pb::Task& task = job.tasks(index);
    if (task.state() == pb::TASK_EXITED) {
      return absl::FailedPreconditionError(absl::StrCat("task ", index, " of job ", job.id(), " has ended"));
    }
    start->set_attempt(job.attempt());
    start->set_master_identity(identity_);
    start->set_master_term(options_.term);
    return AddressOf(task.host());
  });
  if (!address.ok()) return UnlessCleaned(address.status(), start->job_id(), "exec'd in");
  return address;
}

absl::StatusOr<std::string> Master::ReadLog(const pb::ReadLogRequest& req, int64_t max_bytes) {
  // The host whose agent has the task's output.
  auto host_of = [&](const pb::Job& job) -> absl::StatusOr<std::string> {
    if (job.tasks().empty()) return absl::FailedPreconditionError(absl::StrCat("job ", req.job_id(), " has not started"));
    if (req.task_index() < 0 || req.task_index() >= job.tasks_size() ||
        (req.task_index() != 0 && !job.tasks(req.task_index()).remote())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job ", req.job_id(), " has no task ", req.task_index(),
          " with output: task 0 runs the job's command, and tasks started by nexec-run have their own"));
    }
    return job.tasks(req.task_index()).host();
  };
  absl::StatusOr<std::string> address = OnLoop([&]() -> absl::StatusOr<std::string> {
    auto it = jobs_.find(req.job_id());
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", req.job_id()));
    JC_ASSIGN_OR_RETURN(std::string host, host_of(it->second.job));
    return AddressOf(host);
  });
  if (absl::IsNotFound(address.status())) {
    // Cleaned out of memory (ended long ago): its output is still where its tasks ran.
    JC_ASSIGN_OR_RETURN(pb::Job cleaned, CleanedJob(req.job_id()));
    JC_ASSIGN_OR_RETURN(std::string host, host_of(cleaned));
    address = OnLoop([&] { return AddressOf(host); });
  }
  if (!address.ok()) return address.status();
  return dialer_->ReadLog(*address, req, max_bytes);
}

}  // namespace jc::nexec
