#include "executor/master/config.h"

#include <yaml-cpp/yaml.h>

#include <pwd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/yaml_guard.h"
#include "common/status_macros.h"

namespace jc::nexec {
namespace {

absl::Status Bad(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("nexec config: ", where, ": ", what));
}

template <typename T>
absl::Status Read(const YAML::Node& node, const char* key, const std::string& where, T* out) {
  return YamlRead(node, key, "nexec config", where, out);
}

absl::Status CheckKeys(const YAML::Node& node, const std::string& where, const std::set<std::string>& known) {
  return YamlCheckKeys(node, "nexec config", where, known);
}

absl::StatusOr<ResourceValues> ReadResources(const YAML::Node& node, const std::string& where) {
  ResourceValues out;
  if (!node) return out;
  if (!node.IsMap()) return Bad(where, "must be a mapping of resource: value");
  for (const auto& kv : node) {
    std::string name = kv.first.as<std::string>();
    const std::string text = kv.second.as<std::string>();
    if (text == "true" || text == "false") {
      out[name] = text == "true";
      continue;
    }
    try {
      size_t used = 0;
      double d = std::stod(text, &used);
      if (used == text.size()) {
        out[name] = d;
        continue;
      }
    } catch (const std::exception&) {
    }
    out[name] = text;
  }
  return out;
}

// Load thresholds: resource -> "schedule/stop" (LSF's "0.7/2.0"; either side may be
// empty) or {schedule: x, stop: y}.
absl::StatusOr<LoadThresholds> ReadThresholds(const YAML::Node& node, const std::string& where) {
  LoadThresholds out;
  if (!node) return out;
  if (!node.IsMap()) return Bad(where, "must map a resource to \"schedule/stop\" or {schedule: x, stop: y}");
  for (const auto& kv : node) {
    const std::string name = kv.first.as<std::string>();
    const std::string at = absl::StrCat(where, ".", name);
    LoadThreshold t;
    auto number = [&](const std::string& text, std::optional<double>* out) -> absl::Status {
      std::string trimmed(absl::StripAsciiWhitespace(text));
      if (trimmed.empty()) return absl::OkStatus();
      double v = 0;
      if (!absl::SimpleAtod(trimmed, &v)) return Bad(at, absl::StrCat("\"", text, "\" is not a number"));
      *out = v;
      return absl::OkStatus();
    };
    if (kv.second.IsMap()) {
      JC_RETURN_IF_ERROR(CheckKeys(kv.second, at, {"schedule", "stop"}));
      if (kv.second["schedule"]) JC_RETURN_IF_ERROR(number(kv.second["schedule"].as<std::string>(), &t.schedule));
      if (kv.second["stop"]) JC_RETURN_IF_ERROR(number(kv.second["stop"].as<std::string>(), &t.stop));
    } else if (kv.second.IsScalar()) {
      std::vector<std::string> parts = absl::StrSplit(kv.second.as<std::string>(), '/');
      if (parts.size() > 2) return Bad(at, "expected \"schedule/stop\", e.g. \"2.0/4.0\" or \"/4.0\"");
      JC_RETURN_IF_ERROR(number(parts[0], &t.schedule));
      if (parts.size() == 2) JC_RETURN_IF_ERROR(number(parts[1], &t.stop));
    } else {
      return Bad(at, "expected \"schedule/stop\" or {schedule: x, stop: y}");
    }
    if (!t.schedule && !t.stop) return Bad(at, "gives neither a scheduling nor a stop threshold");
    out[name] = t;
  }
  return out;
}

bool IsUser(const std::string& name);

// A share tree: [{name, shares, children: [...]}, ...]; leaves are users or "default".
absl::Status ReadShareNodes(const YAML::Node& list, const std::string& where, std::set<std::string>* users,
                            std::vector<ShareNode>* out) {
  if (!list.IsSequence()) return Bad(where, "must be a list of {name, shares, children}");
  std::set<std::string> siblings;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = absl::StrCat(where, "[", i, "]");
    JC_RETURN_IF_ERROR(CheckKeys(list[i], at, {"name", "shares", "children"}));
    ShareNode n;
    JC_RETURN_IF_ERROR(Read(list[i], "name", at, &n.name));
    JC_RETURN_IF_ERROR(Read(list[i], "shares", at, &n.shares));
    if (n.name.empty()) return Bad(at, "needs a name");
    if (!(n.shares > 0)) return Bad(at + ".shares", "must be positive");
    if (!siblings.insert(n.name).second) return Bad(at, absl::StrCat("\"", n.name, "\" twice at one level"));
    if (const YAML::Node children = list[i]["children"]) {
      JC_RETURN_IF_ERROR(ReadShareNodes(children, at + ".children", users, &n.children));
    }
    if (n.children.empty() && n.name != "default") {
      if (!IsUser(n.name)) return Bad(at, absl::StrCat("\"", n.name, "\" is not a user (a leaf is a user, or default)"));
      if (!users->insert(n.name).second) return Bad(at, absl::StrCat("user ", n.name, " is in the tree twice"));
    }
    out->push_back(std::move(n));
  }
  return absl::OkStatus();
}

