// Shared resources (SPEC B3): a RESS record's stock set and joined by hosts; the pools and consumables
// themselves are the model's (cluster_model_resources.cc).
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
  const size_t index = model_.PoolFor(name, scope);
  Pool& pool = model_.pools[index];
  pool.total = total;
  for (size_t former : std::vector<size_t>(pool.hosts)) {
    if (std::binary_search(members.begin(), members.end(), former)) continue;
    auto& shared = model_.hosts[former].shared;
    if (auto s = shared.find(name); s != shared.end() && s->second == index) shared.erase(s);
    auto& list = model_.pools[index].hosts;
    list.erase(std::remove(list.begin(), list.end(), former), list.end());
    model_.RefreshValues(model_.hosts[former]);
  }
  for (size_t member : members) model_.JoinPool(index, member);
  for (size_t member : model_.pools[index].hosts) model_.RefreshValues(model_.hosts[member]);  // the new total
  return absl::OkStatus();
}

absl::Status Scheduler::AddToSharedResource(const std::string& name, const std::string& scope,
                                            const std::string& host, double total) {
  auto it = model_.host_index.find(host);
  if (it == model_.host_index.end()) return absl::NotFoundError(absl::StrCat("no host ", host));
  const size_t index = model_.PoolFor(name, scope);
  const bool changed = model_.pools[index].total != total;
  model_.pools[index].total = total;
  model_.JoinPool(index, it->second);
  if (changed) {
    for (size_t member : model_.pools[index].hosts) model_.RefreshValues(model_.hosts[member]);
  }
  return absl::OkStatus();
}

}  // namespace jc::nexec
