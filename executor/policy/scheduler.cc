#include "executor/policy/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace jc::nexec {
namespace {

constexpr int kUnlimited = std::numeric_limits<int>::max();

double RusageOf(const Section& s, const char* name) {
  auto it = s.rusage.find(name);
  return it == s.rusage.end() ? 0 : it->second;
}

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
  host_types_[type.name] = type;
  return absl::OkStatus();
}

absl::Status Scheduler::AddHost(const HostConfig& config) {
  if (config.name.empty()) return absl::InvalidArgumentError("host needs a name");
  if (host_index_.count(config.name)) {
    return absl::AlreadyExistsError(absl::StrCat("host ", config.name, " is already defined"));
  }
  if (config.slots < 0 || config.mem_mb < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", config.name, ": slots and memory must not be negative"));
  }
  Host host;
  host.config = config;
  if (!config.type.empty()) {
    auto it = host_types_.find(config.type);
    if (it == host_types_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", config.name, ": unknown host type \"", config.type, "\""));
    }
    host.cpu_factor = it->second.cpu_factor;
  }
  for (int gpu : config.gpus) host.gpu_users[gpu] = 0;
  RefreshValues(host);
  host_index_[config.name] = hosts_.size();
  hosts_.push_back(std::move(host));
  total_slots_ += config.slots;
  Reindex(hosts_.size() - 1, true);
  return absl::OkStatus();
}

void Scheduler::Reindex(size_t i, bool insert) {
  const Host& h = hosts_[i];
  HostKey pack{h.free_slots(), -h.cpu_factor, i};
  HostKey spread{-h.free_slots(), -h.cpu_factor, i};
  if (insert) {
    pack_index_.insert(pack);
    spread_index_.insert(spread);
  } else {
    pack_index_.erase(pack);
    spread_index_.erase(spread);
  }
}

absl::Status Scheduler::SetHostState(const std::string& name, HostState state) {
  auto it = host_index_.find(name);
  if (it == host_index_.end()) return absl::NotFoundError(absl::StrCat("no host ", name));
  hosts_[it->second].state = state;
  return absl::OkStatus();
}

absl::StatusOr<bool> Scheduler::SetHostResource(const std::string& name,
                                                const std::string& resource,
                                                const ResourceValue& value) {
  auto it = host_index_.find(name);
  if (it == host_index_.end()) return absl::NotFoundError(absl::StrCat("no host ", name));
  Host& h = hosts_[it->second];
  auto current = h.config.resources.find(resource);
  if (current != h.config.resources.end() && current->second == value) return false;
  h.config.resources[resource] = value;
  RefreshValues(h);
  return true;
}

absl::Status Scheduler::AddQueue(const QueueConfig& config) {
  if (config.name.empty()) return absl::InvalidArgumentError("queue needs a name");
  if (queues_.count(config.name)) {
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
    if (!host_index_.count(host)) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue ", config.name, ": unknown host \"", host, "\""));
    }
    queue.preference[host] = level;
  }
  queues_[config.name] = std::move(queue);
  return absl::OkStatus();
}

absl::Status Scheduler::UpdateQueue(const QueueConfig& config) {
  auto it = queues_.find(config.name);
  if (it == queues_.end()) return AddQueue(config);
  Queue fresh;
  fresh.config = config;
  for (const std::string& entry : config.hosts) {
    auto [host, level] = ParsePreference(entry);
    if (!host_index_.count(host)) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue ", config.name, ": unknown host \"", host, "\""));
    }
    fresh.preference[host] = level;
  }
  it->second.config = config;
  it->second.preference = std::move(fresh.preference);
  return absl::OkStatus();
}

absl::Status Scheduler::SetQueueOpen(const std::string& name, bool open) {
  auto it = queues_.find(name);
  if (it == queues_.end()) return absl::NotFoundError(absl::StrCat("no queue ", name));
  it->second.open = open;
  return absl::OkStatus();
}

bool Scheduler::QueueOpen(const std::string& name) const {
  auto it = queues_.find(name);
  return it != queues_.end() && it->second.open;
}

int Scheduler::QueueJobs(const std::string& name) const {
  int n = 0;
  for (const auto& [id, job] : jobs_) n += job.request.queue == name;
  return n;
}

absl::Status Scheduler::RemoveQueue(const std::string& name) {
  int jobs = QueueJobs(name);
  if (jobs > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("queue ", name, " still holds ", jobs, " jobs; it can go once they end"));
  }
  queues_.erase(name);
  return absl::OkStatus();
}

