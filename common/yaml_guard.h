#pragma once

// yaml-cpp throws where a node has another shape than a parser expects (a map where a list
// belongs, say). Every such case is the file's mistake: reported as InvalidArgument with
// where it is, never a crash of the process reading it (found by tests/fuzz). Header-only:
// its users link yaml-cpp themselves.

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

}  // namespace jc
