#include "tools/sim/federation.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/yaml_guard.h"

namespace jc::sim {
namespace {

absl::Status Bad(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("federation: ", where, ": ", what));
}

// Unknown keys are listed with the known ones: a federation file is written by hand.
absl::Status CheckKeys(const YAML::Node& node, const std::string& where, const std::set<std::string>& known) {
  absl::Status s = YamlCheckKeys(node, "federation", where, known);
  if (s.ok() || !node.IsMap()) return s;
  return absl::InvalidArgumentError(absl::StrCat(s.message(), " (known: ", absl::StrJoin(known, ", "), ")"));
}

template <typename T>
absl::Status Read(const YAML::Node& node, const char* key, const std::string& where, T* out) {
  return YamlRead(node, key, "federation", where, out);
}

}  // namespace

// Relative speeds are rough training throughputs against a V100 (the synthetic traces'
// reference); watts are the boards' rated power.
std::map<std::string, GpuModel> BuiltinGpuModels() {
  return {{"T4", {0.45, 70}},   {"P100", {0.6, 250}}, {"V100", {1.0, 300}}, {"A10", {0.9, 150}},
          {"A100", {1.9, 400}}, {"H100", {3.3, 700}}, {"H800", {3.3, 700}}, {"910B", {1.6, 310}}};
}

namespace {

absl::Status ParseCenter(const YAML::Node& n, const std::string& where, SimCenter* c) {
  JC_RETURN_IF_ERROR(CheckKeys(n, where,
                            {"id", "topology", "gpu_model", "gpus", "cpus", "memory_gb", "price_per_gpu_hour",
                             "price_per_cpu_hour", "static_power_watts", "watts_per_cpu", "performance",
                             "security_grade", "bandwidth_mbps", "latency_ms", "datasets"}));
  double memory_gb = 0;
  JC_RETURN_IF_ERROR(Read(n, "id", where, &c->id));
  JC_RETURN_IF_ERROR(Read(n, "topology", where, &c->topology));
  JC_RETURN_IF_ERROR(Read(n, "gpu_model", where, &c->gpu_model));
  JC_RETURN_IF_ERROR(Read(n, "gpus", where, &c->gpus));
  JC_RETURN_IF_ERROR(Read(n, "cpus", where, &c->cpus));
  JC_RETURN_IF_ERROR(Read(n, "memory_gb", where, &memory_gb));
  JC_RETURN_IF_ERROR(Read(n, "price_per_gpu_hour", where, &c->price_per_gpu_hour));
  JC_RETURN_IF_ERROR(Read(n, "price_per_cpu_hour", where, &c->price_per_cpu_hour));
  JC_RETURN_IF_ERROR(Read(n, "static_power_watts", where, &c->static_power_watts));
  JC_RETURN_IF_ERROR(Read(n, "watts_per_cpu", where, &c->watts_per_cpu));
  JC_RETURN_IF_ERROR(Read(n, "performance", where, &c->performance));
  JC_RETURN_IF_ERROR(Read(n, "security_grade", where, &c->security_grade));
  JC_RETURN_IF_ERROR(Read(n, "bandwidth_mbps", where, &c->bandwidth_mbps));
  JC_RETURN_IF_ERROR(Read(n, "latency_ms", where, &c->latency_ms));
  JC_RETURN_IF_ERROR(Read(n, "datasets", where, &c->datasets));
  c->memory_mb = memory_gb * 1024;
  return absl::OkStatus();
}

}  // namespace

double Federation::TotalGpus() const {
  double n = 0;
  for (const auto& c : centers) n += c.gpus;
  return n;
}

double Federation::TotalCpus() const {
  double n = 0;
  for (const auto& c : centers) n += c.cpus;
  return n;
}

double Federation::PerformanceOf(const SimCenter& c) const {
  auto it = gpu_models.find(c.gpu_model);
  return (it == gpu_models.end() ? 1.0 : it->second.performance) * c.performance;
}

