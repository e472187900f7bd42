// nexec: the executor's command line (SPEC B11), as a table of commands (Commands(), below)
// on the command table jcctl uses too (common/cli/command_table.h): parsing, `--help` on
// every command and completion come from it. Every listing takes --json. The master is
// --master=host:port or $NEXEC_MASTER. Every call carries a munge credential from
// --munge_socket, $NEXEC_MUNGE_SOCKET or munge's own socket.

#include <grpcpp/grpcpp.h>
#include <google/protobuf/util/json_util.h>
#include <pwd.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/cli/command_table.h"
#include "common/cli/shell_words.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "executor/auth/munge_auth.h"
#include "executor/client/master_list.h"
#include "executor/client/submit_packer.h"
#include "executor/cli/environment.h"
#include "executor/cli/run_limit.h"
#include "executor/cli/exec_command.h"
#include "executor/cli/interactive.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "common/version.h"

namespace pb = ::nexec::v1;
using jc::cli::FlagSpec;
using jc::cli::Invocation;
using jc::nexec::FollowLog;
using jc::nexec::FollowOptions;

namespace {

int Fail(const std::string& message) {
  std::cerr << "nexec: " << message << "\n";
  return 1;
}

int Fail(const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE && !absl::StartsWith(s.error_message(), "cannot get a munge")) {
    return Fail("cannot reach the master (" + s.error_message() + "); is nexec-master running?");
  }
  if (s.error_message().empty()) return Fail("the master answered with error code " + std::to_string(s.error_code()));
  return Fail(s.error_message());
}

std::string CurrentUser() {
  passwd* pw = getpwuid(getuid());
  return pw != nullptr ? pw->pw_name : std::to_string(getuid());
}

std::string Json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

// Prints rows as aligned columns, the way bjobs and squeue do.
void Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

// LSF's STAT column: a suspended job is USUSP when a user stopped it, SSUSP when the
// system did (its queue's run window closed) and will resume it.
std::string State(const pb::Job& j) {
  switch (j.state()) {
    case pb::PENDING: return "PEND";
    case pb::RUNNING: return "RUN";
    case pb::SUSPENDED: return j.system_suspend_reason().empty() ? "USUSP" : "SSUSP";
    case pb::DONE: return "DONE";
    case pb::EXIT: return "EXIT";
    default: return "?";
  }
}

std::string When(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0) return "-";
  return absl::FormatTime("%b %d %H:%M:%S", absl::FromUnixSeconds(t.seconds()), absl::LocalTimeZone());
}

