// Golden tests of the nexec job state machine (executor/master/job_state.h, issue 32 item 1):
// each file in data/job_state/ holds a job and a sequence of events — submitted (or refused
// its queue), dispatched, its launch
// answered, tasks reported by agents, kill, requeue, rerun, suspension and resumption asked
// and done, a host lost, a preemption decided or failed — and, for each event, the job as
// it stands afterwards with the effects the event asked for (store write, scheduler step,
// launch, signal). No I/O, lock or clock: the same sequence always gives the same lines.
// Run with JC_UPDATE_GOLDEN=1 to rewrite the expectations after a deliberate change (and
// read the diff).

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "executor/master/job_state.h"

namespace jc::nexec::job_state {
namespace {

namespace pb = ::nexec::v1;
using nlohmann::json;

std::string TaskState(pb::TaskState s) {
  std::string name = pb::TaskState_Name(s);
  return name.rfind("TASK_", 0) == 0 ? name.substr(5) : name;
}

std::string StepName(SchedulerStep s) {
  switch (s) {
    case SchedulerStep::kNone: return "";
    case SchedulerStep::kQueue: return "queue";
    case SchedulerStep::kCancel: return "cancel";
    case SchedulerStep::kRelease: return "release";
    case SchedulerStep::kRequeue: return "queue again";
    case SchedulerStep::kSuspend: return "suspend";
    case SchedulerStep::kResume: return "resume";
    case SchedulerStep::kCancelPreemption: return "cancel preemption";
  }
  return "?";
}

// One line: state, attempt and tasks, then the effects, then the reason.
std::string Summary(const Tracked& t, const Effects& fx) {
  std::vector<std::string> tasks;
  for (const pb::Task& task : t.job.tasks()) {
    std::string line = absl::StrCat("t", task.index(), ":", TaskState(task.state()));
    if (task.state() == pb::TASK_EXITED) absl::StrAppend(&line, "(", task.exit_code(), ")");
    absl::StrAppend(&line, "@", task.host());
    tasks.push_back(line);
  }
  std::vector<std::string> effects;
  if (fx.write) effects.push_back("write");
  if (std::string step = StepName(fx.scheduler); !step.empty()) effects.push_back("scheduler " + step);
  if (fx.launch) effects.push_back("launch");
  if (fx.signal) effects.push_back("signal " + pb::SignalRequest::Action_Name(*fx.signal));
  if (fx.term_first_task) effects.push_back("SIGTERM t0");
  if (fx.freed) effects.push_back("freed");
  if (fx.kill_report) effects.push_back("kill the reported task");
  if (fx.cpu_seconds > 0) effects.push_back(absl::StrCat("fair share +", fx.cpu_seconds, " cpu s"));
  if (fx.notify) effects.push_back(absl::StrCat("notify ", fx.notify->events_size(), " event(s)"));
  for (int index : fx.kill_tasks) effects.push_back(absl::StrCat("kill t", index));
  std::string line = absl::StrCat(pb::JobState_Name(t.job.state()), " a", t.job.attempt(), " | ",
                                  tasks.empty() ? "-" : absl::StrJoin(tasks, " "), " | ",
                                  effects.empty() ? "-" : absl::StrJoin(effects, ", "));
  if (!t.job.reason().empty()) absl::StrAppend(&line, " | ", t.job.reason());
  if (t.asked != Asked::kNothing) absl::StrAppend(&line, t.asked == Asked::kKill ? " [kill asked]" : " [requeue asked]");
  return line;
}

std::string ErrorLine(const absl::Status& s) {
  return absl::StrCat("refused: ", absl::StatusCodeToString(s.code()), ": ", s.message());
}

absl::Status StatusOf(const json& e) {
  const std::string code = e.value("code", "UNAVAILABLE");
  const std::string message = e.value("message", "connection refused");
  if (code == "INVALID_ARGUMENT") return absl::InvalidArgumentError(message);
  if (code == "PERMISSION_DENIED") return absl::PermissionDeniedError(message);
  if (code == "FAILED_PRECONDITION") return absl::FailedPreconditionError(message);
  if (code == "DEADLINE_EXCEEDED") return absl::DeadlineExceededError(message);
  return absl::UnavailableError(message);
}

// Feeds one event; the line it leaves.
std::string Feed(Tracked& t, const json& e, const At& at) {
  const std::string kind = e.at("event");
  auto line = [&](const absl::StatusOr<Effects>& fx) { return fx.ok() ? Summary(t, *fx) : ErrorLine(fx.status()); };
  Effects fx;
  if (kind == "submit") {
    pb::JobSpec spec;
    spec.set_command(e.value("command", "true"));
    spec.set_user("alice");
    fx = Submitted(t, e.value("id", 7), spec, at);
  } else if (kind == "queue_refused") {
    QueueRefused(t, e.value("message", "no host of type gpu is left"));
  } else if (kind == "dispatch") {
    std::vector<pb::Task> tasks;
    for (const auto& host : e.at("hosts")) {
      pb::Task& task = tasks.emplace_back();
      task.set_host(host.get<std::string>());
      task.set_slots(1);
    }
    fx = Dispatch(t, std::move(tasks), e.value("backfilled_before", 0), absl::Seconds(e.value("run_limit_s", 0)), at);
  } else if (kind == "launched") {
    fx = LaunchAnswered(t, e.value("attempt", t.job.attempt()), e.value("pid", 4242), at);
  } else if (kind == "launch_failed") {
    fx = LaunchAnswered(t, e.value("attempt", t.job.attempt()), StatusOf(e), at);
  } else if (kind == "report") {
    pb::TaskReport r;
    r.set_job_id(t.job.id());
    r.set_attempt(e.value("attempt", t.job.attempt()));
    r.set_task_index(e.value("task", 0));
    pb::TaskState state = pb::TASK_RUNNING;
    pb::TaskState_Parse(e.value("state", "TASK_RUNNING"), &state);
    r.set_state(state);
    r.set_exit_code(e.value("exit", 0));
    r.set_pid(e.value("pid", 0));
    r.set_pre_exec_failed(e.value("pre_exec_failed", false));
    r.set_message(e.value("message", ""));
    r.set_events_written(e.value("events_written", 0));
    if (e.contains("cpu_s")) r.mutable_usage()->set_cpu_seconds(e.at("cpu_s").get<double>());
    fx = TaskReported(t, r, e.value("host", "node1"), e.value("pre_exec_retries", 3), at);
  } else if (kind == "not_reported") {
    fx = NotReported(t, e.value("rerun", false), e.value("host", "node1"), at);
  } else if (kind == "host_lost") {
    fx = HostLost(t, e.value("rerun", false), absl::StrCat("host ", e.value("host", "node1"), " failed"), at);
  } else if (kind == "kill") {
    return line(AskKill(t, e.value("reason", ""), e.value("host_available", true), at));
  } else if (kind == "requeue") {
    return line(AskRequeue(t));
  } else if (kind == "setup_remote_task") {
    // What Master::RunTask adds (nexec-run): not a transition of the machine.
    pb::Task* task = t.job.add_tasks();
    task->set_index(t.job.tasks_size() - 1);
    task->set_host(e.value("host", "node2"));
    task->set_remote(true);
    task->set_state(pb::TASK_STARTING);
    return Summary(t, fx);
  } else if (kind == "setup_resize_event") {
    t.job.add_resize_events(e.value("text", "grow node3 2"));  // what master_elastic.cc records
    return Summary(t, fx);
  } else if (kind == "grow") {
    pb::Task allocation;
    allocation.set_host(e.value("host", "node3"));
    allocation.set_slots(e.value("slots", 2));
    fx = Grew(t, std::move(allocation), at);
  } else if (kind == "shrink") {
    auto shrunk = Shrunk(t, e.value("host", "node3"), e.value("slots", 2), e.value("for_job", 12), at);
    if (!shrunk.ok()) return ErrorLine(shrunk.status());
    fx = *shrunk;
  } else if (kind == "requeue_refused") {
    RequeueRefused(t, e.value("why", std::string("no host can hold it now")));
  } else if (kind == "rerun") {
    return line(Rerun(t, at));
  } else if (kind == "suspend") {
    return line(AskSuspend(t, e.value("system_reason", ""), at));
  } else if (kind == "suspended") {
    fx = Suspended(t, e.value("system_reason", ""), at);
  } else if (kind == "resume") {
    absl::Status s = AskResume(t, e.value("by_system", false));
    return s.ok() ? "resume may go on: signal RESUME" : ErrorLine(s);
  } else if (kind == "resumed") {
    fx = Resumed(t, at);
  } else if (kind == "preempt_requeue") {
    fx = PreemptedForRequeue(t, e.value("preemptor", 9), e.value("reason", "preempted by job 9 (queue high)"),
                             absl::Seconds(e.value("grace_s", 30)), at);
  } else if (kind == "preempt_suspend") {
    fx = PreemptedForSuspend(t, e.value("preemptor", 9));
  } else if (kind == "preemption_failed") {
    fx = PreemptionNotCarriedOut(t, e.value("preemptor", 9), e.value("requeue", true),
                                 e.value("message", "its agent is gone"), at);
  } else {
    FAIL("unknown event " << kind);
  }
  return Summary(t, fx);
}

TEST_CASE("nexec job state machine: golden event sequences (data/job_state/*.json) [B1][B5][B11]") {
  const std::filesystem::path dir = std::filesystem::path(JC_SOURCE_DIR) / "tests/unit/executor/data/job_state";
  const bool update = std::getenv("JC_UPDATE_GOLDEN") != nullptr;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    json doc = json::parse(std::ifstream(entry.path()));
    Tracked t;
    t.job.set_id(7);
    t.job.set_attempt(1);
    t.job.set_state(pb::PENDING);
    if (doc.contains("max_slots")) t.job.mutable_spec()->set_max_slots(doc.at("max_slots").get<int>());
    const absl::Time base = absl::FromUnixSeconds(1795651200);  // 2026-11-26 00:00:00 UTC
    std::vector<std::string> got, history;
    int second = 0;
    for (const json& e : doc.at("events")) {
      second = e.value("at_s", second + 1);
      const At at{base + absl::Seconds(second), absl::UTCTimeZone()};
      got.push_back(absl::StrCat(e.at("event").get<std::string>(), ": ", Feed(t, e, at)));
      // The history lines the event added.
      for (int i = static_cast<int>(history.size()); i < t.job.history_size(); ++i) {
        history.push_back(t.job.history(i));
        got.push_back("  + " + t.job.history(i));
      }
    }
    INFO(entry.path().filename().string());
    if (update) {
      doc["expect"] = got;
      std::ofstream(entry.path()) << doc.dump(2) << "\n";
      continue;
    }
    REQUIRE(doc.contains("expect"));
    std::vector<std::string> want = doc.at("expect").get<std::vector<std::string>>();
    for (size_t i = 0; i < std::max(want.size(), got.size()); ++i) {
      INFO("event " << i);
      CHECK((i < got.size() ? got[i] : "(none)") == (i < want.size() ? want[i] : "(none)"));
    }
  }
  CHECK(files >= 6);
}

}  // namespace
}  // namespace jc::nexec::job_state
