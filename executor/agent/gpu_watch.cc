#include "executor/agent/gpu_watch.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

GpuWatch::GpuWatch(std::string nvidia_smi) : probe_(std::move(nvidia_smi)) {}

absl::Status GpuWatch::Probe(pb::AgentInfo* info) {
  auto gpus = probe_.Sample();
  if (gpus.ok()) {
    watching_ = Adopt(*gpus, info);
    RememberUuids(*gpus);
    return absl::OkStatus();
  }
  if (absl::IsNotFound(gpus.status())) return absl::OkStatus();  // a host without NVIDIA GPUs
  reprobing_ = true;
  return gpus.status();
}

std::optional<pb::AgentInfo> GpuWatch::ProbeAgain(pb::AgentInfo base,
                                                  absl::FunctionRef<absl::Status(pb::AgentInfo*)> finish) {
  auto gpus = probe_.Sample();
  if (!gpus.ok()) return std::nullopt;  // still failing: said at start; tried again next time
  reprobing_ = false;
  // What Start would have made of it: the GPUs, then --resources over them.
  base.clear_gpus();
  if (!Adopt(*gpus, &base)) return std::nullopt;
  RememberUuids(*gpus);
  if (absl::Status finished = finish(&base); !finished.ok()) {
    // Start accepted the same --resources, so this cannot happen; keep the host as it was.
    spdlog::error("nexec agent: --resources after the GPU probe: {}", finished.ToString());
    return std::nullopt;
  }
  watching_ = true;
  return base;
}

bool GpuWatch::Adopt(const GpuSnapshot& snapshot, pb::AgentInfo* info) const {
  if (snapshot.gpus.empty()) return false;
  for (const auto& g : snapshot.gpus) info->add_gpus(g.index);
  (*info->mutable_resources())["model"] = GpuModel(snapshot.gpus[0].name);
  (*info->mutable_resources())["gpumem"] = absl::StrCat(static_cast<int64_t>(snapshot.gpus[0].memory_total_mb));
  spdlog::info("nexec agent: {} GPU(s), {} ({} MB) from {}", snapshot.gpus.size(), snapshot.gpus[0].name,
               snapshot.gpus[0].memory_total_mb, probe_.Executable());
  return true;
}

void GpuWatch::RememberUuids(const GpuSnapshot& snapshot) {
  absl::MutexLock lock(&uuids_mu_);
  for (const auto& g : snapshot.gpus) {
    if (!g.uuid.empty()) uuids_[g.index] = g.uuid;
  }
}

std::vector<std::string> GpuWatch::UuidsOf(const std::vector<int>& gpus) const {
  std::vector<std::string> out;
  absl::MutexLock lock(&uuids_mu_);
  for (int gpu : gpus) {
    auto uuid = uuids_.find(gpu);
    if (uuid != uuids_.end()) out.push_back(uuid->second);
  }
  return out;
}

std::optional<GpuSnapshot> GpuWatch::Sample() const {
  auto sample = probe_.Sample();
  if (!sample.ok()) {
    spdlog::warn("nexec agent: GPU sample failed: {}", std::string(sample.status().message()));
    return std::nullopt;
  }
  return std::move(*sample);
}

GpuWatch::Assessment GpuWatch::Assess(const GpuSnapshot& sample, const std::vector<TaskGpus>& tasks,
                                      bool kill_misuse) {
  Assessment out;
  std::map<int, double> utilization;
  for (const auto& g : sample.gpus) utilization[g.index] = g.utilization_pct;
  // Which task a GPU process belongs to: its process group is the task's.
  std::map<pid_t, size_t> by_group;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].pgid) by_group[*tasks[i].pgid] = i;
  }
  // The GPUs each task was reported on, this sample's included (one note per task and GPU).
  std::vector<std::set<int>> misused;
  misused.reserve(tasks.size());
  for (const auto& t : tasks) misused.push_back(t.misused);
  std::map<std::string, double> memory;
  for (const auto& p : sample.processes) {
    pid_t group = getpgid(p.pid);
    auto owner = by_group.find(group);
    if (group < 0 || owner == by_group.end()) continue;  // not a task of ours
    const TaskGpus& t = tasks[owner->second];
    memory[t.key] += p.used_memory_mb;
    if (std::find(t.gpus.begin(), t.gpus.end(), p.gpu_index) != t.gpus.end() ||
        !misused[owner->second].insert(p.gpu_index).second) {
      continue;
    }
    Misuse m;
    m.key = t.key;
    m.gpu = p.gpu_index;
    m.note.set_job_id(t.job_id);
    m.note.set_task_index(t.task_index);
    m.note.set_attempt(t.attempt);
    m.note.set_killed(kill_misuse);
    m.note.set_message(absl::StrCat("GPU misuse: pid ", p.pid, " used GPU ", p.gpu_index, " (", p.used_memory_mb,
                                    " MB), which was not given to the job (its GPUs: ",
                                    t.gpus.empty() ? "none" : absl::StrJoin(t.gpus, ","), ")",
                                    kill_misuse ? "; the task was killed" : "; reported only"));
    out.misuse.push_back(std::move(m));
  }
  for (const auto& t : tasks) {
    Assessment::Use& use = out.use[t.key];
    use.memory_mb = memory.count(t.key) ? memory[t.key] : 0;
    double sum = 0;
    for (int g : t.gpus) sum += utilization.count(g) ? utilization[g] : 0;
    use.utilization = t.gpus.empty() ? 0 : sum / static_cast<double>(t.gpus.size());
  }
  return out;
}

}  // namespace jc::nexec
