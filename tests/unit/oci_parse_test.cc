// What registries serve, read as pure functions (issue 44 hole 13): manifests and indexes,
// image configs, WWW-Authenticate challenges and token answers. A document of the wrong
// shape is a clear error naming the field — never a library exception, which escaped the
// RPC handler as "500 Unexpected error in RPC handling".

#include <catch2/catch.hpp>

#include "common/oci/manifest.h"
#include "common/oci/origin.h"
#include "common/oci/token_auth.h"

using jc::oci::ChooseFromIndex;
using jc::oci::ParseChallenge;
using jc::oci::ParseConfigPlatform;
using jc::oci::ParseManifest;
using jc::oci::ParseTokenAnswer;

namespace {

const std::string kDigest = "sha256:" + std::string(64, 'b');

}  // namespace

TEST_CASE("manifests and indexes are read with every field's type checked, a wrong shape a DataLoss naming it [A4][C6]",
          "[A4][C6]") {
  auto image = ParseManifest(R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
      "config":{"digest":")" + kDigest + R"(","size":100},"layers":[{"size":1000},{"size":24}]})");
  INFO(image.status().ToString());
  REQUIRE(image.ok());
  CHECK_FALSE(image->is_index);
  CHECK(image->config_digest == kDigest);
  CHECK(image->size_bytes == 1124);

  auto index = ParseManifest(R"({"manifests":[{"digest":")" + kDigest +
                             R"(","platform":{"os":"linux","architecture":"arm64"}},{"digest":")" + kDigest +
                             R"("}]})");
  INFO(index.status().ToString());
  REQUIRE(index.ok());
  CHECK(index->is_index);
  REQUIRE(index->entries.size() == 2);
  CHECK(index->entries[0].platform == "linux/arm64");
  CHECK(index->entries[1].platform == "?/?");
  CHECK(ChooseFromIndex(*index, "linux/arm64").value() == kDigest);
  auto missing = ChooseFromIndex(*index, "linux/amd64");
  CHECK(absl::IsFailedPrecondition(missing.status()));
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("no linux/amd64 variant (it has: linux/arm64, ?/?)"));

  const struct {
    std::string body;
    const char* says;
  } wrong[] = {
      {R"({"manifests": 5})", "\"manifests\" of an index is not a list"},
      {R"({"mediaType":"application/vnd.oci.image.index.v1+json","manifests":{}})", "\"manifests\" of an index is not a list"},
      {R"({"manifests":[5]})", "manifests[0] is not an object"},
      {R"({"manifests":[{"digest":5}]})", "manifests[0].digest is not a string"},
      {R"({"manifests":[{"digest":"sha256:12"}]})", "manifests[0].digest is not sha256:"},
      {R"({"manifests":[{"digest":")" + kDigest + R"(","platform":"linux"}]})", "manifests[0].platform is not an object"},
      {R"({"manifests":[{"digest":")" + kDigest + R"(","platform":{"os":1}}]})", "manifests[0].platform.os is not a string"},
      {R"({"mediaType":7})", "manifest.mediaType is not a string"},
      {R"({"config":{"digest":")" + kDigest + R"(","size":"x"}})", "config.size is not a whole number"},
      {R"({"config":{"digest":")" + kDigest + R"(","size":-1}})", "config.size is out of range"},
      {R"({"config":{"digest":")" + kDigest + R"(","size":1.5}})", "config.size is not a whole number"},
      {R"({"config":{"digest":")" + kDigest + R"(","size":18446744073709551615}})", "config.size is out of range"},
      {R"({"config":{"digest":")" + kDigest + R"("},"layers":{}})", "\"layers\" is not a list"},
      {R"({"config":{"digest":")" + kDigest + R"("},"layers":[[]]})", "layers[0] is not an object"},
      {R"({"config":{"digest":")" + kDigest + R"("},"layers":[{"size":"x"}]})", "layers[0].size is not a whole number"},
      {R"({"config":{"digest":")" + kDigest + R"("},"layers":[{"size":1125899906842624},{"size":1}]})",
       "sizes add up past a pebibyte"},
      {R"({"config":[]})", "\"config\" is missing or not an object"},
      {R"({"layers":[]})", "\"config\" is missing or not an object"},
      {R"({"config":{"digest":null}})", "config.digest is not sha256:"},
      {R"([1,2])", "not a JSON object"},
      {R"({"config":)", "not a JSON object"},
      {std::string(100000, '['), "nested deeper than 16 levels"},
  };
  for (const auto& w : wrong) {
    auto m = ParseManifest(w.body);
    INFO(w.body.substr(0, 120) << ": " << m.status().ToString());
    CHECK(absl::IsDataLoss(m.status()));
    CHECK_THAT(std::string(m.status().message()), Catch::Contains(w.says));
  }
}

