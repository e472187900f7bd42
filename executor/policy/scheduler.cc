#include "executor/policy/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "executor/policy/scheduler_internal.h"

namespace jc::nexec {

// More GPUs per slot than a host can have: refused at submit.
constexpr int kMaxGpusPerSlot = 65536;
namespace {

constexpr int kUnlimited = std::numeric_limits<int>::max();

// "host+2" -> ("host", 2); "host" -> ("host", 0).
std::pair<std::string, int> ParsePreference(const std::string& entry) {
  auto plus = entry.rfind('+');
  int level = 0;
  if (plus != std::string::npos && absl::SimpleAtoi(entry.substr(plus + 1), &level)) {
    return {entry.substr(0, plus), level};
  }
  return {entry, 0};
}

std::string ValueKey(const ResourceValue& v) {
  if (auto* d = std::get_if<double>(&v)) return absl::StrCat("n", *d);
  if (auto* s = std::get_if<std::string>(&v)) return absl::StrCat("s", *s);
  return std::get<bool>(v) ? "t1" : "t0";
}

double OrderValue(const ResourceValues& values, const std::string& name) {
  auto it = values.find(name);
  if (it == values.end()) return -std::numeric_limits<double>::infinity();
  if (auto* d = std::get_if<double>(&it->second)) return *d;
  if (auto* b = std::get_if<bool>(&it->second)) return *b ? 1 : 0;
  return 0;
}

}  // namespace

absl::Status Scheduler::AddHostType(const HostType& type) {
  if (type.name.empty()) return absl::InvalidArgumentError("host type needs a name");
  if (!(type.cpu_factor > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("host type ", type.name, ": cpu_factor must be positive"));
  }
  model_.host_types[type.name] = type;
  return absl::OkStatus();
}

absl::Status Scheduler::AddHost(const HostConfig& config) {
  if (config.name.empty()) return absl::InvalidArgumentError("host needs a name");
  if (model_.host_index.count(config.name)) {
    return absl::AlreadyExistsError(absl::StrCat("host ", config.name, " is already defined"));
  }
  if (config.slots < 0 || config.mem_mb < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", config.name, ": slots and memory must not be negative"));
  }
  Host host;
  host.config = config;
  if (!config.type.empty()) {
    auto it = model_.host_types.find(config.type);
    if (it == model_.host_types.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", config.name, ": unknown host type \"", config.type, "\""));
    }
    host.cpu_factor = it->second.cpu_factor;
  }
  for (int gpu : config.gpus) host.gpu_users[gpu] = 0;
  model_.RefreshValues(host);
  model_.host_index[config.name] = model_.hosts.size();
  model_.hosts.push_back(std::move(host));
  model_.total_slots += config.slots;
  model_.largest_host_slots = std::max(model_.largest_host_slots, config.slots);
  model_.largest_host_mem = std::max(model_.largest_host_mem, config.mem_mb);
  model_.IndexHost(model_.hosts.size() - 1, true);
  return absl::OkStatus();
}

absl::Status Scheduler::SetHostState(const std::string& name, HostState state) {
  auto it = model_.host_index.find(name);
  if (it == model_.host_index.end()) return absl::NotFoundError(absl::StrCat("no host ", name));
  model_.hosts[it->second].state = state;
  return absl::OkStatus();
}

absl::StatusOr<bool> Scheduler::SetHostResource(const std::string& name,
                                                const std::string& resource,
                                                const ResourceValue& value) {
  auto it = model_.host_index.find(name);
  if (it == model_.host_index.end()) return absl::NotFoundError(absl::StrCat("no host ", name));
  Host& h = model_.hosts[it->second];
  auto current = h.config.resources.find(resource);
  if (current != h.config.resources.end() && current->second == value) return false;
  h.config.resources[resource] = value;
  model_.RefreshValues(h);
  return true;
}

absl::Status Scheduler::AddQueue(const QueueConfig& config) {
  if (config.name.empty()) return absl::InvalidArgumentError("queue needs a name");
  if (model_.queues.count(config.name)) {
    return absl::AlreadyExistsError(absl::StrCat("queue ", config.name, " is already defined"));
  }
  if (config.max_slots < 0 || config.max_slots_per_user < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue ", config.name, ": slot limits must not be negative"));
  }
  Queue queue;
  queue.config = config;
  for (const std::string& entry : config.hosts) {
    auto [host, level] = ParsePreference(entry);
    if (!model_.host_index.count(host)) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue ", config.name, ": unknown host \"", host, "\""));
    }
    queue.preference[host] = level;
  }
  if (config.fairshare) queue.fairshare = std::make_shared<FairshareTree>(*config.fairshare);
  if (config.capacity) queue.capacity_held.assign(config.capacity->clusters.size(), 0);
  queue.order = MakeQueueOrder(config, queue.fairshare);
  model_.queues[config.name] = std::move(queue);
  return absl::OkStatus();
}

