#include "executor/policy/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  largest_host_slots_ = std::max(largest_host_slots_, config.slots);
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
  if (config.fairshare) queue.fairshare = std::make_shared<FairshareTree>(*config.fairshare);
  if (config.capacity) queue.capacity_held.assign(config.capacity->clusters.size(), 0);
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
  // A reloaded share tree keeps the usage the users built up.
  std::shared_ptr<FairshareTree> before = it->second.fairshare;
  it->second.fairshare.reset();
  if (config.fairshare) {
    it->second.fairshare = std::make_shared<FairshareTree>(*config.fairshare);
    if (before) it->second.fairshare->set_usage(before->usage());
    for (int64_t id : it->second.pending) {
      const JobRequest& r = jobs_.at(id).request;
      it->second.fairshare->AddPending(r.user, id, r.slots);
    }
  }
  // Clusters may have changed: every job's cluster and what each holds, counted again.
  if (config.capacity || !it->second.capacity_held.empty()) RecountCapacity(it->second);
  return absl::OkStatus();
}

absl::Status Scheduler::SetQueueOpen(const std::string& name, bool open) {
  auto it = queues_.find(name);
  if (it == queues_.end()) return absl::NotFoundError(absl::StrCat("no queue ", name));
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
      auto traits = traits_.find(name);
      bool larger_is_busier = traits != traits_.end() && traits->second.larger_is_less;
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
  auto it = host_index_.find(host);
  if (it == host_index_.end()) return absl::NotFoundError(absl::StrCat("no host ", host));
  hosts_[it->second].config.load_thresholds = thresholds;
  return absl::OkStatus();
}

std::string Scheduler::LoadThresholdExceeded(const std::string& host, const std::string& queue, bool stop) const {
  auto h = host_index_.find(host);
  auto q = queues_.find(queue);
  if (h == host_index_.end() || q == queues_.end()) return "";
  return OverThreshold(hosts_[h->second], q->second.config, stop);
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
  largest_host_slots_ = 0;
  for (const Host& other : hosts_) largest_host_slots_ = std::max(largest_host_slots_, other.config.slots);
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
  for (auto& [name, queue] : queues_) {
    if (queue.config.capacity) RecountCapacity(queue);  // clusters are named by groups
  }
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
  // Consumables: select[] and order[] see what is left of them.
  for (const auto& [name, index] : h.shared) v[name] = pools_[index].total - pools_[index].reserved;
  for (const auto& [name, amount] : h.reserved) {
    auto it = h.config.resources.find(name);
    if (h.shared.count(name) || it == h.config.resources.end()) continue;
    if (const double* total = std::get_if<double>(&it->second)) v[name] = *total - amount;
  }
}

void Scheduler::RefreshLoad(Host& h) {
  // What a placement of slots, memory and GPUs changes, in place: no copy of the host's
  // values (RefreshValues) for every placement.
  int free_gpus = 0;
  for (const auto& [index, users] : h.gpu_users) free_gpus += users == 0;
  ResourceValues& v = h.values;
  v["slots"] = static_cast<double>(h.free_slots());
  v["mem"] = h.config.mem_mb - h.used_mem;
  v["gpu"] = static_cast<double>(free_gpus);
}

