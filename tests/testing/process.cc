#include "tests/testing/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace jc::testing {

Process::Process(std::vector<std::string> argv, std::string log_path)
    : log_path_(std::move(log_path)) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    // The test harness may block signals; the child must see SIGTERM.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

Process::~Process() {
  if (pid_ > 0 && !exit_code_.has_value()) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string Process::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<std::string> Process::WaitForLog(const std::string& pattern,
                                               std::chrono::milliseconds timeout) {
  std::regex re(pattern);
  std::optional<std::string> found;
  WaitUntil(
      [&] {
        std::smatch m;
        std::string log = Log();
        if (std::regex_search(log, m, re)) {
          found = m.size() > 1 ? m[1].str() : m[0].str();
          return true;
        }
        int status = 0;
        if (!exit_code_ && waitpid(pid_, &status, WNOHANG) == pid_) {
          exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        return exit_code_.has_value();
      },
      timeout);
  return found;
}

void Process::Signal(int signal) {
  if (pid_ > 0 && !exit_code_) kill(pid_, signal);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  WaitUntil(
      [&] {
        if (exit_code_) return true;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        return exit_code_.has_value();
      },
      timeout);
  return exit_code_;
}

}  // namespace jc::testing
