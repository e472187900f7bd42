// A center's YAML configuration (adapters/sdk/center_config.h): what it declares is read,
// and every mistake is an error naming it, never a crash of the adapter.

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include <cmath>

#include "adapters/sdk/adapter_core.h"
#include "adapters/sdk/center_config.h"

TEST_CASE("a center configuration reads its specs, data dir and data sources [A14][A6]", "[A14][A6]") {
  auto c = jc::adapter::ParseCenterConfig(
      "center_id: bj-1\nsecurity_grade: 3\ndata_dir: /srv/jc/data\ndata_sources: [/srv/shared, /mnt/lake]\n"
      "specs:\n  - {id: gpu-1x, cpu: 8, memory: 64Gi, gpu: 1}\n");
  REQUIRE(c.ok());
  CHECK(c->center_id == "bj-1");
  CHECK(c->data_sources == std::vector<std::string>{"/srv/shared", "/mnt/lake"});
  REQUIRE(c->FindSpec("gpu-1x") != nullptr);
}

TEST_CASE("data movers: a command per URL scheme, with {source} and {target} [A6]", "[A6]") {
  auto c = jc::adapter::ParseCenterConfig(
      "center_id: c\ndata_movers:\n  - {scheme: rsync, command: [rsync, -a, '{source}/', '{target}/']}\n"
      "  - {scheme: s3, command: [rclone, copy, '{source}', '{target}']}\n");
  REQUIRE(c.ok());
  REQUIRE(c->data_movers.size() == 2);
  CHECK(c->data_movers[0].scheme == "rsync");
  CHECK(c->data_movers[1].argv == std::vector<std::string>{"rclone", "copy", "{source}", "{target}"});
  const std::pair<std::string, std::string> bad[] = {
      {"center_id: c\ndata_movers: {scheme: s3}\n", "must be a list"},
      {"center_id: c\ndata_movers: [{scheme: file, command: [cp, '{source}', '{target}']}]\n", "built-in"},
      {"center_id: c\ndata_movers: [{scheme: 's 3', command: [cp, '{source}', '{target}']}]\n", "URL scheme"},
      {"center_id: c\ndata_movers: [{scheme: s3, command: []}]\n", "non-empty list"},
      {"center_id: c\ndata_movers: [{scheme: s3, command: [rclone, copy, '{source}']}]\n", "{source} and {target}"},
      {"center_id: c\ndata_movers: [{scheme: s3, command: [a, '{source}', '{target}']}, "
       "{scheme: s3, command: [b, '{source}', '{target}']}]\n", "has a mover already"},
      {"center_id: c\ndata_movers: [{scheme: s3, command: [a, '{source}', '{target}'], shell: true}]\n", "unknown key"},
  };
  for (const auto& [yaml, message] : bad) {
    auto r = jc::adapter::ParseCenterConfig(yaml);
    INFO(yaml << " -> " << r.status().ToString());
    REQUIRE_FALSE(r.ok());
    CHECK(std::string(r.status().message()).find(message) != std::string::npos);
  }
}