const SimCenter* Federation::Find(const std::string& id) const {
  for (const auto& c : centers) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

absl::Status ValidateFederation(const Federation& f) {
  if (f.centers.empty()) return Bad("centers", "the federation has no centers");
  std::set<std::string> ids;
  for (size_t i = 0; i < f.centers.size(); ++i) {
    const SimCenter& c = f.centers[i];
    std::string where = absl::StrCat("centers[", i, "]");
    if (c.id.empty()) return Bad(where, "id is required");
    where = absl::StrCat("center ", c.id);
    if (!ids.insert(c.id).second) return Bad(where, "id is used twice");
    if (c.gpus < 0 || c.cpus < 0 || c.memory_mb < 0) return Bad(where, "capacity must not be negative");
    if (c.gpus == 0 && c.cpus == 0) return Bad(where, "has no capacity (gpus and cpus are 0)");
    if (c.gpus > 0 && c.gpu_model.empty()) return Bad(where, "has gpus but no gpu_model");
    if (!c.gpu_model.empty() && !f.gpu_models.count(c.gpu_model)) {
      std::vector<std::string> known;
      for (const auto& [name, m] : f.gpu_models) known.push_back(name);
      return Bad(where, absl::StrCat("unknown GPU model \"", c.gpu_model, "\" (known: ", absl::StrJoin(known, ", "),
                                     "; add it under gpu_models)"));
    }
    if (c.price_per_gpu_hour < 0 || c.price_per_cpu_hour < 0) return Bad(where, "prices must not be negative");
    if (c.static_power_watts < 0 || c.watts_per_cpu < 0) return Bad(where, "power must not be negative");
    if (!(c.performance > 0)) return Bad(where, "performance must be positive");
    if (!(c.bandwidth_mbps > 0)) return Bad(where, "bandwidth_mbps must be positive");
    if (c.latency_ms < 0) return Bad(where, "latency_ms must not be negative");
    for (const auto& d : c.datasets) {
      if (!f.datasets.count(d)) return Bad(where, absl::StrCat("holds unknown dataset \"", d, "\""));
    }
  }
  for (const auto& [name, m] : f.gpu_models) {
    if (!(m.performance > 0)) return Bad(absl::StrCat("gpu_models.", name), "performance must be positive");
    if (m.watts < 0) return Bad(absl::StrCat("gpu_models.", name), "watts must not be negative");
  }
  for (const auto& [key, d] : f.datasets) {
    if (d.size_mb < 0) return Bad(absl::StrCat("dataset ", key), "size_mb must not be negative");
  }
  for (size_t i = 0; i < f.outages.size(); ++i) {
    const Outage& o = f.outages[i];
    std::string where = absl::StrCat("outages[", i, "]");
    if (!ids.count(o.center)) return Bad(where, absl::StrCat("unknown center \"", o.center, "\""));
    if (o.start < 0 || !(o.end > o.start)) return Bad(where, "needs 0 <= start < end");
  }
  if (f.retries < 0) return Bad("retries", "must not be negative");
  return absl::OkStatus();
}

absl::StatusOr<Federation> ParseFederation(const std::string& yaml_text) {
  return ParseYamlGuarded("federation", [&]() -> absl::StatusOr<Federation> {
    YAML::Node root = YAML::Load(yaml_text);
    JC_RETURN_IF_ERROR(CheckKeys(root, "top level", {"gpu_models", "centers", "datasets", "outages", "retries"}));
    Federation f;
    f.gpu_models = BuiltinGpuModels();
    JC_RETURN_IF_ERROR(Read(root, "retries", "top level", &f.retries));
    if (const YAML::Node models = root["gpu_models"]) {
      if (!models.IsMap()) return Bad("gpu_models", "must be a mapping of model name to {performance, watts}");
      for (const auto& kv : models) {
        std::string name = kv.first.as<std::string>();
        std::string where = absl::StrCat("gpu_models.", name);
        JC_RETURN_IF_ERROR(CheckKeys(kv.second, where, {"performance", "watts"}));
        GpuModel m = f.gpu_models.count(name) ? f.gpu_models[name] : GpuModel{};
        JC_RETURN_IF_ERROR(Read(kv.second, "performance", where, &m.performance));
        JC_RETURN_IF_ERROR(Read(kv.second, "watts", where, &m.watts));
        f.gpu_models[name] = m;
      }
    }
    if (const YAML::Node ds = root["datasets"]) {
      if (!ds.IsSequence()) return Bad("datasets", "must be a list");
      for (size_t i = 0; i < ds.size(); ++i) {
        std::string where = absl::StrCat("datasets[", i, "]");
        JC_RETURN_IF_ERROR(CheckKeys(ds[i], where, {"key", "size_mb", "private"}));
        SimDataset d;
        JC_RETURN_IF_ERROR(Read(ds[i], "key", where, &d.key));
        JC_RETURN_IF_ERROR(Read(ds[i], "size_mb", where, &d.size_mb));
        JC_RETURN_IF_ERROR(Read(ds[i], "private", where, &d.is_private));
        if (d.key.empty()) return Bad(where, "key (\"name:version\") is required");
        if (f.datasets.count(d.key)) return Bad(where, absl::StrCat("dataset \"", d.key, "\" is listed twice"));
        f.datasets[d.key] = d;
      }
    }
    const YAML::Node cs = root["centers"];
    if (!cs || !cs.IsSequence()) return Bad("centers", "a list of centers is required");
    for (size_t i = 0; i < cs.size(); ++i) {
      SimCenter c;
      JC_RETURN_IF_ERROR(ParseCenter(cs[i], absl::StrCat("centers[", i, "]"), &c));
      f.centers.push_back(std::move(c));
    }
    if (const YAML::Node os = root["outages"]) {
      if (!os.IsSequence()) return Bad("outages", "must be a list");
      for (size_t i = 0; i < os.size(); ++i) {
        std::string where = absl::StrCat("outages[", i, "]");
        JC_RETURN_IF_ERROR(CheckKeys(os[i], where, {"center", "start", "end"}));
        Outage o;
        JC_RETURN_IF_ERROR(Read(os[i], "center", where, &o.center));
        JC_RETURN_IF_ERROR(Read(os[i], "start", where, &o.start));
        JC_RETURN_IF_ERROR(Read(os[i], "end", where, &o.end));
        f.outages.push_back(o);
      }
    }
    JC_RETURN_IF_ERROR(ValidateFederation(f));
    return f;
  });
}

absl::StatusOr<Federation> LoadFederation(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("federation: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseFederation(text.str());
}

std::string FederationYaml(const Federation& f) {
  YAML::Emitter out;
  out.SetDoublePrecision(6);
  out << YAML::BeginMap;
  out << YAML::Key << "retries" << YAML::Value << f.retries;
  out << YAML::Key << "gpu_models" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, m] : f.gpu_models) {
    out << YAML::Key << name << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "performance"
        << YAML::Value << m.performance << YAML::Key << "watts" << YAML::Value << m.watts << YAML::EndMap;
  }
  out << YAML::EndMap;
  if (!f.datasets.empty()) {
    out << YAML::Key << "datasets" << YAML::Value << YAML::BeginSeq;
    for (const auto& [key, d] : f.datasets) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "key" << YAML::Value << key << YAML::Key << "size_mb"
          << YAML::Value << d.size_mb;
      if (d.is_private) out << YAML::Key << "private" << YAML::Value << true;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::Key << "centers" << YAML::Value << YAML::BeginSeq;
  for (const auto& c : f.centers) {
    out << YAML::BeginMap;
    out << YAML::Key << "id" << YAML::Value << c.id;
    if (!c.topology.empty()) out << YAML::Key << "topology" << YAML::Value << c.topology;
    if (!c.gpu_model.empty()) out << YAML::Key << "gpu_model" << YAML::Value << c.gpu_model;
    out << YAML::Key << "gpus" << YAML::Value << c.gpus;
    out << YAML::Key << "cpus" << YAML::Value << c.cpus;
    out << YAML::Key << "memory_gb" << YAML::Value << c.memory_mb / 1024;
    out << YAML::Key << "price_per_gpu_hour" << YAML::Value << c.price_per_gpu_hour;
    out << YAML::Key << "price_per_cpu_hour" << YAML::Value << c.price_per_cpu_hour;
    out << YAML::Key << "static_power_watts" << YAML::Value << c.static_power_watts;
    out << YAML::Key << "watts_per_cpu" << YAML::Value << c.watts_per_cpu;
    out << YAML::Key << "performance" << YAML::Value << c.performance;
    out << YAML::Key << "security_grade" << YAML::Value << c.security_grade;
    out << YAML::Key << "bandwidth_mbps" << YAML::Value << c.bandwidth_mbps;
    out << YAML::Key << "latency_ms" << YAML::Value << c.latency_ms;
    if (!c.datasets.empty()) out << YAML::Key << "datasets" << YAML::Value << YAML::Flow << c.datasets;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  if (!f.outages.empty()) {
    out << YAML::Key << "outages" << YAML::Value << YAML::BeginSeq;
    for (const auto& o : f.outages) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "center" << YAML::Value << o.center << YAML::Key << "start"
          << YAML::Value << o.start << YAML::Key << "end" << YAML::Value << o.end << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Federation GenerateFederation(int centers, uint64_t seed) {
  Federation f;
  f.gpu_models = BuiltinGpuModels();
  std::mt19937_64 rng(seed);
  struct Kind {
    const char* model;
    double price;  // per GPU-hour, roughly what clouds ask
  };
  const Kind kinds[] = {{"V100", 1.2}, {"A100", 2.6}, {"H100", 4.5}, {"T4", 0.45}, {"A10", 0.8}};
  const char* regions[] = {"cn/north/bj", "cn/east/sh", "cn/south/gz", "cn/west/cd"};
  const int sizes[] = {8, 16, 32, 64, 128, 256};
  std::uniform_real_distribution<double> jitter(0.85, 1.15);
  for (int i = 0; i < centers; ++i) {
    SimCenter c;
    const Kind& k = kinds[rng() % std::size(kinds)];
    c.id = absl::StrCat("c", i, "-", absl::AsciiStrToLower(k.model));
    c.topology = absl::StrCat(regions[rng() % std::size(regions)], "/", c.id);
    c.gpu_model = k.model;
    c.gpus = sizes[rng() % std::size(sizes)];
    c.cpus = c.gpus * 12;
    c.memory_mb = c.gpus * 96 * 1024;
    c.price_per_gpu_hour = std::round(k.price * jitter(rng) * 100) / 100;
    c.price_per_cpu_hour = 0.03;
    c.static_power_watts = std::round(c.gpus * 150 * jitter(rng));
    c.performance = std::round(jitter(rng) * 100) / 100;
    c.security_grade = 1 + static_cast<int>(rng() % 3);
    c.bandwidth_mbps = (rng() % 2) ? 10000 : 1000;
    c.latency_ms = 2 + static_cast<double>(rng() % 30);
    f.centers.push_back(std::move(c));
  }
  return f;
}

}  // namespace jc::sim
