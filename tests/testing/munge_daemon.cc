#include "tests/testing/munge_daemon.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <vector>

namespace jc::testing {
namespace {

namespace fs = std::filesystem;

struct Munged {
  fs::path dir;
  std::string socket;
  ~Munged() {
    std::ifstream pid_file(dir / "key" / "munged.pid");
    pid_t pid = 0;
    if (pid_file >> pid && pid > 0 && kill(pid, SIGTERM) == 0) {
      // Gone before its directory is: munged removes its socket and pid file as it exits,
      // and a removal racing it stopped half way (hundreds of jc-munge-* left in /tmp).
      for (int i = 0; i < 500 && kill(pid, 0) == 0; ++i) usleep(10'000);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

Munged Start() {
  Munged m;
  m.dir = fs::temp_directory_path() / ("jc-munge-" + std::to_string(getpid()));
  fs::remove_all(m.dir);
  fs::create_directories(m.dir / "key");
  // The socket's directory is open to all (an unprivileged test account signs through it);
  // the key's is not.
  chmod(m.dir.c_str(), 0755);
  chmod((m.dir / "key").c_str(), 0700);
  {
    std::random_device rd;
    std::ofstream key(m.dir / "key" / "munge.key", std::ios::binary);
    for (int i = 0; i < 1024; ++i) key.put(static_cast<char>(rd()));
  }
  chmod((m.dir / "key" / "munge.key").c_str(), 0400);
  m.socket = (m.dir / "munge.sock").string();
  std::vector<std::string> argv{"munged",
                                "--force",
                                "--socket=" + m.socket,
                                "--key-file=" + (m.dir / "key" / "munge.key").string(),
                                "--pid-file=" + (m.dir / "key" / "munged.pid").string(),
                                "--log-file=" + (m.dir / "key" / "munged.log").string(),
                                "--seed-file=" + (m.dir / "key" / "munged.seed").string()};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    execvp("munged", args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);  // munged forks into the background once it is ready
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("munged did not start (exit " + std::to_string(WEXITSTATUS(status)) +
                             "); install Debian's munge (scripts/setup.sh does)");
  }
  setenv("NEXEC_MUNGE_SOCKET", m.socket.c_str(), 1);
  return m;
}

}  // namespace

const std::string& UsePrivateMunged() {
  static Munged munged = Start();
  return munged.socket;
}

}  // namespace jc::testing
