// The built-in file:// dataset mover, as an attacker in a project's data directory would
// try it (issue 29 item 7, SPEC C6 and A6): a dataset registered under project a's own
// data root (the control plane checks the URL's text) must not stage project b's private
// files through a symbolic link a member of a planted there, at the path or inside the
// dataset.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "adapters/sdk/dataset_mover.h"

namespace fs = std::filesystem;

TEST_CASE("the file mover stages a dataset from its path as registered: a symbolic link to another project's files, "
          "as the dataset or inside it, is not followed [C6][A6]",
          "[C6][A6]") {
  const fs::path root = fs::temp_directory_path() / ("jc-mover-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "data" / "a" / "ds");
  fs::create_directories(root / "data" / "b" / "private");
  std::ofstream(root / "data" / "a" / "ds" / "part-0") << "a's data\n";
  std::ofstream(root / "data" / "b" / "private" / "secret") << "b's secret\n";
  // What a member of project a can do in a's directory.
  fs::create_directory_symlink(root / "data" / "b" / "private", root / "data" / "a" / "stolen");
  fs::create_symlink(root / "data" / "b" / "private" / "secret", root / "data" / "a" / "ds" / "peek");
  // The center's data sources: the shared data directory.
  auto mover = jc::adapter::MakeFileMover({(root / "data").string()});

  // The dataset itself is the link: refused, before anything is copied.
  const std::string linked = "file://" + (root / "data" / "a" / "stolen").string();
  absl::Status refused = mover->Allowed(linked);
  INFO(refused.ToString());
  CHECK(absl::IsPermissionDenied(refused));
  CHECK(refused.message().find("symbolic link") != std::string::npos);
  CHECK(absl::IsPermissionDenied(mover->Copy(linked, root / "staged-1")));
  CHECK_FALSE(fs::exists(root / "staged-1"));

  // A real dataset is staged, and a link inside it is left out.
  const std::string real = "file://" + (root / "data" / "a" / "ds").string();
  REQUIRE(mover->Allowed(real).ok());
  REQUIRE(mover->Copy(real, root / "staged-2").ok());
  std::stringstream part;
  part << std::ifstream(root / "staged-2" / "part-0").rdbuf();
  CHECK(part.str() == "a's data\n");
  CHECK_FALSE(fs::exists(root / "staged-2" / "peek"));
  // A path outside the data sources stays refused.
  CHECK(absl::IsPermissionDenied(mover->Allowed("file:///etc")));
  fs::remove_all(root);
}