std::vector<Scheduler::Consume> Scheduler::ConsumesOf(const Section& section) const {
  std::vector<Consume> out;
  for (const auto& [name, amount] : section.rusage) {
    if (name == "mem" || name == "gpu" || amount <= 0) continue;
    Consume c{name, amount, {}};
    if (auto t = traits_.find(name); t != traits_.end()) c.traits = t->second;
    if (c.traits.assign) c.amount = std::ceil(amount);  // units are whole
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

int FreeUnits(double total, const std::map<int, int>& users) {
  int free = 0;
  for (int u = 0; u < static_cast<int>(std::floor(total + 1e-9)); ++u) {
    auto it = users.find(u);
    free += it == users.end() || it->second == 0;
  }
  return free;
}

}  // namespace

double Scheduler::FreeOf(const Host& h, const Consume& c) const {
  if (auto s = h.shared.find(c.resource); s != h.shared.end()) {
    const Pool& p = pools_[s->second];
    return c.traits.assign ? FreeUnits(p.total, p.unit_users) : p.total - p.reserved;
  }
  auto it = h.config.resources.find(c.resource);
  if (it == h.config.resources.end()) return 0;
  const double* total = std::get_if<double>(&it->second);
  if (total == nullptr) return 0;
  if (c.traits.assign) {
    auto users = h.unit_users.find(c.resource);
    return users == h.unit_users.end() ? std::floor(*total + 1e-9) : FreeUnits(*total, users->second);
  }
  auto used = h.reserved.find(c.resource);
  return *total - (used == h.reserved.end() ? 0 : used->second);
}

void Scheduler::ApplyConsumables(const HostAllocation& a, int sign, bool only_released) {
  Host& h = hosts_[host_index_.at(a.host)];
  std::set<size_t> touched_pools;
  for (const auto& [name, amount] : a.reserved) {
    if (only_released) {
      auto t = traits_.find(name);
      if (t == traits_.end() || !t->second.release) continue;
    }
    auto units = a.units.find(name);
    if (auto s = h.shared.find(name); s != h.shared.end()) {
      Pool& p = pools_[s->second];
      p.reserved += sign * amount;
      if (units != a.units.end()) {
        for (int u : units->second) p.unit_users[u] += sign;
      }
      touched_pools.insert(s->second);
    } else {
      h.reserved[name] += sign * amount;
      if (units != a.units.end()) {
        for (int u : units->second) h.unit_users[name][u] += sign;
      }
    }
  }
  RefreshValues(h);
  for (size_t p : touched_pools) {
    for (size_t member : pools_[p].hosts) RefreshValues(hosts_[member]);
  }
}

size_t Scheduler::PoolFor(const std::string& name, const std::string& scope) {
  auto [it, added] = pool_index_.emplace(std::make_pair(name, scope), pools_.size());
  if (added) pools_.push_back(Pool{name, {}, 0, 0, {}});
  return it->second;
}

void Scheduler::JoinPool(size_t index, size_t host) {
  Pool& pool = pools_[index];
  Host& h = hosts_[host];
  auto [at, added] = h.shared.insert({pool.resource, index});
  if (!added && at->second == index) return;
  if (added) {
    // What the host's jobs reserved of its own value before the stock was known (a
    // master that just restarted, a host that just joined) now counts against the stock.
    if (auto r = h.reserved.find(pool.resource); r != h.reserved.end()) {
      pool.reserved += r->second;
      h.reserved.erase(r);
    }
    if (auto u = h.unit_users.find(pool.resource); u != h.unit_users.end()) {
      for (const auto& [unit, users] : u->second) pool.unit_users[unit] += users;
      h.unit_users.erase(u);
    }
  }
  at->second = index;
  auto& members = pool.hosts;
  if (!std::binary_search(members.begin(), members.end(), host)) {
    members.insert(std::upper_bound(members.begin(), members.end(), host), host);
  }
  RefreshValues(h);
}

absl::Status Scheduler::SetSharedResource(const std::string& name, const std::string& scope,
                                          const std::vector<std::string>& hosts, double total) {
  std::vector<size_t> members;
  for (const auto& host : hosts) {
    auto it = host_index_.find(host);
    if (it == host_index_.end()) return absl::NotFoundError(absl::StrCat("no host ", host));
    members.push_back(it->second);
  }
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  const size_t index = PoolFor(name, scope);
  Pool& pool = pools_[index];
  pool.total = total;
  for (size_t former : std::vector<size_t>(pool.hosts)) {
    if (std::binary_search(members.begin(), members.end(), former)) continue;
    auto& shared = hosts_[former].shared;
    if (auto s = shared.find(name); s != shared.end() && s->second == index) shared.erase(s);
    auto& list = pools_[index].hosts;
    list.erase(std::remove(list.begin(), list.end(), former), list.end());
    RefreshValues(hosts_[former]);
  }
  for (size_t member : members) JoinPool(index, member);
  for (size_t member : pools_[index].hosts) RefreshValues(hosts_[member]);  // the new total
  return absl::OkStatus();
}

absl::Status Scheduler::AddToSharedResource(const std::string& name, const std::string& scope,
                                            const std::string& host, double total) {
  auto it = host_index_.find(host);
  if (it == host_index_.end()) return absl::NotFoundError(absl::StrCat("no host ", host));
  const size_t index = PoolFor(name, scope);
  const bool changed = pools_[index].total != total;
  pools_[index].total = total;
  JoinPool(index, it->second);
  if (changed) {
    for (size_t member : pools_[index].hosts) RefreshValues(hosts_[member]);
  }
  return absl::OkStatus();
}

void Scheduler::SetLimits(const std::vector<LimitConfig>& limits) {
  limits_.clear();
  for (const LimitConfig& config : limits) {
    Limit limit{config, {}, {}};
    limit.per_fields = config.queues.per + config.users.per + config.hosts.per + config.projects.per + config.apps.per;
    limits_.push_back(std::move(limit));
  }
  for (int64_t id : running_) {
    const Job& job = jobs_.at(id);
    ApplyLimits(job, job.placement, +1);
  }
}

void Scheduler::SetLimitTime(absl::Time now, absl::TimeZone tz) {
  for (Limit& limit : limits_) limit.now = ValuesAt(limit.config, now, tz);
}

std::vector<Scheduler::LimitReport> Scheduler::Limits() const {
  std::vector<LimitReport> out;
  for (const Limit& limit : limits_) {
    LimitReport report{&limit.config, limit.now, {}};
    for (const auto& [key, usage] : limit.usage) {
      std::vector<std::string> values;
      if (limit.per_fields > 0) values = absl::StrSplit(key, kKeySeparator);
      report.buckets[std::move(values)] = usage;
    }
    out.push_back(std::move(report));
  }
  return out;
}

std::string Scheduler::PendingReason(int64_t job_id) const {
  auto it = pending_reasons_.find(job_id);
  return it == pending_reasons_.end() ? "" : it->second;
}

bool Scheduler::Member(const ConsumerSet& set, const std::string& value, bool users) const {
  auto in = [&](const std::set<std::string>& names) {
    if (names.count(value)) return true;
    if (!users) return false;
    for (const std::string& name : names) {  // a user group stands for its members
      auto group = user_groups_.find(name);
      if (group != user_groups_.end() &&
          std::find(group->second.begin(), group->second.end(), value) != group->second.end()) {
        return true;
      }
    }
    return false;
  };
  if (in(set.excluded)) return false;
  return set.all || in(set.names);
}

bool Scheduler::Applies(const Limit& limit, const JobRequest& job) const {
  const LimitConfig& c = limit.config;
  return (!c.queues.given || Member(c.queues, job.queue, false)) &&
         (!c.users.given || Member(c.users, job.user, true)) &&
         (!c.projects.given || Member(c.projects, job.project, false)) &&
         (!c.apps.given || Member(c.apps, job.app, false));
}

std::string Scheduler::BucketKey(const Limit& limit, const JobRequest& job, const std::string& host) const {
  const LimitConfig& c = limit.config;
  std::string key;
  bool first = true;
  auto add = [&](const std::string& value) {
    if (!first) key.push_back(kKeySeparator);
    key += value;
    first = false;
  };
  if (c.queues.per) add(job.queue);
  if (c.users.per) add(job.user);
  if (c.hosts.per) add(host);
  if (c.projects.per) add(job.project);
  if (c.apps.per) add(job.app);
  return key;
}

void Scheduler::AddAllocation(const Limit& limit, const HostAllocation& a, LimitUsage* d) const {
  d->slots += a.slots;
  for (const auto& [resource, value] : limit.config.resources) {
    double amount = 0;
    if (resource == "mem") {
      amount = a.mem_mb;
    } else if (resource == "gpu") {
      amount = static_cast<double>(a.gpus.size());
    } else if (auto r = a.reserved.find(resource); r != a.reserved.end()) {
      amount = r->second;
    }
    d->resources[resource] += amount;
  }
}

template <typename F>
void Scheduler::ForEachDelta(const Limit& limit, const Job& job, const Placement& placement, F&& f) const {
  if (!Applies(limit, job.request)) return;
  const HostAllocation* only = nullptr;  // the common case: one allocation, one bucket
  size_t allocations = 0;
  for (const auto& section : placement.sections) {
    allocations += section.size();
    if (!section.empty()) only = &section.front();
  }
  if (allocations == 1) {
    if (limit.config.hosts.given && !Member(limit.config.hosts, only->host, false)) return;
    LimitUsage d;
    d.jobs = 1;
    AddAllocation(limit, *only, &d);
    f(BucketKey(limit, job.request, only->host), d);
    return;
  }
  std::map<std::string, LimitUsage> buckets;
  for (const auto& section : placement.sections) {
    for (const HostAllocation& a : section) {
      if (limit.config.hosts.given && !Member(limit.config.hosts, a.host, false)) continue;
      auto [at, first] = buckets.try_emplace(BucketKey(limit, job.request, a.host));
      if (first) at->second.jobs = 1;  // a job counts once per bucket, however many hosts
      AddAllocation(limit, a, &at->second);
    }
  }
  for (auto& [key, d] : buckets) f(key, d);
}

void Scheduler::ApplyLimits(const Job& job, const Placement& placement, int sign) {
  for (Limit& limit : limits_) {
    ForEachDelta(limit, job, placement, [&](std::string key, const LimitUsage& d) {
      LimitUsage& u = limit.usage[std::move(key)];
      u.slots += sign * d.slots;
      u.jobs += sign * d.jobs;
      for (const auto& [resource, amount] : d.resources) u.resources[resource] += sign * amount;
    });
  }
}

namespace {

// " for alice/p1" for a limit with per_ values; "" without.
std::string Bucket(int per_fields, const std::string& key, char separator) {
  if (per_fields == 0) return "";
  std::string shown = key;
  std::replace(shown.begin(), shown.end(), separator, '/');
  return absl::StrCat(" for ", shown);
}

}  // namespace

std::string Scheduler::LimitExceeded(const Job& job, const Placement& placement) const {
  for (const Limit& limit : limits_) {
    if (!limit.now.any()) continue;
    std::string exceeded;
    ForEachDelta(limit, job, placement, [&](const std::string& key, const LimitUsage& d) {
      if (exceeded.empty()) exceeded = Exceeds(limit, key, d);
    });
    if (!exceeded.empty()) return exceeded;
  }
  return "";
}

std::string Scheduler::Exceeds(const Limit& limit, const std::string& key, const LimitUsage& d) const {
  auto at = limit.usage.find(key);
  if (at == limit.usage.end()) return "";
  const LimitUsage& u = at->second;  // this job included
  const std::string bucket = Bucket(limit.per_fields, key, kKeySeparator);
  auto over = [&](const char* what, double used, double asked, double value) {
    return absl::StrCat("limit ", limit.config.name, ": ", what, " ", value, bucket, " (", used - asked, " used, ",
                        asked, " asked)");
  };
  constexpr double kEpsilon = 1e-9;
  if (limit.now.slots && d.slots > 0 && u.slots > *limit.now.slots + kEpsilon) {
    return over("slots", u.slots, d.slots, *limit.now.slots);
  }
  if (limit.now.jobs && d.jobs > 0 && u.jobs > *limit.now.jobs + kEpsilon) {
    return over("jobs", u.jobs, d.jobs, *limit.now.jobs);
  }
  for (const auto& [resource, value] : limit.now.resources) {
    auto asked = d.resources.find(resource);
    auto used = u.resources.find(resource);
    if (asked == d.resources.end() || asked->second <= 0 || used == u.resources.end()) continue;
    if (used->second > value + kEpsilon) return over(resource.c_str(), used->second, asked->second, value);
  }
  return "";
}

bool Scheduler::HostLimited(const Job& job, const Host& host) const {
  for (const Limit* limit : host_limits_) {
    if (!Member(limit->config.hosts, host.config.name, false)) continue;
    auto at = limit->usage.find(BucketKey(*limit, job.request, host.config.name));
    if (at == limit->usage.end()) continue;
    if (limit->now.jobs && at->second.jobs >= *limit->now.jobs) return true;
    if (limit->now.slots && at->second.slots >= *limit->now.slots) return true;
  }
  return false;
}

absl::Status Scheduler::SetSuspended(int64_t job_id, bool suspended) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.running) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not running"));
  }
  Job& job = it->second;
  if (job.suspended == suspended) return absl::OkStatus();
  for (const auto& section : job.placement.sections) {
    for (const HostAllocation& a : section) ApplyConsumables(a, suspended ? -1 : +1, true);
  }
  job.suspended = suspended;
  return absl::OkStatus();
}

