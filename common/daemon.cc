#include "common/daemon.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "common/version.h"

ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn or error");
ABSL_FLAG(std::string, log_format, "text", "text or json (one JSON object per line, for log shippers)");

namespace jc::daemon {
namespace {

sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  return signals;
}

}  // namespace

std::vector<char*> Begin(const std::string& name, const char* usage, int argc, char** argv) {
  absl::SetProgramUsageMessage(usage);
  // One config (setting it replaces the whole): --version as every binary prints it, and
  // --help listing the daemon's own flags (those of its main and of this file), not only a
  // file named after the program as Abseil's default does ("No flags matched"); Abseil's
  // own (--flagfile, ...) stay for --helpfull.
  absl::FlagsUsageConfig config;
  config.version_string = [name] { return VersionLine(name) + "\n"; };
  config.contains_help_flags = [](absl::string_view file) { return !absl::StrContains(file, "absl/"); };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  std::vector<char*> left = absl::ParseCommandLine(argc, argv);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (absl::Status logging = InitLogging(absl::GetFlag(FLAGS_log_level), absl::GetFlag(FLAGS_log_format));
      !logging.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(logging.message()).c_str());
    std::exit(2);
  }
  BlockStopSignals();
  return left;
}

void BlockStopSignals() {
  sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int WaitForStop(const std::string& name, const std::function<void()>& reload) {
  sigset_t signals = StopSignals();
  int sig = 0;
  while (true) {
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    if (reload) {
      reload();
    } else {
      spdlog::info("{}: SIGHUP ignored (nothing to reload)", name);
    }
  }
  spdlog::info("{}: signal {} ({}); stopping", name, sig, sig == SIGINT ? "SIGINT" : "SIGTERM");
  return sig;
}

int PollStop(const std::string& name, absl::Duration wait) {
  sigset_t signals = StopSignals();
  const absl::Time until = absl::Now() + wait;
  while (true) {
    const absl::Duration left = std::max(until - absl::Now(), absl::ZeroDuration());
    timespec ts = absl::ToTimespec(left);
    const int sig = sigtimedwait(&signals, nullptr, &ts);
    if (sig < 0) {
      if (errno == EINTR && absl::Now() < until) continue;
      return 0;  // EAGAIN: none came in time
    }
    if (sig == SIGHUP) {
      spdlog::info("{}: SIGHUP ignored while standing by", name);
      continue;
    }
    spdlog::info("{}: signal {} ({}); stopping", name, sig, sig == SIGINT ? "SIGINT" : "SIGTERM");
    return sig;
  }
}

absl::StatusOr<std::unique_ptr<AdminServer>> ServeAdmin(const std::string& name, const std::string& address,
                                                        std::shared_ptr<prometheus::Registry> registry,
                                                        std::function<absl::Status()> ready) {
  if (address.empty()) return std::unique_ptr<AdminServer>();
  auto admin = std::make_unique<AdminServer>(std::move(registry), std::move(ready));
  auto port = admin->Start(address);
  if (!port.ok()) return port.status();
  spdlog::info("{} metrics on http://{}:{}/metrics", name, address.substr(0, address.rfind(':')), *port);
  return admin;
}

}  // namespace jc::daemon
