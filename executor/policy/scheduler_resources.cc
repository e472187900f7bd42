// Consumable resources (rusage of host and shared values: licences, scratch space) and the shared pools they are
// drawn from (SPEC B3).
// Part of the Scheduler class (scheduler.h); the cycle itself is scheduler.cc.

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
#include "executor/policy/scheduler.h"
#include "executor/policy/scheduler_internal.h"

namespace jc::nexec {

std::vector<Scheduler::Consume> Scheduler::ConsumesOf(const Section& section) const {
  std::vector<Consume> out;
  for (const auto& [name, amount] : section.rusage) {
    if (name == "mem" || name == "gpu" || amount <= 0) continue;
    Consume c{name, amount, {}};
    if (auto t = model_.traits.find(name); t != model_.traits.end()) c.traits = t->second;
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
    const Pool& p = model_.pools[s->second];
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
  Host& h = model_.hosts[model_.host_index.at(a.host)];
  std::set<size_t> touched_pools;
  for (const auto& [name, amount] : a.reserved) {
    if (only_released) {
      auto t = model_.traits.find(name);
      if (t == model_.traits.end() || !t->second.release) continue;
    }
    auto units = a.units.find(name);
    if (auto s = h.shared.find(name); s != h.shared.end()) {
      Pool& p = model_.pools[s->second];
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
    for (size_t member : model_.pools[p].hosts) RefreshValues(model_.hosts[member]);
  }
}

size_t Scheduler::PoolFor(const std::string& name, const std::string& scope) {
  auto [it, added] = model_.pool_index.emplace(std::make_pair(name, scope), model_.pools.size());
  if (added) model_.pools.push_back(Pool{name, {}, 0, 0, {}});
  return it->second;
}

void Scheduler::JoinPool(size_t index, size_t host) {
  Pool& pool = model_.pools[index];
  Host& h = model_.hosts[host];
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
    auto it = model_.host_index.find(host);
    if (it == model_.host_index.end()) return absl::NotFoundError(absl::StrCat("no host ", host));
    members.push_back(it->second);
  }
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  const size_t index = PoolFor(name, scope);
  Pool& pool = model_.pools[index];
  pool.total = total;
  for (size_t former : std::vector<size_t>(pool.hosts)) {
    if (std::binary_search(members.begin(), members.end(), former)) continue;
    auto& shared = model_.hosts[former].shared;
    if (auto s = shared.find(name); s != shared.end() && s->second == index) shared.erase(s);
    auto& list = model_.pools[index].hosts;
    list.erase(std::remove(list.begin(), list.end(), former), list.end());
    RefreshValues(model_.hosts[former]);
  }
  for (size_t member : members) JoinPool(index, member);
  for (size_t member : model_.pools[index].hosts) RefreshValues(model_.hosts[member]);  // the new total
  return absl::OkStatus();
}

absl::Status Scheduler::AddToSharedResource(const std::string& name, const std::string& scope,
                                            const std::string& host, double total) {
  auto it = model_.host_index.find(host);
  if (it == model_.host_index.end()) return absl::NotFoundError(absl::StrCat("no host ", host));
  const size_t index = PoolFor(name, scope);
  const bool changed = model_.pools[index].total != total;
  model_.pools[index].total = total;
  JoinPool(index, it->second);
  if (changed) {
    for (size_t member : model_.pools[index].hosts) RefreshValues(model_.hosts[member]);
  }
  return absl::OkStatus();
}

}  // namespace jc::nexec
