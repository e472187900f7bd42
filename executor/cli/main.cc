// nexec: the executor's command line (SPEC B11).
//   nexec submit [-n N[,MAX]] [-R req] [-q queue] [-J name] [-o out] [-e err] [--gpus N]
//                [--exclusive] [--user U] [--key K] [--env all|none|VAR,...] [-E pre] [-Ep post]
//                [-P project] [-app application] [-I | -Ip] [--] command...
//   nexec jobs [-u user] [-q queue] [-a] | job ID | hosts [-l] | queues | limits
//   nexec kill|suspend|resume|requeue ID
//   nexec logs ID [-t TASK] [-e] [-f]
// Every listing takes --json. The master is --master=host:port or $NEXEC_MASTER. Every call
// carries a munge credential from --munge_socket, $NEXEC_MUNGE_SOCKET or munge's own socket.

#include <grpcpp/grpcpp.h>
#include <google/protobuf/util/json_util.h>
#include <pwd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "executor/auth/munge_auth.h"
#include "executor/cli/environment.h"
#include "executor/cli/run_limit.h"
#include "executor/cli/interactive.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "common/version.h"

namespace pb = ::nexec::v1;

namespace {

constexpr const char* kUsage =
    "usage: nexec [--master=host:port] [--munge_socket=PATH] COMMAND ...\n"
    "  submit [-n N[,MAX]] [-R req] [-q queue] [-J name] [-o out] [-e err] [--gpus N]\n"
    "         [--exclusive] [--user U] [--key K] [--env all|none|VAR,...] [-E pre] [-Ep post]\n"
    "         [-P project] [-app application] [-W limit] [-I | -Ip] [--image REF@DIGEST] [--] command...\n"
    "         --image: run in this OCI image (registry/repository@sha256:...), as you,\n"
    "         with your directory and output; each host pulls it once\n"
    "         -n N,MAX: elastic, starts with N slots and grows toward MAX as slots are\n"
    "         free (events in $NEXEC_EVENT_FILE: grow|shrink HOST SLOTS)\n"
    "         -I: interactive, stdin and output here; -Ip: on a pseudo-terminal\n"
    "         -W: run limit, [hours:]minutes or a duration (90s, 2h); killed past it\n"
    "         --env: the environment the job's tasks get (default all: this one's)\n"
    "         --cron SCHEDULE [--start-timeout T] [--overlap skip|queue|kill] [--retries N]:\n"
    "         a timed job instead, submitted each time SCHEDULE is due (\"0 2 * * *\",\n"
    "         @daily, \"2:00\", \"1:8:0\"); a run not started within T is killed\n"
    "  cron [ID] [--json] | cron rm ID              timed jobs: schedule, next run, runs\n"
    "  jobs [-u user] [-q queue] [-a] [--json]      list jobs (-a: finished too)\n"
    "  job ID [--json]                              one job in full\n"
    "  hosts [-l] [--json] | queues [--json]        -l: every resource of every host\n"
    "  limits [--json]                              each limit's use now, per consumer\n"
    "  shares [-q queue] [--json]                   fair-share trees: shares, usage, priority\n"
    "  kill ID | suspend ID | resume ID | requeue ID | rerun ID   (rerun: a finished job again)\n"
    "  logs ID [-t TASK] [-e] [-f]                  task output (-t: a task nexec-run started;\n"
    "                                               -e stderr, -f follow)\n"
    "The master is --master or $NEXEC_MASTER (default 127.0.0.1:6800).\n";

// Asked for (--help): stdout, success. After a mistake: stderr, exit 2.
int Usage(bool asked = false) {
  (asked ? std::cout : std::cerr) << kUsage;
  return asked ? 0 : 2;
}


int Fail(const std::string& message) {
  std::cerr << "nexec: " << message << "\n";
  return 1;
}

int Fail(const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return Fail("cannot reach the master (" + s.error_message() + "); is nexec-master running?");
  }
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const char* env_master = std::getenv("NEXEC_MASTER");
  std::string master = env_master != nullptr ? env_master : "127.0.0.1:6800";
  std::string munge_socket;
  while (!args.empty() && (args[0].rfind("--master=", 0) == 0 || args[0].rfind("--munge_socket=", 0) == 0)) {
    if (args[0].rfind("--master=", 0) == 0) {
      master = args[0].substr(9);
    } else {
      munge_socket = args[0].substr(15);
    }
    args.erase(args.begin());
  }
  if (args.empty()) return Usage();
  if (args[0] == "-h" || args[0] == "--help" || args[0] == "help") return Usage(true);
  if (args[0] == "--version" || args[0] == "version") {
    std::cout << jc::VersionLine("nexec") << "\n";
    return 0;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  // `nexec COMMAND --help` too (submit reads it among its options, not in the command).
  for (const auto& a : args) {
    if (cmd != "submit" && (a == "--help" || a == "-h")) return Usage(true);
  }
  bool json = false;
  for (auto it = args.begin(); it != args.end();) {
    if (*it == "--json") {
      json = true;
      it = args.erase(it);
    } else {
      ++it;
    }
  }
  auto stub = pb::Master::NewStub(grpc::CreateChannel(master, grpc::InsecureChannelCredentials()));
  // Every call carries a munge credential: the master takes who we are from it (B9).
  const jc::nexec::MungeAuth auth = jc::nexec::MungeAuth::Munge(munge_socket);
  auto ctx = [&auth](absl::string_view method, const google::protobuf::Message& request) {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (absl::Status s = auth.Sign(c.get(), method, request); !s.ok()) std::exit(Fail(std::string(s.message())));
    return c;
  };

  if (cmd == "submit") {
    pb::SubmitRequest req;
    pb::JobSpec* s = req.mutable_spec();
    s->set_user(CurrentUser());
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) s->set_cwd(cwd);
    std::string env = "all";
    bool interactive = false, tty = false;
    pb::TimedJob timed;  // with --cron
    size_t i = 0;
    auto value = [&](const std::string& flag) -> std::optional<std::string> {
      if (i + 1 >= args.size()) return std::nullopt;
      return args[++i];
    };
    for (; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "--") {
        ++i;
        break;
      }
      if (a.empty() || a[0] != '-') break;
      std::optional<std::string> v;
      int n = 0;
      if (a == "--exclusive") {
        s->set_exclusive(true);
        continue;
      }
      if (a == "-I" || a == "-Ip" || a == "-Is") {  // LSF: -Ip and -Is with a pseudo-terminal
        interactive = true;
        tty = a != "-I";
        continue;
      }
      if (a == "--help" || a == "-h") return Usage(true);
      if (a != "-n" && a != "-R" && a != "-q" && a != "-J" && a != "-o" && a != "-e" &&
          a != "--gpus" && a != "--user" && a != "--key" && a != "--env" && a != "-E" && a != "-Ep" &&
          a != "-P" && a != "-app" && a != "-W" && a != "--cron" && a != "--start-timeout" && a != "--overlap" &&
          a != "--retries" && a != "--image") {
        return Fail("submit: unknown option " + a);
      }
      v = value(a);
      if (!v) return Fail("submit: " + a + " needs a value");
      if (a == "-n" && absl::StrContains(*v, ',')) {
        // Elastic (LSF's -n min,max): both whole numbers, the maximum not below the minimum.
        std::vector<std::string> parts = absl::StrSplit(*v, ',');
        int max = 0;
        if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &n) || !absl::SimpleAtoi(parts[1], &max) || n < 1) {
          return Fail("submit: -n needs N or MIN,MAX in whole numbers, got \"" + *v + "\"");
        }
        if (max < n) return Fail("submit: -n " + *v + ": the maximum (" + parts[1] + ") is below the minimum (" + parts[0] + ")");
        s->set_slots(n);
        s->set_max_slots(max);
      } else if (a == "-n" || a == "--gpus") {
        if (!absl::SimpleAtoi(*v, &n) || n < (a == "-n" ? 1 : 0)) {
          return Fail("submit: " + a + " needs a whole number, got \"" + *v + "\"");
        }
        a == "-n" ? s->set_slots(n) : s->set_gpus_per_slot(n);
      } else if (a == "-R") {
        s->set_requirement(*v);
      } else if (a == "--image") {
        s->set_image(*v);
      } else if (a == "-q") {
        s->set_queue(*v);
      } else if (a == "-J") {
        s->set_name(*v);
      } else if (a == "-o") {
        s->set_stdout_path(*v);
      } else if (a == "-e") {
        s->set_stderr_path(*v);
      } else if (a == "--env") {
        env = *v;
      } else if (a == "-E") {
        s->set_pre_exec(*v);
      } else if (a == "-Ep") {
        s->set_post_exec(*v);
      } else if (a == "-P") {
        s->set_project(*v);
      } else if (a == "-app") {
        s->set_app(*v);
      } else if (a == "-W") {
        auto limit = jc::nexec::ParseRunLimit(*v);
        if (!limit.ok()) return Fail("submit: -W: " + std::string(limit.status().message()));
        s->set_run_limit_seconds(absl::ToInt64Seconds(*limit));
      } else if (a == "--cron") {
        timed.set_schedule(*v);
      } else if (a == "--start-timeout") {
        auto timeout = jc::nexec::ParseRunLimit(*v);
        if (!timeout.ok()) return Fail("submit: --start-timeout: " + std::string(timeout.status().message()));
        timed.set_start_timeout_seconds(absl::ToInt64Seconds(*timeout));
      } else if (a == "--overlap") {
        timed.set_overlap(*v);
      } else if (a == "--retries") {
        if (!absl::SimpleAtoi(*v, &n) || n < 0) return Fail("submit: --retries needs a whole number, got \"" + *v + "\"");
        timed.set_retries(n);
      } else if (a == "--key") {
        s->set_submit_key(*v);  // sent again, the same key answers with the same job
      } else {
        s->set_user(*v);
      }
    }
    std::vector<std::string> command(args.begin() + static_cast<long>(i), args.end());
    if (command.empty()) return Fail("submit: no command given");
    for (auto& [k, v] : jc::nexec::EnvironmentToSend(env, std::cerr)) (*s->mutable_env())[k] = v;
    s->set_command(absl::StrJoin(command, " "));
    s->set_interactive(interactive);
    s->set_tty(tty);
    if (winsize ws{}; tty && isatty(0) && ioctl(0, TIOCGWINSZ, &ws) == 0) {
      s->set_tty_rows(ws.ws_row);
      s->set_tty_cols(ws.ws_col);
    }
    if (timed.schedule().empty() &&
        (timed.start_timeout_seconds() != 0 || !timed.overlap().empty() || timed.retries() != 0)) {
      return Fail("submit: --start-timeout, --overlap and --retries are for timed jobs (--cron)");
    }
    if (!timed.schedule().empty()) {
      *timed.mutable_spec() = *s;
      pb::TimedJob created;
      auto c = ctx("AddTimedJob", timed);
      grpc::Status st = stub->AddTimedJob(c.get(), timed, &created);
      if (!st.ok()) return Fail(st);
      if (json) {
        std::cout << Json(created) << "\n";
      } else {
        std::cout << "Timed job <" << created.id() << "> is created; next run at " << When(created.next_run()) << ".\n";
      }
      return 0;
    }
    pb::SubmitResponse resp;
    auto c = ctx("Submit", req);
    grpc::Status st = stub->Submit(c.get(), req, &resp);
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

  if (cmd == "jobs") {
    pb::ListJobsRequest req;
    bool all = false;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "-a") {
        all = true;
      } else if ((args[i] == "-u" || args[i] == "-q") && i + 1 < args.size()) {
        args[i] == "-u" ? req.set_user(args[i + 1]) : req.set_queue(args[i + 1]);
        ++i;
      } else {
        return Fail("jobs: unknown option " + args[i]);
      }
    }
    if (!all) {
      req.add_states(pb::PENDING);
      req.add_states(pb::RUNNING);
      req.add_states(pb::SUSPENDED);
    }
    pb::ListJobsResponse resp;
    auto c = ctx("ListJobs", req);
    grpc::Status st = stub->ListJobs(c.get(), req, &resp);
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

  if (cmd == "job" || cmd == "kill" || cmd == "suspend" || cmd == "resume" || cmd == "requeue" || cmd == "rerun") {
    int64_t id = 0;
    if (args.size() != 1 || !ParseId(args[0], &id)) return Fail(cmd + ": give one job id");
    pb::JobRef ref;
    ref.set_job_id(id);
    std::string method = cmd == "job" ? "GetJob" : cmd == "kill" ? "Kill" : cmd == "suspend" ? "Suspend"
                         : cmd == "resume" ? "Resume" : cmd == "rerun" ? "Rerun" : "Requeue";
    auto c = ctx(method, ref);
    if (cmd == "job") {
      pb::Job j;
      grpc::Status st = stub->GetJob(c.get(), ref, &j);
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
    grpc::Status st = cmd == "kill"      ? stub->Kill(c.get(), ref, &resp)
                      : cmd == "suspend" ? stub->Suspend(c.get(), ref, &resp)
                      : cmd == "resume"  ? stub->Resume(c.get(), ref, &resp)
                      : cmd == "rerun"   ? stub->Rerun(c.get(), ref, &resp)
                                         : stub->Requeue(c.get(), ref, &resp);
    if (!st.ok()) return Fail(st);
    std::cout << "Job <" << id << "> is being "
              << (cmd == "kill" ? "killed" : cmd == "suspend" ? "suspended"
                  : cmd == "resume" ? "resumed" : cmd == "rerun" ? "rerun" : "requeued")
              << ".\n";
    return 0;
  }

  if (cmd == "hosts" || cmd == "queues") {
    auto c = cmd == "hosts" ? ctx("ListHosts", pb::ListHostsRequest()) : ctx("ListQueues", pb::ListQueuesRequest());
    if (cmd == "hosts") {
      bool long_format = false;
      for (const auto& a : args) {
        if (a != "-l") return Fail("hosts: unknown option " + a);
        long_format = true;
      }
      pb::ListHostsResponse resp;
      grpc::Status st = stub->ListHosts(c.get(), {}, &resp);
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
    } else {
      pb::ListQueuesResponse resp;
      grpc::Status st = stub->ListQueues(c.get(), {}, &resp);
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

  if (cmd == "cron") {
    if (!args.empty() && args[0] == "rm") {
      int64_t id = 0;
      if (args.size() != 2 || !absl::SimpleAtoi(args[1], &id)) return Fail("cron rm: expected one timed job ID");
      pb::TimedJobRef ref;
      ref.set_id(id);
      pb::TimedJob removed;
      auto c = ctx("RemoveTimedJob", ref);
      grpc::Status st = stub->RemoveTimedJob(c.get(), ref, &removed);
      if (!st.ok()) return Fail(st);
      std::cout << "Timed job <" << id << "> is removed"
                << (removed.run_job_id() != 0 ? "; its last run, job <" + std::to_string(removed.run_job_id()) +
                                                    ">, is left as it is"
                                              : "")
                << ".\n";
      return 0;
    }
    int64_t only = 0;
    if (args.size() > 1 || (args.size() == 1 && !absl::SimpleAtoi(args[0], &only))) {
      return Fail("cron: expected [ID], or rm ID");
    }
    pb::ListTimedJobsRequest req;
    pb::ListTimedJobsResponse resp;
    auto c = ctx("ListTimedJobs", req);
    grpc::Status st = stub->ListTimedJobs(c.get(), req, &resp);
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

  if (cmd == "shares") {
    pb::ListSharesRequest req;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "-q" && i + 1 < args.size()) {
        req.set_queue(args[++i]);
      } else {
        return Fail("shares: unknown argument " + args[i]);
      }
    }
    pb::ListSharesResponse resp;
    auto c = ctx("ListShares", req);
    grpc::Status st = stub->ListShares(c.get(), req, &resp);
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

  if (cmd == "limits") {
    if (!args.empty()) return Fail("limits: unknown argument " + args[0]);
    pb::ListLimitsRequest req;
    pb::ListLimitsResponse resp;
    auto c = ctx("ListLimits", req);
    grpc::Status st = stub->ListLimits(c.get(), req, &resp);
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

  if (cmd == "logs") {
    pb::ReadLogRequest req;
    int64_t id = 0;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      int task = 0;
      if (a == "-e") {
        req.set_stderr(true);
      } else if (a == "-f") {
        req.set_follow(true);
      } else if (a == "-t") {
        if (i + 1 >= args.size() || !absl::SimpleAtoi(args[i + 1], &task) || task < 0) {
          return Fail("logs: -t needs a task index");
        }
        req.set_task_index(task);
        ++i;
      } else if (!ParseId(a, &id)) {
        return Fail("logs: unknown argument " + a);
      }
    }
    if (id == 0) return Fail("logs: give a job id");
    req.set_job_id(id);
    auto c = ctx("ReadLog", req);
    c->set_deadline(std::chrono::system_clock::time_point::max());  // -f follows until the job ends
    auto reader = stub->ReadLog(c.get(), req);
    pb::LogChunk chunk;
    while (reader->Read(&chunk)) std::cout << chunk.data() << std::flush;
    grpc::Status st = reader->Finish();
    if (!st.ok()) return Fail(st);
    return 0;
  }
  std::cerr << "nexec: unknown command \"" << cmd << "\"\n";
  return Usage();
}
