#include "services/scheduler/scoring/profile_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/yaml_guard.h"

namespace jc::scheduler {

absl::StatusOr<WeightProfiles> ParseWeightProfiles(const std::string& yaml_text, const ScorerRegistry& registry,
                                                   const ModelRegistry* models) {
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
      std::string where = absl::StrCat("profiles.", name);
      if (!p.second.IsMap() || p.second.size() == 0) return bad(where, "must map algorithm ids to weights");
      // Either the weights themselves, or {model: NAME, weights: {...}}.
      std::string model = kDefaultModel;
      YAML::Node listed = p.second;
      if (p.second["weights"] || p.second["model"]) {
        for (const auto& kv : p.second) {
          std::string key = kv.first.as<std::string>();
          if (key != "weights" && key != "model") {
            return bad(where, absl::StrCat("unknown key \"", key, "\" (with model or weights: model, weights)"));
          }
        }
        if (p.second["model"]) {
          if (!p.second["model"].IsScalar()) return bad(absl::StrCat(where, ".model"), "must be a model name");
          model = p.second["model"].as<std::string>();
          if (models != nullptr && models->Find(model) == nullptr) {
            std::string known;
            for (const auto& n : models->names()) absl::StrAppend(&known, known.empty() ? "" : ", ", n);
            return bad(absl::StrCat(where, ".model"), absl::StrCat("unknown evaluation model \"", model, "\" (known: ", known, ")"));
          }
        }
        listed = p.second["weights"];
        if (!listed || !listed.IsMap() || listed.size() == 0) {
          return bad(absl::StrCat(where, ".weights"), "must map algorithm ids to weights");
        }
      }
      std::map<std::string, double> weights;
      for (const auto& w : listed) {
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
      if (absl::Status s = out.Set(name, std::move(weights), model); !s.ok()) return s;
    }
    return out;
  });
}

absl::StatusOr<WeightProfiles> LoadWeightProfiles(const std::string& path, const ScorerRegistry& registry,
                                                  const ModelRegistry* models) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("weight profiles: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseWeightProfiles(text.str(), registry, models);
}

}  // namespace jc::scheduler
