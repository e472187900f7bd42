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

TEST_CASE("a project's image is staged apart from another project's and the federation's of the same id, and neither "
          "passes for the other (issue 44, hole 13) [A4][C6]",
          "[A4][C6]") {
  Dirs d;
  fs::create_directories(d.root / "registry" / "ml-torch");
  std::ofstream(d.root / "registry" / "ml-torch" / "rootfs") << "ml's bits\n";
  StagedImages images("c", d.images(), {"cp", "-r", "{source}", "{target}"});
  auto federation = images.Stage(Request("torch", {d.registry() + "/torch"}));
  REQUIRE(federation.ok());
  // Project ml's "torch" is another image: the federation's held does not answer for it.
  CHECK_FALSE(images.Has("ml", "torch"));
  auto ml_request = Request("torch", {d.registry() + "/ml-torch"});
  ml_request.set_project("ml");
  auto ml = images.Stage(ml_request);
  REQUIRE(ml.ok());
  CHECK(ml->source_url() == d.registry() + "/ml-torch");  // fetched, not taken from the federation's
  CHECK(images.Has("ml", "torch"));
  CHECK_FALSE(images.Has("cv", "torch"));
  std::ifstream ml_bits(fs::path(d.images()) / ".projects" / "ml" / "torch" / "rootfs");
  std::string line;
  std::getline(ml_bits, line);
  CHECK(line == "ml's bits");
  // A restart keeps both apart; the center reports the federation's ids only.
  StagedImages restarted("c", d.images(), {});
  CHECK(restarted.Has("torch"));
  CHECK(restarted.Has("ml", "torch"));
  CHECK_FALSE(restarted.Has("cv", "torch"));
  CHECK(restarted.Held() == std::vector<std::string>{"torch"});
  // The copy a job runs: its project's, else the federation's.
  CHECK(restarted.PathFor("ml", "torch") == (fs::path(d.images()) / ".projects" / "ml" / "torch").string());
  CHECK(restarted.PathFor("cv", "torch") == (fs::path(d.images()) / "torch").string());
  CHECK(restarted.PathFor("cv", "other").empty());
  // A copy at image_dir/<id> from before ids were per project (no record that the SDK staged
  // it as the federation's) may be a project's: not taken for the federation's.
  fs::create_directories(fs::path(d.images()) / "legacy");
  StagedImages upgraded("c", d.images(), {});
  CHECK_FALSE(upgraded.Has("legacy"));
  CHECK(upgraded.Held() == std::vector<std::string>{"torch"});
  // A project name is one path component.
  auto bad = Request("torch", {});
  bad.set_project("../x");
  CHECK(images.Stage(bad).status().code() == absl::StatusCode::kInvalidArgument);
}