TEST_CASE("an image config says its platform, and a config of the wrong shape is a DataLoss [A4][C6]", "[A4][C6]") {
  CHECK(ParseConfigPlatform(R"({"os":"linux","architecture":"amd64"})").value() == "linux/amd64");
  CHECK(ParseConfigPlatform(R"({})").value() == "?/?");
  CHECK(absl::IsDataLoss(ParseConfigPlatform(R"({"os":["linux"]})").status()));
  CHECK(absl::IsDataLoss(ParseConfigPlatform(R"({"os":"linux","architecture":64})").status()));
  CHECK(absl::IsDataLoss(ParseConfigPlatform("not json").status()));
}

TEST_CASE("WWW-Authenticate challenges are parsed with quoted commas and escapes, a malformed one a DataLoss [C6]",
          "[C6]") {
  auto c = ParseChallenge(
      R"(Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push")");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->scheme == "Bearer");
  CHECK(c->params["realm"] == "https://auth.example.com/token");
  CHECK(c->params["service"] == "registry.example.com");
  CHECK(c->params["scope"] == "repository:a/b:pull,push");
  auto unquoted = ParseChallenge("Bearer Realm=https://h/t, service=s , error=\"a \\\"b\\\"\"");
  REQUIRE(unquoted.ok());
  CHECK(unquoted->params["realm"] == "https://h/t");
  CHECK(unquoted->params["service"] == "s");
  CHECK(unquoted->params["error"] == "a \"b\"");
  CHECK(ParseChallenge("Basic").value().params.empty());

  for (const std::string& bad : {std::string(""), std::string("=x"), std::string("Bearer realm"),
                                std::string("Bearer realm=\"https://h"), std::string("Bearer \"x\""),
                                std::string(5000, 'a')}) {
    INFO(bad.substr(0, 40));
    CHECK(absl::IsDataLoss(ParseChallenge(bad).status()));
  }
}

TEST_CASE("a token answer gives a token of bearer-token characters, anything else a DataLoss [C6]", "[C6]") {
  CHECK(ParseTokenAnswer(R"({"token":"abc.DEF-_~+/="})").value() == "abc.DEF-_~+/=");
  CHECK(ParseTokenAnswer(R"({"token":"","access_token":"xyz","expires_in":60})").value() == "xyz");
  const struct {
    std::string body;
    const char* says;
  } wrong[] = {
      {R"({"token":5})", "\"token\" is not a string"},
      {R"({"access_token":{"a":1}})", "\"access_token\" is not a string"},
      {R"({"token":"a\r\nX-Injected: 1"})", "characters a bearer token does not"},
      {R"({"token":"a b"})", "characters a bearer token does not"},
      {R"({})", "no \"token\" or \"access_token\""},
      {R"("token")", "not a JSON object"},
      {"{\"token\":\"" + std::string(70000, 'a') + "\"}", "longer than 64 KiB"},
      {std::string(1000, '{'), "nested deeper than 8 levels"},
  };
  for (const auto& w : wrong) {
    auto t = ParseTokenAnswer(w.body);
    INFO(w.body.substr(0, 60) << ": " << t.status().ToString());
    CHECK(absl::IsDataLoss(t.status()));
    CHECK_THAT(std::string(t.status().message()), Catch::Contains(w.says));
  }
}

TEST_CASE("a registry's redirects and realms are read strictly: scheme, host, port and "
          "path, nothing else [C6]",
          "[C6]") {
  const jc::oci::Origin base{"registry.example.com", 5000};
  auto relative = jc::oci::ParseLocation("/v2/a/blobs/x?y=1", base);
  REQUIRE(relative.ok());
  CHECK(relative->https);
  CHECK(relative->origin == base);
  CHECK(relative->path == "/v2/a/blobs/x?y=1");
  auto other = jc::oci::ParseLocation("HTTPS://CDN.example.com/blob#frag", base);
  REQUIRE(other.ok());
  CHECK(other->origin.host == "cdn.example.com");
  CHECK(other->origin.port == 443);
  CHECK(other->path == "/blob");
  auto clear = jc::oci::ParseLocation("http://10.0.0.1?x", base);
  REQUIRE(clear.ok());
  CHECK_FALSE(clear->https);
  CHECK(clear->origin.port == 80);
  CHECK(clear->path == "/?x");
  auto v6 = jc::oci::ParseLocation("https://[::1]:8443/t", base);
  REQUIRE(v6.ok());
  CHECK(v6->origin.host == "::1");
  CHECK(v6->origin.ToString() == "[::1]:8443");
  CHECK(jc::oci::ParseHostPort("Registry.Example.com").value() == jc::oci::Origin{"registry.example.com", 443});
  for (const char* bad : {"//evil.example.com/x", "ftp://h/x", "https://user:pw@h/x", "https://h:0/", "https://h:99999/",
                          "https://h:/x", "https:///x", "relative/path", "https://h/a b", "https://h/\r\nX: 1",
                          "https://[::1/x", "https://::1/x"}) {
    INFO(bad);
    CHECK(absl::IsInvalidArgument(jc::oci::ParseLocation(bad, base).status()));
  }
  CHECK(absl::IsInvalidArgument(jc::oci::ParseLocation("https://h/\r\nX-Injected: 1", base).status()));
  CHECK(absl::IsInvalidArgument(jc::oci::ParseLocation(std::string("https://h/\x01"), base).status()));
}