TEST_CASE("a center configuration with a mistake is refused, naming it [A14][C5]", "[A14][C5]") {
  const std::pair<std::string, std::string> bad[] = {
      {"security_grade: 3\n", "center_id is missing"},
      {"center_id: c\ndata_sources: /srv\n", "must be a list"},
      {"center_id: c\ndata_sources: [srv/relative]\n", "must be an absolute directory"},
      {"center_id: [\n", "not YAML"},
      // Found by tests/fuzz/center_config_fuzz: a device count given as a size was cast
      // to int past its range (undefined behaviour).
      {"center_id: c\nspecs:\n  - {id: g, cpu: 8, memory: 64Gi, gpu: 4Gi}\n", "gpu must be a whole number of devices"},
      {"center_id: c\nspecs:\n  - {id: g, cpu: 8, memory: 64Gi, npu: 1.5}\n", "npu must be a whole number"},
  };
  for (const auto& [yaml, message] : bad) {
    auto c = jc::adapter::ParseCenterConfig(yaml);
    INFO(yaml << " -> " << c.status().ToString());
    REQUIRE_FALSE(c.ok());
    CHECK(std::string(c.status().message()).find(message) != std::string::npos);
  }
  // Shapes yaml-cpp throws on (a list entry that is not a map, and worse) are errors too;
  // this input, found by tests/fuzz/center_config_fuzz, made the adapter abort.
  std::ifstream in(std::string(JC_SOURCE_DIR) + "/tests/fuzz/corpus/center_config_fuzz/regression-322391b7",
                   std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  REQUIRE_FALSE(text.str().empty());
  auto c = jc::adapter::ParseCenterConfig(text.str());
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("an image mover: a command with {target}, and a directory to keep images in [A4]", "[A4]") {
  auto c = jc::adapter::ParseCenterConfig(
      "center_id: c\nimage_dir: /srv/jc/images\nimage_registry: registry.c:5000\n"
      "image_mover: [apptainer, pull, '{target}', 'docker://{source}']\n");
  REQUIRE(c.ok());
  CHECK(c->image_dir == "/srv/jc/images");
  CHECK(c->image_registry == "registry.c:5000");
  CHECK(c->image_mover == std::vector<std::string>{"apptainer", "pull", "{target}", "docker://{source}"});
  const std::pair<std::string, std::string> bad[] = {
      {"center_id: c\nimage_dir: /i\nimage_mover: apptainer\n", "non-empty list"},
      {"center_id: c\nimage_dir: /i\nimage_mover: []\n", "non-empty list"},
      {"center_id: c\nimage_dir: /i\nimage_mover: [skopeo, copy, '{source}']\n", "{target}"},
      {"center_id: c\nimage_mover: [cp, '{source}', '{target}']\n", "needs image_dir"},
      {"center_id: c\nimage_dir: /i\nimage_mover: [cp, [a], '{target}']\n", "must be strings"},
  };
  for (const auto& [yaml, message] : bad) {
    auto r = jc::adapter::ParseCenterConfig(yaml);
    INFO(yaml << " -> " << r.status().ToString());
    REQUIRE_FALSE(r.ok());
    CHECK(std::string(r.status().message()).find(message) != std::string::npos);
  }
}

TEST_CASE("an image mirror: the center's own registry, with credentials and CAs for it and for the sources [A4]",
          "[A4]") {
  auto c = jc::adapter::ParseCenterConfig(
      "center_id: c\nimage_mirror:\n  registry: harbor.c:5000/jointcloud\n  auth_file: /etc/jc/m.json\n"
      "  cert_dir: /etc/jc/m-ca\n  source_auth_file: /etc/jc/s.json\n  source_cert_dir: /etc/jc/s-ca\n");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->image_mirror.registry == "harbor.c:5000/jointcloud");
  CHECK(c->image_mirror.auth_file == "/etc/jc/m.json");
  CHECK(c->image_mirror.source_cert_dir == "/etc/jc/s-ca");
  const std::pair<std::string, std::string> bad[] = {
      {"center_id: c\nimage_mirror: harbor.c:5000\n", "must be a map"},
      {"center_id: c\nimage_mirror:\n  auth_file: /a\n", "registry is required"},
      {"center_id: c\nimage_mirror:\n  registry: harbor.c:5000\n  password: x\n", "unknown key \"password\""},
      {"center_id: c\nimage_mirror:\n  registry: Not A Registry\n", "is not host[:port][/prefix]"},
  };
  for (const auto& [yaml, message] : bad) {
    auto r = jc::adapter::ParseCenterConfig(yaml);
    INFO(yaml << " -> " << r.status().ToString());
    REQUIRE_FALSE(r.ok());
    CHECK(std::string(r.status().message()).find(message) != std::string::npos);
  }
}

TEST_CASE("default_time_limit is a duration, for replicas whose job has none [A16]", "[A16]") {
  auto c = jc::adapter::ParseCenterConfig("center_id: c\ndefault_time_limit: 90m\n");
  REQUIRE(c.ok());
  CHECK(c->default_time_limit == absl::Minutes(90));
  auto none = jc::adapter::ParseCenterConfig("center_id: c\n");
  REQUIRE(none.ok());
  CHECK(none->default_time_limit == absl::ZeroDuration());
  for (const char* bad : {"an hour", "-5m", "inf"}) {
    auto r = jc::adapter::ParseCenterConfig(std::string("center_id: c\ndefault_time_limit: ") + bad + "\n");
    INFO(bad << " -> " << r.status().ToString());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(r.status().message().find("default_time_limit") != std::string::npos);
  }
}

TEST_CASE("replica_retention is how long an ended replica is kept: 14 days unless set, at least a day [A14]",
          "[A14]") {
  auto c = jc::adapter::ParseCenterConfig("center_id: c\nreplica_retention: 720h\n");
  REQUIRE(c.ok());
  CHECK(c->replica_retention == absl::Hours(720));
  auto none = jc::adapter::ParseCenterConfig("center_id: c\n");
  REQUIRE(none.ok());
  CHECK(none->replica_retention == absl::Hours(14 * 24));
  for (const char* bad : {"a fortnight", "-5h", "inf", "23h59m", "0s"}) {
    auto r = jc::adapter::ParseCenterConfig(std::string("center_id: c\nreplica_retention: ") + bad + "\n");
    INFO(bad << " -> " << r.status().ToString());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(r.status().message().find("replica_retention") != std::string::npos);
  }
}

TEST_CASE("a backend's start estimates are kept only for offered specs, once each, with a wait in seconds [A16]",
          "[A16]") {
  auto c = jc::adapter::ParseCenterConfig(
      "center_id: c\nspecs:\n  - {id: small, cpu: 1, memory: 1Gi}\n  - {id: big, cpu: 8, memory: 8Gi}\n");
  REQUIRE(c.ok());
  auto estimate = [](const std::string& spec, double wait) {
    jointcloud::adapter::v1::SpecStartEstimate e;
    e.set_resource_spec_id(spec);
    e.set_wait_seconds(wait);
    e.set_source("test");
    return e;
  };
  auto kept = jc::adapter::CheckedStartEstimates(
      *c, {estimate("small", 30), estimate("small", 5), estimate("unknown-spec", 1), estimate("big", -1),
           estimate("big", std::nan("")), estimate("big", 600)});
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].resource_spec_id() == "small");
  CHECK(kept[0].wait_seconds() == 30);
  CHECK(kept[1].resource_spec_id() == "big");
  CHECK(kept[1].wait_seconds() == 600);
}
