#include "executor/sensor/sensor.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/exec/close_descriptors.h"
#include "common/log.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

absl::StatusOr<std::vector<pb::SensorResource>> ParseSensorOutput(const std::string& yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("sensor output is not YAML: line ", e.mark.line + 1, ": ", e.msg));
  }
  std::vector<pb::SensorResource> out;
  if (root.IsNull()) return out;
  if (!root.IsSequence()) return absl::InvalidArgumentError("sensor output must be a YAML list");
  for (size_t i = 0; i < root.size(); ++i) {
    const YAML::Node& n = root[i];
    std::string where = absl::StrCat("record ", i + 1);
    if (!n.IsMap()) return absl::InvalidArgumentError(where + " is not a mapping");
    pb::SensorResource r;
    auto text = [&](const char* key) { return n[key] ? n[key].as<std::string>() : std::string(); };
    auto flag = [&](const char* key) {
      std::string v = text(key);
      return v == "true" || v == "yes" || v == "y";
    };
    for (const auto& kv : n) {
      static const std::set<std::string> known{"resource", "description", "type",  "direction",
                                               "release",  "assign",      "slotresource",
                                               "value",    "locale"};
      std::string key = kv.first.as<std::string>();
      if (!known.count(key)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": unknown field \"", key, "\""));
      }
    }
    r.set_resource(text("resource"));
    if (r.resource().empty()) return absl::InvalidArgumentError(where + ": resource is required");
    where = absl::StrCat(where, " (", r.resource(), ")");
    r.set_description(text("description"));
    r.set_type(text("type").empty() ? "number" : text("type"));
    r.set_direction(text("direction").empty() ? "decrease" : text("direction"));
    r.set_release(flag("release"));
    r.set_assign(flag("assign"));
    // rusage[] is per slot unless the sensor says the resource is the job's (storage).
    r.set_slotresource(n["slotresource"] ? flag("slotresource") : true);
    r.set_value(std::string(absl::StripAsciiWhitespace(text("value"))));
    if (r.type() != "number" && r.type() != "text" && r.type() != "tag") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": type must be number, text or tag; got \"", r.type(), "\""));
    }
    if (r.direction() != "increase" && r.direction() != "decrease") {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": direction must be increase or decrease; got \"", r.direction(), "\""));
    }
    double number = 0;
    if (r.type() == "number" && !absl::SimpleAtod(r.value(), &number)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": value \"", r.value(), "\" is not a number"));
    }
    if (r.type() == "tag" && r.value().empty()) r.set_value("true");
    for (absl::string_view host : absl::StrSplit(text("locale"), ' ', absl::SkipWhitespace())) {
      r.add_locale(std::string(host));
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> FindSensors(const std::string& dir, const std::string& host) {
  std::vector<std::string> out;
  for (const std::string& name : {std::string("ress.host"), "ress." + host}) {
    std::string path = (std::filesystem::path(dir) / name).string();
    if (access(path.c_str(), X_OK) == 0) out.push_back(path);
  }
  return out;
}

SensorRunner::SensorRunner(std::vector<std::string> paths, absl::Duration restart_delay)
    : paths_(std::move(paths)), restart_delay_(restart_delay) {
  for (const auto& p : paths_) threads_.emplace_back([this, p] { Run(p); });
}

SensorRunner::~SensorRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (const auto& [path, pid] : pids_) kill(-pid, SIGKILL);
  }
  for (auto& t : threads_) t.join();
}

std::vector<pb::SensorResource> SensorRunner::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<pb::SensorResource> out;
  for (const auto& [name, r] : current_) out.push_back(r);
  return out;
}