absl::Status Scheduler::UpdateQueue(const QueueConfig& config) {
  auto it = model_.queues.find(config.name);
  if (it == model_.queues.end()) return AddQueue(config);
  Queue fresh;
  fresh.config = config;
  for (const std::string& entry : config.hosts) {
    auto [host, level] = ParsePreference(entry);
    if (!model_.host_index.count(host)) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue ", config.name, ": unknown host \"", host, "\""));
    }
    fresh.preference[host] = level;
  }
  it->second.config = config;
  it->second.preference = std::move(fresh.preference);
  // A reloaded share tree keeps the usage the users built up.
  std::shared_ptr<FairshareTree> before = it->second.fairshare;
  it->second.fairshare.reset();
  if (config.fairshare) {
    it->second.fairshare = std::make_shared<FairshareTree>(*config.fairshare);
    if (before) it->second.fairshare->set_usage(before->usage());
  }
  // The order made anew (the policy may have changed) is told of every waiting job.
  std::unique_ptr<QueueOrder> order = MakeQueueOrder(config, it->second.fairshare);
  if (it->second.order) order->Continue(*it->second.order);
  for (int64_t id : it->second.pending) order->Added(model_.jobs.at(id).request);
  it->second.order = std::move(order);
  // Clusters may have changed: every job's cluster and what each holds, counted again.
  if (config.capacity || !it->second.capacity_held.empty()) model_.RecountCapacity(it->second);
  return absl::OkStatus();
}

absl::Status Scheduler::SetQueueOpen(const std::string& name, bool open) {
  auto it = model_.queues.find(name);
  if (it == model_.queues.end()) return absl::NotFoundError(absl::StrCat("no queue ", name));
  it->second.open = open;
  return absl::OkStatus();
}

std::string Scheduler::OverThreshold(const Host& h, const QueueConfig& queue, bool stop) const {
  auto check = [&](const LoadThresholds& thresholds, const std::string& whose) -> std::string {
    for (const auto& [name, t] : thresholds) {
      const std::optional<double>& limit = stop ? t.stop : t.schedule;
      if (!limit) continue;
      auto v = h.values.find(name);
      if (v == h.values.end()) continue;
      const double* value = std::get_if<double>(&v->second);
      if (value == nullptr) continue;
      auto traits = model_.traits.find(name);
      bool larger_is_busier = traits != model_.traits.end() && traits->second.larger_is_less;
      if (larger_is_busier ? *value > *limit : *value < *limit) {
        return absl::StrCat(name, " ", *value, " on ", h.config.name, " is ", larger_is_busier ? "above " : "below ",
                            whose, stop ? " stop" : " scheduling", " threshold ", *limit);
      }
    }
    return "";
  };
  std::string why = check(queue.load_thresholds, absl::StrCat("queue ", queue.name, "'s"));
  if (why.empty()) why = check(h.config.load_thresholds, "the host's");
  return why;
}

absl::Status Scheduler::SetHostThresholds(const std::string& host, const LoadThresholds& thresholds) {
  auto it = model_.host_index.find(host);
  if (it == model_.host_index.end()) return absl::NotFoundError(absl::StrCat("no host ", host));
  model_.hosts[it->second].config.load_thresholds = thresholds;
  return absl::OkStatus();
}

std::string Scheduler::LoadThresholdExceeded(const std::string& host, const std::string& queue, bool stop) const {
  auto h = model_.host_index.find(host);
  auto q = model_.queues.find(queue);
  if (h == model_.host_index.end() || q == model_.queues.end()) return "";
  return OverThreshold(model_.hosts[h->second], q->second.config, stop);
}

bool Scheduler::QueueOpen(const std::string& name) const {
  auto it = model_.queues.find(name);
  return it != model_.queues.end() && it->second.open;
}

int Scheduler::QueueJobs(const std::string& name) const {
  int n = 0;
  for (const auto& [id, job] : model_.jobs) n += job.request.queue == name;
  return n;
}

std::vector<std::string> Scheduler::UsersHolding(const std::string& queue) const {
  std::set<std::string> users;
  auto q = model_.queues.find(queue);
  if (q == model_.queues.end()) return {};
  for (const auto& [user, slots] : q->second.used_by_user) users.insert(user);
  for (const auto& [user, held] : q->second.held_by_user) users.insert(user);
  return {users.begin(), users.end()};
}

absl::Status Scheduler::RemoveQueue(const std::string& name) {
  int jobs = QueueJobs(name);
  if (jobs > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("queue ", name, " still holds ", jobs, " jobs; it can go once they end"));
  }
  model_.queues.erase(name);
  return absl::OkStatus();
}

absl::Status Scheduler::UpdateHostCapacity(const std::string& name, int slots, double mem_mb,
                                             double swap_mb, const std::vector<int>& gpus) {
  auto it = model_.host_index.find(name);
  if (it == model_.host_index.end()) return absl::NotFoundError(absl::StrCat("no host ", name));
  if (slots < 0 || mem_mb < 0) return absl::InvalidArgumentError("negative capacity");
  model_.IndexHost(it->second, false);
  Host& h = model_.hosts[it->second];
  model_.total_slots += slots - h.config.slots;
  h.config.slots = slots;
  model_.largest_host_slots = 0;
  for (const Host& other : model_.hosts) model_.largest_host_slots = std::max(model_.largest_host_slots, other.config.slots);
  h.config.mem_mb = mem_mb;
  model_.largest_host_mem = 0;
  for (const Host& other : model_.hosts) model_.largest_host_mem = std::max(model_.largest_host_mem, other.config.mem_mb);
  h.config.swap_mb = swap_mb;
  h.config.gpus = gpus;
  std::map<int, int> users;
  for (int g : gpus) {
    auto old = h.gpu_users.find(g);
    users[g] = old == h.gpu_users.end() ? 0 : old->second;
  }
  // GPUs that disappeared but are still in use stay counted until their jobs end.
  for (const auto& [g, n] : h.gpu_users) {
    if (n > 0 && !users.count(g)) users[g] = n;
  }
  h.gpu_users = std::move(users);
  model_.RefreshValues(h);
  model_.IndexHost(it->second, true);
  return absl::OkStatus();
}

