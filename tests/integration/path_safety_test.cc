// Names that become path components can never climb out of the directory they name an
// item of (issue 11, SPEC C5): "." and ".." and names with '/' are refused at every entry
// point, and the adapter checks the resolved path before it removes or writes anything.
// Everything here happens inside one sandbox, laid out so that a regression would delete
// a file the test can see, never anything outside the sandbox.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/path_inside.h"
#include "services/southbound/adapter_client.h"
#include "tests/testing/local_adapter.h"
#include "tests/testing/test_system.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Sandbox {
  fs::path root;
  Sandbox() {
    root = fs::temp_directory_path() / ("jc-paths-" + std::to_string(getpid()));
    fs::remove_all(root);
    fs::create_directories(root / "x" / "y" / "data");
    std::ofstream(root / "x" / "precious.txt") << "keep me\n";
    std::ofstream(root / "x" / "y" / "precious.txt") << "keep me too\n";
    fs::create_directories(root / "source");
    std::ofstream(root / "source" / "part-0") << "data\n";
    // A link inside the data dir that points out of it.
    fs::create_directory_symlink(root / "x", root / "x" / "y" / "data" / "escape");
  }
  ~Sandbox() { fs::remove_all(root); }
  bool Intact() const {
    return fs::exists(root / "x" / "precious.txt") && fs::exists(root / "x" / "y" / "precious.txt") &&
           fs::exists(root / "source" / "part-0");
  }
  fs::path data_dir() const { return root / "x" / "y" / "data"; }
};

}  // namespace

TEST_CASE("PathInside keeps every resolved path strictly inside its root [C5]", "[C5]") {
  Sandbox box;
  auto ok = jc::PathInside(box.data_dir(), {"imagenet", "v1"});
  REQUIRE(ok.ok());
  CHECK(*ok == fs::weakly_canonical(box.data_dir()) / "imagenet" / "v1");
  for (const auto& parts : std::vector<std::vector<std::string>>{
           {"..", ".."}, {".", "v"}, {"a", ".."}, {"a/../..", "v"}, {"", "v"}, {"escape", "v"}, {"escape"}}) {
    INFO(parts[0] << " / " << (parts.size() > 1 ? parts[1] : ""));
    auto refused = parts.size() == 2 ? jc::PathInside(box.data_dir(), {parts[0], parts[1]})
                                     : jc::PathInside(box.data_dir(), {parts[0]});
    CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("dataset, version, center and replica names that would leave their directory are refused everywhere, "
          "and nothing outside changes [C5][A5][A6][A14]",
          "[C5][A5][A6][A14]") {
  Sandbox box;
  jc::testing::LocalAdapter center(
      "safe", 2,
      "security_grade: 3\ndata_dir: " + box.data_dir().string() + "\ndata_sources: [" + (box.root / "source").string() +
          "]\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 64Mi}\n");
  auto adapters = jc::southbound::MakeGrpcAdapterClient();

  // The adapter's StageDataset, called directly as anyone who reaches it could.
  const std::vector<std::pair<std::string, std::string>> bad_datasets{
      {"..", ".."}, {".", "v1"}, {"imagenet", ".."}, {"../..", "v1"}, {"a/b", "v1"}, {"escape", "v1"}};
  for (const auto& [name, version] : bad_datasets) {
    jc::southbound::apb::StageDatasetRequest req;
    req.set_data_name(name);
    req.set_data_version(version);
    req.add_source_urls("file://" + (box.root / "source").string());
    auto staged = adapters->Stage(center.address(), req);
    INFO(name << ":" << version << " -> " << staged.status().ToString());
    CHECK(staged.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(box.Intact());
  }
  // A source outside the center's data_sources is refused, however it is named: directly,
  // through "..", or through a symlink inside an allowed root.
  fs::create_directories(box.root / "secret");
  std::ofstream(box.root / "secret" / "key") << "private\n";
  fs::create_symlink(box.root / "secret", box.root / "source" / "link-out");
  for (const std::string& url : {"file://" + (box.root / "secret").string(),
                                 "file://" + (box.root / "source" / ".." / "secret").string(),
                                 "file://" + (box.root / "source" / "link-out").string(), std::string("file:///etc")}) {
    jc::southbound::apb::StageDatasetRequest req;
    req.set_data_name("stolen");
    req.set_data_version("v1");
    req.add_source_urls(url);
    auto refused = adapters->Stage(center.address(), req);
    INFO(url << " -> " << refused.status().ToString());
    CHECK(refused.status().code() == absl::StatusCode::kPermissionDenied);
    CHECK_FALSE(fs::exists(box.data_dir() / "stolen"));
  }
  fs::remove(box.root / "source" / "link-out");
  fs::remove_all(box.root / "secret");

  // A proper name still stages, inside the data dir.
  jc::southbound::apb::StageDatasetRequest good;
  good.set_data_name("imagenet");
  good.set_data_version("v1");
  good.add_source_urls("file://" + (box.root / "source").string());
  auto staged = adapters->Stage(center.address(), good);
  INFO(staged.status().ToString());
  REQUIRE(staged.ok());
  CHECK(fs::exists(box.data_dir() / "imagenet" / "v1" / "part-0"));
  CHECK(box.Intact());

  // A replica key is a file name at the center: its job id cannot be "." or "..".
  for (const std::string job_id : {".", ".."}) {
    jc::southbound::apb::SubmitReplicaRequest submit;
    submit.mutable_key()->set_job_id(job_id);
    submit.set_command("true");
    submit.set_resource_spec_id("cpu-1");
    auto r = adapters->Submit(center.address(), submit);
    INFO(r.status().ToString());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  }

  // The control plane's REST API refuses such names before they reach any center.
  jc::testing::TestSystem plane;
  for (const auto& [name, version] : std::vector<std::pair<std::string, std::string>>{
           {"..", "v1"}, {"imagenet", ".."}, {".", "v1"}, {"a/b", "v1"}}) {
    auto r = plane.rest->Post("/openapi/v1/datasets", {{"data_name", name},
                                                       {"data_version", version},
                                                       {"created_user", "alice"},
                                                       {"location", json::array()}});
    INFO(name << ":" << version << " -> " << r.body.dump());
    CHECK(r.http_status == 400);
    CHECK(r.body.value("code", "") == "INVALID_ARGUMENT");
  }
  auto center_dots = plane.rest->Post("/openapi/v1/centers", {{"ai_center_id", ".."}, {"name", "x"}, {"region", "r"}});
  CHECK(center_dots.http_status == 400);
  CHECK(plane.rest->Get("/openapi/v1/datasets").body["data"]["datasets"].empty());  // nothing stored
  CHECK(box.Intact());
}
