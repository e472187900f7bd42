#include "adapters/sdk/run_program.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace jc::adapter {

ProgramResult RunProgram(const std::vector<std::string>& args, const std::string& log) {
  ProgramResult r;
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.how = std::strerror(rc);
    return r;
  }
  r.started = true;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (FILE* f = std::fopen(log.c_str(), "r")) {
    char buf[4096];
    const size_t n = std::fread(buf, 1, sizeof buf, f);
    r.output.assign(buf, n);
    std::fclose(f);
  }
  std::error_code ec;
  std::filesystem::remove(log, ec);
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  r.how = WIFEXITED(status) ? absl::StrCat("exited ", WEXITSTATUS(status))
                            : absl::StrCat("was killed by signal ", WTERMSIG(status));
  return r;
}

}  // namespace jc::adapter
