#include "adapters/sdk/center_config.h"

#include <yaml-cpp/yaml.h>

#include <pwd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/strings/str_join.h"
#include "common/oci/image_reference.h"
#include "common/yaml_guard.h"
#include "common/quantity.h"

namespace jc::adapter {
namespace {

template <typename T>
absl::StatusOr<T> Get(const YAML::Node& node, const std::string& key, const std::string& where,
                      T fallback) {
  if (!node[key]) return fallback;
  try {
    return node[key].as<T>();
  } catch (const YAML::Exception&) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", key, "\" is not a valid value (\"", node[key].Scalar(), "\")"));
  }
}

// One entry of a list: an absolute directory.
absl::StatusOr<std::string> DirectoryAt(const YAML::Node& list, size_t index, const std::string& where) {
  std::string v;
  try {
    v = list[index].as<std::string>();
  } catch (const YAML::Exception&) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a directory path"));
  }
  if (v.empty() || v[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", v, "\" must be an absolute directory"));
  }
  return v;
}

#define JC_CFG_ASSIGN(lhs, expr)        \
  do {                                  \
    auto jc_cfg_v = (expr);             \
    if (!jc_cfg_v.ok()) return jc_cfg_v.status(); \
    lhs = *jc_cfg_v;                    \
  } while (0)

absl::StatusOr<double> QuantityField(const YAML::Node& node, const std::string& key,
                                     const std::string& where, bool bytes_to_mb) {
  if (!node[key]) return 0.0;
  auto q = Quantity::Parse(node[key].Scalar());
  if (!q.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", key, "\": ", q.status().message()));
  }
  // Memory without a unit is taken as MB (Table 2's unit); with one, converted to MB.
  const std::string& text = node[key].Scalar();
  bool has_unit = !text.empty() && !std::isdigit(static_cast<unsigned char>(text.back()));
  if (bytes_to_mb && has_unit) return static_cast<double>(q->CeilMebibytes());
  return static_cast<double>(q->milli()) / Quantity::kMilliPerUnit;
}

}  // namespace
bool IsRootAccount(const std::string& account);
namespace {

// A run_as target: a plain account name, never root (by name or by uid on this host).
absl::Status CheckAccount(const std::string& account, const std::string& where) {
  if (account.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": the account is empty"));
  if (IsRootAccount(account)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", account, "\" is root; replicas never run as root, map to an ordinary account"));
  }
  return absl::OkStatus();
}

absl::Status ParseAccountMap(const YAML::Node& node, const std::string& where,
                             std::map<std::string, std::string>* out) {
  if (!node) return absl::OkStatus();
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": must map names to local accounts"));
  for (const auto& kv : node) {
    std::string name = kv.first.as<std::string>();
    std::string at = absl::StrCat(where, ".", name);
    std::string account;
    try {
      account = kv.second.as<std::string>();
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": must be an account name"));
    }
    if (auto s = CheckAccount(account, at); !s.ok()) return s;
    (*out)[name] = account;
  }
  return absl::OkStatus();
}

absl::StatusOr<RunAs> ParseRunAs(const YAML::Node& node) {
  RunAs r;
  if (!node) return r;
  if (!node.IsMap()) return absl::InvalidArgumentError("run_as: must be a map with projects, users and default");
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (key != "projects" && key != "users" && key != "default") {
      return absl::InvalidArgumentError(
          absl::StrCat("run_as: unknown key \"", key, "\" (expected projects, users or default)"));
    }
  }
  r.configured = true;
  if (auto s = ParseAccountMap(node["projects"], "run_as.projects", &r.projects); !s.ok()) return s;
  if (auto s = ParseAccountMap(node["users"], "run_as.users", &r.users); !s.ok()) return s;
  if (node["default"]) {
    try {
      r.default_account = node["default"].as<std::string>();
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError("run_as.default: must be an account name");
    }
    if (auto s = CheckAccount(r.default_account, "run_as.default"); !s.ok()) return s;
  }
  return r;
}

}  // namespace

bool IsRootAccount(const std::string& account) {
  if (account == "root") return true;
  passwd pw;
  passwd* out = nullptr;
  char buf[16384];
  return !account.empty() && getpwnam_r(account.c_str(), &pw, buf, sizeof buf, &out) == 0 && out != nullptr &&
         out->pw_uid == 0;
}

