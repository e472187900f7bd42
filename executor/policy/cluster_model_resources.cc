// The model's consumables (rusage[] of host and shared values: licences, scratch space), the shared pools
// they are drawn from (SPEC B3), and the values select[] and order[] see of each host.

#include <algorithm>
#include <cmath>
#include <set>

#include "executor/policy/cluster_model.h"

namespace jc::nexec {

std::vector<ClusterModel::Consume> ClusterModel::ConsumesOf(const Section& section) const {
  std::vector<Consume> out;
  for (const auto& [name, amount] : section.rusage) {
    if (name == "mem" || name == "gpu" || amount <= 0) continue;
    Consume c{name, amount, {}};
    if (auto t = traits.find(name); t != traits.end()) c.traits = t->second;
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

double ClusterModel::FreeOf(const Host& h, const Consume& c) const {
  if (auto s = h.shared.find(c.resource); s != h.shared.end()) {
    const Pool& p = pools[s->second];
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

void ClusterModel::ApplyConsumables(const HostAllocation& a, int sign, bool only_released) {
  Host& h = hosts[host_index.at(a.host)];
  std::set<size_t> touched_pools;
  for (const auto& [name, amount] : a.reserved) {
    if (only_released) {
      auto t = traits.find(name);
      if (t == traits.end() || !t->second.release) continue;
    }
    auto units = a.units.find(name);
    if (auto s = h.shared.find(name); s != h.shared.end()) {
      Pool& p = pools[s->second];
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
    for (size_t member : pools[p].hosts) RefreshValues(hosts[member]);
  }
}

size_t ClusterModel::PoolFor(const std::string& name, const std::string& scope) {
  auto [it, added] = pool_index.emplace(std::make_pair(name, scope), pools.size());
  if (added) pools.push_back(Pool{name, {}, 0, 0, {}});
  return it->second;
}

void ClusterModel::JoinPool(size_t index, size_t host) {
  Pool& pool = pools[index];
  Host& h = hosts[host];
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

void ClusterModel::RefreshValues(Host& h) {
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
  for (const auto& [name, index] : h.shared) v[name] = pools[index].total - pools[index].reserved;
  for (const auto& [name, amount] : h.reserved) {
    auto it = h.config.resources.find(name);
    if (h.shared.count(name) || it == h.config.resources.end()) continue;
    if (const double* total = std::get_if<double>(&it->second)) v[name] = *total - amount;
  }
}

void ClusterModel::RefreshLoad(Host& h) {
  // What a placement of slots, memory and GPUs changes, in place: no copy of the host's
  // values (RefreshValues) for every placement.
  int free_gpus = 0;
  for (const auto& [index, users] : h.gpu_users) free_gpus += users == 0;
  ResourceValues& v = h.values;
  v["slots"] = static_cast<double>(h.free_slots());
  v["mem"] = h.config.mem_mb - h.used_mem;
  v["gpu"] = static_cast<double>(free_gpus);
}

}  // namespace jc::nexec
