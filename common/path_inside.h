#pragma once

// Every write or removal under a data, log or work directory first resolves the path it
// will touch and checks that it stays inside that directory: a name checked at one entry
// point is not trusted at another, and a symlink inside the directory may point out.

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc {

// `root`/`parts...`, resolved (symlinks of the existing prefix followed, "." and ".."
// folded); InvalidArgument when it is not strictly below `root`, or when a part is empty,
// ".", ".." or holds '/'.
absl::StatusOr<std::filesystem::path> PathInside(const std::filesystem::path& root,
                                                 std::initializer_list<std::string> parts);

// OK when `path`, resolved (symlinks followed), is one of `roots` or below one (each
// resolved too); PermissionDenied naming the roots otherwise. For reading: a source a
// caller names must lie where the operator allowed.
absl::Status CheckResolvedUnder(const std::filesystem::path& path, const std::vector<std::string>& roots);

// Lexical checks, for paths at another machine that cannot be resolved here (a dataset's
// file:// URL at its center): an absolute path with no empty, "." or ".." part (a final
// '/' is allowed) ...
bool IsPlainPath(const std::string& path);
// ... that is `root` or below it, component by component.
bool LexicallyUnder(const std::string& path, const std::string& root);

}  // namespace jc