absl::StatusOr<std::string> RunAs::AccountFor(const std::string& center_id, const std::string& project,
                                              const std::string& user) const {
  if (auto it = users.find(user); !user.empty() && it != users.end()) return it->second;
  if (auto it = projects.find(project); !project.empty() && it != projects.end()) return it->second;
  if (!default_account.empty()) return default_account;
  return absl::FailedPreconditionError(absl::StrCat(
      "center ", center_id, " maps no local account for ",
      project.empty() ? "jobs without a project" : absl::StrCat("project \"", project, "\""),
      user.empty() ? "" : absl::StrCat(" or user \"", user, "\""), " (run_as in its configuration)"));
}

pb::RunAsPolicy RunAs::Policy() const {
  pb::RunAsPolicy p;
  p.set_any(!configured || !default_account.empty());
  for (const auto& [project, account] : projects) p.add_projects(project);
  for (const auto& [user, account] : users) p.add_users(user);
  return p;
}

const pb::SpecOffer* CenterConfig::FindSpec(const std::string& id) const {
  for (const auto& s : specs) {
    if (s.resource_spec_id() == id) return &s;
  }
  return nullptr;
}

static absl::StatusOr<CenterConfig> ParseCenterConfigUnguarded(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("center configuration is not YAML: ", e.what()));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("center configuration must be a YAML map");
  CenterConfig c;
  JC_CFG_ASSIGN(c.center_id, Get<std::string>(root, "center_id", "center", ""));
  if (c.center_id.empty()) return absl::InvalidArgumentError("center configuration: center_id is missing");
  JC_CFG_ASSIGN(c.security_grade, Get<int>(root, "security_grade", "center", 0));
  JC_CFG_ASSIGN(c.static_power_watts, Get<double>(root, "static_power_watts", "center", 0));
  JC_CFG_ASSIGN(c.performance_factor, Get<double>(root, "performance_factor", "center", 1));
  std::string time_limit;
  JC_CFG_ASSIGN(time_limit, Get<std::string>(root, "default_time_limit", "center", ""));
  if (!time_limit.empty()) {
    if (!absl::ParseDuration(time_limit, &c.default_time_limit) || c.default_time_limit < absl::ZeroDuration() ||
        c.default_time_limit == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("center: default_time_limit \"", time_limit,
                                                     "\" is not a duration (\"2h\", \"90m\", \"3600s\")"));
    }
  }
  std::string retention;
  JC_CFG_ASSIGN(retention, Get<std::string>(root, "replica_retention", "center", ""));
  if (!retention.empty()) {
    if (!absl::ParseDuration(retention, &c.replica_retention) || c.replica_retention == absl::InfiniteDuration() ||
        c.replica_retention < CenterConfig::kMinReplicaRetention) {
      return absl::InvalidArgumentError(absl::StrCat("center: replica_retention \"", retention,
                                                     "\" is not a duration of at least 24h (\"336h\", \"720h\")"));
    }
  }
  JC_CFG_ASSIGN(c.user, Get<std::string>(root, "user", "center", ""));
  if (!c.user.empty()) {
    if (auto s = CheckAccount(c.user, "user"); !s.ok()) return s;
  }
  JC_CFG_ASSIGN(c.run_as, ParseRunAs(root["run_as"]));
  if (const YAML::Node ports = root["ports"]) {
    if (!ports.IsMap()) return absl::InvalidArgumentError("center: \"ports\" must be {first: N, last: M}");
    JC_CFG_ASSIGN(c.port_first, Get<int>(ports, "first", "ports", 0));
    JC_CFG_ASSIGN(c.port_last, Get<int>(ports, "last", "ports", 0));
    if (c.port_first < 1024 || c.port_last > 65535 || c.port_first > c.port_last) {
      return absl::InvalidArgumentError(absl::StrCat("ports: first and last must be 1024 to 65535, first <= last; got ",
                                                     c.port_first, " to ", c.port_last));
    }
  }
  JC_CFG_ASSIGN(c.endpoint_host, Get<std::string>(root, "endpoint_host", "center", "127.0.0.1"));
  if (c.endpoint_host.empty() || c.endpoint_host.find_first_of(" /:@\t\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("center: endpoint_host must be a host name or IPv4 address, got \"",
                                                   c.endpoint_host, "\""));
  }
  JC_CFG_ASSIGN(c.data_dir, Get<std::string>(root, "data_dir", "center", ""));
  if (const YAML::Node sources = root["data_sources"]) {
    if (!sources.IsSequence()) {
      return absl::InvalidArgumentError("center: \"data_sources\" must be a list of directories");
    }
    for (size_t k = 0; k < sources.size(); ++k) {
      std::string dir;
      JC_CFG_ASSIGN(dir, DirectoryAt(sources, k, absl::StrCat("data_sources[", k, "]")));
      c.data_sources.push_back(dir);
    }
  }
  if (const YAML::Node movers = root["data_movers"]) {
    if (!movers.IsSequence()) return absl::InvalidArgumentError("center: \"data_movers\" must be a list");
    for (size_t k = 0; k < movers.size(); ++k) {
      std::string where = absl::StrCat("data_movers[", k, "]");
      const YAML::Node m = movers[k];
      if (!m.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": must be {scheme, command}"));
      CommandMoverConfig mover;
      JC_CFG_ASSIGN(mover.scheme, Get<std::string>(m, "scheme", where, ""));
      bool scheme_ok = !mover.scheme.empty();
      for (char ch : mover.scheme) scheme_ok &= absl::ascii_isalnum(ch) || ch == '+' || ch == '-' || ch == '.';
      if (!scheme_ok) return absl::InvalidArgumentError(absl::StrCat(where, ": scheme must be a URL scheme such as rsync"));
      if (mover.scheme == "file") {
        return absl::InvalidArgumentError(absl::StrCat(where, ": file:// is the built-in mover's (limited by data_sources)"));
      }
      for (const auto& other : c.data_movers) {
        if (other.scheme == mover.scheme) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": scheme ", mover.scheme, " has a mover already"));
        }
      }
      const YAML::Node command = m["command"];
      if (!command || !command.IsSequence() || command.size() == 0) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": command must be a non-empty list (program, arguments)"));
      }
      for (const auto& arg : command) {
        if (!arg.IsScalar()) return absl::InvalidArgumentError(absl::StrCat(where, ": command items must be strings"));
        mover.argv.push_back(arg.as<std::string>());
      }
      std::string joined = absl::StrJoin(mover.argv, " ");
      if (joined.find("{source}") == std::string::npos || joined.find("{target}") == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": command must use {source} and {target}"));
      }
      for (const auto& kv : m) {
        std::string key = kv.first.as<std::string>();
        if (key != "scheme" && key != "command") {
          return absl::InvalidArgumentError(absl::StrCat(where, ": unknown key \"", key, "\" (expected scheme, command)"));
        }
      }
      c.data_movers.push_back(std::move(mover));
    }
  }
  JC_CFG_ASSIGN(c.image_dir, Get<std::string>(root, "image_dir", "center", ""));
  JC_CFG_ASSIGN(c.image_registry, Get<std::string>(root, "image_registry", "center", ""));
  if (const YAML::Node m = root["image_mirror"]) {
    if (!m.IsMap()) return absl::InvalidArgumentError("center: image_mirror must be a map (registry, auth_file, ...)");
    for (const auto& kv : m) {
      const std::string key = kv.first.as<std::string>();
      if (key != "registry" && key != "auth_file" && key != "cert_dir" && key != "source_auth_file" &&
          key != "source_cert_dir") {
        return absl::InvalidArgumentError(absl::StrCat(
            "image_mirror: unknown key \"", key, "\" (expected registry, auth_file, cert_dir, source_auth_file, "
            "source_cert_dir)"));
      }
    }
    JC_CFG_ASSIGN(c.image_mirror.registry, Get<std::string>(m, "registry", "image_mirror", ""));
    JC_CFG_ASSIGN(c.image_mirror.auth_file, Get<std::string>(m, "auth_file", "image_mirror", ""));
    JC_CFG_ASSIGN(c.image_mirror.cert_dir, Get<std::string>(m, "cert_dir", "image_mirror", ""));
    JC_CFG_ASSIGN(c.image_mirror.source_auth_file, Get<std::string>(m, "source_auth_file", "image_mirror", ""));
    JC_CFG_ASSIGN(c.image_mirror.source_cert_dir, Get<std::string>(m, "source_cert_dir", "image_mirror", ""));
    if (c.image_mirror.registry.empty()) return absl::InvalidArgumentError("image_mirror: registry is required");
    auto probe = oci::ImageReference::Parse(c.image_mirror.registry + "/probe@sha256:" + std::string(64, '0'));
    if (!probe.ok() || probe->registry.find_first_of(".:") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("image_mirror: registry \"", c.image_mirror.registry,
                                                     "\" is not host[:port][/prefix]"));
    }
  }
  if (const YAML::Node command = root["image_mover"]) {
    if (!command.IsSequence() || command.size() == 0) {
      return absl::InvalidArgumentError("center: image_mover must be a non-empty list (program, arguments)");
    }
    for (const auto& arg : command) {
      if (!arg.IsScalar()) return absl::InvalidArgumentError("center: image_mover items must be strings");
      c.image_mover.push_back(arg.as<std::string>());
    }
    if (absl::StrJoin(c.image_mover, " ").find("{target}") == std::string::npos) {
      return absl::InvalidArgumentError("center: image_mover must use {target} (where the image goes)");
    }
    if (c.image_dir.empty()) {
      return absl::InvalidArgumentError("center: image_mover needs image_dir (where staged images are kept)");
    }
  }
  if (const YAML::Node n = root["network"]) {
    double v;
    JC_CFG_ASSIGN(v, Get<double>(n, "bandwidth_mbps", "network", 0));
    c.network.set_bandwidth_mbps(v);
    JC_CFG_ASSIGN(v, Get<double>(n, "latency_ms", "network", 0));
    c.network.set_latency_ms(v);
    JC_CFG_ASSIGN(v, Get<double>(n, "jitter_ms", "network", 0));
    c.network.set_jitter_ms(v);
    JC_CFG_ASSIGN(v, Get<double>(n, "loss_rate", "network", 0));
    c.network.set_loss_rate(v);
  }
  int i = 0;
  for (const YAML::Node& n : root["specs"]) {
    std::string where = absl::StrCat("specs[", i++, "]");
    pb::SpecOffer s;
    std::string id;
    JC_CFG_ASSIGN(id, Get<std::string>(n, "id", where, ""));
    if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": id is missing"));
    if (c.FindSpec(id)) return absl::InvalidArgumentError(absl::StrCat(where, ": spec ", id, " is listed twice"));
    s.set_resource_spec_id(id);
    double v;
    JC_CFG_ASSIGN(v, QuantityField(n, "cpu", where, false));
    s.mutable_quantity()->set_cpu(v);
    if (v <= 0) return absl::InvalidArgumentError(absl::StrCat(where, " (", id, "): cpu must be positive"));
    JC_CFG_ASSIGN(v, QuantityField(n, "memory", where, true));
    s.mutable_quantity()->set_memory_mb(v);
    // Devices are counted: whole numbers, and few (a quantity such as 4Gi is not one).
    for (const auto& [name, set] :
         {std::pair<const char*, void (pb::ResourceQuantity::*)(int32_t)>{"gpu", &pb::ResourceQuantity::set_gpu},
          {"npu", &pb::ResourceQuantity::set_npu},
          {"mlu", &pb::ResourceQuantity::set_mlu}}) {
      JC_CFG_ASSIGN(v, QuantityField(n, name, where, false));
      if (!(v >= 0) || v > 65536 || v != static_cast<double>(static_cast<int32_t>(v))) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " (", id, "): ", name, " must be a whole number of devices, 0 to 65536 (got ", v, ")"));
      }
      (s.mutable_quantity()->*set)(static_cast<int32_t>(v));
    }
    JC_CFG_ASSIGN(v, Get<double>(n, "execution_power_watts", where, 0));
    s.set_execution_power_watts(v);
    JC_CFG_ASSIGN(v, Get<double>(n, "price", where, 0));
    s.set_price(v);
    c.specs.push_back(s);
  }
  i = 0;
  for (const YAML::Node& n : root["images"]) {
    std::string where = absl::StrCat("images[", i++, "]");
    pb::Image img;
    std::string v;
    JC_CFG_ASSIGN(v, Get<std::string>(n, "id", where, ""));
    if (v.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": id is missing"));
    img.set_image_id(v);
    JC_CFG_ASSIGN(v, Get<std::string>(n, "name", where, ""));
    img.set_name(v);
    JC_CFG_ASSIGN(v, Get<std::string>(n, "framework", where, ""));
    img.set_framework(v);
    c.images.push_back(img);
  }
  i = 0;
  for (const YAML::Node& n : root["datasets"]) {
    std::string where = absl::StrCat("datasets[", i++, "]");
    pb::Dataset d;
    std::string v;
    JC_CFG_ASSIGN(v, Get<std::string>(n, "name", where, ""));
    if (v.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": name is missing"));
    d.set_data_name(v);
    JC_CFG_ASSIGN(v, Get<std::string>(n, "version", where, ""));
    d.set_data_version(v);
    JC_CFG_ASSIGN(v, Get<std::string>(n, "url", where, ""));
    d.set_url(v);
    c.datasets.push_back(d);
  }
  return c;
}

absl::StatusOr<CenterConfig> ParseCenterConfig(const std::string& text) {
  return ParseYamlGuarded("center configuration", [&] { return ParseCenterConfigUnguarded(text); });
}

absl::StatusOr<CenterConfig> LoadCenterConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read center configuration ", path));
  std::stringstream text;
  text << in.rdbuf();
  auto c = ParseCenterConfig(text.str());
  if (!c.ok()) return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  return c;
}

}  // namespace jc::adapter
