#include "executor/cli/interactive.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace jc::nexec {
namespace {

namespace pb = ::nexec::v1;

std::atomic<int> g_interrupts{0};
std::atomic<int> g_resizes{0};

void OnInterrupt(int) { g_interrupts.fetch_add(1); }
void OnResize(int) { g_resizes.fetch_add(1); }

// The terminal's settings, put back however the session ends.
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(0) || tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() { Restore(); }
  void Restore() {
    if (active_) tcsetattr(0, TCSANOW, &saved_);
    active_ = false;
  }

 private:
  termios saved_{};
  bool active_ = false;
};

bool Ended(pb::JobState s) { return s == pb::DONE || s == pb::EXIT; }

// Sends `data` (and then, with eof, the end of input) until the agent took all of it.
// False when the job takes no more input (it ended, or closed its stdin).
bool Send(pb::Master::Stub* stub, const ContextFactory& ctx, int64_t job_id, const std::string& data, bool eof,
          int rows = 0, int cols = 0) {
  size_t sent = 0;
  while (true) {
    pb::InputRequest req;
    req.set_job_id(job_id);
    req.set_data(data.substr(sent));
    req.set_eof(eof);
    req.set_rows(rows);
    req.set_cols(cols);
    pb::InputResponse resp;
    auto c = ctx("SendInput", req);
    grpc::Status st = stub->SendInput(c.get(), req, &resp);
    if (st.ok()) {
      sent += static_cast<size_t>(resp.accepted());
      if (sent >= data.size()) return true;
      continue;  // the command is slow to read: the rest again
    }
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // not started yet
  }
}

}  // namespace

int RunInteractive(pb::Master::Stub* stub, const ContextFactory& ctx, int64_t job_id, bool tty) {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction resize {};
  resize.sa_handler = OnResize;
  sigemptyset(&resize.sa_mask);
  resize.sa_flags = SA_RESTART;
  sigaction(SIGWINCH, &resize, nullptr);

  auto get = [&](pb::Job* job) {
    pb::JobRef ref;
    ref.set_job_id(job_id);
    auto c = ctx("GetJob", ref);
    return stub->GetJob(c.get(), ref, job);
  };
  auto kill_job = [&] {
    pb::JobRef ref;
    ref.set_job_id(job_id);
    pb::ControlResponse resp;
    auto c = ctx("Kill", ref);
    (void)stub->Kill(c.get(), ref, &resp);
  };

  std::cerr << "<<Waiting for dispatch ...>>" << std::endl;
  pb::Job job;
  while (true) {
    if (g_interrupts.load() > 0) {
      kill_job();
      std::cerr << "<<Job <" << job_id << "> killed while waiting>>" << std::endl;
      return 130;
    }
    grpc::Status st = get(&job);
    if (!st.ok() && st.error_code() != grpc::StatusCode::UNAVAILABLE) {
      std::cerr << "nexec: " << st.error_message() << std::endl;
      return 1;
    }
    if (st.ok() && job.state() != pb::PENDING) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::cerr << "<<Starting on " << (job.tasks().empty() ? std::string("?") : job.tasks(0).host()) << ">>"
            << std::endl;

  RawTerminal raw_terminal;
  if (!tty) raw_terminal.Restore();  // pipes: this terminal keeps its line editing and ^C
  // Input runs on its own thread, blocked in read(0) most of the time; the session ends
  // without waiting for it.
  // (The terminal's first size went with the submission; SIGWINCH sends changes.)
  std::thread([stub, ctx, job_id] {
    char buf[65536];
    while (true) {
      ssize_t n = read(0, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        Send(stub, ctx, job_id, "", true);
        return;
      }
      if (!Send(stub, ctx, job_id, std::string(buf, static_cast<size_t>(n)), false)) return;
    }
  }).detach();

  // Each of task 0's outputs, followed until the job ends (across a master restart).
  auto follow = [&](bool stderr_out, int fd) {
    pb::ReadLogRequest req;
    req.set_job_id(job_id);
    req.set_stderr(stderr_out);
    req.set_follow(true);
    FollowOptions keep_on;
    keep_on.reconnects = 50;
    keep_on.task_exists = true;  // started, so its output comes
    // The job's exit code is asked below either way; output given up on is said here.
    if (absl::Status s = FollowLog(stub, ctx, req, fd, keep_on); !s.ok()) {
      std::cerr << "nexec: job " << job_id << "'s " << (stderr_out ? "stderr" : "stdout")
                << " is no longer shown: " << s.message() << "\n";
    }
  };
  std::atomic<int> followers{tty ? 1 : 2};
  std::thread out([&] {
    follow(false, 1);
    followers.fetch_sub(1);
  });
  std::thread err;
  if (!tty) {
    err = std::thread([&] {
      follow(true, 2);
      followers.fetch_sub(1);
    });
  }
  int forwarded = 0, resized = 0;
  while (followers.load() > 0) {
    if (int n = g_resizes.load(); n > resized && tty && isatty(0)) {
      resized = n;
      winsize ws{};
      if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
        std::thread([=] { Send(stub, ctx, job_id, "", false, ws.ws_row, ws.ws_col); }).detach();
      }
    }
    // ^C here (pipes; a raw terminal sends it as a key): SIGINT for the job's command.
    if (int n = g_interrupts.load(); n > forwarded) {
      forwarded = n;
      pb::SignalTaskRequest req;
      req.set_job_id(job_id);
      req.set_task_index(0);
      req.set_signal(SIGINT);
      pb::ControlResponse resp;
      auto c = ctx("SignalTask", req);
      (void)stub->SignalTask(c.get(), req, &resp);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  out.join();
  if (err.joinable()) err.join();
  raw_terminal.Restore();
  // The output is complete once the job ended; its exit code is the session's.
  for (int i = 0; i < 300 && !Ended(job.state()); ++i) {
    if (!get(&job).ok() || !Ended(job.state())) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!Ended(job.state())) {
    std::cerr << "nexec: job " << job_id << " output ended but the job is still " << pb::JobState_Name(job.state())
              << std::endl;
    return 1;
  }
  return job.exit_code();
}

}  // namespace jc::nexec