absl::StatusOr<FairshareConfig> ReadFairshare(const YAML::Node& node, const std::string& where) {
  if (!node.IsMap()) return Bad(where, "must be {shares: [...], half_life: 5h, gpu_factor: 1, cpu_time_factor: 0}");
  JC_RETURN_IF_ERROR(CheckKeys(node, where, {"shares", "half_life", "gpu_factor", "cpu_time_factor", "preempt"}));
  FairshareConfig f;
  std::set<std::string> users;
  if (!node["shares"]) return Bad(where, "needs shares: the share tree");
  JC_RETURN_IF_ERROR(ReadShareNodes(node["shares"], where + ".shares", &users, &f.tree));
  std::string half_life;
  JC_RETURN_IF_ERROR(Read(node, "half_life", where, &half_life));
  if (!half_life.empty() && (!absl::ParseDuration(half_life, &f.half_life) || f.half_life <= absl::ZeroDuration())) {
    return Bad(where + ".half_life", absl::StrCat("expected a duration such as 5h, got \"", half_life, "\""));
  }
  JC_RETURN_IF_ERROR(Read(node, "gpu_factor", where, &f.gpu_factor));
  if (f.gpu_factor < 0) return Bad(where + ".gpu_factor", "must not be negative");
  JC_RETURN_IF_ERROR(Read(node, "cpu_time_factor", where, &f.cpu_time_factor));
  if (f.cpu_time_factor < 0) return Bad(where + ".cpu_time_factor", "must not be negative");
  JC_RETURN_IF_ERROR(Read(node, "preempt", where, &f.preemptive));
  return f;
}

// A list of names, as YAML list or one string ("medium low", "all ~u001").
absl::StatusOr<std::string> NamesText(const YAML::Node& node, const std::string& where) {
  if (node.IsSequence()) {
    std::vector<std::string> names;
    for (const auto& n : node) names.push_back(n.as<std::string>());
    return absl::StrJoin(names, " ");
  }
  if (node.IsScalar()) return node.as<std::string>();
  return Bad(where, "must be names: a list, or one string such as \"all ~u001\"");
}

bool IsUser(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* out = nullptr;
  return getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &out) == 0 && out != nullptr;
}

