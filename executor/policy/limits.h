#pragma once

// Resource limits (SPEC B7; SkyForm AIP's 资源配额, LSF's lsb.resources Limit sections):
// any number of limits, each over a set of consumers — queues, users or user groups,
// hosts, projects, applications, each as a set (one bucket for all of them together) or
// in its per_ form (one bucket per member) — on slots, jobs, or numeric resources, each
// value optionally in force only inside time windows:
//
//   - name: weekday                    # at most 2 slots Monday 8:00 to Friday 18:00,
//     queues: [medium, low]            # 5 otherwise, for everyone in medium and low
//     users: all ~u001                 # but u001
//     slots: "[2 1:8:0-5:18:0] [5 5:18:01-1:7:59]"
//   - name: per-user-gpus
//     per_user: all
//     resources: "[mem,5000] [gpu,2]"  # each user: 5000 MB reserved, 2 GPUs
//
// Plain data and the arithmetic of buckets; the scheduler keeps usage and checks jobs.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "executor/policy/time_window.h"

namespace jc::nexec {

// Who a limit is over, in one dimension: "all", names, and exclusions ("~u001").
struct ConsumerSet {
  bool given = false;  // the limit names this dimension at all
  bool per = false;    // per_ form: a bucket per member
  bool all = false;
  std::set<std::string> names;
  std::set<std::string> excluded;
  std::string text;  // as configured, for display
};

// A limit's value: a number, or several each in force inside its windows; outside every
// window there is no limit.
struct LimitValue {
  struct Part {
    double value = 0;
    TimeWindows windows;  // always open when empty
  };
  std::vector<Part> parts;
  std::string text;
  // The value in force at `t`, or none.
  std::optional<double> At(absl::Time t, absl::TimeZone tz) const;
};

struct LimitConfig {
  std::string name;
  ConsumerSet queues, users, hosts, projects, apps;
  std::optional<LimitValue> slots, jobs;
  std::map<std::string, LimitValue> resources;  // mem (MB), gpu, or any numeric resource
};

// "[2 1:8:0-5:18:0] [5 5:18:01-1:7:59]" or "130".
absl::StatusOr<LimitValue> ParseLimitValue(absl::string_view text);
// "[mem,5000] [gpu,2 9:00-18:00]": resource, value and optional windows per bracket.
absl::StatusOr<std::map<std::string, LimitValue>> ParseLimitResources(absl::string_view text);
// "all ~u001", "medium low"; names separated by spaces or commas.
ConsumerSet ParseConsumers(absl::string_view text, bool per);

// The values of a limit at one moment (what the scheduler checks against).
struct LimitValues {
  std::optional<double> slots, jobs;
  std::map<std::string, double> resources;
  bool any() const { return slots || jobs || !resources.empty(); }
};
LimitValues ValuesAt(const LimitConfig& limit, absl::Time t, absl::TimeZone tz);

// What a bucket holds.
struct LimitUsage {
  double slots = 0;
  double jobs = 0;
  std::map<std::string, double> resources;
};

}  // namespace jc::nexec
