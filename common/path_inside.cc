#include "common/path_inside.h"

#include "absl/strings/str_cat.h"
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

}  // namespace jc