absl::Status Scheduler::UpdateHostCapacity(const std::string& name, int slots, double mem_mb,
                                             double swap_mb, const std::vector<int>& gpus) {
  auto it = host_index_.find(name);
  if (it == host_index_.end()) return absl::NotFoundError(absl::StrCat("no host ", name));
  if (slots < 0 || mem_mb < 0) return absl::InvalidArgumentError("negative capacity");
  Reindex(it->second, false);
  Host& h = hosts_[it->second];
  total_slots_ += slots - h.config.slots;
  h.config.slots = slots;
  h.config.mem_mb = mem_mb;
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
  RefreshValues(h);
  Reindex(it->second, true);
  return absl::OkStatus();
}

absl::Status Scheduler::SetHostType(const std::string& name, const std::string& type) {
  auto it = host_index_.find(name);
  if (it == host_index_.end()) return absl::NotFoundError(absl::StrCat("no host ", name));
  double factor = 1.0;
  if (!type.empty()) {
    auto t = host_types_.find(type);
    if (t == host_types_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown host type \"", type, "\""));
    }
    factor = t->second.cpu_factor;
  }
  Reindex(it->second, false);
  Host& h = hosts_[it->second];
  h.config.type = type;
  h.cpu_factor = factor;
  RefreshValues(h);
  Reindex(it->second, true);
  return absl::OkStatus();
}

void Scheduler::DefineUserGroup(const std::string& group, std::vector<std::string> members) {
  user_groups_[group] = std::move(members);
}

bool Scheduler::UserAllowed(const QueueConfig& queue, const std::string& user) const {
  if (queue.users.empty()) return true;
  for (const std::string& entry : queue.users) {
    if (entry == "all" || entry == user) return true;
    auto group = user_groups_.find(entry);
    if (group != user_groups_.end() &&
        std::find(group->second.begin(), group->second.end(), user) != group->second.end()) {
      return true;
    }
  }
  return false;
}

void Scheduler::RefreshValues(Host& h) {
  int free_gpus = 0;
  for (const auto& [index, users] : h.gpu_users) free_gpus += users == 0;
  ResourceValues& v = h.values;
  v = h.config.resources;  // static and sensor values; the built-ins below win
  v["hname"] = h.config.name;
  v["type"] = h.config.type.empty() ? std::string("default") : h.config.type;
  v["cpuf"] = h.cpu_factor;
  v["ncpus"] = static_cast<double>(h.config.slots);
  v["maxslots"] = static_cast<double>(h.config.slots);
  v["slots"] = static_cast<double>(h.free_slots());
  v["maxmem"] = h.config.mem_mb;
  v["mem"] = h.config.mem_mb - h.used_mem;
  v["maxswp"] = h.config.swap_mb;
  v["ngpus"] = static_cast<double>(h.gpu_users.size());
  v["gpu"] = static_cast<double>(free_gpus);
}

absl::Status Scheduler::Submit(JobRequest job) {
  if (jobs_.count(job.id)) return absl::AlreadyExistsError(absl::StrCat("job ", job.id, " exists"));
  JC_RETURN_IF_ERROR(Check(&job));
  auto q = queues_.find(job.queue);
  Job entry;
  entry.shape = absl::StrCat(job.queue, "|", job.user, "|", ToString(job.requirement), "|",
                             job.slots, "|", job.exclusive, "|", job.gpus_per_slot);
  int64_t id = job.id;
  entry.request = std::move(job);
  q->second.pending.push_back(id);
  jobs_[id] = std::move(entry);
  return absl::OkStatus();
}

absl::Status Scheduler::Check(JobRequest* job_ptr) const {
  JobRequest& job = *job_ptr;
  auto q = queues_.find(job.queue);
  if (q == queues_.end()) {
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
    for (const auto& [name, value] : s.rusage) {
      if (value < 0) {
        return absl::InvalidArgumentError(absl::StrCat("rusage[", name, "] must not be negative"));
      }
    }
    if (s.span_hosts && s.slots > 0) {
      int biggest = 0;
      for (const Host& h : hosts_) biggest = std::max(biggest, h.config.slots);
      if (s.slots > biggest) {
        return absl::InvalidArgumentError(
            absl::StrCat("span[hosts=1] asks for ", s.slots, " slots on one host; the largest "
                         "host has ", biggest));
      }
    }
  }
  if (job.slots > total_slots_) {
    return absl::InvalidArgumentError(absl::StrCat("the job asks for ", job.slots,
                                                   " slots; the cluster has ", total_slots_));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Cancel(int64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.running) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not pending"));
  }
  auto& pending = queues_[it->second.request.queue].pending;
  pending.erase(std::remove(pending.begin(), pending.end(), job_id), pending.end());
  jobs_.erase(it);
  return absl::OkStatus();
}

size_t Scheduler::pending() const {
  size_t n = 0;
  for (const auto& [name, q] : queues_) n += q.pending.size();
  return n;
}