absl::Status Scheduler::SetHostType(const std::string& name, const std::string& type) {
  auto it = model_.host_index.find(name);
  if (it == model_.host_index.end()) return absl::NotFoundError(absl::StrCat("no host ", name));
  double factor = 1.0;
  if (!type.empty()) {
    auto t = model_.host_types.find(type);
    if (t == model_.host_types.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown host type \"", type, "\""));
    }
    factor = t->second.cpu_factor;
  }
  model_.IndexHost(it->second, false);
  Host& h = model_.hosts[it->second];
  h.config.type = type;
  h.cpu_factor = factor;
  model_.RefreshValues(h);
  model_.IndexHost(it->second, true);
  return absl::OkStatus();
}

void Scheduler::DefineUserGroup(const std::string& group, std::vector<std::string> members) {
  model_.user_groups[group] = std::move(members);
  for (auto& [name, queue] : model_.queues) {
    if (queue.config.capacity) model_.RecountCapacity(queue);  // clusters are named by groups
  }
}

bool Scheduler::UserAllowed(const QueueConfig& queue, const std::string& user) const {
  if (queue.users.empty()) return true;
  for (const std::string& entry : queue.users) {
    if (entry == "all" || entry == user) return true;
    auto group = model_.user_groups.find(entry);
    if (group != model_.user_groups.end() &&
        std::find(group->second.begin(), group->second.end(), user) != group->second.end()) {
      return true;
    }
  }
  return false;
}

absl::Status Scheduler::SetSuspended(int64_t job_id, bool suspended) {
  auto it = model_.jobs.find(job_id);
  if (it == model_.jobs.end() || !it->second.running) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not running"));
  }
  Job& job = it->second;
  if (job.suspended == suspended) return absl::OkStatus();
  for (const auto& section : job.placement.sections) {
    for (const HostAllocation& a : section) model_.ApplyConsumables(a, suspended ? -1 : +1, true);
  }
  job.suspended = suspended;
  return absl::OkStatus();
}

absl::Status Scheduler::Submit(JobRequest job) {
  if (model_.jobs.count(job.id)) return absl::AlreadyExistsError(absl::StrCat("job ", job.id, " exists"));
  JC_RETURN_IF_ERROR(Check(&job));
  auto q = model_.queues.find(job.queue);
  Job entry;
  entry.shape = absl::StrCat(job.queue, "|", job.user, "|", ToString(job.requirement), "|",
                             job.slots, "|", job.exclusive, "|", job.gpus_per_slot, "|", job.project, "|",
                             job.app, "|", absl::ToInt64Seconds(job.run_limit));  // run limits decide backfill
  int64_t id = job.id;
  entry.cluster = model_.ClusterOf(q->second.config, job.user);
  entry.request = std::move(job);
  q->second.pending.push_back(id);
  q->second.order->Added(entry.request);
  model_.jobs[id] = std::move(entry);
  return absl::OkStatus();
}

