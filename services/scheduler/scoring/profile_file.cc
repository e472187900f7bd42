#include "services/scheduler/scoring/profile_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/yaml_guard.h"

namespace jc::scheduler {

absl::StatusOr<WeightProfiles> ParseWeightProfiles(const std::string& yaml_text, const ScorerRegistry& registry) {
  return ParseYamlGuarded("weight profiles", [&]() -> absl::StatusOr<WeightProfiles> {
    auto bad = [](const std::string& where, const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat("weight profiles: ", where, ": ", what));
    };
    YAML::Node root = YAML::Load(yaml_text);
    if (!root.IsMap()) return bad("top level", "must be a mapping with \"profiles\"");
    for (const auto& kv : root) {
      if (kv.first.as<std::string>() != "profiles") {
        return bad("top level", absl::StrCat("unknown key \"", kv.first.as<std::string>(), "\" (known: profiles)"));
      }
    }
    const YAML::Node profiles = root["profiles"];
    if (!profiles || !profiles.IsMap()) return bad("profiles", "must be a mapping of profile name to weights");
    WeightProfiles out = WeightProfiles::Builtin();
    for (const auto& p : profiles) {
      std::string name = p.first.as<std::string>();
      if (name.empty()) return bad("profiles", "a profile has no name");
      if (!p.second.IsMap() || p.second.size() == 0) {
        return bad(absl::StrCat("profiles.", name), "must map algorithm ids to weights");
      }
      std::map<std::string, double> weights;
      for (const auto& w : p.second) {
        std::string id = w.first.as<std::string>();
        std::string where = absl::StrCat("profiles.", name, ".", id);
        if (registry.IndexOf(id) < 0) return bad(where, "unknown scoring algorithm");
        double value = 0;
        try {
          value = w.second.as<double>();
        } catch (const YAML::Exception&) {
          return bad(where, "the weight is not a number");
        }
        if (!(value >= 0) || !std::isfinite(value)) return bad(where, "the weight must be a number >= 0");
        weights[id] = value;
      }
      if (absl::Status s = out.Set(name, std::move(weights)); !s.ok()) return s;
    }
    return out;
  });
}

absl::StatusOr<WeightProfiles> LoadWeightProfiles(const std::string& path, const ScorerRegistry& registry) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("weight profiles: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseWeightProfiles(text.str(), registry);
}

}  // namespace jc::scheduler