// "4*gpu0,2*gpu1": slots per host, each host once, in allocation order.
std::string Hosts(const pb::Job& j) {
  std::vector<std::pair<std::string, int>> slots;
  for (const auto& t : j.tasks()) {
    if (t.grown() && t.state() == pb::TASK_EXITED) continue;  // given back (elastic)
    auto it = std::find_if(slots.begin(), slots.end(), [&](const auto& h) { return h.first == t.host(); });
    if (it == slots.end()) {
      slots.emplace_back(t.host(), t.slots());
    } else {
      it->second += t.slots();
    }
  }
  std::vector<std::string> parts;
  for (const auto& [host, n] : slots) parts.push_back(absl::StrCat(n, "*", host));
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

// "2", or for an elastic job "2..8 (holds 5)".
std::string Slots(const pb::Job& j) {
  const int min = std::max(1, j.spec().slots());
  if (j.spec().max_slots() <= min) return std::to_string(min);
  int held = 0;
  for (const auto& t : j.tasks()) {
    if (!t.remote() && !(t.grown() && t.state() == pb::TASK_EXITED)) held += t.slots();
  }
  return absl::StrCat(min, "..", j.spec().max_slots(), " (elastic", held > 0 ? absl::StrCat(", holds ", held) : "", ")");
}

bool ParseId(const std::string& text, int64_t* id) { return absl::SimpleAtoi(text, id) && *id > 0; }

// What every command runs with: the master's stub, who we are (munge), and whether to
// print JSON.
struct Cli {
  std::unique_ptr<pb::Master::Stub> stub;  // to the master that leads
  std::unique_ptr<jc::nexec::MasterList> masters;  // every master given (--master A,B,C)
  jc::nexec::MungeAuth auth = jc::nexec::MungeAuth::Disabled();
  bool json = false;
  std::string command;  // the command's first word (one function serves kill, suspend, ...)
  std::string leader;             // the master the stub calls
  std::vector<uid_t> master_uids;  // whose answers count, besides root's
  // One call to the leader, in a munge session: the master takes who we are from it (B9),
  // and its answer counts only when the master's account signed it (issue 47: not
  // whoever listens at the master's address while it is down).
  template <typename Req, typename Resp>
  grpc::Status Call(const char* method, const Req& req, Resp* resp,
                    grpc::Status (pb::Master::Stub::*rpc)(grpc::ClientContext*, const Req&, Resp*)) const {
    jc::nexec::MungeAuth::AnswerFrom from;
    from.response = resp;
    from.uids = master_uids;
    return auth.Call(
        leader, method, req, std::chrono::seconds(30),
        [&](grpc::ClientContext* c) { return (stub.get()->*rpc)(c, req, resp); }, &from);
  }
  // A context whose call carries a munge credential (streams, and the calls of an
  // interactive job, which do not check the answer).
  std::unique_ptr<grpc::ClientContext> Ctx(absl::string_view method, const google::protobuf::Message& request) const {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (absl::Status s = auth.Sign(c.get(), method, request); !s.ok()) std::exit(Fail(std::string(s.message())));
    return c;
  }
};

// submit --cron and what only a timed job takes (--start-timeout, --overlap, --retries).
absl::Status ReadTimedFlags(const Invocation& in, pb::TimedJob* timed) {
  if (in.Has("cron")) timed->set_schedule(in.Get("cron"));
  if (in.Has("start-timeout")) {
    auto timeout = jc::nexec::ParseRunLimit(in.Get("start-timeout"));
    if (!timeout.ok()) return absl::InvalidArgumentError("submit: --start-timeout: " + std::string(timeout.status().message()));
    timed->set_start_timeout_seconds(absl::ToInt64Seconds(*timeout));
  }
  if (in.Has("overlap")) timed->set_overlap(in.Get("overlap"));
  if (in.Has("retries")) {
    int n = 0;
    if (!absl::SimpleAtoi(in.Get("retries"), &n) || n < 0) {
      return absl::InvalidArgumentError("submit: --retries needs a whole number, got \"" + in.Get("retries") + "\"");
    }
    timed->set_retries(n);
  }
  if (timed->schedule().empty() &&
      (timed->start_timeout_seconds() != 0 || !timed->overlap().empty() || timed->retries() != 0)) {
    return absl::InvalidArgumentError("submit: --start-timeout, --overlap and --retries are for timed jobs (--cron)");
  }
  return absl::OkStatus();
}

int CreateTimedJob(Cli& cli, const pb::TimedJob& timed) {
  pb::TimedJob created;
  grpc::Status st = cli.Call("AddTimedJob", timed, &created, &pb::Master::Stub::AddTimedJob);
  if (!st.ok()) return Fail(st);
  if (cli.json) {
    std::cout << Json(created) << "\n";
  } else {
    std::cout << "Timed job <" << created.id() << "> is created; next run at " << When(created.next_run()) << ".\n";
  }
  return 0;
}

// What one submission's flags and command ask for (a `nexec submit` line, or a line of a
// job pack): InvalidArgument, naming the flag, for a value it cannot take.
struct Submission {
  pb::SubmitRequest request;
  bool interactive = false;
  bool tty = false;
  pb::TimedJob timed;  // with --cron
};
absl::StatusOr<Submission> SubmissionOf(const Invocation& in, const std::string& command) {
  Submission sub;
  pb::JobSpec* s = sub.request.mutable_spec();
  s->set_user(CurrentUser());
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) s->set_cwd(cwd);
  std::string env = "all";
  if (in.Has("exclusive")) s->set_exclusive(true);
  if (in.Has("I") || in.Has("Ip") || in.Has("Is")) {  // LSF: -Ip and -Is with a pseudo-terminal
    sub.interactive = true;
    sub.tty = !in.Has("I");
  }
  int n = 0;
  if (in.Has("n") && absl::StrContains(in.Get("n"), ',')) {
    // Elastic (LSF's -n min,max): both whole numbers, the maximum not below the minimum.
    const std::string v = in.Get("n");
    std::vector<std::string> parts = absl::StrSplit(v, ',');
    int max = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &n) || !absl::SimpleAtoi(parts[1], &max) || n < 1) {
      return absl::InvalidArgumentError("submit: -n needs N or MIN,MAX in whole numbers, got \"" + v + "\"");
    }
    if (max < n) {
      return absl::InvalidArgumentError("submit: -n " + v + ": the maximum (" + parts[1] + ") is below the minimum (" +
                                        parts[0] + ")");
    }
    s->set_slots(n);
    s->set_max_slots(max);
  } else if (in.Has("n")) {
    if (!absl::SimpleAtoi(in.Get("n"), &n) || n < 1) {
      return absl::InvalidArgumentError("submit: -n needs a whole number, got \"" + in.Get("n") + "\"");
    }
    s->set_slots(n);
  }
  if (in.Has("gpus")) {
    if (!absl::SimpleAtoi(in.Get("gpus"), &n) || n < 0) {
      return absl::InvalidArgumentError("submit: --gpus needs a whole number, got \"" + in.Get("gpus") + "\"");
    }
    s->set_gpus_per_slot(n);
  }
  if (in.Has("R")) s->set_requirement(in.Get("R"));
  if (in.Has("image")) s->set_image(in.Get("image"));
  if (in.Has("q")) s->set_queue(in.Get("q"));
  if (in.Has("J")) s->set_name(in.Get("J"));
  if (in.Has("o")) s->set_stdout_path(in.Get("o"));
  if (in.Has("e")) s->set_stderr_path(in.Get("e"));
  if (in.Has("env")) env = in.Get("env");
  if (in.Has("E")) s->set_pre_exec(in.Get("E"));
  if (in.Has("Ep")) s->set_post_exec(in.Get("Ep"));
  if (in.Has("P")) s->set_project(in.Get("P"));
  if (in.Has("app")) s->set_app(in.Get("app"));
  if (in.Has("W")) {
    auto limit = jc::nexec::ParseRunLimit(in.Get("W"));
    if (!limit.ok()) return absl::InvalidArgumentError("submit: -W: " + std::string(limit.status().message()));
    s->set_run_limit_seconds(absl::ToInt64Seconds(*limit));
  }
  JC_RETURN_IF_ERROR(ReadTimedFlags(in, &sub.timed));
  if (in.Has("key")) s->set_submit_key(in.Get("key"));  // sent again, the same key answers with the same job
  if (in.Has("user")) s->set_user(in.Get("user"));
  if (command.empty()) return absl::InvalidArgumentError("submit: no command given");
  // What the master would refuse, or could not even read, said here and plainly: a string
  // that is not UTF-8 fails the whole call (a pack's too) in protobuf's words, and a spec past
  // the master's 1 MiB a job (attacker helper-79).
  if (!jc::IsUtf8(command)) return absl::InvalidArgumentError("submit: the command is not UTF-8 text");
  for (const auto& [flag, value] : in.flags) {
    if (!jc::IsUtf8(value)) return absl::InvalidArgumentError("submit: the value of --" + flag + " is not UTF-8 text");
  }
  for (auto& [k, v] : jc::nexec::EnvironmentToSend(env, std::cerr)) (*s->mutable_env())[k] = v;
  s->set_command(command);
  s->set_interactive(sub.interactive);
  s->set_tty(sub.tty);
  if (const size_t bytes = s->ByteSizeLong(); bytes > jc::nexec::kMaxSubmissionBytes) {
    return absl::InvalidArgumentError(absl::StrCat("submit: the job's command, flags and environment take ", bytes,
                                                   " bytes, past the ", jc::nexec::kMaxSubmissionBytes,
                                                   " a job may take"));
  }
  return sub;
}

int SubmitPack(Cli& cli, const Invocation& in);

int Submit(Cli& cli, const Invocation& in) {
  if (in.Has("pack")) return SubmitPack(cli, in);
  if (in.args.empty()) {
    // Bad usage, as a missing argument is (exit 2): COMMAND is optional only with --pack.
    std::cerr << "nexec: submit: no command given (nexec submit [flags] COMMAND..., or --pack FILE)\n";
    return 2;
  }
  auto& stub = cli.stub;
  const bool json = cli.json;
  auto ctx = [&cli](absl::string_view method, const google::protobuf::Message& request) { return cli.Ctx(method, request); };
  absl::StatusOr<Submission> sub = SubmissionOf(in, absl::StrJoin(in.args, " "));
  if (!sub.ok()) return Fail(std::string(sub.status().message()));
  pb::SubmitRequest& req = sub->request;
  pb::JobSpec* s = req.mutable_spec();
  const bool interactive = sub->interactive, tty = sub->tty;
  pb::TimedJob& timed = sub->timed;
  if (winsize ws{}; tty && isatty(0) && ioctl(0, TIOCGWINSZ, &ws) == 0) {
    s->set_tty_rows(ws.ws_row);
    s->set_tty_cols(ws.ws_col);
  }
  if (!timed.schedule().empty()) {
    *timed.mutable_spec() = *s;
    return CreateTimedJob(cli, timed);
  }
  pb::SubmitResponse resp;
  grpc::Status st = cli.Call("Submit", req, &resp, &pb::Master::Stub::Submit);
  if (!st.ok()) return Fail(st);
  if (interactive) {
    // The job's output is this command's: the messages go to stderr, as bsub -I's do.
    std::cerr << "Job <" << resp.job_id() << "> is submitted"
              << (s->queue().empty() ? "" : " to queue <" + s->queue() + ">") << "." << std::endl;
    auto make = [&ctx](absl::string_view method, const google::protobuf::Message& request) {
      return ctx(method, request);
    };
    int code = jc::nexec::RunInteractive(stub.get(), make, resp.job_id(), tty);
    std::cout << std::flush;
    _exit(code);  // the input thread may still wait on stdin
  }
  if (json) {
    std::cout << Json(resp) << "\n";
  } else {
    std::cout << "Job <" << resp.job_id() << "> is submitted"
              << (s->queue().empty() ? "" : " to queue <" + s->queue() + ">") << ".\n";
  }
  return 0;
}

