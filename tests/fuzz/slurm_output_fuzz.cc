// libFuzzer harness: what Slurm's commands print, as the Slurm adapter reads it
// (adapters/slurm/slurm_output.h): squeue's job lines, states and tagged jobs, sacct's
// accounting lines, sinfo's node lines, gres strings, durations and exit codes. Job names,
// comments and reasons in them are any account's to choose. Every parser must return a
// value, never crash, overflow or report a negative or non-finite figure.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/str_split.h"
#include "adapters/slurm/slurm_output.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void CheckObservation(const jc::adapter::ReplicaObservation& o) {
  if (!o.usage.has_value()) return;
  const auto& u = *o.usage;
  Check(std::isfinite(u.wall_seconds()) && u.wall_seconds() >= 0);
  Check(std::isfinite(u.cpu_seconds()) && u.cpu_seconds() >= 0);
  Check(u.memory_peak_mb() >= 0 && u.gpus() >= 0 && u.read_bytes() >= 0 && u.write_bytes() >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const auto& [id, o] : jc::adapter::ParseSqueueJobs(text)) CheckObservation(o);
  const auto counts = jc::adapter::ParseSqueueStates(text);
  Check(counts.running >= 0 && counts.waiting >= 0);
  (void)jc::adapter::OldestTaggedJob(text, "jc:0123456789abcdef0123456789abcdef");
  // sacct: the jobs asked about are those its lines name, so that every line is read.
  std::set<std::string> wanted;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    wanted.insert(std::string(line.substr(0, line.find_first_of(".|"))));
  }
  std::map<std::string, jc::adapter::ReplicaObservation> out = jc::adapter::ParseSqueueJobs(text);
  jc::adapter::ReadSacct(text, wanted, &out);
  for (const auto& [id, o] : out) CheckObservation(o);
  const auto nodes = jc::adapter::ParseSinfoNodes(text);
  Check(nodes.nodes >= 0 && nodes.gpu_total >= 0 && nodes.gpu_alloc >= 0);
  Check(jc::adapter::GresCount(text, "gpu") >= 0);
  // The queue's plan (SPEC A16): counts never negative, a wait never negative.
  const auto queue = jc::adapter::ParseSqueueQueue(text);
  for (const auto& j : queue) Check(j.cpus >= 0 && j.gpus >= 0 && !j.id.empty());
  const auto now = absl::FromUnixSeconds(1'800'000'000);
  if (auto wait = jc::adapter::SlurmStartWait(queue, 4, 1, 2, 1, now)) Check(*wait >= absl::ZeroDuration());
  const double seconds = jc::adapter::SlurmDurationSeconds(text);
  Check(std::isfinite(seconds) && seconds >= 0);
  const int status = jc::adapter::WaitStatusFromExitCode(text);
  Check(status >= 0 && status <= 0xffff);
  (void)jc::adapter::ObserveSlurmJob(text, text, status);
  return 0;
}