absl::Status Scheduler::Submit(JobRequest job) {
  if (jobs_.count(job.id)) return absl::AlreadyExistsError(absl::StrCat("job ", job.id, " exists"));
  JC_RETURN_IF_ERROR(Check(&job));
  auto q = queues_.find(job.queue);
  Job entry;
  entry.shape = absl::StrCat(job.queue, "|", job.user, "|", ToString(job.requirement), "|",
                             job.slots, "|", job.exclusive, "|", job.gpus_per_slot, "|", job.project, "|",
                             job.app, "|", absl::ToInt64Seconds(job.run_limit));  // run limits decide backfill
  int64_t id = job.id;
  entry.cluster = ClusterOf(q->second.config, job.user);
  entry.request = std::move(job);
  q->second.pending.push_back(id);
  if (q->second.fairshare) q->second.fairshare->AddPending(entry.request.user, id, entry.request.slots);
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
      const int biggest = largest_host_slots_;
      if (s.slots > biggest) {
        return absl::InvalidArgumentError(
            absl::StrCat("span[hosts=1] asks for ", s.slots, " slots on one host; the largest "
                         "host has ", biggest));
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
  if (job.slots > total_slots_) {
    return absl::InvalidArgumentError(absl::StrCat("the job asks for ", job.slots,
                                                   " slots; the cluster has ", total_slots_));
  }
  if (queue.capacity) {
    const size_t cluster = ClusterOf(queue, job.user);
    if (cluster == kNoCluster) {
      return absl::InvalidArgumentError(absl::StrCat("user ", job.user, " is in no virtual cluster of queue ",
                                                     queue.name, " (and it has none named default)"));
    }
    const VirtualClusterConfig& vc = queue.capacity->clusters[cluster];
    const double demand = CapacityAmount(*queue.capacity, DemandOf(job));
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
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.running) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not pending"));
  }
  Queue& queue = queues_[it->second.request.queue];
  queue.pending.erase(std::remove(queue.pending.begin(), queue.pending.end(), job_id), queue.pending.end());
  if (queue.fairshare) queue.fairshare->RemovePending(it->second.request.user, job_id);
  jobs_.erase(it);
  pending_reasons_.erase(job_id);
  victims_of_.erase(job_id);
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

void Scheduler::AdvanceFairshare(absl::Time now) {
  const absl::Duration elapsed = fairshare_time_ == absl::InfinitePast() ? absl::ZeroDuration() : now - fairshare_time_;
  fairshare_time_ = now;
  if (elapsed <= absl::ZeroDuration()) return;
  for (auto& [name, queue] : queues_) {
    if (!queue.fairshare) continue;
    std::map<std::string, std::pair<int, int>> held;  // user -> slots, GPUs
    for (const auto& [user, slots] : queue.used_by_user) {
      if (slots > 0) held[user].first = slots;
    }
    for (const auto& [user, amount] : queue.held_by_user) {
      if (amount.gpus > 0) held[user].second = static_cast<int>(amount.gpus + 0.5);
    }
    queue.fairshare->Advance(elapsed, held);
  }
}

void Scheduler::AddFairshareCpuTime(int64_t job_id, double cpu_seconds) {
  auto j = jobs_.find(job_id);
  if (j == jobs_.end()) return;
  auto q = queues_.find(j->second.request.queue);
  if (q != queues_.end() && q->second.fairshare) q->second.fairshare->AddCpuTime(j->second.request.user, cpu_seconds);
}

void Scheduler::AddFairshareHistory(const JobRequest& job, int slots, int gpus, double cpu_seconds, absl::Time start,
                                    absl::Time end, absl::Time now) {
  auto q = queues_.find(job.queue);
  if (q == queues_.end() || !q->second.fairshare) return;
  q->second.fairshare->AddPast(job.user, slots, gpus, cpu_seconds, start, end, now);
}

std::vector<FairshareTree::NodeReport> Scheduler::FairshareReport(const std::string& name) const {
  auto q = queues_.find(name);
  if (q == queues_.end() || !q->second.fairshare) return {};
  return q->second.fairshare->Report(q->second.used_by_user);
}

DrfVector Scheduler::ClusterTotal() const {
  DrfVector total;
  for (const Host& h : hosts_) {
    if (h.state == HostState::kUnavailable) continue;
    total.slots += h.config.slots;
    total.mem_mb += h.config.mem_mb;
    total.gpus += static_cast<double>(h.config.gpus.size());
  }
  return total;
}

DrfVector Scheduler::DemandOf(const JobRequest& job) const {
  DrfVector d;
  if (job.requirement.sections.empty()) {
    d.slots = job.slots;
    d.gpus = static_cast<double>(job.gpus_per_slot) * job.slots;
    return d;
  }
  for (const Section& s : job.requirement.sections) {
    const int slots = s.slots > 0 ? s.slots : job.slots;
    d.slots += slots;
    d.mem_mb += RusageOf(s, "mem") * slots;
    d.gpus += (RusageOf(s, "gpu") + job.gpus_per_slot) * slots;
  }
  return d;
}

DominantShare Scheduler::JobDominantShare(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {};
  return DominantShareOf(DemandOf(it->second.request), ClusterTotal());
}

const std::string& Scheduler::GroupOf(const std::string& user) const {
  for (const auto& [group, members] : user_groups_) {
    if (std::find(members.begin(), members.end(), user) != members.end()) return group;
  }
  return user;
}

std::vector<int64_t> Scheduler::DrfDispatchOrder(const Queue& queue) const {
  const DrfBy by = queue.config.drf;
  std::vector<DrfJob> pending;
  pending.reserve(queue.pending.size());
  for (int64_t id : queue.pending) {
    const JobRequest& r = jobs_.at(id).request;
    pending.push_back({id, by == DrfBy::kGroup ? GroupOf(r.user) : r.user, DemandOf(r)});
  }
  std::map<std::string, DrfVector> held;
  if (by != DrfBy::kJob) {
    for (const auto& [user, amount] : queue.held_by_user) held[by == DrfBy::kGroup ? GroupOf(user) : user] += amount;
  }
  return DrfOrder(pending, by, ClusterTotal(), std::move(held));
}

Scheduler::DispatchSequence Scheduler::DispatchOrder(const Queue& queue) const {
  DispatchSequence seq;
  if (queue.config.drf != DrfBy::kOff) {
    seq.ids = DrfDispatchOrder(queue);
    return seq;
  }
  if (queue.config.capacity) {
    seq.ids = CapacityDispatchOrder(queue);
    return seq;
  }
  if (queue.fairshare) {
    // The tree keeps the queue's pending jobs by user between cycles.
    seq.fairshare = queue.fairshare->Start(queue.used_by_user);
    return seq;
  }
  seq.ids = RoundRobinOrder(queue);
  return seq;
}

std::vector<int64_t> Scheduler::RoundRobinOrder(const Queue& queue) const {
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
                            double mem_per_slot, int gpus_per_slot,
                            const std::vector<Consume>& consumes) const {
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
  for (const Consume& c : consumes) {
    if (!c.traits.per_slot) continue;  // a job's one share: taken on its first host
    cap = std::min(cap, static_cast<int>(std::floor((FreeOf(h, c) + 1e-9) / c.amount)));
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
    if (!host_limits_.empty() && HostLimited(job, h)) return false;
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
        Host& h = hosts_[std::get<2>(*it)];
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
      auto dir = traits_.find(key.resource);
      bool most_first = key.descending != (dir != traits_.end() && dir->second.larger_is_less);
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
                             int slots, std::set<std::string>* job_level_done,
                             std::vector<HostAllocation>* out) {
  double mem_per_slot = RusageOf(section, "mem");
  int gpus_per_slot = static_cast<int>(RusageOf(section, "gpu")) + job.request.gpus_per_slot;
  const std::vector<Consume> consumes = ConsumesOf(section);
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
        double left = FreeOf(*h, c) - pool_taken[s->second];
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
          double left = FreeOf(*h, c) - (s == h->shared.end() ? 0 : pool_taken[s->second]);
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
        const Pool* pool = s == h->shared.end() ? nullptr : &pools_[s->second];
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

void Scheduler::Apply(const Job& job, Queue& queue, const Placement& placement, int sign, bool with_limits) {
  // The user's entries, looked up once (string-keyed maps) rather than per allocation.
  int& used_by_user = queue.used_by_user[job.request.user];
  DrfVector& held = queue.held_by_user[job.request.user];
  for (const auto& section : placement.sections) {
    for (const HostAllocation& a : section) {
      size_t i = host_index_.at(a.host);
      Reindex(i, false);
      Host& h = hosts_[i];
      h.used_slots += sign * a.slots;
      h.used_mem += sign * a.mem_mb;
      for (int g : a.gpus) h.gpu_users[g] += sign;
      if (!a.reserved.empty()) ApplyConsumables(a, sign, false);  // refreshes every value
      if (job.request.exclusive) h.exclusive_jobs += sign;
      RefreshLoad(h);
      Reindex(i, true);
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
  if (with_limits && !limits_.empty()) ApplyLimits(job, placement, sign);
}

void Scheduler::SelectHostLimits(const Job& job) {
  host_limits_.clear();
  for (const Limit& limit : limits_) {
    if (limit.config.hosts.given && (limit.now.slots || limit.now.jobs) && Applies(limit, job.request)) {
      host_limits_.push_back(&limit);
    }
  }
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
  SelectHostLimits(job);
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
    std::string exceeded = LimitExceeded(job, placement);
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
  for (auto& [name, q] : queues_) order.push_back(&q);
  std::stable_sort(order.begin(), order.end(), [](const Queue* a, const Queue* b) {
    return a->config.priority > b->config.priority;
  });
  // Shapes that failed this cycle, with the reason (a limit's) their jobs wait for.
  std::unordered_map<std::string, std::string> failed_shapes;
  reservations_.clear();
  reservation_views_.clear();
  for (Queue* queue : order) {
    if (!queue->open) continue;
    // Preempted jobs of this queue go before its waiting ones, once their slots are free.
    if (!queue->lent.empty()) ResumeLent(*queue);
    if (queue->pending.empty()) continue;
    // A capacity queue may reclaim guarantees by preemption.
    bool fairshare_preempts = queue->config.fairshare && queue->config.fairshare->preemptive;
    // Each fair-share preemption attempt scans the running jobs: a few per queue and cycle
    // (the users furthest under their share come first in the order anyway).
    constexpr int kFairsharePreemptTries = 16;
    int fairshare_tries = 0;
    bool preemptive = !queue->config.preempt.empty() || queue->config.capacity.has_value() || fairshare_preempts;
    bool reserved_in_queue = false;  // one reservation per queue and cycle (EASY backfill)
    std::vector<int64_t> dispatched;  // sorted once the queue is done
    DispatchSequence sequence = DispatchOrder(*queue);
    for (int64_t id = 0; sequence.Next(&id);) {
      Job& job = jobs_.at(id);
      const bool full = pack_index_.empty() || std::get<0>(*pack_index_.rbegin()) <= 0;
      if (full && !preemptive && grown_allocations_ == 0) {
        // Cluster full: only slots reservations hold can still take a job, and only one
        // that backfills (slots are not freed within a cycle).
        if (held_slots_ == 0) break;
        if (!MayBackfill(job)) continue;
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
      // Reserved slots are held from every job but those that end before the reservations
      // start; such a job tries with them free (backfill).
      std::vector<int> held_before;  // per reservation, the slots and GPUs it held
      if (!reservations_.empty() && MayBackfill(job)) {
        for (const Reservation& r : reservations_) held_before.push_back(r.HeldUnits());
        Hold(-1);
      }
      bool placed_now = TryPlace(job, *queue, &placement);
      if (!held_before.empty()) {
        Hold(+1);
        // Backfilled if it took what a reservation held (else it simply fit beside them).
        for (size_t k = 0; placed_now && k < reservations_.size(); ++k) {
          if (reservations_[k].HeldUnits() < held_before[k]) placement.backfilled_before = reservations_[k].job_id;
        }
      }
      TakenBack taken;  // allocations elastic jobs grew by, taken back for this job
      if (!placed_now && grown_allocations_ > 0 && !pending_reasons_.count(id)) {
        // What elastic jobs grew by goes back first, before anything is preempted.
        placed_now = TakeBackGrowth(job, *queue, &placement, &taken);
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
            preemptive = !queue->config.preempt.empty() || queue->config.capacity.has_value();
          }
          return TryFairsharePreempt(job, *queue);
        };
        const bool preempted = waits_for_resources &&
                               ((!queue->config.preempt.empty() && TryPreempt(job, *queue)) ||
                                (queue->config.capacity && TryReclaim(job, *queue)) ||
                                (fairshare_preempts && fairshare_preempt()));
        // Taken-back growth stays taken when preemption frees the rest; else it returns.
        SettleTakeBack(&taken, id, preempted);
        if (preempted) {
          failed_shapes[job.shape] = "";
          took_back_ = true;
        } else if (queue->config.backfill && !reserved_in_queue && failed_shapes[job.shape].empty()) {
          // Only a job waiting for resources reserves; one a limit holds would hold hosts
          // it may not use.
          Reserve(job, *queue);
          reserved_in_queue = true;
        }
        continue;
      }
      SettleTakeBack(&taken, id, true);
      if (placement.backfilled_before != 0) ++st.backfilled;
      victims_of_.erase(id);
      job.started = now_;
      job.running = true;
      job.placement = placement;
      job.base_sections = job.placement.sections.size();
      job.placed_in_cycle = cycles_;
      if (job.request.max_slots > job.request.slots) elastic_.insert(id);
      queue->last_dispatched_user = job.request.user;
      running_.insert(id);
      dispatched.push_back(id);
      placed.push_back(std::move(placement));
      ++st.placed;
    }
    if (!dispatched.empty()) {
      std::sort(dispatched.begin(), dispatched.end());
      if (queue->fairshare) {
        for (int64_t id : dispatched) queue->fairshare->RemovePending(jobs_.at(id).request.user, id);
      }
      auto& p = queue->pending;
      p.erase(std::remove_if(p.begin(), p.end(),
                             [&](int64_t id) { return std::binary_search(dispatched.begin(), dispatched.end(), id); }),
              p.end());
    }
  }
  // Elastic jobs grow into what is left; slots held for reservations are not.
  GrowElastic();
  // Held slots are this cycle's only: the next one computes its reservations again.
  Hold(-1);
  for (const Reservation& r : reservations_) {
    ReservationView& view = reservation_views_[r.job_id];
    view.start = r.start;
    for (const auto& [i, n] : r.wanted) view.hosts.push_back(hosts_[i].config.name);
  }
  return placed;
}

int Scheduler::Reservation::HeldUnits() const {
  int n = 0;
  for (const auto& [i, slots] : held) n += slots;
  for (const auto& [i, gpus] : held_gpus) n += static_cast<int>(gpus.size());
  return n;
}

void Scheduler::Hold(int sign) {
  for (Reservation& r : reservations_) {
    for (const auto& [i, want] : r.wanted) {
      Host& h = hosts_[i];
      int& held = r.held[i];
      const int change = sign > 0 ? std::max(0, std::min(want - held, h.free_slots())) : -held;
      if (change == 0) continue;
      Reindex(i, false);
      h.used_slots += change;
      held += change;
      held_slots_ += change;
      RefreshLoad(h);
      Reindex(i, true);
    }
    for (const auto& [i, want] : r.wanted_gpus) {
      Host& h = hosts_[i];
      std::vector<int>& held = r.held_gpus[i];
      const size_t before = held.size();
      if (sign > 0) {
        for (auto& [index, users] : h.gpu_users) {
          if (static_cast<int>(held.size()) >= want) break;
          if (users != 0) continue;
          ++users;
          held.push_back(index);
        }
      } else {
        for (int index : held) --h.gpu_users[index];
        held.clear();
      }
      if (held.size() != before) RefreshLoad(h);
    }
    for (const auto& [i, want] : r.wanted_mem) {
      Host& h = hosts_[i];
      double& held = r.held_mem[i];
      const double change = sign > 0 ? std::max(0.0, std::min(want - held, h.config.mem_mb - h.used_mem)) : -held;
      if (change == 0) continue;
      h.used_mem += change;
      held += change;
      RefreshLoad(h);
    }
    for (const auto& [i, wants] : r.wanted_consumables) {
      Host& h = hosts_[i];
      HostAllocation held_now;  // what changes, applied as an allocation of consumables
      held_now.host = h.config.name;
      for (const auto& [name, want] : wants) {
        double& held = r.held_consumables[i][name];
        double left = 0;
        if (auto pool = h.shared.find(name); pool != h.shared.end()) {
          left = pools_[pool->second].total - pools_[pool->second].reserved;
        } else if (auto it = h.config.resources.find(name); it != h.config.resources.end()) {
          if (const double* total = std::get_if<double>(&it->second)) left = *total - h.reserved[name];
        }
        const double change = sign > 0 ? std::max(0.0, std::min(want - held, left)) : -held;
        if (change == 0) continue;
        held += change;
        held_now.reserved[name] = change;
      }
      if (!held_now.reserved.empty()) ApplyConsumables(held_now, +1, false);
    }
  }
}

bool Scheduler::MayBackfill(const Job& job) const {
  if (job.request.run_limit <= absl::ZeroDuration()) return false;  // never without a run limit
  const absl::Time ends = now_ + job.request.run_limit;
  for (const Reservation& r : reservations_) {
    // An unknown start (a job in the way has no run limit) could be any moment: nothing
    // may delay it.
    if (r.start == absl::InfiniteFuture() || ends > r.start) return false;
  }
  return true;
}

void Scheduler::Reserve(const Job& job, Queue& queue) {
  // Running jobs by when they end at the latest; suspended and lent ones are not counted
  // on (a suspended job's end is unknown).
  // A heap, not a sort: the job usually fits after the first few ends, so only those are
  // ordered (O(running) to build, O(log running) per job taken).
  using Ending = std::tuple<absl::Time, int64_t, Job*>;
  std::vector<Ending> by_end;
  by_end.reserve(running_.size());
  for (int64_t rid : running_) {
    Job& r = jobs_.at(rid);
    if (!r.suspended && !r.lent) by_end.emplace_back(r.Ends(), rid, &r);
  }
  const auto later = [](const Ending& a, const Ending& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) > std::tie(std::get<0>(b), std::get<1>(b));
  };
  std::make_heap(by_end.begin(), by_end.end(), later);
  // Held slots of earlier reservations stay held: this job's reservation comes after.
  std::vector<Job*> released;
  Placement found;
  absl::Time start = absl::InfiniteFuture();
  bool fits = false;
  int free_now = 0;
  for (const Host& h : hosts_) free_now += std::max(0, h.free_slots());
  int freed = 0;
  while (!by_end.empty()) {
    std::pop_heap(by_end.begin(), by_end.end(), later);
    Job* r = std::get<2>(by_end.back());
    by_end.pop_back();
    Apply(*r, queues_.at(r->request.queue), r->placement, -1);
    released.push_back(r);
    for (const auto& section : r->placement.sections) {
      for (const HostAllocation& a : section) freed += a.slots;
    }
    // Placement attempts only once enough slots are free somewhere.
    if (free_now + freed < job.request.slots) continue;
    if (TryPlace(job, queue, &found)) {
      Apply(job, queue, found, -1);
      start = r->Ends();
      fits = true;
      break;
    }
  }
  for (auto it = released.rbegin(); it != released.rend(); ++it) {
    Apply(**it, queues_.at((*it)->request.queue), (*it)->placement, +1);
  }
  if (!fits) return;  // not even on an empty cluster (a limit holds it): nothing to reserve
  Reservation r;
  r.job_id = job.request.id;
  r.start = std::max(start, now_);
  for (const auto& section : found.sections) {
    for (const HostAllocation& a : section) {
      const size_t i = host_index_.at(a.host);
      r.wanted[i] += a.slots;
      if (!a.gpus.empty()) r.wanted_gpus[i] += static_cast<int>(a.gpus.size());
      if (a.mem_mb > 0) r.wanted_mem[i] += a.mem_mb;
      for (const auto& [name, amount] : a.reserved) {
        if (!a.units.count(name)) r.wanted_consumables[i][name] += amount;
      }
    }
  }
  std::vector<std::string> names;
  for (const auto& [i, n] : r.wanted) names.push_back(hosts_[i].config.name);
  pending_reasons_[job.request.id] =
      r.start == absl::InfiniteFuture()
          ? absl::StrCat("reserved ", absl::StrJoin(names, " "), " (start unknown: a job there has no run limit)")
          : absl::StrCat("reserved ", absl::StrJoin(names, " "), " to start by ",
                         absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", r.start, absl::UTCTimeZone()));
  reservations_.push_back(std::move(r));
  Hold(+1);
}

std::optional<ReservationView> Scheduler::ReservationOf(int64_t job_id) const {
  auto it = reservation_views_.find(job_id);
  if (it == reservation_views_.end()) return std::nullopt;
  return it->second;
}

void Scheduler::Lend(const Job& victim, int sign, bool everything) {
  Queue& queue = queues_.at(victim.request.queue);
  if (everything) {
    Apply(victim, queue, victim.placement, sign);
    return;
  }
  // Only the slots: a stopped process keeps its memory, GPUs and what it reserved; the
  // limits go on counting it.
  const std::string& user = victim.request.user;
  for (const auto& section : victim.placement.sections) {
    for (const HostAllocation& a : section) {
      const size_t i = host_index_.at(a.host);
      Reindex(i, false);
      hosts_[i].used_slots += sign * a.slots;
      RefreshLoad(hosts_[i]);
      Reindex(i, true);
      queue.used_slots += sign * a.slots;
      queue.used_by_user[user] += sign * a.slots;
      queue.held_by_user[user].slots += sign * a.slots;
      if (victim.cluster != kNoCluster && victim.cluster < queue.capacity_held.size() &&
          queue.config.capacity->resource == CapacityResource::kSlots) {
        queue.capacity_held[victim.cluster] += sign * a.slots;
      }
    }
  }
}

namespace {

// Preemption candidates ranked by key (lowest first) and, for equal keys, the youngest job
// first; at most 256 (each candidate tried costs a placement attempt: a few hundred find
// room for any one job and keep a cycle on a large cluster short).
template <typename Key, typename J>
std::vector<J*> LowestFirst(std::vector<std::pair<Key, J*>> ranked) {
  constexpr size_t kMaxCandidates = 256;
  auto first = [](const std::pair<Key, J*>& a, const std::pair<Key, J*>& b) {
    if (a.first != b.first) return a.first < b.first;
    return a.second->request.id > b.second->request.id;
  };
  if (ranked.size() > kMaxCandidates) {
    std::nth_element(ranked.begin(), ranked.begin() + kMaxCandidates, ranked.end(), first);
    ranked.resize(kMaxCandidates);
  }
  std::sort(ranked.begin(), ranked.end(), first);
  std::vector<J*> out;
  out.reserve(ranked.size());
  for (const auto& entry : ranked) out.push_back(entry.second);
  return out;
}

bool HoldsGpus(const Placement& placement) {
  for (const auto& section : placement.sections) {
    for (const HostAllocation& a : section) {
      if (!a.gpus.empty()) return true;
    }
  }
  return false;
}

}  // namespace

bool Scheduler::WaitingForVictims(int64_t id) {
  auto w = victims_of_.find(id);
  if (w == victims_of_.end()) return false;
  // Its victims being requeued still hold their GPUs: wait for them, preempt no more.
  for (int64_t v : w->second) {
    auto it = jobs_.find(v);
    if (it != jobs_.end() && it->second.running && it->second.being_requeued) {
      pending_reasons_[id] = absl::StrCat("waiting for preempted job ", v, " to end");
      return true;
    }
  }
  victims_of_.erase(w);
  return false;
}

bool Scheduler::TryPreempt(const Job& job, Queue& queue) {
  if (WaitingForVictims(job.request.id)) return true;
  // The queues it may preempt, with their priority and max_preemptions, looked up once.
  std::map<std::string, const QueueConfig*> preemptable;
  for (const std::string& name : queue.config.preempt) {
    auto q = queues_.find(name);
    if (q != queues_.end() && q->second.config.priority < queue.config.priority) preemptable[name] = &q->second.config;
  }
  std::vector<std::pair<int, Job*>> ranked;  // (queue priority, job)
  for (int64_t rid : running_) {
    Job& v = jobs_.at(rid);
    if (v.suspended || v.lent || v.being_requeued) continue;
    auto vq = preemptable.find(v.request.queue);
    if (vq == preemptable.end()) continue;
    if (vq->second->max_preemptions > 0 && v.request.preemptions >= vq->second->max_preemptions) continue;
    ranked.emplace_back(vq->second->priority, &v);
  }
  if (ranked.empty()) return false;
  // The lowest queue first, and in it the youngest job: the least work lost (LSF's order).
  return PreemptAmong(job, queue, LowestFirst(std::move(ranked)), nullptr, absl::StrCat("queue ", queue.config.name));
}

bool Scheduler::PreemptAmong(const Job& job, Queue& queue, const std::vector<Job*>& candidates,
                             const std::function<bool(const Job&)>& eligible, const std::string& why) {
  const int64_t id = job.request.id;
  auto fits = [&] {
    Placement p;
    if (!TryPlace(job, queue, &p)) return false;
    Apply(job, queue, p, -1);  // only a test: the job starts in a later cycle
    return true;
  };
  std::vector<Job*> chosen;
  bool found = false;
  for (Job* v : candidates) {
    if (eligible && !eligible(*v)) continue;  // earlier victims changed what it may give
    Lend(*v, -1, HoldsGpus(v->placement));
    chosen.push_back(v);
    if (fits()) {
      found = true;
      break;
    }
  }
  if (!found) {
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) Lend(**it, +1, HoldsGpus((*it)->placement));
    return false;
  }
  // The fewest victims: each chosen before the last is given back if the job fits without it.
  std::vector<Job*> needed;
  for (size_t i = 0; i + 1 < chosen.size(); ++i) {
    const bool everything = HoldsGpus(chosen[i]->placement);
    Lend(*chosen[i], +1, everything);
    if (fits()) continue;
    Lend(*chosen[i], -1, everything);
    needed.push_back(chosen[i]);
  }
  needed.push_back(chosen.back());
  std::vector<int64_t> ids;
  for (Job* v : needed) {
    const bool requeue = HoldsGpus(v->placement);
    if (requeue) {
      Lend(*v, +1, true);  // held until it ends and the master releases it
      v->being_requeued = true;
    } else {
      v->lent = true;
      v->lent_to = id;
      queues_.at(v->request.queue).lent.push_back(v->request.id);
    }
    preemptions_.push_back({v->request.id, id, requeue,
                            absl::StrCat("preempted by job ", id, " (", why, ")")});
    victims_of_[id].push_back(v->request.id);
    ids.push_back(v->request.id);
  }
  pending_reasons_[id] = absl::StrCat("preempting job", ids.size() > 1 ? "s " : " ", absl::StrJoin(ids, ", "));
  // The lent slots are the preemptor's: held from every other job for the rest of this
  // cycle (a reservation starting now, so nothing backfills it); the next cycle starts
  // the preemptor on them before any lower queue.
  Reservation held;
  held.job_id = id;
  held.start = now_;
  for (Job* v : needed) {
    if (!v->lent) continue;
    for (const auto& section : v->placement.sections) {
      for (const HostAllocation& a : section) held.wanted[host_index_.at(a.host)] += a.slots;
    }
  }
  if (!held.wanted.empty()) {
    reservations_.push_back(std::move(held));
    Hold(+1);
  }
  return true;
}

bool Scheduler::TryFairsharePreempt(const Job& job, Queue& queue) {
  if (WaitingForVictims(job.request.id)) return true;
  FairshareTree& tree = *queue.fairshare;
  FairshareTree::Standing standing = tree.Snapshot(queue.used_by_user, job.request.user);
  const std::string& user = job.request.user;
  const int slots = job.request.slots;
  std::vector<std::pair<double, Job*>> ranked;  // (its user's priority, job)
  for (int64_t rid : running_) {
    Job& v = jobs_.at(rid);
    if (v.request.queue != queue.config.name || v.request.user == user) continue;
    if (v.suspended || v.lent || v.being_requeued) continue;
    if (queue.config.max_preemptions > 0 && v.request.preemptions >= queue.config.max_preemptions) continue;
    if (!tree.MayPreempt(standing, user, slots, v.request.user)) continue;
    ranked.emplace_back(tree.UserPriority(standing, v.request.user), &v);
  }
  if (ranked.empty()) return false;
  std::vector<Job*> candidates = LowestFirst(std::move(ranked));
  // Each victim taken leaves its branch: the next must still be over enough.
  auto eligible = [&](const Job& v) {
    if (!tree.MayPreempt(standing, user, slots, v.request.user)) return false;
    tree.Take(standing, v.request.user, v.request.slots);
    return true;
  };
  return PreemptAmong(job, queue, candidates, eligible, absl::StrCat("fair share of queue ", queue.config.name));
}

void Scheduler::ResumeLent(Queue& queue) {
  // Slots lent to preemptors that have not started yet are promised to them: a victim
  // whose own preemptor started does not take those (a preemption in the same queue,
  // by capacity or fair share, must not be undone by resuming an earlier victim).
  std::map<size_t, int> promised;
  for (const auto& [name, q] : queues_) {
    for (int64_t id : q.lent) {
      const Job& v = jobs_.at(id);
      auto preemptor = jobs_.find(v.lent_to);
      if (preemptor == jobs_.end() || preemptor->second.running) continue;
      for (const auto& section : v.placement.sections) {
        for (const HostAllocation& a : section) promised[host_index_.at(a.host)] += a.slots;
      }
    }
  }
  for (auto it = queue.lent.begin(); it != queue.lent.end();) {
    Job& v = jobs_.at(*it);
    auto preemptor = jobs_.find(v.lent_to);
    if (preemptor != jobs_.end() && !preemptor->second.running) {
      ++it;  // its preemptor has not started yet: the slots are promised to it
      continue;
    }
    std::map<size_t, int> slots_on;
    for (const auto& section : v.placement.sections) {
      for (const HostAllocation& a : section) slots_on[host_index_.at(a.host)] += a.slots;
    }
    bool free = true;
    for (const auto& [i, n] : slots_on) {
      auto held = promised.find(i);
      free = free && hosts_[i].free_slots() - (held == promised.end() ? 0 : held->second) >= n;
    }
    if (!free) {
      ++it;
      continue;
    }
    Lend(v, +1, false);
    v.lent = false;
    v.lent_to = 0;
    resumes_.push_back(v.request.id);
    it = queue.lent.erase(it);
  }
}

std::vector<Preemption> Scheduler::TakePreemptions() { return std::exchange(preemptions_, {}); }

std::vector<int64_t> Scheduler::TakeResumes() { return std::exchange(resumes_, {}); }

absl::Status Scheduler::CancelPreemption(int64_t victim) {
  auto it = jobs_.find(victim);
  if (it == jobs_.end() || !it->second.running) return absl::NotFoundError(absl::StrCat("job ", victim, " is not running"));
  Job& v = it->second;
  v.being_requeued = false;
  if (v.lent) {
    Lend(v, +1, false);
    v.lent = false;
    v.lent_to = 0;
    auto& lent = queues_.at(v.request.queue).lent;
    lent.erase(std::remove(lent.begin(), lent.end(), victim), lent.end());
  }
  return absl::OkStatus();
}

absl::Status Scheduler::RestorePreempted(int64_t victim, int64_t preemptor) {
  auto it = jobs_.find(victim);
  if (it == jobs_.end() || !it->second.running) return absl::NotFoundError(absl::StrCat("job ", victim, " is not running"));
  Job& v = it->second;
  if (v.lent) return absl::OkStatus();
  Lend(v, -1, false);
  v.lent = true;
  v.lent_to = preemptor;
  queues_.at(v.request.queue).lent.push_back(victim);
  if (preemptor != 0) victims_of_[preemptor].push_back(victim);
  return absl::OkStatus();
}

absl::Status Scheduler::RestoreRequeueing(int64_t victim, int64_t preemptor) {
  auto it = jobs_.find(victim);
  if (it == jobs_.end() || !it->second.running) return absl::NotFoundError(absl::StrCat("job ", victim, " is not running"));
  it->second.being_requeued = true;  // holds everything until it ends and is released
  if (preemptor != 0) victims_of_[preemptor].push_back(victim);
  return absl::OkStatus();
}

absl::Status Scheduler::Release(int64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.running) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not running"));
  }
  if (it->second.lent) {
    // Its slots were lent: take them back so Apply returns everything once.
    Lend(it->second, +1, false);
    auto& lent = queues_.at(it->second.request.queue).lent;
    lent.erase(std::remove(lent.begin(), lent.end(), job_id), lent.end());
  }
  if (it->second.suspended) {
    // What the suspension gave back is not held: take it again so Apply returns it all.
    for (const auto& section : it->second.placement.sections) {
      for (const HostAllocation& a : section) ApplyConsumables(a, +1, true);
    }
  }
  Apply(it->second, queues_.at(it->second.request.queue), it->second.placement, -1);
  grown_allocations_ -= static_cast<int>(it->second.placement.sections.size() - it->second.base_sections);
  elastic_.erase(job_id);
  running_.erase(job_id);
  jobs_.erase(it);
  return absl::OkStatus();
}

absl::Status Scheduler::Restore(const JobRequest& request, const Placement& placement, absl::Time started,
                               int grown) {
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
  job.started = started;
  job.cluster = ClusterOf(q->second.config, request.user);
  grown = std::clamp(grown, 0, static_cast<int>(placement.sections.size()));
  job.base_sections = placement.sections.size() - static_cast<size_t>(grown);
  Apply(job, q->second, placement, +1);
  if (request.max_slots > 0) elastic_.insert(request.id);
  grown_allocations_ += grown;
  running_.insert(request.id);
  jobs_[request.id] = std::move(job);
  return absl::OkStatus();
}

}  // namespace jc::nexec