int Jobs(Cli& cli, const Invocation& in) {
  const bool json = cli.json;

  pb::ListJobsRequest req;
  const bool all = in.Has("a");
  if (in.Has("u")) req.set_user(in.Get("u"));
  if (in.Has("q")) req.set_queue(in.Get("q"));
  if (!all) {
    req.add_states(pb::PENDING);
    req.add_states(pb::RUNNING);
    req.add_states(pb::SUSPENDED);
  }
  pb::ListJobsResponse resp;
  grpc::Status st = cli.Call("ListJobs", req, &resp, &pb::Master::Stub::ListJobs);
  if (!st.ok()) return Fail(st);
  if (json) {
    std::cout << Json(resp) << "\n";
    return 0;
  }
  if (resp.jobs().empty()) {
    std::cout << "No unfinished job found\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"JOBID", "USER", "STAT", "QUEUE", "SLOTS", "EXEC_HOST", "JOB_NAME", "SUBMIT_TIME"}};
  for (const auto& j : resp.jobs()) {
    rows.push_back({std::to_string(j.id()), j.spec().user(), State(j), j.spec().queue(),
                    std::to_string(j.spec().slots()), Hosts(j),
                    j.spec().name().empty() ? j.spec().command().substr(0, 20) : j.spec().name(),
                    When(j.submitted_at())});
  }
  Table(rows);
  return 0;
}

int JobOrControl(Cli& cli, const Invocation& in) {
  const bool json = cli.json;

  const std::string& cmd = cli.command;
  int64_t id = 0;
  if (!ParseId(in.args[0], &id)) return Fail(cmd + ": \"" + in.args[0] + "\" is not a job id");
  pb::JobRef ref;
  ref.set_job_id(id);
  std::string method = cmd == "job" ? "GetJob" : cmd == "kill" ? "Kill" : cmd == "suspend" ? "Suspend"
                       : cmd == "resume" ? "Resume" : cmd == "rerun" ? "Rerun" : "Requeue";
  if (cmd == "job") {
    pb::Job j;
    grpc::Status st = cli.Call("GetJob", ref, &j, &pb::Master::Stub::GetJob);
    if (!st.ok()) return Fail(st);
    if (json) {
      std::cout << Json(j) << "\n";
      return 0;
    }
    Table({{"Job", std::to_string(j.id())},
           {"Name", j.spec().name()},
           {"User", j.spec().user()},
           {"Queue", j.spec().queue()},
           {"State", State(j) + (j.reason().empty() ? "" : " (" + j.reason() + ")")},
           {"Command", j.spec().command()},
           {"Slots", Slots(j)},
           {"Requirement", j.spec().requirement().empty() ? "-" : j.spec().requirement()},
           {"Hosts", Hosts(j)},
           {"Submitted", When(j.submitted_at())},
           {"Started", When(j.started_at())},
           {"Ended", When(j.ended_at())},
           {"Exit code", std::to_string(j.exit_code())},
           {"Attempt", std::to_string(j.attempt())},
           {"Timed job", j.spec().timed_job_id() != 0 ? std::to_string(j.spec().timed_job_id()) : "-"},
           {"Run limit", j.spec().run_limit_seconds() > 0
                             ? absl::FormatDuration(absl::Seconds(j.spec().run_limit_seconds()))
                             : "-"},
           {"Reservation", j.reserved_hosts().empty()
                               ? "-"
                               : absl::StrCat(absl::StrJoin(j.reserved_hosts(), " "), ", start by ",
                                              j.has_reserved_start() ? When(j.reserved_start()) : "unknown")},
           {"Preempted", absl::StrCat(j.preemptions(), " time(s)",
                                      j.preempted_by() != 0 ? absl::StrCat(", now by job ", j.preempted_by()) : "")}});
    for (const auto& t : j.tasks()) {
      std::cout << "  task " << t.index() << " on " << t.host() << ": " << t.slots()
                << " slot(s), gpus [" << absl::StrJoin(t.gpus(), ",") << "]";
      if (t.remote()) std::cout << ", nexec-run: " << t.command() << (t.rank() >= 0 ? absl::StrCat(" (rank ", t.rank(), ")") : "");
      if (t.grown()) std::cout << (t.state() == pb::TASK_EXITED ? ", grown, given back" : ", grown");
      if (t.index() == 0 || t.remote()) {
        std::cout << ", " << (t.state() == pb::TASK_EXITED ? absl::StrCat("exited ", t.exit_code())
                                                             : pb::TaskState_Name(t.state()))
                  << ", pid " << t.pid() << ", cpu " << t.usage().cpu_seconds() << " s, rss "
                  << t.usage().rss_kb() << " KB, threads " << t.usage().threads();
        if (t.gpus_size() > 0 || t.usage().gpu_memory_mb() > 0) {
          std::cout << ", gpu util " << t.usage().gpu_utilization() << "%, gpu memory "
                    << t.usage().gpu_memory_mb() << " MB";
        }
      }
      std::cout << "\n";
    }
    if (!j.history().empty()) std::cout << "History:\n";
    for (const auto& line : j.history()) std::cout << "  " << line << "\n";
    return 0;
  }
  pb::ControlResponse resp;
  grpc::Status st = cli.Call(method.c_str(), ref, &resp,
                             cmd == "kill"      ? &pb::Master::Stub::Kill
                             : cmd == "suspend" ? &pb::Master::Stub::Suspend
                             : cmd == "resume"  ? &pb::Master::Stub::Resume
                             : cmd == "rerun"   ? &pb::Master::Stub::Rerun
                                                : &pb::Master::Stub::Requeue);
  if (!st.ok()) return Fail(st);
  std::cout << "Job <" << id << "> is being "
            << (cmd == "kill" ? "killed" : cmd == "suspend" ? "suspended"
                : cmd == "resume" ? "resumed" : cmd == "rerun" ? "rerun" : "requeued")
            << ".\n";
  return 0;
}

// Who leads among the masters given (issue 47): each one's own answer.
int Masters(Cli& cli, const Invocation&) {
  auto answers = cli.masters->AskAll(absl::Seconds(3));
  if (cli.json) {
    std::vector<std::string> items;
    for (const auto& [address, info] : answers) {
      items.push_back(info.ok() ? Json(*info)
                                : absl::StrCat("{\"address\":\"", address, "\",\"state\":\"down\",\"error\":\"",
                                               absl::CEscape(info.status().message()), "\"}"));
    }
    std::cout << "[" << absl::StrJoin(items, ",") << "]\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows{{"MASTER", "STATE", "TERM", "LEADER", "SINCE"}};
  bool any_leads = false;
  for (const auto& [address, info] : answers) {
    if (!info.ok()) {
      rows.push_back({address, "down", "-", "-", "-"});
      continue;
    }
    any_leads = any_leads || info->leading();
    rows.push_back({address, info->leading() ? "leading" : "standing by", info->term() > 0 ? absl::StrCat(info->term()) : "-",
                    info->leader().empty() ? "-" : info->leader(), When(info->since())});
  }
  Table(rows);
  for (const auto& [address, info] : answers) {
    if (!info.ok()) {
      std::cout << address << ": " << info.status().message() << "\n";
    } else if (!info->leading()) {
      std::cout << address << ": " << info->state() << "\n";
    }
  }
  if (!any_leads) {
    std::cerr << "nexec: no master leads now\n";
    return 1;
  }
  return 0;
}

int HostsOrQueues(Cli& cli, const Invocation& in) {
  const bool json = cli.json;

  if (cli.command == "hosts") {
    const bool long_format = in.Has("l");
    pb::ListHostsResponse resp;
    grpc::Status st = cli.Call("ListHosts", pb::ListHostsRequest(), &resp, &pb::Master::Stub::ListHosts);
    if (!st.ok()) return Fail(st);
    if (json) {
      std::cout << Json(resp) << "\n";
      return 0;
    }
    if (long_format) {  // as lshosts -l / bhosts -l: one block per host, every resource
      for (const auto& h : resp.hosts()) {
        std::cout << "HOST  " << h.name() << "\n";
        std::vector<std::vector<std::string>> rows{
            {"  status", h.state()},
            {"  reason", h.reason().empty() ? "-" : h.reason()},
            {"  type", h.type().empty() ? "-" : h.type()},
            {"  cpu_factor", absl::StrCat(h.cpu_factor())},
            {"  slots", absl::StrCat(h.used_slots(), " used of ", h.slots())},
            {"  mem_mb", absl::StrCat(static_cast<int64_t>(h.used_mem_mb()), " used of ",
                                      static_cast<int64_t>(h.mem_mb()))},
            {"  swap_mb", absl::StrCat(static_cast<int64_t>(h.swap_mb()))},
            {"  memfree_mb", absl::StrCat(static_cast<int64_t>(h.mem_free_mb()), " (measured)")},
            {"  swpfree_mb", absl::StrCat(static_cast<int64_t>(h.swap_free_mb()), " (measured)")},
            {"  gpus", h.gpus().empty() ? "-" : absl::StrJoin(h.gpus(), ",")},
            {"  gpus_used", h.used_gpus().empty() ? "-" : absl::StrJoin(h.used_gpus(), ",")},
            {"  load_1m", absl::StrCat(h.load_1m())},
            {"  images", h.image_digests().empty() ? "-" : absl::StrJoin(h.image_digests(), " ")},
            {"  last_heartbeat", When(h.last_heartbeat())}};
        std::map<std::string, std::string> sorted(h.resources().begin(), h.resources().end());
        for (const auto& [k, v] : sorted) rows.push_back({"  " + k, v});
        Table(rows);
        std::cout << "\n";
      }
      return 0;
    }
    std::vector<std::vector<std::string>> rows{
        {"HOST", "STATUS", "TYPE", "CPUF", "SLOTS", "USED", "MEM_MB", "GPUS", "GPUS_USED", "LOAD"}};
    for (const auto& h : resp.hosts()) {
      rows.push_back({h.name(), h.state(), h.type(), absl::StrCat(h.cpu_factor()),
                      std::to_string(h.slots()), std::to_string(h.used_slots()),
                      absl::StrCat(static_cast<int64_t>(h.mem_mb())), std::to_string(h.gpus_size()),
                      absl::StrJoin(h.used_gpus(), ","), absl::StrCat(h.load_1m())});
    }
    Table(rows);
    // A host that refuses this master says why under the table (it is long).
    for (const auto& h : resp.hosts()) {
      if (!h.reason().empty()) std::cout << h.name() << ": " << h.state() << ": " << h.reason() << "\n";
    }
  } else {
    pb::ListQueuesResponse resp;
    grpc::Status st = cli.Call("ListQueues", pb::ListQueuesRequest(), &resp, &pb::Master::Stub::ListQueues);
    if (!st.ok()) return Fail(st);
    if (json) {
      std::cout << Json(resp) << "\n";
      return 0;
    }
    std::vector<std::vector<std::string>> rows{
        {"QUEUE", "PRIO", "STATUS", "PEND", "RUN", "SLOTS_USED", "MAX_SLOTS", "PER_USER", "BALANCE",
         "RUN_WINDOW"}};
    for (const auto& q : resp.queues()) {
      // LSF's bqueues: Active, or Inact_Win outside the run window (and until when).
      std::string window = q.run_window().empty() ? "-" : q.run_window();
      if (q.has_window_changes_at()) {
        window += absl::StrCat(q.open() ? " (closes " : " (opens ", When(q.window_changes_at()), ")");
      }
      rows.push_back({q.name(), std::to_string(q.priority()), q.open() ? "Active" : "Inact_Win",
                      std::to_string(q.pending_jobs()),
                      std::to_string(q.running_jobs()), std::to_string(q.used_slots()),
                      q.max_slots() ? std::to_string(q.max_slots()) : "-",
                      q.max_slots_per_user() ? std::to_string(q.max_slots_per_user()) : "-",
                      q.balance(), window});
    }
    Table(rows);
    // Capacity queues: each virtual cluster's guarantee, max and holding.
    std::vector<std::vector<std::string>> clusters{
        {"QUEUE", "CLUSTER", "RESOURCE", "GUARANTEE", "MAX", "HELD", "USER_LIMIT", "PEND", "RUN"}};
    for (const auto& q : resp.queues()) {
      for (const auto& vc : q.clusters()) {
        clusters.push_back({q.name(), vc.name(), vc.resource(), absl::StrCat(vc.guarantee()),
                            vc.max() > 0 ? absl::StrCat(vc.max()) : "-", absl::StrCat(vc.held()),
                            vc.user_limit() > 0 ? absl::StrCat(vc.user_limit()) : "-",
                            std::to_string(vc.pending_jobs()), std::to_string(vc.running_jobs())});
      }
    }
    if (clusters.size() > 1) {
      std::cout << "\n";
      Table(clusters);
    }
  }
  return 0;
}

int CronList(Cli& cli, const Invocation& in) {
  const bool json = cli.json;
  int64_t only = 0;
  if (!in.args.empty() && !absl::SimpleAtoi(in.args[0], &only)) {
    return Fail("cron: \"" + in.args[0] + "\" is not a timed job ID");
  }
  pb::ListTimedJobsRequest req;
  pb::ListTimedJobsResponse resp;
  grpc::Status st = cli.Call("ListTimedJobs", req, &resp, &pb::Master::Stub::ListTimedJobs);
  if (!st.ok()) return Fail(st);
  if (only != 0) {
    for (const auto& tj : resp.timed_jobs()) {
      if (tj.id() != only) continue;
      if (json) {
        std::cout << Json(tj) << "\n";
        return 0;
      }
      std::cout << "Timed job <" << tj.id() << ">, user <" << tj.spec().user() << ">, queue <" << tj.spec().queue()
                << ">\n  Command       " << tj.spec().command() << "\n  Schedule      " << tj.schedule()
                << "\n  Next run      " << When(tj.next_run()) << "\n  Overlap       " << tj.overlap()
                << "\n  Retries       " << tj.retries() << "\n  Start timeout "
                << (tj.start_timeout_seconds() > 0 ? absl::FormatDuration(absl::Seconds(tj.start_timeout_seconds()))
                                                   : "-")
                << "\n  Run limit     "
                << (tj.spec().run_limit_seconds() > 0
                        ? absl::FormatDuration(absl::Seconds(tj.spec().run_limit_seconds()))
                        : "-")
                << "\n  Runs          " << tj.runs() << " (" << tj.skipped() << " skipped)\n  Last run      "
                << (tj.run_job_id() != 0 ? "job " + std::to_string(tj.run_job_id()) : "-") << "\nHistory\n";
      for (const auto& line : tj.history()) std::cout << "  " << line << "\n";
      return 0;
    }
    return Fail("no timed job " + std::to_string(only));
  }
  if (json) {
    std::cout << Json(resp) << "\n";
    return 0;
  }
  if (resp.timed_jobs().empty()) {
    std::cout << "No timed job found\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"ID", "USER", "QUEUE", "SCHEDULE", "OVERLAP", "NEXT_RUN", "LAST_JOB", "RUNS", "SKIPPED", "COMMAND"}};
  for (const auto& tj : resp.timed_jobs()) {
    rows.push_back({std::to_string(tj.id()), tj.spec().user(), tj.spec().queue(), tj.schedule(), tj.overlap(),
                    When(tj.next_run()), tj.run_job_id() != 0 ? std::to_string(tj.run_job_id()) : "-",
                    std::to_string(tj.runs()), std::to_string(tj.skipped()), tj.spec().command()});
  }
  Table(rows);
  return 0;
}

int CronRemove(Cli& cli, const Invocation& in) {

    int64_t id = 0;
    if (!absl::SimpleAtoi(in.args[0], &id)) return Fail("cron rm: \"" + in.args[0] + "\" is not a timed job ID");
    pb::TimedJobRef ref;
    ref.set_id(id);
    pb::TimedJob removed;
    grpc::Status st = cli.Call("RemoveTimedJob", ref, &removed, &pb::Master::Stub::RemoveTimedJob);
    if (!st.ok()) return Fail(st);
    std::cout << "Timed job <" << id << "> is removed"
              << (removed.run_job_id() != 0 ? "; its last run, job <" + std::to_string(removed.run_job_id()) +
                                                  ">, is left as it is"
                                            : "")
              << ".\n";
    return 0;
}

int Shares(Cli& cli, const Invocation& in) {
  const bool json = cli.json;

  pb::ListSharesRequest req;
  if (in.Has("q")) req.set_queue(in.Get("q"));
  pb::ListSharesResponse resp;
  grpc::Status st = cli.Call("ListShares", req, &resp, &pb::Master::Stub::ListShares);
  if (!st.ok()) return Fail(st);
  if (json) {
    std::cout << Json(resp) << "\n";
    return 0;
  }
  if (resp.nodes().empty()) {
    std::cout << "No fair-share queue" << (req.queue().empty() ? "" : " named " + req.queue()) << "\n";
    return 0;
  }
  // As LSF's bqueues -l / bhpart: the tree, each node's share, usage and priority.
  std::vector<std::vector<std::string>> rows{{"QUEUE", "NODE", "SHARES", "SHARE", "USAGE_SLOT_H", "RUN", "PRIORITY"}};
  for (const auto& n : resp.nodes()) {
    std::string name = n.path().substr(n.path().rfind('/') == std::string::npos ? 0 : n.path().rfind('/') + 1);
    rows.push_back({n.queue(), std::string(2 * n.depth(), ' ') + name, absl::StrCat(n.shares()),
                    absl::StrFormat("%.1f%%", 100 * n.share_fraction()), absl::StrFormat("%.2f", n.usage_slot_hours()),
                    std::to_string(n.running_slots()), absl::StrFormat("%.3f", n.priority())});
  }
  Table(rows);
  return 0;
}

int Limits(Cli& cli, const Invocation& in) {
  const bool json = cli.json;

  pb::ListLimitsRequest req;
  pb::ListLimitsResponse resp;
  grpc::Status st = cli.Call("ListLimits", req, &resp, &pb::Master::Stub::ListLimits);
  if (!st.ok()) return Fail(st);
  if (json) {
    std::cout << Json(resp) << "\n";
    return 0;
  }
  if (resp.limits().empty()) {
    std::cout << "No limits configured\n";
    return 0;
  }
  // As LSF's blimits: per limit and bucket, used/limit now ("-": no limit at this hour).
  auto of = [](double used, bool limited, double value) {
    return absl::StrCat(used, "/", limited ? absl::StrCat(value) : std::string("-"));
  };
  for (const auto& l : resp.limits()) {
    std::cout << "LIMIT " << l.name() << " (" << l.consumers() << ")";
    if (!l.slots().empty()) std::cout << " slots: " << l.slots();
    if (!l.jobs().empty()) std::cout << " jobs: " << l.jobs();
    if (!l.resources().empty()) std::cout << " resources: " << l.resources();
    std::cout << "\n";
    std::vector<std::string> header{l.per().empty() ? "CONSUMERS" : absl::StrJoin(l.per(), "/")};
    if (!l.slots().empty()) header.push_back("SLOTS");
    if (!l.jobs().empty()) header.push_back("JOBS");
    std::vector<std::string> names;
    for (const auto& [name, v] : l.resources_now()) names.push_back(name);
    for (const auto& name : names) header.push_back(absl::AsciiStrToUpper(name));
    std::vector<std::vector<std::string>> rows{header};
    auto row = [&](const pb::LimitBucket& b) {
      std::vector<std::string> r{b.key().empty() ? "-" : absl::StrJoin(b.key(), "/")};
      if (!l.slots().empty()) r.push_back(of(b.slots(), l.has_slots_now(), l.slots_now()));
      if (!l.jobs().empty()) r.push_back(of(b.jobs(), l.has_jobs_now(), l.jobs_now()));
      for (const auto& name : names) {
        auto used = b.resources().find(name);
        r.push_back(of(used == b.resources().end() ? 0 : used->second, true, l.resources_now().at(name)));
      }
      rows.push_back(r);
    };
    for (const auto& b : l.buckets()) row(b);
    if (l.buckets().empty()) row(pb::LimitBucket());
    Table(rows);
    std::cout << "\n";
  }
  return 0;
}

int Logs(Cli& cli, const Invocation& in) {
  auto& stub = cli.stub;
  auto ctx = [&cli](absl::string_view method, const google::protobuf::Message& request) { return cli.Ctx(method, request); };

  pb::ReadLogRequest req;
  int64_t id = 0;
  if (!ParseId(in.args[0], &id)) return Fail("logs: \"" + in.args[0] + "\" is not a job id");
  if (in.Has("e")) req.set_stderr(true);
  if (in.Has("f")) req.set_follow(true);
  if (in.Has("t")) {
    int task = 0;
    if (!absl::SimpleAtoi(in.Get("t"), &task) || task < 0) return Fail("logs: -t needs a task index");
    req.set_task_index(task);
  }
  req.set_job_id(id);
  // -f follows until the job ends, across a restart of the master (as tail -F would).
  FollowOptions options;
  if (req.follow()) options.reconnects = 50;
  std::cout << std::flush;
  if (absl::Status s = FollowLog(stub.get(), ctx, req, STDOUT_FILENO, options); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  return 0;
  }

int Exec(Cli& cli, const Invocation& in) {
  int64_t id = 0;
  if (!ParseId(in.args[0], &id)) return Fail("exec: \"" + in.args[0] + "\" is not a job id");
  int task = 0;
  if (in.Has("task") && (!absl::SimpleAtoi(in.Get("task"), &task) || task < 0)) {
    return Fail("exec: --task needs a task index, got \"" + in.Get("task") + "\"");
  }
  std::vector<std::string> command(in.args.begin() + 1, in.args.end());
  if (!command.empty() && command[0] == "--") command.erase(command.begin());
  if (command.empty()) {
    std::cerr << "nexec: exec: the command to run: nexec exec ID -- COMMAND [ARG...]\n";
    return 2;
  }
  const bool tty = in.Has("t") || in.Has("it");
  const bool input = in.Has("i") || in.Has("it");
  std::cout << std::flush;
  return jc::nexec::RunExec(cli.stub.get(), cli.auth, id, task, std::move(command), input, tty);
}

using Command = jc::cli::Command<Cli>;

const jc::cli::Tool& NexecTool() {
  static const auto* tool = new jc::cli::Tool{
      "nexec",
      "",
      "COMMAND [ARGS] [flags]",
      {
          {"master", 0, true,
           "the master, host:port, or every master: A,B,C (the one that leads is called; default: $NEXEC_MASTER, "
           "else 127.0.0.1:6800)"},
          {"munge_socket", 0, true, "munged's socket (default: $NEXEC_MUNGE_SOCKET, else munge's own)"},
          {"json", 0, false, "print JSON instead of a table"},
          {"help", 'h', false, "show help"},
      },
      "\nExit codes: 0 done; 1 the master refused or failed; 2 bad usage.\n"
      "Run \"nexec COMMAND --help\" for a command's flags.\n"};
  return *tool;
}

FlagSpec Short(char name, std::string help, bool takes_value = true) {
  return FlagSpec{std::string(1, name), name, takes_value, std::move(help)};
}
FlagSpec Lsf(std::string name, std::string help, bool takes_value = true) {
  return FlagSpec{std::move(name), 0, takes_value, std::move(help), /*single_dash=*/true};
}

std::vector<Command> Commands() {
  std::vector<Command> c;
  Command submit{{"submit"},
                 "COMMAND...",
                 "Submit a job (bsub): COMMAND runs on the slots it gets, as you, in this directory.\n"
                 "Prints \"Job <ID> is submitted.\" With --cron, a timed job instead, submitted each time\n"
                 "SCHEDULE is due (\"0 2 * * *\", @daily, \"2:00\", \"1:8:0\").",
                 {Short('n', "slots N, or MIN,MAX: elastic, grows toward MAX as slots are free (events in "
                             "$NEXEC_EVENT_FILE: grow|shrink HOST SLOTS)"),
                  Short('R', "resource requirement (select[...] order[...] rusage[...] span[...] same[...])"),
                  Short('q', "queue"), Short('J', "job name"), Short('o', "stdout file"), Short('e', "stderr file"),
                  {"gpus", 0, true, "GPUs per slot"},
                  {"exclusive", 0, false, "the hosts only for this job"},
                  {"user", 0, true, "run as this account (root and administrators)"},
                  {"key", 0, true, "a submission key: sent again, answered with the job it made"},
                  {"env", 0, true, "the environment the tasks get: all (default: this one), none, or VAR,..."},
                  Short('E', "pre-exec command; the job starts when it exits 0"),
                  Lsf("Ep", "post-exec command, run after the job"),
                  Short('P', "project (what limits over projects count)"),
                  Lsf("app", "application profile (what limits over applications count)"),
                  Short('W', "run limit: [hours:]minutes or a duration (90s, 2h); killed past it"),
                  Short('I', "interactive: stdin and output here", false),
                  Lsf("Ip", "interactive on a pseudo-terminal", false),
                  Lsf("Is", "interactive on a pseudo-terminal (as -Ip)", false),
                  {"image", 0, true, "run in this OCI image (registry/repository@sha256:...), as you, pulled once per host"},
                  {"cron", 0, true, "a timed job: submitted each time SCHEDULE is due"},
                  {"start-timeout", 0, true, "timed jobs: a run not started within this is killed"},
                  {"overlap", 0, true, "timed jobs: skip, queue or kill a run still going when the next is due"},
                  {"retries", 0, true, "timed jobs: runs retried after a failure"},
                  {"pack", 0, true,
                   "a job pack (bsub -pack): FILE (- for stdin) holds one submission a line, its flags then its "
                   "command; sent in a few calls"}},
                 0,
                 1 << 20,
                 Submit,
                 /*args_end_flags=*/true};
  c.push_back(std::move(submit));
  c.push_back({{"jobs"}, "", "List jobs (bjobs): unfinished ones, or all with -a",
               {Short('u', "only this user's"), Short('q', "only this queue's"), Short('a', "finished jobs too", false)},
               0, 0, Jobs});
  c.push_back({{"job"}, "ID", "One job in full: tasks, hosts, usage, history", {}, 1, 1, JobOrControl});
  for (const auto& [verb, what] : std::vector<std::pair<std::string, std::string>>{
           {"kill", "Kill a job (bkill)"},
           {"suspend", "Suspend a job (bstop)"},
           {"resume", "Resume a suspended job (bresume)"},
           {"requeue", "Requeue a job: killed, then pending again (brequeue)"},
           {"rerun", "Run a finished job again"}}) {
    c.push_back({{verb}, "ID", what, {}, 1, 1, JobOrControl});
  }
  c.push_back({{"hosts"}, "", "List hosts (bhosts); -l: every resource of every host",
               {Short('l', "every resource of every host", false)}, 0, 0, HostsOrQueues});
  c.push_back({{"queues"}, "", "List queues (bqueues)", {}, 0, 0, HostsOrQueues});
  c.push_back({{"masters"}, "", "Each master given (--master A,B,C): leading or standing by, its term, the leader", {},
               0, 0, Masters});
  c.push_back({{"limits"}, "", "Each limit's use now, per consumer (blimits)", {}, 0, 0, Limits});
  c.push_back({{"shares"}, "", "Fair-share trees: shares, usage, priority (bhpart)", {Short('q', "only this queue")}, 0,
               0, Shares});
  c.push_back({{"cron"}, "[ID]", "Timed jobs: schedule, next run, runs; one in full with its ID", {}, 0, 1, CronList});
  c.push_back({{"cron", "rm"}, "ID", "Remove a timed job (its last run is left as it is)", {}, 1, 1, CronRemove});
  c.push_back({{"logs"}, "ID", "A job's output (bpeek)",
               {Short('t', "a task nexec-run started, by index"), Short('e', "stderr", false),
                Short('f', "follow until the job ends", false)},
               1, 1, Logs});
  Command exec{{"exec"},
               "ID -- COMMAND...",
               "Run COMMAND in a running job's task (as kubectl exec): as the job's account, in its\n"
               "environment, directory and cgroup, or in its container. Exits with COMMAND's status.",
               {Short('i', "pass this stdin to the command", false),
                Short('t', "run it on a pseudo-terminal (stderr joins stdout)", false),
                Lsf("it", "-i and -t: an interactive shell", false),
                {"task", 0, true, "a task nexec-run started, by index (default 0: the job's command)"}},
               2,
               1 << 20,
               Exec,
               /*args_end_flags=*/true};
  c.push_back(std::move(exec));
  c.push_back({{"version"}, "", "nexec's version", {}, 0, 0, [](Cli&, const Invocation&) {
                 std::cout << jc::VersionLine("nexec") << "\n";
                 return 0;
               }});
  c.push_back({{"completion"}, "SHELL", "A completion script for SHELL, bash or zsh: source <(nexec completion bash)",
               {}, 1, 1, nullptr});
  return c;
}

// The most a pack file may hold: far more than a thousand packs of jobs, far less than a
// machine's memory (/dev/zero as the file read until the CLI was killed: helper-79).
constexpr size_t kMaxPackFileBytes = 256 << 20;

// The pack file's text: FILE, or stdin for "-"; a pipe (`--pack <(generate)`) as well as a
// regular file. InvalidArgument for a directory or one past kMaxPackFileBytes.
absl::StatusOr<std::string> ReadPackFile(const std::string& file) {
  const int fd = file == "-" ? dup(0) : open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError("is a directory, not a file of submissions");
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      close(fd);
      return absl::InvalidArgumentError(std::strerror(saved));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxPackFileBytes) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxPackFileBytes >> 20, " MiB: split it"));
    }
  }
  close(fd);
  return text;
}

