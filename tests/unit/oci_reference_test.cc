// OCI image references as users write them, normalised as registries are asked (issue 30).

#include <catch2/catch.hpp>

#include "common/oci/image_reference.h"
#include "common/oci/registry_client.h"

using jc::oci::ImageReference;

TEST_CASE("image references are normalised as Docker does and a malformed one says what is wrong [A4]", "[A4]") {
  const struct {
    const char* text;
    const char* registry;
    const char* repository;
    const char* tag;
    const char* normal;
  } good[] = {
      {"ubuntu", "docker.io", "library/ubuntu", "latest", "docker.io/library/ubuntu:latest"},
      {"pytorch/pytorch:2.1", "docker.io", "pytorch/pytorch", "2.1", "docker.io/pytorch/pytorch:2.1"},
      {"harbor.example.com/ai/torch:v1", "harbor.example.com", "ai/torch", "v1", "harbor.example.com/ai/torch:v1"},
      {"127.0.0.1:5000/demo/app", "127.0.0.1:5000", "demo/app", "latest", "127.0.0.1:5000/demo/app:latest"},
      {"localhost/a_b/c-d.e:x.y-z", "localhost", "a_b/c-d.e", "x.y-z", "localhost/a_b/c-d.e:x.y-z"},
  };
  for (const auto& g : good) {
    auto ref = ImageReference::Parse(g.text);
    INFO(g.text << ": " << ref.status().ToString());
    REQUIRE(ref.ok());
    CHECK(ref->registry == g.registry);
    CHECK(ref->repository == g.repository);
    CHECK(ref->tag == g.tag);
    CHECK(ref->ToString() == g.normal);
  }
  const std::string digest = "sha256:" + std::string(64, 'a');
  auto pinned = ImageReference::Parse("r.example/x@" + digest);
  REQUIRE(pinned.ok());
  CHECK(pinned->tag.empty());
  CHECK(pinned->Selector() == digest);
  CHECK(ImageReference::Parse("ubuntu").value().ApiHost() == "registry-1.docker.io");

  const struct {
    const char* text;
    const char* says;
  } bad[] = {
      {"", "empty"},
      {"Ubuntu", "is not a repository name part"},
      {"r.example/x:-tag", "a tag is up to 128"},
      {"r.example/x@sha256:abc", "64 lower-case hex digits"},
      {"r.example//x", "is not a repository name part"},
      // Found by image_reference_fuzz: a registry whose port is not a number, and a
      // reference that grows past 512 characters once ":latest" is added.
      {"ubuaaaaaa:aaaaaaaaq/t/u", "the registry \"ubuaaaaaa:aaaaaaaaq\" is not host[:port]: a port is a number"},
      {"r.example:0/x", "a port is 1 to 65535"},
  };
  for (const auto& b : bad) {
    auto ref = ImageReference::Parse(b.text);
    INFO(b.text);
    REQUIRE(absl::IsInvalidArgument(ref.status()));
    CHECK_THAT(std::string(ref.status().message()), Catch::Contains(b.says));
  }
  const std::string long_name = "r.example/" + std::string(500, 'a');
  CHECK(ImageReference::Parse(long_name).status().message().find("longer than 512 characters once normalised") !=
        std::string::npos);
  CHECK(jc::oci::Sha256Digest("") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