int Scheduler::free_slots(const std::string& host) const {
  auto it = host_index_.find(host);
  return it == host_index_.end() ? 0 : hosts_[it->second].free_slots();
}

std::vector<int64_t> Scheduler::DispatchOrder(const Queue& queue) const {
  if (!queue.config.user_round_robin) return {queue.pending.begin(), queue.pending.end()};
  // Round robin: every user's first job, then every user's second job, and so on. Users
  // go in the order of their oldest waiting job, starting after the user served last, so
  // turns carry over from one cycle to the next.
  std::vector<std::string> users;
  std::unordered_map<std::string, std::vector<int64_t>> by_user;
  for (int64_t id : queue.pending) {
    const std::string& user = jobs_.at(id).request.user;
    auto& list = by_user[user];
    if (list.empty()) users.push_back(user);
    list.push_back(id);
  }
  auto last = std::find(users.begin(), users.end(), queue.last_dispatched_user);
  if (last != users.end()) std::rotate(users.begin(), last + 1, users.end());
  std::vector<int64_t> order;
  order.reserve(queue.pending.size());
  for (size_t round = 0; order.size() < queue.pending.size(); ++round) {
    for (const std::string& user : users) {
      const auto& list = by_user[user];
      if (round < list.size()) order.push_back(list[round]);
    }
  }
  return order;
}

int Scheduler::HostCapacity(const Host& h, const Queue& queue, const Job& job,
                            double mem_per_slot, int gpus_per_slot) const {
  if (h.state != HostState::kOk || h.exclusive_jobs > 0) return 0;
  if (job.request.exclusive && h.used_slots > 0) return 0;
  int cap = h.free_slots();
  if (mem_per_slot > 0) {
    cap = std::min<int>(cap, static_cast<int>((h.config.mem_mb - h.used_mem) / mem_per_slot));
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
  return std::max(cap, 0);
}

std::vector<Scheduler::Host*> Scheduler::CandidateHosts(const Job& job, const Queue& queue,
                                                        const Section& section,
                                                        double mem_per_slot, int gpus_per_slot,
                                                        int enough) {
  std::vector<Host*> out;
  auto admit = [&](Host& h) {
    if (!queue.preference.empty() && !queue.preference.count(h.config.name)) return false;
    if (section.select != nullptr && !EvaluateSelect(*section.select, h.values)) return false;
    return HostCapacity(h, queue, job, mem_per_slot, gpus_per_slot) > 0;
  };
  bool simple = section.order.empty() && section.same.empty() && queue.preference.empty();
  if (simple) {
    // Walk hosts best-first and stop once the section could be satisfied.
    int found = 0;
    auto walk = [&](const std::set<HostKey>& index, HostKey from) {
      for (auto it = index.lower_bound(from); it != index.end() && found < enough; ++it) {
        Host& h = hosts_[std::get<2>(*it)];
        if (!admit(h)) continue;
        int cap = HostCapacity(h, queue, job, mem_per_slot, gpus_per_slot);
        if (section.span_hosts) {
          if (cap < enough) continue;  // this host alone cannot take the section
          cap = enough;
        }
        out.push_back(&h);
        found += std::min(cap, section.ptile.value_or(kUnlimited));
      }
    };
    if (queue.config.balance == Balance::kPack) {
      walk(pack_index_, HostKey{1, -std::numeric_limits<double>::infinity(), 0});
    } else {
      walk(spread_index_, HostKey{std::numeric_limits<int>::min(),
                                  -std::numeric_limits<double>::infinity(), 0});
    }
    return out;
  }
  for (Host& h : hosts_) {
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
      auto dir = larger_is_less_.find(key.resource);
      bool most_first = key.descending != (dir != larger_is_less_.end() && dir->second);
      if (va != vb) return most_first ? va > vb : va < vb;
    }
    if (a->free_slots() != b->free_slots()) {
      return queue.config.balance == Balance::kPack ? a->free_slots() < b->free_slots()
                                                     : a->free_slots() > b->free_slots();
    }
    if (a->cpu_factor != b->cpu_factor) return a->cpu_factor > b->cpu_factor;
    return host_index_.at(a->config.name) < host_index_.at(b->config.name);
  });
  return out;
}