absl::Status Scheduler::Check(JobRequest* job_ptr) const {
  JobRequest& job = *job_ptr;
  auto q = model_.queues.find(job.queue);
  if (q == model_.queues.end()) {
    return absl::InvalidArgumentError(absl::StrCat("no queue named \"", job.queue, "\""));
  }
  const QueueConfig& queue = q->second.config;
  if (!UserAllowed(queue, job.user)) {
    return absl::PermissionDeniedError(
        absl::StrCat("user ", job.user, " may not submit to queue ", queue.name));
  }
  if (job.interactive && !queue.allow_interactive) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue ", queue.name, " does not accept interactive jobs"));
  }
  if (job.gpus_per_slot < 0) return absl::InvalidArgumentError("--gpus must not be negative");
  Requirement& req = job.requirement;
  if (req.sections.empty()) req.sections.emplace_back();
  if (!req.multi_section) {
    if (job.slots < 1) return absl::InvalidArgumentError("a job needs at least one slot (-n)");
    req.sections[0].slots = job.slots;
  } else {
    job.slots = req.TotalSlots();
  }
  for (const Section& s : req.sections) {
    double gpu = RusageOf(s, "gpu");
    if (gpu < 0 || gpu != std::floor(gpu)) {
      return absl::InvalidArgumentError("rusage[gpu=...] must be a whole number of GPUs");
    }
    // A count past any host (1e20 GPUs once reached a cast to int: undefined) or no number
    // at all (a number of 400 digits parses as infinity) is refused here, never carried.
    if (gpu > kMaxGpusPerSlot) {
      return absl::InvalidArgumentError(
          absl::StrCat("rusage[gpu=...] asks for more GPUs per slot than any host has (at most ", kMaxGpusPerSlot, ")"));
    }
    for (const auto& [name, value] : s.rusage) {
      if (!std::isfinite(value)) {
        return absl::InvalidArgumentError(absl::StrCat("rusage[", name, "] must be a finite number"));
      }
      if (value < 0) {
        return absl::InvalidArgumentError(absl::StrCat("rusage[", name, "] must not be negative"));
      }
    }
    // A slot's memory is on one host: more per slot than the largest host has would wait
    // for ever (a huge finite number did), as the hosts known now say, like -n past the
    // cluster's slots below.
    const double mem = RusageOf(s, "mem");
    if (mem > model_.largest_host_mem) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "rusage[mem=%.15g] asks for more memory per slot than the largest host has (%.15g MB)", mem,
          model_.largest_host_mem));
    }
    if (s.span_hosts && s.slots > 0) {
      const int biggest = model_.largest_host_slots;
      if (s.slots > biggest) {
        return absl::InvalidArgumentError(
            absl::StrCat("span[hosts=1] asks for ", s.slots, " slots on one host; the largest "
                         "host has ", biggest));
      }
      if (mem * s.slots > model_.largest_host_mem) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "span[hosts=1] with rusage[mem=%.15g] asks for %.15g MB on one host; the largest host has %.15g MB", mem,
            mem * s.slots, model_.largest_host_mem));
      }
      // Each of the checks above may pass on a different host (the most slots on one, the
      // most memory on another): the section waits for ever unless one host has its slots,
      // their memory and their GPUs together (helper-56). A scan of the hosts, at submit only.
      const double gpus = gpu * s.slots;  // shared or not, a slot's GPUs are distinct on its host
      const bool one_host_holds_it =
          std::any_of(model_.hosts.begin(), model_.hosts.end(), [&](const ClusterModel::Host& h) {
            return h.config.slots >= s.slots && h.config.mem_mb >= mem * s.slots &&
                   static_cast<double>(h.config.gpus.size()) >= gpus;
          });
      if (!one_host_holds_it) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "span[hosts=1] asks for %d slots, %.15g MB and %.15g GPUs on one host; no host has all three", s.slots,
            mem * s.slots, gpus));
      }
    }
  }
  if (job.max_slots != 0) {
    if (job.max_slots < job.slots) {
      return absl::InvalidArgumentError(absl::StrCat("-n ", job.slots, ",", job.max_slots,
                                                     ": an elastic job's maximum must not be below its minimum"));
    }
    if (req.multi_section) {
      return absl::InvalidArgumentError("an elastic job (-n min,max) takes one section, not a multi-section -R");
    }
    if (req.sections[0].span_hosts || req.sections[0].ptile || !req.sections[0].same.empty()) {
      return absl::InvalidArgumentError(
          "an elastic job (-n min,max) grows onto any host: span[] and same[] are not allowed with it");
    }
    if (job.max_slots == job.slots) job.max_slots = 0;  // nothing to grow
  }
  if (job.slots > model_.total_slots) {
    return absl::InvalidArgumentError(absl::StrCat("the job asks for ", job.slots,
                                                   " slots; the cluster has ", model_.total_slots));
  }
  if (queue.capacity) {
    const size_t cluster = model_.ClusterOf(queue, job.user);
    if (cluster == kNoCluster) {
      return absl::InvalidArgumentError(absl::StrCat("user ", job.user, " is in no virtual cluster of queue ",
                                                     queue.name, " (and it has none named default)"));
    }
    const VirtualClusterConfig& vc = queue.capacity->clusters[cluster];
    const double demand = model_.CapacityAmount(*queue.capacity, model_.DemandOf(job));
    const char* resource = CapacityResourceName(queue.capacity->resource);
    if (vc.max > 0 && demand > vc.max) {
      return absl::InvalidArgumentError(absl::StrCat("the job asks for ", demand, " ", resource, "; virtual cluster ",
                                                     vc.name, " may hold at most ", vc.max));
    }
    if (queue.capacity->user_limit_factor > 0 && vc.guarantee > 0 &&
        demand > queue.capacity->user_limit_factor * vc.guarantee) {
      return absl::InvalidArgumentError(absl::StrCat("the job asks for ", demand, " ", resource, "; a user of virtual cluster ",
                                                     vc.name, " may hold at most ",
                                                     queue.capacity->user_limit_factor * vc.guarantee,
                                                     " (user_limit_factor × guarantee)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Cancel(int64_t job_id) {
  auto it = model_.jobs.find(job_id);
  if (it == model_.jobs.end() || it->second.running) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not pending"));
  }
  Queue& queue = model_.queues[it->second.request.queue];
  queue.pending.erase(std::remove(queue.pending.begin(), queue.pending.end(), job_id), queue.pending.end());
  if (queue.order) queue.order->Removed(it->second.request);
  model_.jobs.erase(it);
  pending_reasons_.erase(job_id);
  preemptions_.Forget(job_id);
  return absl::OkStatus();
}

size_t Scheduler::pending() const {
  size_t n = 0;
  for (const auto& [name, q] : model_.queues) n += q.pending.size();
  return n;
}

int Scheduler::free_slots(const std::string& host) const {
  const Host* h = model_.FindHost(host);
  return h == nullptr ? 0 : h->free_slots();
}

int Scheduler::HostCapacity(const Host& h, const Queue& queue, const Job& job,
                            double mem_per_slot, int gpus_per_slot,
                            const std::vector<Consume>& consumes) const {
  if (h.state != HostState::kOk || h.exclusive_jobs > 0) return 0;
  if (job.request.exclusive && h.used_slots > 0) return 0;
  int cap = h.free_slots();
  if (mem_per_slot > 0) {
    // In double until it is known to be below cap: a tiny rusage[mem] divides to past any
    // int. The epsilon is Check's and the elastic shrink's: a host of exactly the job's
    // memory in fractions (3 × 0.1 MB in 0.3) holds it.
    const double fit = (h.config.mem_mb - h.used_mem) / mem_per_slot + 1e-9;
    if (fit < cap) cap = static_cast<int>(std::max(0.0, fit));
  }
  if (gpus_per_slot > 0) {
    if (queue.config.gpu_shared) {
      if (static_cast<int>(h.gpu_users.size()) < gpus_per_slot) return 0;
    } else {
      int free = 0;
      for (const auto& [index, users] : h.gpu_users) free += users == 0;
      cap = std::min(cap, free / gpus_per_slot);
    }
  }
  for (const Consume& c : consumes) {
    if (!c.traits.per_slot) continue;  // a job's one share: taken on its first host
    cap = std::min(cap, static_cast<int>(std::floor((model_.FreeOf(h, c) + 1e-9) / c.amount)));
  }
  return std::max(cap, 0);
}

std::vector<Scheduler::Host*> Scheduler::CandidateHosts(const Job& job, const Queue& queue,
                                                        const Section& section,
                                                        double mem_per_slot, int gpus_per_slot,
                                                        const std::vector<Consume>& consumes,
                                                        int enough) {
  std::vector<Host*> out;
  auto admit = [&](Host& h) {
    if (!queue.preference.empty() && !queue.preference.count(h.config.name)) return false;
    if (section.select != nullptr && !EvaluateSelect(*section.select, h.values)) return false;
    if (limits_.any_host_limits() && limits_.HostLimited(job.request, h.config.name)) return false;
    if ((!queue.config.load_thresholds.empty() || !h.config.load_thresholds.empty()) &&
        !OverThreshold(h, queue.config, false).empty()) {
      return false;  // too busy for new work
    }
    return HostCapacity(h, queue, job, mem_per_slot, gpus_per_slot, consumes) > 0;
  };
  bool simple = section.order.empty() && section.same.empty() && queue.preference.empty();
  if (simple) {
    // Walk hosts best-first and stop once the section could be satisfied.
    int found = 0;
    auto walk = [&](const std::set<HostKey>& index, HostKey from) {
      for (auto it = index.lower_bound(from); it != index.end() && found < enough; ++it) {
        Host& h = model_.hosts[std::get<2>(*it)];
        if (!admit(h)) continue;
        int cap = HostCapacity(h, queue, job, mem_per_slot, gpus_per_slot, consumes);
        if (section.span_hosts) {
          if (cap < enough) continue;  // this host alone cannot take the section
          cap = enough;
        }
        out.push_back(&h);
        found += std::min(cap, section.ptile.value_or(kUnlimited));
      }
    };
    if (queue.config.balance == Balance::kPack) {
      walk(model_.pack_index, HostKey{1, -std::numeric_limits<double>::infinity(), 0});
    } else {
      walk(model_.spread_index, HostKey{std::numeric_limits<int>::min(),
                                  -std::numeric_limits<double>::infinity(), 0});
    }
    return out;
  }
  for (Host& h : model_.hosts) {
    if (admit(h)) out.push_back(&h);
  }
  std::stable_sort(out.begin(), out.end(), [&](const Host* a, const Host* b) {
    auto pa = queue.preference.find(a->config.name);
    auto pb = queue.preference.find(b->config.name);
    int la = pa == queue.preference.end() ? 0 : pa->second;
    int lb = pb == queue.preference.end() ? 0 : pb->second;
    if (la != lb) return la > lb;
    for (const OrderKey& key : section.order) {
      double va = OrderValue(a->values, key.resource);
      double vb = OrderValue(b->values, key.resource);
      // "Most first" means most of the resource: for one whose larger values mean less of
      // it (RESS direction: increase), the smallest value.
      auto dir = model_.traits.find(key.resource);
      bool most_first = key.descending != (dir != model_.traits.end() && dir->second.larger_is_less);
      if (va != vb) return most_first ? va > vb : va < vb;
    }
    if (a->free_slots() != b->free_slots()) {
      return queue.config.balance == Balance::kPack ? a->free_slots() < b->free_slots()
                                                     : a->free_slots() > b->free_slots();
    }
    if (a->cpu_factor != b->cpu_factor) return a->cpu_factor > b->cpu_factor;
    return model_.host_index.at(a->config.name) < model_.host_index.at(b->config.name);
  });
  return out;
}

bool Scheduler::PlaceSection(const Job& job, const Queue& queue, const Section& section,
                             int slots, std::set<std::string>* job_level_done,
                             std::vector<HostAllocation>* out) {
  double mem_per_slot = RusageOf(section, "mem");
  int gpus_per_slot = static_cast<int>(RusageOf(section, "gpu")) + job.request.gpus_per_slot;
  const std::vector<Consume> consumes = model_.ConsumesOf(section);
  std::vector<Host*> candidates =
      CandidateHosts(job, queue, section, mem_per_slot, gpus_per_slot, consumes, slots);

  auto fill = [&](const std::vector<Host*>& hosts, std::vector<HostAllocation>* alloc) {
    int remaining = slots;
    // What this section already took from shared pools (its hosts may share one).
    std::map<size_t, double> pool_taken;
    std::map<size_t, std::set<int>> pool_units_taken;
    std::set<std::string> job_level = *job_level_done;
    for (Host* h : hosts) {
      int cap = HostCapacity(*h, queue, job, mem_per_slot, gpus_per_slot, consumes);
      for (const Consume& c : consumes) {
        auto s = h->shared.find(c.resource);
        if (!c.traits.per_slot || s == h->shared.end()) continue;
        double left = model_.FreeOf(*h, c) - pool_taken[s->second];
        cap = std::min(cap, static_cast<int>(std::floor((left + 1e-9) / c.amount)));
      }
      if (section.span_hosts) {
        if (cap < slots) continue;
        cap = slots;
      }
      int take = std::min({cap, section.ptile.value_or(kUnlimited), remaining});
      if (take <= 0) continue;
      HostAllocation a;
      a.host = h->config.name;
      a.slots = take;
      a.mem_mb = take * mem_per_slot;
      // GPUs by index: free ones lowest first, or, where the queue shares GPUs, the
      // least used ones.
      std::vector<std::pair<int, int>> order;  // (users, index)
      for (const auto& [index, users] : h->gpu_users) {
        if (queue.config.gpu_shared || users == 0) order.push_back({users, index});
      }
      std::sort(order.begin(), order.end());
      for (int g = 0; g < take * gpus_per_slot; ++g) a.gpus.push_back(order[g].second);
      std::sort(a.gpus.begin(), a.gpus.end());
      // Consumables: per slot here, or the job's one share on the first host with it.
      bool fits = true;
      std::map<size_t, double> taken_here;  // merged into pool_taken once the host fits
      for (const Consume& c : consumes) {
        double amount = c.amount * take;
        if (!c.traits.per_slot) {
          if (job_level.count(c.resource)) continue;
          auto s = h->shared.find(c.resource);
          double left = model_.FreeOf(*h, c) - (s == h->shared.end() ? 0 : pool_taken[s->second]);
          if (left + 1e-9 < c.amount) {
            fits = false;
            break;
          }
          amount = c.amount;
        }
        a.reserved[c.resource] = amount;
        auto s = h->shared.find(c.resource);
        if (s != h->shared.end()) taken_here[s->second] += amount;
        if (!c.traits.assign) continue;
        // Units: the lowest free ones, none given twice.
        const Pool* pool = s == h->shared.end() ? nullptr : &model_.pools[s->second];
        const std::map<int, int>* users = pool != nullptr ? &pool->unit_users : nullptr;
        if (pool == nullptr) {
          auto u = h->unit_users.find(c.resource);
          if (u != h->unit_users.end()) users = &u->second;
        }
        double total = pool != nullptr ? pool->total : std::get<double>(h->config.resources.at(c.resource));
        std::vector<int>& given = a.units[c.resource];
        for (int u = 0; u < static_cast<int>(std::floor(total + 1e-9)) &&
                        static_cast<double>(given.size()) < amount; ++u) {
          bool busy = users != nullptr && users->count(u) && users->at(u) > 0;
          if (pool != nullptr) busy |= pool_units_taken[s->second].count(u) > 0;
          if (!busy) given.push_back(u);
        }
        if (static_cast<double>(given.size()) < amount) {
          fits = false;
          break;
        }
      }
      if (!fits) continue;
      for (const Consume& c : consumes) {
        if (!c.traits.per_slot) job_level.insert(c.resource);
      }
      for (const auto& [pool, amount] : taken_here) pool_taken[pool] += amount;
      for (const Consume& c : consumes) {
        auto s = h->shared.find(c.resource);
        auto given = a.units.find(c.resource);
        if (s != h->shared.end() && given != a.units.end()) {
          pool_units_taken[s->second].insert(given->second.begin(), given->second.end());
        }
      }
      alloc->push_back(std::move(a));
      remaining -= take;
      if (remaining == 0) {
        *job_level_done = job_level;
        return true;
      }
    }
    alloc->clear();
    return false;
  };

  if (section.same.empty()) return fill(candidates, out);
  // same[...]: try each group of hosts sharing the values, in candidate order.
  std::vector<std::string> group_order;
  std::map<std::string, std::vector<Host*>> groups;
  for (Host* h : candidates) {
    std::string key;
    bool complete = true;
    for (const std::string& name : section.same) {
      auto it = h->values.find(name);
      if (it == h->values.end()) {
        complete = false;
        break;
      }
      absl::StrAppend(&key, ValueKey(it->second), "\x1f");
    }
    if (!complete) continue;
    auto& group = groups[key];
    if (group.empty()) group_order.push_back(key);
    group.push_back(h);
  }
  for (const std::string& key : group_order) {
    if (fill(groups[key], out)) return true;
  }
  return false;
}

void Scheduler::ApplyPlacement(const Job& job, Queue& queue, const Placement& placement, int sign,
                               bool with_limits) {
  // The user's entries, looked up once (string-keyed maps) rather than per allocation.
  int& used_by_user = queue.used_by_user[job.request.user];
  DrfVector& held = queue.held_by_user[job.request.user];
  for (const auto& section : placement.sections) {
    for (const HostAllocation& a : section) {
      size_t i = model_.host_index.at(a.host);
      model_.IndexHost(i, false);
      Host& h = model_.hosts[i];
      h.used_slots += sign * a.slots;
      h.used_mem += sign * a.mem_mb;
      for (int g : a.gpus) h.gpu_users[g] += sign;
      if (!a.reserved.empty()) model_.ApplyConsumables(a, sign, false);  // refreshes every value
      if (job.request.exclusive) h.exclusive_jobs += sign;
      model_.RefreshLoad(h);
      model_.IndexHost(i, true);
      queue.used_slots += sign * a.slots;
      used_by_user += sign * a.slots;
      held.slots += sign * a.slots;
      held.mem_mb += sign * a.mem_mb;
      held.gpus += sign * static_cast<double>(a.gpus.size());
      if (job.cluster != kNoCluster && job.cluster < queue.capacity_held.size()) {
        queue.capacity_held[job.cluster] +=
            sign * (queue.config.capacity->resource == CapacityResource::kGpus ? static_cast<double>(a.gpus.size())
                                                                                : a.slots);
      }
    }
  }
  if (with_limits && !limits_.empty()) limits_.Apply(job.request, placement, sign, model_.user_groups);
}

bool Scheduler::TryPlace(const Job& job, Queue& queue, Placement* out) {
  const QueueConfig& qc = queue.config;
  int needed = job.request.slots;
  if (qc.max_slots > 0 && queue.used_slots + needed > qc.max_slots) {
    pending_reasons_[job.request.id] = absl::StrCat("queue ", qc.name, ": max_slots ", qc.max_slots, " (",
                                                    queue.used_slots, " used, ", needed, " asked)");
    return false;
  }
  if (qc.max_slots_per_user > 0) {
    auto it = queue.used_by_user.find(job.request.user);
    int used = it == queue.used_by_user.end() ? 0 : it->second;
    if (used + needed > qc.max_slots_per_user) {
      pending_reasons_[job.request.id] =
          absl::StrCat("queue ", qc.name, ": max_slots_per_user ", qc.max_slots_per_user, " (", job.request.user,
                       " uses ", used, ", ", needed, " asked)");
      return false;
    }
  }
  if (qc.capacity) {
    std::string exceeded = CapacityExceeded(job, queue);
    if (!exceeded.empty()) {
      pending_reasons_[job.request.id] = std::move(exceeded);
      return false;
    }
  }
  limits_.SelectForHosts(job.request, model_.user_groups);
  // Gang: each section is applied as soon as it is placed so the next one sees it; if
  // any section fails, every applied one is rolled back and nothing changes.
  Placement placement;
  placement.job_id = job.request.id;
  std::set<std::string> job_level_done;  // per-job consumables reserved by an earlier section
  for (const Section& section : job.request.requirement.sections) {
    std::vector<HostAllocation> alloc;
    if (!PlaceSection(job, queue, section, section.slots, &job_level_done, &alloc)) {
      pending_reasons_.erase(job.request.id);  // it does not fit: no limit to name
      Apply(job, queue, placement, -1);
      return false;
    }
    Placement one;
    one.sections.push_back(alloc);
    Apply(job, queue, one, +1);
    placement.sections.push_back(std::move(alloc));
  }
  if (!limits_.empty()) {
    std::string exceeded = limits_.Exceeded(job.request, placement, model_.user_groups);
    if (!exceeded.empty()) {
      Apply(job, queue, placement, -1);
      pending_reasons_[job.request.id] = std::move(exceeded);
      return false;
    }
  }
  pending_reasons_.erase(job.request.id);
  *out = std::move(placement);
  return true;
}

std::vector<Placement> Scheduler::Cycle(CycleStats* stats) {
  CycleStats local;
  CycleStats& st = stats != nullptr ? *stats : local;
  std::vector<Placement> placed;
  ++cycles_;
  std::vector<Queue*> order;
  for (auto& [name, q] : model_.queues) order.push_back(&q);
  std::stable_sort(order.begin(), order.end(), [](const Queue* a, const Queue* b) {
    return a->config.priority > b->config.priority;
  });
  // Shapes that failed this cycle, with the reason (a limit's) their jobs wait for.
  std::unordered_map<std::string, std::string> failed_shapes;
  backfill_.StartCycle();
  for (Queue* queue : order) {
    if (!queue->open) continue;
    // Preempted jobs of this queue go before its waiting ones, once their slots are free.
    if (!queue->lent.empty()) preemptions_.ResumeLent(*queue);
    if (queue->pending.empty()) continue;
    CycleQueue(*queue, failed_shapes, &placed, st);
  }
  // Elastic jobs grow into what is left; slots held for reservations are not.
  elastic_.Grow(cycles_);
  // Held slots are this cycle's only: the next one computes its reservations again.
  backfill_.EndCycle();
  return placed;
}

// One queue's part of a cycle: its pending jobs in its order, each placed, or given back
// growth, or preempting for, or reserved for, or left waiting with the reason.
void Scheduler::CycleQueue(Queue& queue, std::unordered_map<std::string, std::string>& failed_shapes,
                           std::vector<Placement>* placed, CycleStats& st) {
  // A capacity queue may reclaim guarantees by preemption.
  bool fairshare_preempts = queue.config.fairshare && queue.config.fairshare->preemptive;
  // Each fair-share preemption attempt scans the running jobs: a few per queue and cycle
  // (the users furthest under their share come first in the order anyway).
  constexpr int kFairsharePreemptTries = 16;
  int fairshare_tries = 0;
  bool preemptive = !queue.config.preempt.empty() || queue.config.capacity.has_value() || fairshare_preempts;
  bool reserved_in_queue = false;  // one reservation per queue and cycle (EASY backfill)
  std::vector<int64_t> dispatched;  // sorted once the queue is done
  std::vector<const JobRequest*> dispatched_in_order;  // not looked up again
  const OrderInputs inputs = InputsOf(queue);
  std::unique_ptr<OrderSequence> sequence = queue.order->Start(inputs);
  for (int64_t id = 0; sequence->Next(&id);) {
    Job& job = model_.jobs.at(id);
    const bool full = model_.pack_index.empty() || std::get<0>(*model_.pack_index.rbegin()) <= 0;
    if (full && !preemptive && !elastic_.AnyGrown()) {
      // Cluster full: only slots reservations hold can still take a job, and only one
      // that backfills (slots are not freed within a cycle).
      if (backfill_.held_slots() == 0) break;
      if (!backfill_.MayBackfill(job, now_)) continue;
    }
    ++st.considered;
    if (auto failed = failed_shapes.find(job.shape); failed != failed_shapes.end()) {
      ++st.skipped_by_cache;
      if (failed->second.empty()) {
        pending_reasons_.erase(id);
      } else {
        pending_reasons_[id] = failed->second;
      }
      continue;
    }
    Placement placement;
    bool placed_now = backfill_.Place(job, queue, now_, &placement);
    Elastic::TakenBack taken;  // allocations elastic jobs grew by, taken back for this job
    if (!placed_now && elastic_.AnyGrown() && !pending_reasons_.count(id)) {
      // What elastic jobs grew by goes back first, before anything is preempted.
      placed_now = elastic_.TakeBack(job, queue, &placement, &taken);
      if (!placed_now) pending_reasons_.erase(id);  // it does not fit: no limit to name
    }
    if (!placed_now) {
      auto reason = pending_reasons_.find(id);
      failed_shapes[job.shape] = reason == pending_reasons_.end() ? "" : reason->second;
      // One preemption per shape and cycle: the next job of the shape waits for the
      // next cycle, which sees what this one freed.
      // Preempting frees resources; a job a limit holds would not start anyway.
      const bool waits_for_resources = failed_shapes[job.shape].empty();
      auto fairshare_preempt = [&] {
        if (++fairshare_tries == kFairsharePreemptTries) {
          fairshare_preempts = false;
          preemptive = !queue.config.preempt.empty() || queue.config.capacity.has_value();
        }
        return preemptions_.ByFairshare(job, queue, now_);
      };
      const bool preempted = waits_for_resources &&
                             ((!queue.config.preempt.empty() && preemptions_.ByQueue(job, queue, now_)) ||
                              (queue.config.capacity && TryReclaim(job, queue)) ||
                              (fairshare_preempts && fairshare_preempt()));
      // Taken-back growth stays taken when preemption frees the rest; else it returns.
      elastic_.Settle(&taken, id, preempted);
      if (preempted) {
        failed_shapes[job.shape] = "";
        elastic_.TookBack();
      } else if (queue.config.backfill && !reserved_in_queue && failed_shapes[job.shape].empty()) {
        // Only a job waiting for resources reserves; one a limit holds would hold hosts
        // it may not use.
        if (std::optional<std::string> reason = backfill_.Reserve(job, queue, now_)) pending_reasons_[id] = *reason;
        reserved_in_queue = true;
      }
      continue;
    }
    elastic_.Settle(&taken, id, true);
    if (placement.backfilled_before != 0) ++st.backfilled;
    preemptions_.Forget(id);
    job.started = now_;
    job.running = true;
    job.placement = placement;
    job.base_sections = job.placement.sections.size();
    job.placed_in_cycle = cycles_;
    elastic_.Placed(job.request);
    model_.running.insert(id);
    sequence->Taken();
    dispatched.push_back(id);
    dispatched_in_order.push_back(&job.request);
    placed->push_back(std::move(placement));
    ++st.placed;
  }
  sequence.reset();  // the order may change now
  if (!dispatched.empty()) {
    for (const JobRequest* request : dispatched_in_order) queue.order->Dispatched(*request);
    std::sort(dispatched.begin(), dispatched.end());
    auto& p = queue.pending;
    p.erase(std::remove_if(p.begin(), p.end(),
                           [&](int64_t id) { return std::binary_search(dispatched.begin(), dispatched.end(), id); }),
            p.end());
  }
}

absl::Status Scheduler::Release(int64_t job_id) {
  auto it = model_.jobs.find(job_id);
  if (it == model_.jobs.end() || !it->second.running) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not running"));
  }
  if (it->second.lent) {
    // Its slots were lent: take them back so Apply returns everything once.
    preemptions_.Lend(it->second, +1, false);
    auto& lent = model_.queues.at(it->second.request.queue).lent;
    lent.erase(std::remove(lent.begin(), lent.end(), job_id), lent.end());
  }
  if (it->second.suspended) {
    // What the suspension gave back is not held: take it again so Apply returns it all.
    for (const auto& section : it->second.placement.sections) {
      for (const HostAllocation& a : section) model_.ApplyConsumables(a, +1, true);
    }
  }
  Apply(it->second, model_.queues.at(it->second.request.queue), it->second.placement, -1);
  elastic_.Released(it->second);
  model_.running.erase(job_id);
  model_.jobs.erase(it);
  return absl::OkStatus();
}

absl::Status Scheduler::Restore(const JobRequest& request, const Placement& placement, absl::Time started,
                               int grown) {
  auto q = model_.queues.find(request.queue);
  if (q == model_.queues.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", request.id, " ran in queue ", request.queue, ", which is gone"));
  }
  for (const auto& section : placement.sections) {
    for (const auto& a : section) {
      if (!model_.host_index.count(a.host)) {
        return absl::FailedPreconditionError(
            absl::StrCat("job ", request.id, " ran on host ", a.host, ", which is gone"));
      }
    }
  }
  Job job;
  job.request = request;
  job.placement = placement;
  job.running = true;
  job.started = started;
  job.cluster = model_.ClusterOf(q->second.config, request.user);
  grown = std::clamp(grown, 0, static_cast<int>(placement.sections.size()));
  job.base_sections = placement.sections.size() - static_cast<size_t>(grown);
  Apply(job, q->second, placement, +1);
  elastic_.Restored(request, grown);
  model_.running.insert(request.id);
  model_.jobs[request.id] = std::move(job);
  return absl::OkStatus();
}

}  // namespace jc::nexec
