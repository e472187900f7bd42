// Limits (SPEC B7, LSF's Limit sections): which jobs a limit counts, its buckets, and
// whether a placement would exceed one. The limit definitions themselves are limits.h.

#include "executor/policy/limit_book.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace jc::nexec {

bool InConsumers(const ConsumerSet& set, const std::string& value, const UserGroups* groups) {
  auto in = [&](const std::set<std::string>& names) {
    if (names.count(value)) return true;
    if (groups == nullptr) return false;
    for (const std::string& name : names) {  // a user group stands for its members
      auto group = groups->find(name);
      if (group != groups->end() && std::find(group->second.begin(), group->second.end(), value) != group->second.end()) {
        return true;
      }
    }
    return false;
  };
  if (in(set.excluded)) return false;
  return set.all || in(set.names);
}

void LimitBook::Set(const std::vector<LimitConfig>& configs) {
  limits_.clear();
  host_limits_.clear();
  for (const LimitConfig& config : configs) {
    Limit limit{config, {}, {}};
    limit.per_fields = config.queues.per + config.users.per + config.hosts.per + config.projects.per + config.apps.per;
    limits_.push_back(std::move(limit));
  }
}

void LimitBook::SetTime(absl::Time now, absl::TimeZone tz) {
  for (Limit& limit : limits_) limit.now = ValuesAt(limit.config, now, tz);
}

std::vector<LimitBook::Report> LimitBook::Reports() const {
  std::vector<Report> out;
  for (const Limit& limit : limits_) {
    Report report{&limit.config, limit.now, {}};
    for (const auto& [key, usage] : limit.usage) {
      std::vector<std::string> values;
      if (limit.per_fields > 0) values = absl::StrSplit(key, kKeySeparator);
      report.buckets[std::move(values)] = usage;
    }
    out.push_back(std::move(report));
  }
  return out;
}

bool LimitBook::Applies(const Limit& limit, const JobRequest& job, const UserGroups& groups) {
  const LimitConfig& c = limit.config;
  return (!c.queues.given || InConsumers(c.queues, job.queue, nullptr)) &&
         (!c.users.given || InConsumers(c.users, job.user, &groups)) &&
         (!c.projects.given || InConsumers(c.projects, job.project, nullptr)) &&
         (!c.apps.given || InConsumers(c.apps, job.app, nullptr));
}

std::string LimitBook::BucketKey(const Limit& limit, const JobRequest& job, const std::string& host) {
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

void LimitBook::AddAllocation(const Limit& limit, const HostAllocation& a, LimitUsage* d) {
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
void LimitBook::ForEachDelta(const Limit& limit, const JobRequest& job, const Placement& placement,
                             const UserGroups& groups, F&& f) {
  if (!Applies(limit, job, groups)) return;
  const HostAllocation* only = nullptr;  // the common case: one allocation, one bucket
  size_t allocations = 0;
  for (const auto& section : placement.sections) {
    allocations += section.size();
    if (!section.empty()) only = &section.front();
  }
  if (allocations == 1) {
    if (limit.config.hosts.given && !InConsumers(limit.config.hosts, only->host, nullptr)) return;
    LimitUsage d;
    d.jobs = 1;
    AddAllocation(limit, *only, &d);
    f(BucketKey(limit, job, only->host), d);
    return;
  }
  std::map<std::string, LimitUsage> buckets;
  for (const auto& section : placement.sections) {
    for (const HostAllocation& a : section) {
      if (limit.config.hosts.given && !InConsumers(limit.config.hosts, a.host, nullptr)) continue;
      auto [at, first] = buckets.try_emplace(BucketKey(limit, job, a.host));
      if (first) at->second.jobs = 1;  // a job counts once per bucket, however many hosts
      AddAllocation(limit, a, &at->second);
    }
  }
  for (auto& [key, d] : buckets) f(key, d);
}

void LimitBook::Apply(const JobRequest& job, const Placement& placement, int sign, const UserGroups& groups) {
  for (Limit& limit : limits_) {
    ForEachDelta(limit, job, placement, groups, [&](std::string key, const LimitUsage& d) {
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

std::string LimitBook::Exceeded(const JobRequest& job, const Placement& placement, const UserGroups& groups) const {
  for (const Limit& limit : limits_) {
    if (!limit.now.any()) continue;
    std::string exceeded;
    ForEachDelta(limit, job, placement, groups, [&](const std::string& key, const LimitUsage& d) {
      if (exceeded.empty()) exceeded = Exceeds(limit, key, d);
    });
    if (!exceeded.empty()) return exceeded;
  }
  return "";
}

std::string LimitBook::Exceeds(const Limit& limit, const std::string& key, const LimitUsage& d) {
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

void LimitBook::SelectForHosts(const JobRequest& job, const UserGroups& groups) {
  host_limits_.clear();
  for (const Limit& limit : limits_) {
    if (limit.config.hosts.given && (limit.now.slots || limit.now.jobs) && Applies(limit, job, groups)) {
      host_limits_.push_back(&limit);
    }
  }
}

bool LimitBook::HostLimited(const JobRequest& job, const std::string& host) const {
  for (const Limit* limit : host_limits_) {
    if (!InConsumers(limit->config.hosts, host, nullptr)) continue;
    auto at = limit->usage.find(BucketKey(*limit, job, host));
    if (at == limit->usage.end()) continue;
    if (limit->now.jobs && at->second.jobs >= *limit->now.jobs) return true;
    if (limit->now.slots && at->second.slots >= *limit->now.slots) return true;
  }
  return false;
}

LimitBook::Buckets LimitBook::Remember() const {
  Buckets had;
  had.reserve(limits_.size());
  for (const Limit& limit : limits_) {
    auto& keys = had.emplace_back();
    for (const auto& [key, usage] : limit.usage) keys.insert(key);
  }
  return had;
}

void LimitBook::Forget(const Buckets& before) {
  for (size_t i = 0; i < limits_.size() && i < before.size(); ++i) {
    if (limits_[i].usage.size() == before[i].size()) continue;
    for (auto it = limits_[i].usage.begin(); it != limits_[i].usage.end();) {
      it = before[i].count(it->first) ? std::next(it) : limits_[i].usage.erase(it);
    }
  }
}

}  // namespace jc::nexec
