#pragma once

// Every write or removal under a data, log or work directory first resolves the path it
// will touch and checks that it stays inside that directory: a name checked at one entry
// point is not trusted at another, and a symlink inside the directory may point out.

#include <filesystem>
#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"

namespace jc {

// `root`/`parts...`, resolved (symlinks of the existing prefix followed, "." and ".."
// folded); InvalidArgument when it is not strictly below `root`, or when a part is empty,
// ".", ".." or holds '/'.
absl::StatusOr<std::filesystem::path> PathInside(const std::filesystem::path& root,
                                                 std::initializer_list<std::string> parts);

}  // namespace jc
