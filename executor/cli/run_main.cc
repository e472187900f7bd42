// nexec-run: starts a command on a host of the current job's allocation through that
// host's agent, never SSH (SPEC B10; LSF's blaunch). It forwards the task's stdout and
// stderr and the signals it gets, and exits with the task's exit code, so MPI launchers
// use it where they would use rsh or ssh:
//
//   mpiexec -launcher rsh -launcher-exec nexec-run ...        (MPICH's Hydra)
//   mpirun --mca plm_rsh_agent nexec-run ...                   (Open MPI)
//   nexec-run --torch node2 python3 train.py                   (torch.distributed env)
//   nexec-run -z "$NEXEC_HOSTS" ./worker                        (LSF's blaunch -z: one task
//                                                               per entry, in parallel)
//
// Inside a job only: the job comes from $NEXEC_JOBID, the master from $NEXEC_MASTER and
// munged from $NEXEC_MUNGE_SOCKET, which the agent sets for every task.

#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "executor/auth/munge_auth.h"
#include "executor/client/master_list.h"
#include "executor/cli/environment.h"
#include "executor/cli/follow_log.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "common/version.h"

namespace pb = ::nexec::v1;

namespace {

constexpr const char* kUsage =
    "usage: nexec-run [--torch] [--env all|none|VAR,...] [--master=host:port[,host:port...]] HOST command [args...]\n"
    "       nexec-run [options] -z \"HOST HOST ...\" command [args...]\n"
    "Runs command on HOST, a host of the current nexec job's allocation, through its agent;\n"
    "forwards output and signals and exits with the command's exit code.\n"
    "  -z       one task per listed host (a host listed twice gets two), started together;\n"
    "           exits with the first non-zero exit code, in list order (0 when all succeed).\n"
    "           If any cannot start, those that did are killed and nothing runs.\n"
    "  --torch  set MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and LOCAL_RANK (torch.distributed)\n"
    "  --env    the environment the task gets (default all: this one's)\n";

int Fail(const std::string& message) {
  std::cerr << "nexec-run: " << message << "\n";
  return 1;
}

// Signals nexec-run forwards to the task (what an MPI launcher or a user sends it).
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const char* env_master = std::getenv("NEXEC_MASTER");
  std::string master = env_master != nullptr ? env_master : "127.0.0.1:6800";
  std::string munge_socket, env = "all";
  bool torch = false;
  std::vector<std::string> hosts;  // -z
  bool many = false;
  size_t i = 0;
  for (; i < args.size() && !args[i].empty() && args[i][0] == '-'; ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--version") {
      std::cout << jc::VersionLine("nexec-run") << "\n";
      return 0;
    }
    if (a == "--torch") {
      torch = true;
    } else if (a.rfind("--master=", 0) == 0) {
      master = a.substr(9);
    } else if (a.rfind("--munge_socket=", 0) == 0) {
      munge_socket = a.substr(15);
    } else if (a == "--env" && i + 1 < args.size()) {
      env = args[++i];
    } else if (a.rfind("--env=", 0) == 0) {
      env = a.substr(6);
    } else if (a == "-z" && i + 1 < args.size()) {
      many = true;
      hosts = absl::StrSplit(args[++i], absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
    } else if (a == "--") {
      ++i;
      break;
    } else {
      std::cerr << "nexec-run: unknown option " << a << "\n" << kUsage;
      return 2;
    }
  }
  if (!many && i < args.size()) hosts = {args[i++]};
  if (hosts.empty() || args.size() < i + 1) {
    std::cerr << kUsage;
    return 2;
  }
  const char* job_env = std::getenv("NEXEC_JOBID");
  int64_t job_id = 0;
  if (job_env == nullptr || !absl::SimpleAtoi(job_env, &job_id) || job_id <= 0) {
    return Fail("not inside a nexec job ($NEXEC_JOBID is not set); it starts tasks of a running job on its hosts");
  }
  pb::RunTaskRequest req;
  req.set_job_id(job_id);
  // As rsh and ssh do: the arguments, joined by spaces, are the remote shell's command line.
  req.set_command(absl::StrJoin(args.begin() + static_cast<long>(i), args.end(), " "));
  req.set_torch(torch);
  for (auto& [k, v] : jc::nexec::EnvironmentToSend(env, std::cerr)) (*req.mutable_env())[k] = v;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) req.set_cwd(cwd);

  // Signals are taken by one thread (sigwait) from here on, and forwarded.
  sigset_t forwarded;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  pthread_sigmask(SIG_BLOCK, &forwarded, nullptr);

  // $NEXEC_MASTER may list several masters (one leads): the task starts through the leader.
  auto masters = jc::nexec::MasterList::Parse(master);
  if (!masters.ok()) return Fail(std::string(masters.status().message()));
  // NEXEC_AUTH=none: a master run with --auth=none (development only) signs nothing.
  const char* env_auth = std::getenv("NEXEC_AUTH");
  auto auth_or = jc::nexec::MungeAuthFromFlags(env_auth != nullptr && *env_auth != 0 ? env_auth : "munge", munge_socket);
  if (!auth_or.ok()) return Fail("NEXEC_AUTH: " + std::string(auth_or.status().message()));
  const jc::nexec::MungeAuth auth = *auth_or;
  auto master_accounts = jc::nexec::MasterList::MasterAccounts();
  if (!master_accounts.ok()) return Fail(std::string(master_accounts.status().message()));
  (*masters)->Prove(auth, *master_accounts);  // who leads: believed only when signed
  std::string leader = (*masters)->Current();
  if ((*masters)->addresses().size() > 1) {
    auto found = (*masters)->FindLeader(absl::Seconds(20));
    if (!found.ok()) return Fail(std::string(found.status().message()));
    leader = *found;
  }
  auto stub = pb::Master::NewStub(grpc::CreateChannel(leader, grpc::InsecureChannelCredentials()));
  auto call = [&](absl::string_view method, const google::protobuf::Message& request, bool forever = false) {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(forever ? std::chrono::system_clock::time_point::max()
                            : std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (absl::Status s = auth.Sign(c.get(), method, request); !s.ok()) std::exit(Fail(std::string(s.message())));
    return c;
  };
  // A call whose answer is acted on: in a munge session, taken only when the master's
  // account signed it (not whoever listens at the master's address while it is down).
  auto checked = [&](const char* method, const auto& request, auto* response, auto rpc) {
    jc::nexec::MungeAuth::AnswerFrom from;
    from.response = response;
    from.uids = *master_accounts;
    return auth.Call(
        leader, method, request, std::chrono::seconds(30),
        [&](grpc::ClientContext* c) { return (stub.get()->*rpc)(c, request, response); }, &from);
  };

  // Start every task, in parallel (one RunTask each; the master commits them together).
  std::vector<pb::Task> tasks(hosts.size());
  std::vector<grpc::Status> started(hosts.size());
  {
    std::vector<std::thread> starters;
    for (size_t h = 0; h < hosts.size(); ++h) {
      starters.emplace_back([&, h] {
        pb::RunTaskRequest one = req;
        one.set_host(hosts[h]);
        started[h] = checked("RunTask", one, &tasks[h], &pb::Master::Stub::RunTask);
      });
      // --torch ranks follow call order: keep the list's order for them.
      if (torch) starters.back().join();
    }
    for (auto& t : starters) {
      if (t.joinable()) t.join();
    }
  }
  for (size_t h = 0; h < hosts.size(); ++h) {
    if (started[h].ok()) continue;
    // All or none: the tasks that did start are ended, and the first error is reported.
    // A kill the master could not pass on (busy, an agent that did not answer in time) is
    // sent again; one that still fails is said, since that task may run on.
    for (size_t k = 0; k < hosts.size(); ++k) {
      if (!started[k].ok()) continue;
      pb::SignalTaskRequest s;
      s.set_job_id(job_id);
      s.set_task_index(tasks[k].index());
      s.set_signal(SIGKILL);
      grpc::Status killed;
      for (int attempt = 0; attempt < 3; ++attempt) {
        pb::ControlResponse resp;
        auto c = call("SignalTask", s);
        killed = stub->SignalTask(c.get(), s, &resp);
        // NOT_FOUND: the task is no longer running anywhere, which is what was wanted.
        if (killed.ok() || killed.error_code() == grpc::StatusCode::NOT_FOUND) break;
      }
      if (!killed.ok() && killed.error_code() != grpc::StatusCode::NOT_FOUND) {
        std::cerr << "nexec-run: " << hosts[k] << ": the task started there could not be killed ("
                  << killed.error_message() << "); it may still run\n";
      }
    }
    const grpc::Status& st = started[h];
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE && st.error_message().find("host") == std::string::npos) {
      return Fail("cannot reach the master at " + master + " (" + st.error_message() + ")");
    }
    return Fail(many ? hosts[h] + ": " + st.error_message() : st.error_message());
  }

  std::thread signals([&] {
    while (true) {
      int sig = 0;
      if (sigwait(&forwarded, &sig) != 0) continue;
      for (const pb::Task& task : tasks) {
        pb::SignalTaskRequest s;
        s.set_job_id(job_id);
        s.set_task_index(task.index());
        s.set_signal(sig);
        pb::ControlResponse resp;
        auto c = call("SignalTask", s);
        grpc::Status st = stub->SignalTask(c.get(), s, &resp);
        if (!st.ok()) std::cerr << "nexec-run: forwarding signal " << sig << ": " << st.error_message() << "\n";
      }
    }
  });
  signals.detach();

  // Each task's stdout and stderr, followed until it ends (across a master restart).
  auto follow = [&](int task_index, bool stderr) {
    pb::ReadLogRequest r;
    r.set_job_id(job_id);
    r.set_task_index(task_index);
    r.set_stderr(stderr);
    r.set_follow(true);
    jc::nexec::FollowOptions keep_on;
    keep_on.reconnects = 50;
    keep_on.task_exists = true;  // started, so its output comes
    auto ctx = [&](absl::string_view method, const google::protobuf::Message& request) { return call(method, request); };
    // How the tasks ended is asked below either way; output given up on is said here.
    if (absl::Status s = jc::nexec::FollowLog(stub.get(), ctx, r, stderr ? STDERR_FILENO : STDOUT_FILENO, keep_on);
        !s.ok()) {
      std::cerr << "nexec-run: task " << task_index << "'s " << (stderr ? "stderr" : "stdout")
                << " is no longer shown: " << s.message() << "\n";
    }
  };
  std::vector<std::thread> followers;
  for (const pb::Task& task : tasks) {
    followers.emplace_back(follow, task.index(), false);
    followers.emplace_back(follow, task.index(), true);
  }
  for (auto& t : followers) t.join();

  // The streams end when the tasks exited (or the job ended): the first non-zero exit
  // code, in list order, is ours.
  for (int tries = 0; tries < 100; ++tries) {
    pb::JobRef ref;
    ref.set_job_id(job_id);
    pb::Job job;
    if (checked("GetJob", ref, &job, &pb::Master::Stub::GetJob).ok()) {
      bool ended = job.state() == pb::DONE || job.state() == pb::EXIT;
      int code = 0;
      bool all = true;
      for (const pb::Task& task : tasks) {
        if (task.index() >= job.tasks_size() || job.tasks(task.index()).state() != pb::TASK_EXITED) {
          all = false;
          if (ended && code == 0) code = 128 + SIGKILL;  // ended with its job
          continue;
        }
        int exit = job.tasks(task.index()).exit_code();
        if (code == 0 && exit != 0) code = exit > 255 ? 255 : exit;
      }
      if (all || ended) return code;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Fail("the tasks' end was not reported by the master");
}