// A capacity queue's virtual clusters: each names a user group, a user or `default`; no
// user in two; guarantees and maxima not negative, a max not under its guarantee.
absl::StatusOr<CapacityConfig> ReadCapacity(const YAML::Node& node, const std::string& where,
                                            const std::map<std::string, std::vector<std::string>>& groups) {
  if (!node.IsMap()) return Bad(where, "must be {resource: slots|gpu, user_limit_factor: 1, clusters: [...]}");
  JC_RETURN_IF_ERROR(CheckKeys(node, where, {"resource", "user_limit_factor", "clusters"}));
  CapacityConfig c;
  std::string resource = "slots";
  JC_RETURN_IF_ERROR(Read(node, "resource", where, &resource));
  if (resource == "gpu") {
    c.resource = CapacityResource::kGpus;
  } else if (resource != "slots") {
    return Bad(where + ".resource", absl::StrCat("expected slots or gpu, got \"", resource, "\""));
  }
  JC_RETURN_IF_ERROR(Read(node, "user_limit_factor", where, &c.user_limit_factor));
  if (c.user_limit_factor < 0) return Bad(where + ".user_limit_factor", "must not be negative (0: no limit)");
  const YAML::Node list = node["clusters"];
  if (!list || !list.IsSequence() || list.size() == 0) {
    return Bad(where + ".clusters", "needs a list of {name, guarantee, max}");
  }
  std::map<std::string, std::string> cluster_of_user;  // user -> the cluster naming them
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = absl::StrCat(where, ".clusters[", i, "]");
    if (!list[i].IsMap()) return Bad(at, "must be {name, guarantee, max}");
    JC_RETURN_IF_ERROR(CheckKeys(list[i], at, {"name", "guarantee", "max"}));
    VirtualClusterConfig vc;
    JC_RETURN_IF_ERROR(Read(list[i], "name", at, &vc.name));
    JC_RETURN_IF_ERROR(Read(list[i], "guarantee", at, &vc.guarantee));
    JC_RETURN_IF_ERROR(Read(list[i], "max", at, &vc.max));
    if (vc.name.empty()) return Bad(at, "needs a name: a user group, a user or default");
    if (vc.guarantee < 0) return Bad(at + ".guarantee", "must not be negative");
    if (vc.max < 0) return Bad(at + ".max", "must not be negative (0: no cap)");
    if (vc.max > 0 && vc.max < vc.guarantee) {
      return Bad(at + ".max", absl::StrCat(vc.max, " is below the guarantee ", vc.guarantee));
    }
    for (const auto& other : c.clusters) {
      if (other.name == vc.name) return Bad(at, absl::StrCat("\"", vc.name, "\" twice"));
    }
    std::vector<std::string> members;
    if (auto g = groups.find(vc.name); g != groups.end()) {
      members = g->second;
    } else if (vc.name != "default") {
      if (!IsUser(vc.name)) return Bad(at, absl::StrCat("\"", vc.name, "\" is neither a user group nor a user"));
      members = {vc.name};
    }
    for (const std::string& user : members) {
      auto [it, fresh] = cluster_of_user.emplace(user, vc.name);
      if (!fresh) {
        return Bad(at, absl::StrCat("user ", user, " is already in virtual cluster ", it->second,
                                    ": a user belongs to one"));
      }
    }
    c.clusters.push_back(std::move(vc));
  }
  return c;
}

