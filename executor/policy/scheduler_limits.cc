// Limits (SPEC B7, LSF's Limit sections): which jobs a limit counts, its buckets, and whether a placement
// would exceed one. The limit definitions themselves are limits.h.
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

}  // namespace jc::nexec
