#include "common/path_inside.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/validate.h"

namespace jc {

absl::StatusOr<std::filesystem::path> PathInside(const std::filesystem::path& root,
                                                 std::initializer_list<std::string> parts) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::absolute(root, ec), ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot resolve ", root.string(), ": ", ec.message()));
  fs::path joined = base;
  for (const auto& part : parts) {
    if (absl::Status s = CheckPathComponent("path component", part); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("refusing a path under ", base.string(), ": ", s.message()));
    }
    joined /= part;
  }
  fs::path resolved = fs::weakly_canonical(joined, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot resolve ", joined.string(), ": ", ec.message()));
  // Strictly below: the relative path from the root must not climb out or be the root.
  fs::path rel = resolved.lexically_relative(base);
  if (rel.empty() || rel == "." || *rel.begin() == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing ", resolved.string(), ": it is not inside ", base.string()));
  }
  return resolved;
}

absl::Status CheckResolvedUnder(const std::filesystem::path& path, const std::vector<std::string>& roots) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot resolve ", path.string(), ": ", ec.message()));
  for (const auto& root : roots) {
    fs::path base = fs::weakly_canonical(fs::absolute(root, ec), ec);
    if (ec) continue;
    fs::path rel = resolved.lexically_relative(base);
    if (!rel.empty() && *rel.begin() != "..") return absl::OkStatus();  // the root itself, or below it
  }
  return absl::PermissionDeniedError(absl::StrCat(
      resolved.string(), " is not inside the allowed roots (",
      roots.empty() ? std::string("none configured") : absl::StrJoin(roots, ", "), ")"));
}

bool IsPlainPath(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  std::string_view rest(path);
  rest.remove_prefix(1);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty()) return true;  // "/"
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find('/', start);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view part = rest.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool LexicallyUnder(const std::string& path, const std::string& root) {
  if (!IsPlainPath(path) || !IsPlainPath(root)) return false;
  std::string r = root;
  if (r.size() > 1 && r.back() == '/') r.pop_back();
  if (r == "/") return true;
  return path == r || (path.size() > r.size() && path.compare(0, r.size(), r) == 0 && path[r.size()] == '/');
}

}  // namespace jc
