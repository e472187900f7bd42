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

}  // namespace jc
