// nexec-run: starts a command on a host of the current job's allocation through that
// host's agent, never SSH (SPEC B10; LSF's blaunch). It forwards the task's stdout and
// stderr and the signals it gets, and exits with the task's exit code, so MPI launchers
// use it where they would use rsh or ssh:
//
//   mpiexec -launcher rsh -launcher-exec nexec-run ...        (MPICH's Hydra)
//   mpirun --mca plm_rsh_agent nexec-run ...                   (Open MPI)
//   nexec-run --torch node2 python3 train.py                   (torch.distributed env)
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
#include "executor/auth/munge_auth.h"
#include "executor/cli/environment.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace pb = ::nexec::v1;

namespace {

constexpr const char* kUsage =
    "usage: nexec-run [--torch] [--env all|none|VAR,...] [--master=host:port] HOST command [args...]\n"
    "Runs command on HOST, a host of the current nexec job's allocation, through its agent;\n"
    "forwards output and signals and exits with the command's exit code.\n"
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
  size_t i = 0;
  for (; i < args.size() && !args[i].empty() && args[i][0] == '-'; ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
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
    } else if (a == "--") {
      ++i;
      break;
    } else {
      std::cerr << "nexec-run: unknown option " << a << "\n" << kUsage;
      return 2;
    }
  }
  if (args.size() < i + 2) {
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
  req.set_host(args[i]);
  // As rsh and ssh do: the arguments, joined by spaces, are the remote shell's command line.
  req.set_command(absl::StrJoin(args.begin() + static_cast<long>(i) + 1, args.end(), " "));
  req.set_torch(torch);
  for (auto& [k, v] : jc::nexec::EnvironmentToSend(env, std::cerr)) (*req.mutable_env())[k] = v;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) req.set_cwd(cwd);

  // Signals are taken by one thread (sigwait) from here on, and forwarded.
  sigset_t forwarded;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  pthread_sigmask(SIG_BLOCK, &forwarded, nullptr);

  auto stub = pb::Master::NewStub(grpc::CreateChannel(master, grpc::InsecureChannelCredentials()));
  const jc::nexec::MungeAuth auth = jc::nexec::MungeAuth::Munge(munge_socket);
  auto call = [&](absl::string_view method, const google::protobuf::Message& request, bool forever = false) {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(forever ? std::chrono::system_clock::time_point::max()
                            : std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (absl::Status s = auth.Sign(c.get(), method, request); !s.ok()) std::exit(Fail(std::string(s.message())));
    return c;
  };

  pb::Task task;
  {
    auto c = call("RunTask", req);
    grpc::Status st = stub->RunTask(c.get(), req, &task);
    if (!st.ok()) {
      if (st.error_code() == grpc::StatusCode::UNAVAILABLE && st.error_message().find("host") == std::string::npos) {
        return Fail("cannot reach the master at " + master + " (" + st.error_message() + ")");
      }
      return Fail(st.error_message());
    }
  }

  std::thread signals([&] {
    while (true) {
      int sig = 0;
      if (sigwait(&forwarded, &sig) != 0) continue;
      pb::SignalTaskRequest s;
      s.set_job_id(job_id);
      s.set_task_index(task.index());
      s.set_signal(sig);
      pb::ControlResponse resp;
      auto c = call("SignalTask", s);
      grpc::Status st = stub->SignalTask(c.get(), s, &resp);
      if (!st.ok()) std::cerr << "nexec-run: forwarding signal " << sig << ": " << st.error_message() << "\n";
    }
  });
  signals.detach();

  // The task's stdout and stderr, followed until it ends.
  auto follow = [&](bool stderr) {
    pb::ReadLogRequest r;
    r.set_job_id(job_id);
    r.set_task_index(task.index());
    r.set_stderr(stderr);
    r.set_follow(true);
    int64_t offset = 0;
    for (int tries = 0; tries < 50; ++tries) {
      r.set_offset(offset);
      auto c = call("ReadLog", r, true);
      auto reader = stub->ReadLog(c.get(), r);
      pb::LogChunk chunk;
      while (reader->Read(&chunk)) {
        const std::string& data = chunk.data();
        for (size_t done = 0; done < data.size();) {
          ssize_t n = write(stderr ? STDERR_FILENO : STDOUT_FILENO, data.data() + done, data.size() - done);
          if (n <= 0) break;
          done += static_cast<size_t>(n);
        }
        offset = chunk.offset() + static_cast<int64_t>(data.size());
      }
      if (reader->Finish().ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the master restarting: go on from offset
    }
  };
  std::thread out(follow, false), err(follow, true);
  out.join();
  err.join();

  // The streams end when the task exited (or the job ended): its exit code is ours.
  for (int tries = 0; tries < 100; ++tries) {
    pb::JobRef ref;
    ref.set_job_id(job_id);
    pb::Job job;
    auto c = call("GetJob", ref);
    if (stub->GetJob(c.get(), ref, &job).ok() && task.index() < job.tasks_size()) {
      const pb::Task& t = job.tasks(task.index());
      if (t.state() == pb::TASK_EXITED) return t.exit_code() > 255 ? 255 : t.exit_code();
      if (job.state() == pb::DONE || job.state() == pb::EXIT) return 128 + SIGKILL;  // ended with its job
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Fail("the task's end was not reported by the master");
}