// What a job pack's line may not ask for: what a pack cannot do (a terminal, a timed job),
// or what belongs to the whole command (where the master is, how to print).
constexpr const char* kNotInPackLines[] = {"pack",    "cron",   "start-timeout", "overlap", "retries", "I",
                                           "Ip",      "Is",     "master",        "munge_socket", "json"};

// nexec submit --pack FILE (LSF's bsub -pack): every line of FILE a submission, its flags as
// `nexec submit` takes them and then its command, taken verbatim from the line as sh would
// get it. Empty lines and lines starting with # are skipped. A line that does not parse
// refuses the whole file before anything is sent; the master takes or refuses each line's
// job on its own, and each line is answered: "Job <ID> is submitted." or why not.
int SubmitPack(Cli& cli, const Invocation& in) {
  if (!in.args.empty()) return Fail("submit: --pack takes no command: each line of the file is a submission");
  for (const auto& [flag, value] : in.flags) {
    if (flag != "pack" && flag != "json" && flag != "master" && flag != "munge_socket") {
      return Fail("submit: --pack takes no other flag (--" + flag + "): each line of the file has its own");
    }
  }
  const std::string file = in.Get("pack");
  absl::StatusOr<std::string> read = ReadPackFile(file);
  if (!read.ok()) {
    std::cerr << "nexec: submit: --pack " << file << ": " << read.status().message() << "\n";
    return 2;
  }
  const std::string& text = *read;
  const std::vector<Command> commands = Commands();
  const auto infos = jc::cli::Infos(commands);
  std::vector<int> lines;  // each submission's line number
  std::vector<pb::SubmitRequest> submissions;
  std::vector<std::string> errors;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    const std::string where = file + ":" + std::to_string(number) + ": ";
    if (absl::EndsWith(line, "\r")) line.remove_suffix(1);  // a CRLF file
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty() || trimmed[0] == '#') continue;
    // A line is text: a NUL would cut its command short where it runs, a carriage return
    // inside it is a file of CR line endings read as one line, and bytes that are not UTF-8
    // fail the whole pack's call (attacker helper-79).
    if (line.find('\0') != absl::string_view::npos) {
      errors.push_back(where + "a NUL byte in the line (is the file text?)");
      continue;
    }
    if (line.find('\r') != absl::string_view::npos) {
      errors.push_back(where + "a carriage return inside the line (are the file's lines ended by CR alone?)");
      continue;
    }
    if (!jc::IsUtf8(line)) {
      errors.push_back(where + "the line is not UTF-8 text");
      continue;
    }
    auto words = jc::cli::SplitShellWords(line);
    if (!words.ok()) {
      errors.push_back(where + std::string(words.status().message()));
      continue;
    }
    std::vector<std::string> argv{"submit"};
    for (const auto& w : *words) argv.push_back(w.text);
    auto parsed = jc::cli::Parse(NexecTool(), infos, argv);
    if (!parsed.ok() || parsed->help || parsed->command < 0 || commands[parsed->command].path[0] != "submit") {
      errors.push_back(where + (parsed.ok() ? "not a submission" : std::string(parsed.status().message())));
      continue;
    }
    const Invocation& line_in = parsed->invocation;
    bool refused = false;
    for (const char* flag : kNotInPackLines) {
      if (line_in.Has(flag)) {
        // As the line spells it: -I, -Ip and -Is with one dash (bsub's), the rest with two.
        const std::string name = flag;
        const bool one_dash = name.size() == 1 || name == "Ip" || name == "Is";
        errors.push_back(where + (one_dash ? "-" : "--") + name + " is not for a job pack's line");
        refused = true;
        break;
      }
    }
    if (refused) continue;
    // The command as written: from its first word to the end of the line (args_end_flags:
    // the arguments are the line's last words).
    std::string command;
    if (!line_in.args.empty()) {
      command = std::string(absl::StripTrailingAsciiWhitespace(
          line.substr((*words)[words->size() - line_in.args.size()].start)));
    }
    absl::StatusOr<Submission> sub = SubmissionOf(line_in, command);
    if (!sub.ok()) {
      errors.push_back(where + std::string(sub.status().message()));
      continue;
    }
    lines.push_back(number);
    submissions.push_back(std::move(sub->request));
  }
  // A file that does not say what to submit is bad usage (exit 2), as a bad command line is.
  if (!errors.empty()) {
    for (const auto& e : errors) std::cerr << "nexec: " << e << "\n";
    std::cerr << "nexec: submit: --pack " << file << ": nothing submitted (" << errors.size() << " line(s) to mend)\n";
    return 2;
  }
  if (submissions.empty()) {
    std::cerr << "nexec: submit: --pack " << file << ": no submission in it\n";
    return 2;
  }
  const size_t total = submissions.size();
  std::vector<absl::StatusOr<int64_t>> results;
  for (const pb::SubmitPackRequest& pack : jc::nexec::SplitIntoPacks(std::move(submissions))) {
    pb::SubmitPackResponse answer;
    grpc::Status st = cli.Call("SubmitPack", pack, &answer, &pb::Master::Stub::SubmitPack);
    for (auto& r : jc::nexec::PackResults(st, answer, pack.submissions_size())) results.push_back(std::move(r));
    if (!st.ok()) {
      // The rest are not sent: the master is gone or refuses this client.
      while (results.size() < total) {
        results.push_back(absl::UnavailableError("not sent: an earlier pack's call failed"));
      }
      break;
    }
  }
  int refused = 0;
  nlohmann::json jobs = nlohmann::json::array();
  for (size_t i = 0; i < total; ++i) {
    const std::string where = file + ":" + std::to_string(lines[i]);
    if (results[i].ok()) {
      // As Submit's --json prints a job id: a string (protobuf's mapping of an int64).
      jobs.push_back({{"line", lines[i]}, {"job_id", std::to_string(*results[i])}});
      if (!cli.json) std::cout << "Job <" << *results[i] << "> is submitted. (" << where << ")\n";
    } else {
      ++refused;
      const std::string why(results[i].status().message());
      jobs.push_back({{"line", lines[i]}, {"error", why}});
      std::cerr << "nexec: " << where << ": " << why << "\n";
    }
  }
  if (cli.json) std::cout << nlohmann::json{{"jobs", jobs}}.dump() << "\n";
  if (refused > 0) return Fail("submit: --pack " + file + ": " + std::to_string(refused) + " of " +
                               std::to_string(total) + " not submitted");
  return 0;
}

}  // namespace