bool Scheduler::PlaceSection(const Job& job, const Queue& queue, const Section& section,
                             int slots, std::vector<HostAllocation>* out) {
  double mem_per_slot = RusageOf(section, "mem");
  int gpus_per_slot = static_cast<int>(RusageOf(section, "gpu")) + job.request.gpus_per_slot;
  std::vector<Host*> candidates =
      CandidateHosts(job, queue, section, mem_per_slot, gpus_per_slot, slots);

  auto fill = [&](const std::vector<Host*>& hosts, std::vector<HostAllocation>* alloc) {
    int remaining = slots;
    for (Host* h : hosts) {
      int cap = HostCapacity(*h, queue, job, mem_per_slot, gpus_per_slot);
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
      alloc->push_back(std::move(a));
      remaining -= take;
      if (remaining == 0) return true;
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

void Scheduler::Apply(const Job& job, Queue& queue, const Placement& placement, int sign) {
  for (const auto& section : placement.sections) {
    for (const HostAllocation& a : section) {
      size_t i = host_index_.at(a.host);
      Reindex(i, false);
      Host& h = hosts_[i];
      h.used_slots += sign * a.slots;
      h.used_mem += sign * a.mem_mb;
      for (int g : a.gpus) h.gpu_users[g] += sign;
      if (job.request.exclusive) h.exclusive_jobs += sign;
      RefreshValues(h);
      Reindex(i, true);
      queue.used_slots += sign * a.slots;
      queue.used_by_user[job.request.user] += sign * a.slots;
    }
  }
}

bool Scheduler::TryPlace(const Job& job, Queue& queue, Placement* out) {
  const QueueConfig& qc = queue.config;
  int needed = job.request.slots;
  if (qc.max_slots > 0 && queue.used_slots + needed > qc.max_slots) return false;
  if (qc.max_slots_per_user > 0) {
    auto it = queue.used_by_user.find(job.request.user);
    int used = it == queue.used_by_user.end() ? 0 : it->second;
    if (used + needed > qc.max_slots_per_user) return false;
  }
  // Gang: each section is applied as soon as it is placed so the next one sees it; if
  // any section fails, every applied one is rolled back and nothing changes.
  Placement placement;
  placement.job_id = job.request.id;
  for (const Section& section : job.request.requirement.sections) {
    std::vector<HostAllocation> alloc;
    if (!PlaceSection(job, queue, section, section.slots, &alloc)) {
      Apply(job, queue, placement, -1);
      return false;
    }
    Placement one;
    one.sections.push_back(alloc);
    Apply(job, queue, one, +1);
    placement.sections.push_back(std::move(alloc));
  }
  *out = std::move(placement);
  return true;
}

std::vector<Placement> Scheduler::Cycle(CycleStats* stats) {
  CycleStats local;
  CycleStats& st = stats != nullptr ? *stats : local;
  std::vector<Placement> placed;
  std::vector<Queue*> order;
  for (auto& [name, q] : queues_) order.push_back(&q);
  std::stable_sort(order.begin(), order.end(), [](const Queue* a, const Queue* b) {
    return a->config.priority > b->config.priority;
  });
  std::unordered_set<std::string> failed_shapes;
  for (Queue* queue : order) {
    if (queue->pending.empty() || !queue->open) continue;
    std::unordered_set<int64_t> dispatched;
    for (int64_t id : DispatchOrder(*queue)) {
      if (pack_index_.empty() || std::get<0>(*pack_index_.rbegin()) <= 0) break;  // cluster full
      Job& job = jobs_.at(id);
      ++st.considered;
      if (failed_shapes.count(job.shape)) {
        ++st.skipped_by_cache;
        continue;
      }
      Placement placement;
      if (!TryPlace(job, *queue, &placement)) {
        failed_shapes.insert(job.shape);
        continue;
      }
      job.running = true;
      job.placement = placement;
      queue->last_dispatched_user = job.request.user;
      running_.insert(id);
      dispatched.insert(id);
      placed.push_back(std::move(placement));
      ++st.placed;
    }
    if (!dispatched.empty()) {
      auto& p = queue->pending;
      p.erase(std::remove_if(p.begin(), p.end(), [&](int64_t id) { return dispatched.count(id) > 0; }),
              p.end());
    }
  }
  return placed;
}

absl::Status Scheduler::Release(int64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.running) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not running"));
  }
  Apply(it->second, queues_.at(it->second.request.queue), it->second.placement, -1);
  running_.erase(job_id);
  jobs_.erase(it);
  return absl::OkStatus();
}

absl::Status Scheduler::Restore(const JobRequest& request, const Placement& placement) {
  auto q = queues_.find(request.queue);
  if (q == queues_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", request.id, " ran in queue ", request.queue, ", which is gone"));
  }
  for (const auto& section : placement.sections) {
    for (const auto& a : section) {
      if (!host_index_.count(a.host)) {
        return absl::FailedPreconditionError(
            absl::StrCat("job ", request.id, " ran on host ", a.host, ", which is gone"));
      }
    }
  }
  Job job;
  job.request = request;
  job.placement = placement;
  job.running = true;
  Apply(job, q->second, placement, +1);
  running_.insert(request.id);
  jobs_[request.id] = std::move(job);
  return absl::OkStatus();
}

}  // namespace jc::nexec