namespace {

// What of a sensor's stderr is logged per run (each line cut at 1 KiB): a sensor that prints
// errors every round would fill the agent's log.
constexpr int kStderrLinesLogged = 20;
// The resources the sensors of one daemon may report in all.
constexpr size_t kMostResources = 1000;
// What is buffered of a line before it is handed on in pieces (a sensor that never prints a
// newline must not grow the agent's memory).
constexpr size_t kLongestPiece = 64 * 1024;
// A round of output longer than this is dropped (the same, for a sensor that never prints
// `---`).
constexpr size_t kLongestRound = 1024 * 1024;
// What of a sensor's stderr is read once its output ended, without waiting for more (its
// children may keep writing there).
constexpr size_t kLastErrorRead = 64 * 1024;

// Takes the complete lines (and, with `all`, the rest) off the front of `buffer`, or a piece
// of kLongestPiece of a longer one, and hands each to `piece(text, ends_line)`.
template <typename PieceFn>
void TakeLines(std::string& buffer, bool all, PieceFn piece) {
  size_t start = 0;
  while (start < buffer.size()) {
    const size_t end = buffer.find('\n', start);
    if (end == std::string::npos) {
      if (!all && buffer.size() - start < kLongestPiece) break;
      const size_t len = std::min(buffer.size() - start, kLongestPiece);
      piece(absl::string_view(buffer).substr(start, len), /*ends_line=*/all && start + len == buffer.size());
      start += len;
      continue;
    }
    piece(absl::string_view(buffer).substr(start, end - start), /*ends_line=*/true);
    start = end + 1;
  }
  buffer.erase(0, start);
}

}  // namespace

