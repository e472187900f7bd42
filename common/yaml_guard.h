#pragma once

// yaml-cpp throws where a node has another shape than a parser expects (a map where a list
// belongs, say). Every such case is the file's mistake: reported as InvalidArgument with
// where it is, never a crash of the process reading it (found by tests/fuzz). Header-only:
// its users link yaml-cpp themselves.

#include <set>
#include <string>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace jc {

// Runs `parse` (returning absl::StatusOr<T>); a yaml-cpp exception becomes an error
// starting with `what` ("center configuration", "nexec config").
template <typename Parse>
auto ParseYamlGuarded(const std::string& what, Parse&& parse) -> decltype(parse()) {
  try {
    return std::forward<Parse>(parse)();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unexpected structure",
                     e.mark.is_null() ? std::string() : absl::StrCat(" at line ", e.mark.line + 1), ": ", e.msg));
  }
}

// The field readers of every YAML file: an error names the file's kind (`what`: "nexec
// config", "federation"), the place and the problem.
inline absl::Status YamlError(const std::string& what, const std::string& where, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", where, ": ", problem));
}

// node[key] as T into *out when present; a value of another type is an error.
template <typename T>
absl::Status YamlRead(const YAML::Node& node, const char* key, const std::string& what, const std::string& where,
                      T* out) {
  const YAML::Node v = node[key];
  if (!v) return absl::OkStatus();
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return YamlError(what, absl::StrCat(where, ".", key), "has the wrong type");
  }
  return absl::OkStatus();
}

// `node` is a mapping whose keys are all in `known`.
inline absl::Status YamlCheckKeys(const YAML::Node& node, const std::string& what, const std::string& where,
                                  const std::set<std::string>& known) {
  if (!node.IsMap()) return YamlError(what, where, "must be a mapping");
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (!known.count(key)) return YamlError(what, where, absl::StrCat("unknown key \"", key, "\""));
  }
  return absl::OkStatus();
}

}  // namespace jc
