#pragma once

// Resource requirement strings of the native executor (SPEC B2), in the LSF / SkyForm
// AIP syntax:
//
//   select[type==x86_64 && mem>1024] order[-mem:ut] rusage[mem=100,gpu=1]
//   span[hosts=1] same[model]
//   4{select[mem>10]} 5{rusage[gpu=1]}          multi-section: slots{requirement} ...
//
// A leading bare expression is a select section ("mem>10 rusage[gpu=1]").

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::nexec {

// A boolean / comparison expression of a select section.
struct Expr {
  enum class Kind { kNumber, kString, kName, kNot, kAnd, kOr, kCompare, kDefined };
  Kind kind;
  double number = 0;
  std::string text;  // kString literal, kName / kDefined resource name, kCompare operator
  std::unique_ptr<Expr> lhs;
  std::unique_ptr<Expr> rhs;
};

struct OrderKey {
  std::string resource;
  // true: most first. By default numeric resources order by "more is better" (free
  // memory, slots); a leading '-' reverses it; a leading '+' is the default spelled out.
  bool descending = true;
};

// One section: what each of its slots needs and how its slots may be laid out.
struct Section {
  int slots = 0;  // 0 = the job's -n (single-section strings)
  std::shared_ptr<const Expr> select;  // null = any host
  std::vector<OrderKey> order;
  std::map<std::string, double> rusage;  // per slot reservation, e.g. mem=100 (MB), gpu=1
  std::optional<int> span_hosts;         // span[hosts=1]: every slot on one host
  std::optional<int> ptile;              // span[ptile=n]: n slots per host
  std::vector<std::string> same;         // same[model]: hosts share these values
};

struct Requirement {
  std::vector<Section> sections;
  bool multi_section = false;
  int TotalSlots() const;
};

// Longer requirement strings are refused.
inline constexpr size_t kMaxRequirementLength = 4096;

// Parses a requirement string. Errors name the 1-based column and what was expected,
// e.g. `column 12: expected ']' to close select[`.
absl::StatusOr<Requirement> ParseRequirement(absl::string_view text);

// The canonical text of a requirement (parses back to the same requirement).
std::string ToString(const Requirement& requirement);
std::string ToString(const Expr& expr);

// A host's resource values as the select expression sees them.
using ResourceValue = std::variant<double, std::string, bool>;  // number, text, tag
using ResourceValues = std::map<std::string, ResourceValue, std::less<>>;

// Evaluates a select expression against a host. A name the host does not have is false
// in a boolean position and, compared with a known text resource, stands for itself as a
// string (so `type==x86_64` compares against the text "x86_64").
bool EvaluateSelect(const Expr& expr, const ResourceValues& host);

}  // namespace jc::nexec