void SensorRunner::Run(const std::string& path) {
  // Before each start but the first: the restart delay, in short steps so shutdown is not
  // held up by it; false once the runner stops.
  bool first = true;
  auto wait_to_restart = [&] {
    for (absl::Time until = absl::Now() + restart_delay_; absl::Now() < until;) {
      {
        std::lock_guard<std::mutex> guard(mu_);
        if (stopping_) return false;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  };
  while (first || wait_to_restart()) {
    first = false;
    int fds[2], errs[2];
    // Close-on-exec: a probe or another sensor forked meanwhile by another thread must not
    // keep this one's write end for its whole life (this reader would never see the end).
    // Its stderr a pipe of its own, logged here: not the daemon's, which a child of the
    // sensor's would keep after the daemon's SIGKILL (PR_SET_PDEATHSIG ends the sensor
    // alone), a supervisor's pipe among it, for as long as the kernel held it on an account's
    // path (a `df`; helper-94).
    if (pipe2(fds, O_CLOEXEC) != 0) {
      spdlog::error("sensor {}: pipe: {}; trying again in {}", path, std::strerror(errno),
                    absl::FormatDuration(restart_delay_));
      continue;
    }
    if (pipe2(errs, O_CLOEXEC) != 0) {
      spdlog::error("sensor {}: pipe: {}; trying again in {}", path, std::strerror(errno),
                    absl::FormatDuration(restart_delay_));
      close(fds[0]);
      close(fds[1]);
      continue;
    }
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
      // Never a pid of -1 kept: its wait would reap any child of the daemon's (a task's).
      spdlog::error("sensor {}: fork: {}; trying again in {}", path, std::strerror(errno),
                    absl::FormatDuration(restart_delay_));
      for (int fd : {fds[0], fds[1], errs[0], errs[1]}) close(fd);
      continue;
    }
    if (pid == 0) {
      setpgid(0, 0);
      // A sensor loops forever: it ends with the daemon that runs it, also one SIGKILLed
      // (else each restart would add another copy). This thread lives as long as the runner.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);  // the daemon died before that took hold
      dup2(fds[1], 1);
      dup2(errs[1], 2);
      // Its output and error pipes; not the daemon's stdin nor anything else: a sensor lives
      // as long as the daemon and may look at accounts' paths (a `df`), where the kernel
      // could hold it, and with it a supervisor's pipe (attacker helper-93).
      const int kept[] = {1, 2};
      CloseDescriptorsBut(kept, 2);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execl(path.c_str(), path.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    close(errs[1]);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        kill(pid, SIGKILL);
      } else {
        pids_[path] = pid;
      }
    }
    std::string round;
    std::string last_error;  // logged once per change, not every round
    auto flush = [&] {
      if (absl::StripAsciiWhitespace(round).empty()) return;
      auto records = ParseSensorOutput(round);
      if (records.ok()) {
        // Bounded: a sensor that names new resources round after round would grow the daemon
        // and its heartbeats past what the master takes (attacker helper-97: the host was lost).
        std::lock_guard<std::mutex> lock(mu_);
        size_t kept = current_.size();
        for (const auto& r : *records) kept += current_.count(r.resource()) == 0 ? 1 : 0;
        if (kept > kMostResources) {
          records = absl::ResourceExhaustedError(absl::StrCat("this round would make ", kept,
                                                              " resources, more than the ", kMostResources,
                                                              " the sensors of a host may report"));
        }
      }
      if (!records.ok()) {
        // The last good values stay in force.
        std::string error(records.status().message());
        if (error != last_error) spdlog::warn("sensor {}: {} (keeping its last good values)", path, error);
        last_error = error;
      } else {
        if (!last_error.empty()) spdlog::info("sensor {}: good output again", path);
        last_error.clear();
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& r : *records) current_[r.resource()] = std::move(r);
      }
      round.clear();
    };
    bool in_line = false;       // the last piece handed on did not end its line
    bool round_dropped = false;  // this round outgrew kLongestRound
    auto output_line = [&](absl::string_view piece, bool ends_line) {
      if (!in_line && ends_line && absl::StripTrailingAsciiWhitespace(piece) == "---") {
        if (round_dropped) spdlog::warn("sensor {}: a round of more than {} bytes, dropped", path, kLongestRound);
        round_dropped = false;
        flush();
        return;
      }
      in_line = !ends_line;
      if (round_dropped) return;
      if (round.size() + piece.size() + 1 > kLongestRound) {
        round.clear();
        round_dropped = true;
        return;
      }
      absl::StrAppend(&round, piece, ends_line ? "\n" : "");
    };
    int error_lines = 0;  // counted up to one past the cap, never further (no wrap)
    auto error_line = [&](absl::string_view line, bool /*ends_line*/) {
      if (error_lines > kStderrLinesLogged) return;
      if (++error_lines <= kStderrLinesLogged) {
        spdlog::warn("sensor {} (stderr): {}", path, line.substr(0, 1024));
      } else {
        spdlog::warn("sensor {}: more on its stderr, not logged until it starts again", path);
      }
    };
    // Until its output ends; its stderr read as it comes, never waited for to end (a child
    // of the sensor's may hold it).
    std::string out_buffer, err_buffer;
    pollfd ends[2] = {{fds[0], POLLIN, 0}, {errs[0], POLLIN, 0}};
    bool err_open = true;
    char chunk[4096];
    while (true) {
      if (poll(ends, err_open ? 2 : 1, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (err_open && ends[1].revents != 0) {
        const ssize_t n = read(errs[0], chunk, sizeof chunk);
        if (n > 0) {
          err_buffer.append(chunk, static_cast<size_t>(n));
          TakeLines(err_buffer, false, error_line);
        } else if (n == 0 || errno != EINTR) {
          err_open = false;
        }
      }
      if (ends[0].revents != 0) {
        const ssize_t n = read(fds[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        out_buffer.append(chunk, static_cast<size_t>(n));
        TakeLines(out_buffer, false, output_line);
      }
    }
    TakeLines(out_buffer, true, output_line);
    // What it said last, without waiting for more, and no more than kLastErrorRead: a child
    // of the sensor's may keep writing there.
    if (err_open && fcntl(errs[0], F_SETFL, O_NONBLOCK) == 0) {
      ssize_t n;
      for (size_t read_so_far = 0;
           read_so_far < kLastErrorRead && (n = read(errs[0], chunk, sizeof chunk)) > 0;
           read_so_far += static_cast<size_t>(n)) {
        err_buffer.append(chunk, static_cast<size_t>(n));
        TakeLines(err_buffer, false, error_line);
      }
    }
    TakeLines(err_buffer, true, error_line);
    close(errs[0]);
    if (!round_dropped) flush();
    close(fds[0]);
    waitpid(pid, nullptr, 0);
    {
      std::lock_guard<std::mutex> lock(mu_);
      pids_.erase(path);
      if (stopping_) return;
    }
    spdlog::info("sensor {} exited; starting it again in {}", path, absl::FormatDuration(restart_delay_));
  }
}

}  // namespace jc::nexec