int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--version") args[0] = "version";
  const std::vector<Command> commands = Commands();
  const auto infos = jc::cli::Infos(commands);
  auto parsed = jc::cli::Parse(NexecTool(), infos, args);
  if (!parsed.ok()) {
    std::cerr << "nexec: " << parsed.status().message() << "\n";
    return 2;
  }
  if (parsed->help) {
    // Asked for: stdout, success. No command given: stderr, exit 2.
    const bool asked = std::any_of(args.begin(), args.end(),
                                   [](const std::string& a) { return a == "--help" || a == "-h" || a == "help"; });
    (asked ? std::cout : std::cerr) << jc::cli::Help(NexecTool(), infos, parsed->words);
    return asked ? 0 : 2;
  }
  const Command& command = commands[static_cast<size_t>(parsed->command)];
  const Invocation& in = parsed->invocation;
  if (command.path[0] == "completion") {
    auto script = jc::cli::Completion(NexecTool(), infos, in.args[0]);
    if (!script.ok()) {
      std::cerr << "nexec: " << script.status().message() << "\n";
      return 2;
    }
    std::cout << *script;
    return 0;
  }
  Cli cli;
  const char* env_master = std::getenv("NEXEC_MASTER");
  const std::string master = in.Get("master", env_master != nullptr ? env_master : "127.0.0.1:6800");
  // Any answer size: `nexec jobs -a` lists every job the master holds (up to
  // --max_ended_jobs ended ones), well past gRPC's default of 4 MB a message.
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(-1);
  auto masters = jc::nexec::MasterList::Parse(master, channel_args);
  if (!masters.ok()) return Fail(std::string(masters.status().message()));
  cli.masters = std::move(*masters);
  // NEXEC_AUTH=none: a master run with --auth=none (development only) signs nothing.
  const char* env_auth = std::getenv("NEXEC_AUTH");
  auto auth = jc::nexec::MungeAuthFromFlags(env_auth != nullptr && *env_auth != 0 ? env_auth : "munge",
                                            in.Get("munge_socket"));
  if (!auth.ok()) return Fail("NEXEC_AUTH: " + std::string(auth.status().message()));
  cli.auth = *auth;
  // Who leads is believed only when the master signed it (not whoever listens at a listed
  // address while its master is down).
  auto master_accounts = jc::nexec::MasterList::MasterAccounts();
  if (!master_accounts.ok()) return Fail(std::string(master_accounts.status().message()));
  cli.masters->Prove(cli.auth, *master_accounts);
  std::string leader = cli.masters->Current();
  if (cli.masters->addresses().size() > 1 && command.path[0] != "masters") {
    // Several masters: the one that leads, waited for over a failover (the lease's TTL).
    auto found = cli.masters->FindLeader(absl::Seconds(20));
    if (!found.ok()) return Fail(std::string(found.status().message()));
    leader = *found;
  }
  cli.stub = pb::Master::NewStub(grpc::CreateCustomChannel(leader, grpc::InsecureChannelCredentials(), channel_args));
  cli.leader = leader;
  cli.master_uids = *master_accounts;
  cli.json = in.Has("json");
  cli.command = command.path[0];
  return command.run(cli, in);
}