absl::StatusOr<LimitConfig> ParseLimit(const YAML::Node& node, std::string where,
                                       const std::set<std::string>& queues,
                                       const std::map<std::string, std::vector<std::string>>& groups) {
  if (!node.IsMap()) return Bad(where, "must be a mapping");
  JC_RETURN_IF_ERROR(CheckKeys(node, where,
                               {"name", "queues", "per_queue", "users", "per_user", "hosts", "per_host", "projects",
                                "per_project", "apps", "per_app", "slots", "jobs", "resources"}));
  LimitConfig l;
  JC_RETURN_IF_ERROR(Read(node, "name", where, &l.name));
  if (l.name.empty()) return Bad(where, "needs a name");
  where = absl::StrCat(where, " (", l.name, ")");
  struct Dimension {
    const char* key;
    ConsumerSet* set;
  };
  for (const auto& [key, set] : {Dimension{"queues", &l.queues}, Dimension{"users", &l.users},
                                 Dimension{"hosts", &l.hosts}, Dimension{"projects", &l.projects},
                                 Dimension{"apps", &l.apps}}) {
    const std::string per = key == std::string("queues")     ? "per_queue"
                            : key == std::string("users")    ? "per_user"
                            : key == std::string("hosts")    ? "per_host"
                            : key == std::string("projects") ? "per_project"
                                                             : "per_app";
    if (node[key] && node[per]) return Bad(where, absl::StrCat("give ", key, " or ", per, ", not both"));
    const char* used = node[per] ? per.c_str() : key;
    if (!node[used]) continue;
    JC_ASSIGN_OR_RETURN(std::string text, NamesText(node[used], absl::StrCat(where, ".", used)));
    *set = ParseConsumers(text, node[per].IsDefined());
    if (!set->all && set->names.empty()) {
      return Bad(absl::StrCat(where, ".", used), "names nobody (use all, names, and ~exclusions)");
    }
    // Consumers must exist: queues of this file; users that are accounts or groups.
    std::vector<std::string> named(set->names.begin(), set->names.end());
    named.insert(named.end(), set->excluded.begin(), set->excluded.end());
    for (const std::string& name : named) {
      if (key == std::string("queues") && !queues.count(name)) {
        return Bad(absl::StrCat(where, ".", used), absl::StrCat("no queue named \"", name, "\""));
      }
      if (key == std::string("users") && !groups.count(name) && !IsUser(name)) {
        return Bad(absl::StrCat(where, ".", used), absl::StrCat("\"", name, "\" is neither a user nor a user group"));
      }
    }
  }
  auto value = [&](const char* key, std::optional<LimitValue>* out) -> absl::Status {
    if (!node[key]) return absl::OkStatus();
    auto parsed = ParseLimitValue(node[key].as<std::string>());
    if (!parsed.ok()) return Bad(absl::StrCat(where, ".", key), std::string(parsed.status().message()));
    *out = *std::move(parsed);
    return absl::OkStatus();
  };
  JC_RETURN_IF_ERROR(value("slots", &l.slots));
  JC_RETURN_IF_ERROR(value("jobs", &l.jobs));
  if (node["resources"]) {
    auto parsed = ParseLimitResources(node["resources"].as<std::string>());
    if (!parsed.ok()) return Bad(where + ".resources", std::string(parsed.status().message()));
    l.resources = *std::move(parsed);
  }
  if (!l.slots && !l.jobs && l.resources.empty()) return Bad(where, "limits nothing: give slots, jobs or resources");
  return l;
}

}  // namespace

ExecutorConfig DefaultConfig() {
  ExecutorConfig c;
  QueueConfig normal;
  normal.name = "normal";
  c.queues.push_back(normal);
  c.default_queue = "normal";
  return c;
}

// How a queue orders and shares (fair share, DRF, capacity) and whom it preempts.
static absl::Status ReadQueuePolicies(const YAML::Node& node, const std::string& where, const ExecutorConfig& c,
                                      QueueConfig* q) {
  if (const YAML::Node fs = node["fairshare"]) {
    JC_ASSIGN_OR_RETURN(q->fairshare, ReadFairshare(fs, where + ".fairshare"));
  }
  std::string drf;
  JC_RETURN_IF_ERROR(Read(node, "drf", where, &drf));
  if (drf == "job") {
    q->drf = DrfBy::kJob;
  } else if (drf == "user") {
    q->drf = DrfBy::kUser;
  } else if (drf == "group") {
    q->drf = DrfBy::kGroup;
  } else if (!drf.empty()) {
    return Bad(where + ".drf", absl::StrCat("expected job, user or group, got \"", drf, "\""));
  }
  if (q->drf != DrfBy::kOff && (q->fairshare || q->user_round_robin)) {
    return Bad(where + ".drf", "orders the queue by itself: not with fairshare or round_robin");
  }
  if (const YAML::Node capacity = node["capacity"]) {
    JC_ASSIGN_OR_RETURN(q->capacity, ReadCapacity(capacity, where + ".capacity", c.user_groups));
    if (q->drf != DrfBy::kOff || q->user_round_robin) {
      return Bad(where + ".capacity", "orders the queue by its clusters: not with drf or round_robin");
    }
  }
  if (const YAML::Node preempt = node["preempt"]) {
    JC_ASSIGN_OR_RETURN(std::string names, NamesText(preempt, where + ".preempt"));
    q->preempt = absl::StrSplit(names, ' ', absl::SkipEmpty());
  }
  JC_RETURN_IF_ERROR(Read(node, "backfill", where, &q->backfill));
  JC_RETURN_IF_ERROR(Read(node, "max_preemptions", where, &q->max_preemptions));
  if (q->max_preemptions < 0) return Bad(where + ".max_preemptions", "must not be negative (0: no limit)");
  std::string grace;
  JC_RETURN_IF_ERROR(Read(node, "preempt_grace", where, &grace));
  if (!grace.empty() && (!absl::ParseDuration(grace, &q->preempt_grace) || q->preempt_grace < absl::ZeroDuration())) {
    return Bad(where + ".preempt_grace", absl::StrCat("expected a duration such as 30s, got \"", grace, "\""));
  }
  return absl::OkStatus();
}

