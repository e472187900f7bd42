#include "executor/agent/gpu_probe.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/exec/close_descriptors.h"

namespace jc::nexec {
namespace {

std::vector<std::string> Fields(absl::string_view line) {
  std::vector<std::string> out;
  for (absl::string_view f : absl::StrSplit(line, ',')) out.emplace_back(absl::StripAsciiWhitespace(f));
  return out;
}

// nvidia-smi prints "[N/A]" or "[Not Supported]" for figures a GPU does not have.
double Number(const std::string& field) {
  double v = 0;
  return absl::SimpleAtod(field, &v) ? v : 0;
}

// Runs `argv` (no shell) and returns its stdout.
absl::StatusOr<std::string> Run(const std::vector<std::string>& argv) {
  int out[2];
  // Close-on-exec (dup2 below clears it on stdout): a sensor forked meanwhile by another
  // thread must not keep the write end, or this read would never end.
  if (pipe2(out, O_CLOEXEC) != 0) return absl::UnavailableError("pipe failed");
  pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return absl::UnavailableError("fork failed");
  }
  if (pid == 0) {
    // The agent's blocked signals (its stop signals) are not the probe's.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(out[1], STDOUT_FILENO);
    // Its output pipe only: stdin and stderr /dev/null, nothing else of the agent's.
    const int kept[] = {STDOUT_FILENO};
    CloseDescriptorsBut(kept, 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(argv[0], " ", argv[1], " failed (status ", status, ")"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::vector<GpuSample>> ParseGpuQuery(const std::string& csv) {
  std::vector<GpuSample> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipWhitespace())) {
    ++line_no;
    std::vector<std::string> f = Fields(line);
    GpuSample g;
    if (f.size() < 6 || !absl::SimpleAtoi(f[0], &g.index) || g.index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("nvidia-smi --query-gpu line ", line_no, ": \"", line,
                                                     "\" is not index, uuid, name, memory.total, memory.used, "
                                                     "utilization.gpu"));
    }
    g.uuid = f[1];
    g.name = f[2];
    g.memory_total_mb = Number(f[3]);
    g.memory_used_mb = Number(f[4]);
    g.utilization_pct = Number(f[5]);
    out.push_back(std::move(g));
  }
  return out;
}

absl::StatusOr<std::vector<GpuProcess>> ParseComputeApps(const std::string& csv, const std::vector<GpuSample>& gpus) {
  std::vector<GpuProcess> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipWhitespace())) {
    ++line_no;
    if (absl::StartsWith(absl::StripAsciiWhitespace(line), "No running")) continue;  // older drivers say so
    std::vector<std::string> f = Fields(line);
    GpuProcess p;
    int pid = 0;
    if (f.size() < 3 || !absl::SimpleAtoi(f[1], &pid) || pid <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("nvidia-smi --query-compute-apps line ", line_no, ": \"", line,
                                                     "\" is not gpu_uuid, pid, used_memory"));
    }
    p.pid = pid;
    p.used_memory_mb = Number(f[2]);
    for (const auto& g : gpus) {
      if (g.uuid == f[0]) p.gpu_index = g.index;
    }
    if (p.gpu_index >= 0) out.push_back(p);
  }
  return out;
}

std::string GpuModel(const std::string& name) {
  std::vector<std::string> words;
  for (absl::string_view w : absl::StrSplit(name, ' ', absl::SkipWhitespace())) {
    std::string lower = absl::AsciiStrToLower(w);
    if (lower == "nvidia" || lower == "tesla" || lower == "geforce" || lower == "quadro") continue;
    words.emplace_back(w);
  }
  if (words.empty()) return name;
  std::string model = words[0];
  // "RTX 4090", "GTX 1080": the series and the number together.
  if ((model == "RTX" || model == "GTX") && words.size() > 1) model += words[1];
  return std::string(absl::string_view(model).substr(0, model.find('-')));
}

std::string GpuProbe::Executable() const {
  if (nvidia_smi_.find('/') != std::string::npos) return access(nvidia_smi_.c_str(), X_OK) == 0 ? nvidia_smi_ : "";
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", nvidia_smi_);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

absl::StatusOr<GpuSnapshot> GpuProbe::Sample() const {
  std::string exe = Executable();
  if (exe.empty()) return absl::NotFoundError(absl::StrCat(nvidia_smi_, " not found"));
  GpuSnapshot snap;
  auto gpus = Run({exe, "--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu",
                   "--format=csv,noheader,nounits"});
  if (!gpus.ok()) return gpus.status();
  auto parsed = ParseGpuQuery(*gpus);
  if (!parsed.ok()) return parsed.status();
  snap.gpus = std::move(*parsed);
  auto apps = Run({exe, "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"});
  if (!apps.ok()) return apps.status();
  auto processes = ParseComputeApps(*apps, snap.gpus);
  if (!processes.ok()) return processes.status();
  snap.processes = std::move(*processes);
  return snap;
}

}  // namespace jc::nexec
