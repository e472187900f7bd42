#include "adapters/sdk/run_program.h"

#include <fcntl.h>
#include <spawn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace jc::adapter {

ProgramResult RunProgram(const std::vector<std::string>& args, const std::string& log, absl::Duration timeout) {
  ProgramResult r;
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  // Its own process group, so that a timeout takes what it started too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    r.how = std::strerror(rc);
    return r;
  }
  r.started = true;
  int status = 0;
  bool timed_out = false;
  if (timeout == absl::InfiniteDuration()) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  } else {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR)) break;
      if (absl::Now() >= deadline) {
        timed_out = true;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  if (FILE* f = std::fopen(log.c_str(), "r")) {
    char buf[4096];
    const size_t n = std::fread(buf, 1, sizeof buf, f);
    r.output.assign(buf, n);
    std::fclose(f);
  }
  std::error_code ec;
  std::filesystem::remove(log, ec);
  r.ok = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  r.how = timed_out             ? absl::StrCat("ran past its ", absl::FormatDuration(timeout), " and was killed")
          : WIFEXITED(status) ? absl::StrCat("exited ", WEXITSTATUS(status))
                              : absl::StrCat("was killed by signal ", WTERMSIG(status));
  return r;
}

}  // namespace jc::adapter