// One entry of `queues`, checked (its name's uniqueness is the caller's).
static absl::StatusOr<QueueConfig> ReadQueue(const YAML::Node& node, const std::string& where,
                                             const ExecutorConfig& c) {
  QueueConfig q;
  std::string balance = "pack";
  JC_RETURN_IF_ERROR(Read(node, "name", where, &q.name));
  JC_RETURN_IF_ERROR(Read(node, "priority", where, &q.priority));
  JC_RETURN_IF_ERROR(Read(node, "users", where, &q.users));
  JC_RETURN_IF_ERROR(Read(node, "hosts", where, &q.hosts));
  JC_RETURN_IF_ERROR(Read(node, "max_slots", where, &q.max_slots));
  JC_RETURN_IF_ERROR(Read(node, "max_slots_per_user", where, &q.max_slots_per_user));
  JC_RETURN_IF_ERROR(Read(node, "balance", where, &balance));
  JC_RETURN_IF_ERROR(Read(node, "round_robin", where, &q.user_round_robin));
  JC_RETURN_IF_ERROR(Read(node, "gpu_shared", where, &q.gpu_shared));
  JC_RETURN_IF_ERROR(Read(node, "interactive", where, &q.allow_interactive));
  JC_RETURN_IF_ERROR(Read(node, "rerun_on_host_failure", where, &q.rerun_on_host_failure));
  JC_RETURN_IF_ERROR(Read(node, "pre_exec", where, &q.pre_exec));
  JC_RETURN_IF_ERROR(Read(node, "post_exec", where, &q.post_exec));
  JC_RETURN_IF_ERROR(Read(node, "pre_exec_retries", where, &q.pre_exec_retries));
  JC_RETURN_IF_ERROR(Read(node, "cpu_binding", where, &q.cpu_binding));
  JC_RETURN_IF_ERROR(Read(node, "pids_limit", where, &q.pids_limit));
  if (q.pids_limit < 0) return Bad(where + ".pids_limit", "must be 0 (no limit) or more");
  if (const YAML::Node controls = node["job_controls"]) {
    std::string at = where + ".job_controls";
    if (!controls.IsMap()) return Bad(at, "must map suspend, resume or kill to a command");
    JC_RETURN_IF_ERROR(CheckKeys(controls, at, {"suspend", "resume", "kill"}));
    JC_RETURN_IF_ERROR(Read(controls, "suspend", at, &q.suspend_action));
    JC_RETURN_IF_ERROR(Read(controls, "resume", at, &q.resume_action));
    JC_RETURN_IF_ERROR(Read(controls, "kill", at, &q.kill_action));
  }
  JC_ASSIGN_OR_RETURN(q.load_thresholds, ReadThresholds(node["load_thresholds"], where + ".load_thresholds"));
  std::string action = "suspend";
  JC_RETURN_IF_ERROR(Read(node, "threshold_action", where, &action));
  if (action != "suspend" && action != "kill") {
    return Bad(where + ".threshold_action", absl::StrCat("expected suspend or kill, got \"", action, "\""));
  }
  q.threshold_kills = action == "kill";
  JC_RETURN_IF_ERROR(ReadQueuePolicies(node, where, c, &q));
  std::string run_window;
  JC_RETURN_IF_ERROR(Read(node, "run_window", where, &run_window));
  auto window = TimeWindows::Parse(run_window);
  if (!window.ok()) return Bad(where + ".run_window", std::string(window.status().message()));
  q.run_window = *std::move(window);
  if (q.pre_exec_retries < 0) return Bad(where + ".pre_exec_retries", "must not be negative");
  std::string timeout;
  JC_RETURN_IF_ERROR(Read(node, "pre_exec_timeout", where, &timeout));
  if (!timeout.empty()) {
    absl::Duration d;
    if (!absl::ParseDuration(timeout, &d) || d <= absl::ZeroDuration() || d > absl::Hours(24 * 7)) {
      return Bad(where + ".pre_exec_timeout", absl::StrCat("expected a duration such as 30s or 10m, got \"",
                                                            timeout, "\""));
    }
    q.pre_exec_timeout_seconds = static_cast<int>(std::max<int64_t>(1, absl::ToInt64Seconds(d)));
  }
  if (q.name.empty()) return Bad(where, "needs a name");
  if (balance != "pack" && balance != "spread") {
    return Bad(where + ".balance", absl::StrCat("expected \"pack\" or \"spread\", got \"",
                                                balance, "\""));
  }
  q.balance = balance == "spread" ? Balance::kSpread : Balance::kPack;
  if (q.max_slots < 0 || q.max_slots_per_user < 0) {
    return Bad(where, "slot limits must not be negative");
  }
  return q;
}

