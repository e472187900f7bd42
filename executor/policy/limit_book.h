#pragma once

// The limits in force (SPEC B7, LSF's Limit sections) and what placed jobs hold of them:
// which jobs a limit counts, its buckets, and whether a placement would take one past its
// value (limits.h has the definitions and their values in time). A unit of the scheduler's
// model (issue 48, "the house"): it owns its fields, and the scheduler tells it what is
// placed and given back (Apply); it knows nothing of hosts, queues or cycles.

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/time/time.h"
#include "executor/policy/cluster.h"
#include "executor/policy/limits.h"

namespace jc::nexec {

// User groups by name, with their members: a group named in a limit's users stands for them.
using UserGroups = std::map<std::string, std::vector<std::string>>;

class LimitBook {
 public:
  // Replaces the limits; every bucket starts empty (the caller applies what runs again).
  void Set(const std::vector<LimitConfig>& configs);
  // Takes the values in force at `now` (the limits' time windows).
  void SetTime(absl::Time now, absl::TimeZone tz);
  bool empty() const { return limits_.empty(); }

  struct Report {
    const LimitConfig* config;
    LimitValues values;                                      // in force now
    std::map<std::vector<std::string>, LimitUsage> buckets;  // by per_ values, in the
                                                             // order queue, user, host, project, app
  };
  std::vector<Report> Reports() const;

  // Counts (sign +1) or gives back (-1) what `placement` of `job` holds in every bucket.
  void Apply(const JobRequest& job, const Placement& placement, int sign, const UserGroups& groups);
  // With the placement applied: the first limit it took past its value, described
  // ("limit weekday: slots 2 for alice (1 used, 2 asked)"); "" when none.
  std::string Exceeded(const JobRequest& job, const Placement& placement, const UserGroups& groups) const;

  // The limits over hosts that apply to `job`, chosen once per job placed; a host where
  // one already holds as much of the job's kind as it allows is not a candidate.
  void SelectForHosts(const JobRequest& job, const UserGroups& groups);
  bool any_host_limits() const { return !host_limits_.empty(); }
  bool HostLimited(const JobRequest& job, const std::string& host) const;

  // The buckets that exist now; Forget drops every bucket made since (a start estimate's
  // probe leaves no entry behind).
  using Buckets = std::vector<std::unordered_set<std::string>>;
  Buckets Remember() const;
  void Forget(const Buckets& before);

 private:
  struct Limit {
    LimitConfig config;
    LimitValues now;
    // By bucket key: the per_ values joined by kKeySeparator (one value, the common case,
    // is the value itself: no allocation for a short name), hashed.
    std::unordered_map<std::string, LimitUsage> usage;
    int per_fields = 0;  // how many per_ values a key joins
  };
  static constexpr char kKeySeparator = '\x1f';
  static bool Applies(const Limit& limit, const JobRequest& job, const UserGroups& groups);
  static std::string BucketKey(const Limit& limit, const JobRequest& job, const std::string& host);
  static void AddAllocation(const Limit& limit, const HostAllocation& a, LimitUsage* d);
  // Calls f(bucket key, what the placement adds to it) for each bucket of `limit` the
  // placement touches; a placement of one allocation (the common case) builds no map.
  template <typename F>
  static void ForEachDelta(const Limit& limit, const JobRequest& job, const Placement& placement,
                           const UserGroups& groups, F&& f);
  // The description of `limit`'s bucket `key` past a value in force, with `d` asked; "".
  static std::string Exceeds(const Limit& limit, const std::string& key, const LimitUsage& d);

  std::vector<Limit> limits_;
  std::vector<const Limit*> host_limits_;  // the job being placed: its limits over hosts
};

// Whether `value` is in the consumer set; for users, a group named in it stands for its
// members.
bool InConsumers(const ConsumerSet& set, const std::string& value, const UserGroups* groups);

}  // namespace jc::nexec
