#include "services/gateway/route_order.h"

#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace jc::gateway {
namespace {

bool Overlap(const std::string& a, const std::string& b) {
  std::vector<absl::string_view> sa = absl::StrSplit(a, '/'), sb = absl::StrSplit(b, '/');
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i) {
    const bool param = absl::StrContains(sa[i], '{') || absl::StrContains(sb[i], '{');
    if (!param && sa[i] != sb[i]) return false;
  }
  return true;
}

}  // namespace

std::string PathRegex(const std::string& path) {
  static const std::regex kSpecial(R"([.^$|()\[\]*+?\\{}])");
  static const std::regex kParam(R"(\\\{[^}]+\\\})");
  std::string escaped = std::regex_replace(path, kSpecial, R"(\$&)");
  return std::regex_replace(escaped, kParam, "([^/]+)");
}

std::vector<std::string> RoutesMatchingOneAnother(const std::vector<Route>& routes) {
  std::vector<std::string> found;
  for (size_t i = 0; i < routes.size(); ++i) {
    for (size_t j = i + 1; j < routes.size(); ++j) {
      if (routes[i].method == routes[j].method && Overlap(routes[i].path, routes[j].path)) {
        found.push_back(absl::StrCat(routes[i].method, " ", routes[i].path, " and ", routes[j].method, " ",
                                     routes[j].path));
      }
    }
  }
  return found;
}

std::vector<const Route*> InstallOrder(const std::vector<Route>& routes) {
  std::vector<const Route*> order;
  order.reserve(routes.size());
  const bool any_order = RoutesMatchingOneAnother(routes).empty();
  for (const Route& r : routes) {
    if (r.busy && any_order) order.push_back(&r);
  }
  for (const Route& r : routes) {
    if (!r.busy || !any_order) order.push_back(&r);
  }
  return order;
}

}  // namespace jc::gateway