// host_types, hosts (each of a known type) and user_groups.
static absl::Status ReadHostsAndGroups(const YAML::Node& root, ExecutorConfig* c) {
  std::set<std::string> types;
  if (const YAML::Node list = root["host_types"]) {
    for (size_t i = 0; i < list.size(); ++i) {
      std::string where = absl::StrCat("host_types[", i, "]");
      JC_RETURN_IF_ERROR(CheckKeys(list[i], where, {"name", "cpu_factor"}));
      HostType t;
      JC_RETURN_IF_ERROR(Read(list[i], "name", where, &t.name));
      JC_RETURN_IF_ERROR(Read(list[i], "cpu_factor", where, &t.cpu_factor));
      if (t.name.empty()) return Bad(where, "needs a name");
      if (!(t.cpu_factor > 0)) return Bad(where + ".cpu_factor", "must be positive");
      if (!types.insert(t.name).second) return Bad(where, absl::StrCat("\"", t.name, "\" twice"));
      c->host_types.push_back(t);
    }
  }
  if (const YAML::Node list = root["hosts"]) {
    for (size_t i = 0; i < list.size(); ++i) {
      std::string where = absl::StrCat("hosts[", i, "]");
      JC_RETURN_IF_ERROR(CheckKeys(list[i], where, {"name", "type", "resources", "load_thresholds"}));
      std::string name;
      HostStatic h;
      JC_RETURN_IF_ERROR(Read(list[i], "name", where, &name));
      JC_RETURN_IF_ERROR(Read(list[i], "type", where, &h.type));
      if (name.empty()) return Bad(where, "needs a name");
      if (!h.type.empty() && !types.count(h.type)) {
        return Bad(where + ".type", absl::StrCat("unknown host type \"", h.type, "\""));
      }
      JC_ASSIGN_OR_RETURN(h.resources, ReadResources(list[i]["resources"], where + ".resources"));
      JC_ASSIGN_OR_RETURN(h.load_thresholds, ReadThresholds(list[i]["load_thresholds"], where + ".load_thresholds"));
      c->hosts[name] = h;
    }
  }
  if (const YAML::Node groups = root["user_groups"]) {
    if (!groups.IsMap()) return Bad("user_groups", "must map a group name to a list of users");
    for (const auto& kv : groups) {
      std::string name = kv.first.as<std::string>();
      std::string where = absl::StrCat("user_groups.", name);
      // Either a list of members, or {members: [...], admins: [...]}.
      if (kv.second.IsMap()) {
        JC_RETURN_IF_ERROR(CheckKeys(kv.second, where, {"members", "admins"}));
        JC_RETURN_IF_ERROR(Read(kv.second, "members", where, &c->user_groups[name]));
        JC_RETURN_IF_ERROR(Read(kv.second, "admins", where, &c->group_admins[name]));
        continue;
      }
      try {
        c->user_groups[name] = kv.second.as<std::vector<std::string>>();
      } catch (const YAML::Exception&) {
        return Bad(where, "must be a list of users, or {members: [...], admins: [...]}");
      }
    }
  }
  return absl::OkStatus();
}

