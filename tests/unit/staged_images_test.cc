// A center's image mover (adapters/sdk/staged_images.h) with real commands: what it
// fetched is present, also after a restart; a failed or empty fetch leaves nothing that
// passes for an image.

#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "adapters/sdk/staged_images.h"

namespace fs = std::filesystem;
using jc::adapter::StagedImages;
namespace pb = ::jointcloud::adapter::v1;

namespace {

struct Dirs {
  Dirs() {
    static int n = 0;
    root = fs::temp_directory_path() / ("jc-staged-images-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    fs::remove_all(root);
    fs::create_directories(root / "registry" / "torch");
    std::ofstream(root / "registry" / "torch" / "rootfs") << "bits\n";
  }
  ~Dirs() { fs::remove_all(root); }
  std::string images() const { return (root / "images").string(); }
  std::string registry() const { return (root / "registry").string(); }
  fs::path root;
};

pb::StageImageRequest Request(const std::string& id, std::vector<std::string> sources) {
  pb::StageImageRequest r;
  r.set_image_id(id);
  r.set_name("PyTorch");
  for (auto& s : sources) r.add_source_urls(s);
  return r;
}

}  // namespace

TEST_CASE("an image mover fetches from the first source that works, and the image stays after a restart [A4]",
          "[A4]") {
  Dirs d;
  StagedImages images("c", d.images(), {"cp", "-r", "{source}", "{target}"});
  CHECK(images.receives());
  CHECK_FALSE(images.Has("torch"));
  auto staged = images.Stage(Request("torch", {d.registry() + "/missing", d.registry() + "/torch"}));
  REQUIRE(staged.ok());
  CHECK(staged->source_url() == d.registry() + "/torch");
  CHECK(staged->failed_source_urls_size() == 1);
  CHECK(staged->failed_source_urls(0) == d.registry() + "/missing");
  CHECK(staged->image().image_id() == "torch");
  CHECK(images.Has("torch"));
  CHECK(fs::exists(fs::path(d.images()) / "torch" / "rootfs"));
  // Held already: answered at once, nothing copied.
  auto again = images.Stage(Request("torch", {d.registry() + "/torch"}));
  REQUIRE(again.ok());
  CHECK(again->source_url().empty());
  // A restarted adapter reads what image_dir holds; no hidden leftovers count.
  StagedImages restarted("c", d.images(), {});
  CHECK(restarted.Held() == std::vector<std::string>{"torch"});
  CHECK_FALSE(restarted.receives());
}

TEST_CASE("an image mover that fails, or exits 0 without writing, leaves no image, and bad ids and no mover are refused "
          "[A4]",
          "[A4]") {
  Dirs d;
  StagedImages failing("c", d.images(), {"false", "{source}", "{target}"});
  auto failed = failing.Stage(Request("torch", {d.registry() + "/torch"}));
  REQUIRE_FALSE(failed.ok());
  CHECK(std::string(failed.status().message()).find("exited 1") != std::string::npos);
  CHECK_FALSE(failing.Has("torch"));

  StagedImages silent("c", d.images(), {"true", "{target}"});
  auto empty = silent.Stage(Request("torch", {}));
  REQUIRE_FALSE(empty.ok());
  CHECK(std::string(empty.status().message()).find("wrote nothing") != std::string::npos);
  CHECK(StagedImages("c", d.images(), {}).Held().empty());

  // Without sources, {source} is the image id (a mover that pulls by id from its own mirror).
  StagedImages by_id("c", d.images(), {"cp", "-r", d.registry() + "/{source}", "{target}"});
  auto pulled = by_id.Stage(Request("torch", {}));
  REQUIRE(pulled.ok());
  CHECK(pulled->source_url().empty());
  CHECK(by_id.Has("torch"));

  auto bad = by_id.Stage(Request("../etc", {}));
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  StagedImages none("c", d.images(), {});
  auto refused = none.Stage(Request("other", {}));
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(refused.status().message()).find("no image_mover") != std::string::npos);
}