static absl::StatusOr<ExecutorConfig> ParseConfigUnguarded(const std::string& yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("nexec config: not valid YAML: line ",
                                                   e.mark.line + 1, ": ", e.msg));
  }
  if (root.IsNull()) return DefaultConfig();
  JC_RETURN_IF_ERROR(CheckKeys(root, "top level",
                               {"host_types", "hosts", "user_groups", "queues", "default_queue",
                                "administrators", "limits", "max_pend_jobs_per_user"}));
  ExecutorConfig c;
  JC_RETURN_IF_ERROR(ReadHostsAndGroups(root, &c));
  JC_RETURN_IF_ERROR(Read(root, "administrators", "top level", &c.administrators));
  JC_RETURN_IF_ERROR(Read(root, "max_pend_jobs_per_user", "top level", &c.max_pend_jobs_per_user));
  if (c.max_pend_jobs_per_user < 0) {
    return Bad("max_pend_jobs_per_user", absl::StrCat("must be 0 (no limit) or more, got ", c.max_pend_jobs_per_user));
  }
  std::set<std::string> queue_names;
  if (const YAML::Node list = root["queues"]) {
    for (size_t i = 0; i < list.size(); ++i) {
      std::string where = absl::StrCat("queues[", i, "]");
      JC_RETURN_IF_ERROR(CheckKeys(list[i], where,
                                   {"name", "priority", "users", "hosts", "max_slots",
                                    "max_slots_per_user", "balance", "round_robin", "gpu_shared",
                                    "interactive", "rerun_on_host_failure", "pre_exec", "post_exec",
                                    "pre_exec_timeout", "pre_exec_retries", "cpu_binding", "pids_limit", "job_controls",
                                    "run_window", "load_thresholds", "threshold_action", "fairshare", "drf", "preempt", "max_preemptions",
                                    "preempt_grace", "backfill", "capacity"}));
      JC_ASSIGN_OR_RETURN(QueueConfig q, ReadQueue(list[i], where, c));
      if (!queue_names.insert(q.name).second) return Bad(where, absl::StrCat("\"", q.name, "\" twice"));
      c.queues.push_back(q);
    }
  }
  if (c.queues.empty()) {
    c.queues = DefaultConfig().queues;
  }
  // A queue preempts only existing queues of lower priority (so preemption never cycles).
  for (size_t i = 0; i < c.queues.size(); ++i) {
    for (const std::string& name : c.queues[i].preempt) {
      auto victim = std::find_if(c.queues.begin(), c.queues.end(), [&](const QueueConfig& q) { return q.name == name; });
      const std::string where = absl::StrCat("queues[", i, "].preempt");
      if (victim == c.queues.end()) return Bad(where, absl::StrCat("no queue \"", name, "\""));
      if (victim->priority >= c.queues[i].priority) {
        return Bad(where, absl::StrCat("queue ", name, " (priority ", victim->priority, ") is not below ", c.queues[i].name,
                                       " (priority ", c.queues[i].priority, ")"));
      }
    }
  }
  if (const YAML::Node list = root["limits"]) {
    if (!list.IsSequence()) return Bad("limits", "must be a list of limits");
    std::set<std::string> queue_set, names;
    for (const auto& q : c.queues) queue_set.insert(q.name);
    for (size_t i = 0; i < list.size(); ++i) {
      std::string where = absl::StrCat("limits[", i, "]");
      JC_ASSIGN_OR_RETURN(LimitConfig limit, ParseLimit(list[i], where, queue_set, c.user_groups));
      if (!names.insert(limit.name).second) return Bad(where, absl::StrCat("\"", limit.name, "\" twice"));
      c.limits.push_back(std::move(limit));
    }
  }
  c.default_queue = c.queues.front().name;
  JC_RETURN_IF_ERROR(Read(root, "default_queue", "top level", &c.default_queue));
  bool found = false;
  for (const auto& q : c.queues) found |= q.name == c.default_queue;
  if (!found) return Bad("default_queue", absl::StrCat("no queue named \"", c.default_queue, "\""));
  return c;
}

absl::StatusOr<ExecutorConfig> ParseConfig(const std::string& yaml) {
  return ParseYamlGuarded("nexec config", [&] { return ParseConfigUnguarded(yaml); });
}

absl::StatusOr<ExecutorConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read nexec config ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseConfig(ss.str());
}

}  // namespace jc::nexec
