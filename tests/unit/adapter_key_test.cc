// Issue 44, hole 5: how an adapter proves its center, and where the keys are kept.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/auth/adapter_proof.h"
#include "services/registry/registry.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/test_store.h"

namespace {

using jc::auth::AdapterKeys;
using jc::auth::AdapterProof;
using jc::auth::AdapterProofMatches;

struct Fixture {
  std::unique_ptr<jc::store::Store> store = jc::testing::MakeTestStore();
  jc::FakeClock clock;
  jc::registry::Registry registry{store.get(), &clock, {absl::Seconds(30), absl::Seconds(90), absl::Minutes(10)}};
};

std::filesystem::path KeyFile(const std::string& content, mode_t mode) {
  static int n = 0;
  auto path = std::filesystem::temp_directory_path() / ("jc-adapter-key-" + std::to_string(getpid()) + "-" + std::to_string(n++));
  std::filesystem::remove(path);
  std::ofstream(path) << content;
  chmod(path.c_str(), mode);
  return path;
}

}  // namespace

TEST_CASE("an adapter's proof holds for its own center and key only, and the replaced key only until its grace [C6]",
          "[C6]") {
  auto key = jc::auth::NewAdapterKey();
  auto other = jc::auth::NewAdapterKey();
  REQUIRE(key.ok());
  REQUIRE(other.ok());
  CHECK(*key != *other);
  const std::string challenge = "challenge-1";
  const std::string proof = AdapterProof(*key, "alpha", challenge);
  CHECK(proof.size() == 32);
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  AdapterKeys keys{*key, "", absl::InfinitePast()};
  CHECK(AdapterProofMatches(keys, now, "alpha", challenge, proof));
  // Another center's id, another challenge (a replayed answer), another key: no.
  CHECK_FALSE(AdapterProofMatches(keys, now, "beta", challenge, proof));
  CHECK_FALSE(AdapterProofMatches(keys, now, "alpha", "challenge-2", proof));
  CHECK_FALSE(AdapterProofMatches(keys, now, "alpha", challenge, AdapterProof(*other, "alpha", challenge)));
  CHECK_FALSE(AdapterProofMatches(keys, now, "alpha", challenge, ""));
  CHECK_FALSE(AdapterProofMatches(keys, now, "alpha", "", AdapterProof(*key, "alpha", "")));
  // The NUL between the parts: ("alph", "a"+challenge) is not ("alpha", challenge).
  CHECK_FALSE(AdapterProofMatches(keys, now, "alph", "a" + challenge, proof));
  // After a rotation, the old key proves the center until previous_until, not after.
  AdapterKeys rotated{*other, *key, now + absl::Minutes(5)};
  CHECK(AdapterProofMatches(rotated, now, "alpha", challenge, proof));
  CHECK_FALSE(AdapterProofMatches(rotated, now + absl::Minutes(5), "alpha", challenge, proof));
  CHECK(AdapterProofMatches(rotated, now + absl::Hours(9), "alpha", challenge, AdapterProof(*other, "alpha", challenge)));
}

TEST_CASE("an adapter reads its key only from a file no other account can read or replace [C6]", "[C6]") {
  auto key = jc::auth::NewAdapterKey();
  REQUIRE(key.ok());
  auto good = KeyFile(*key + "\n", 0600);
  auto read = jc::auth::ReadAdapterKeyFile(good.string());
  INFO(read.status().ToString());
  REQUIRE(read.ok());
  CHECK(*read == *key);

  auto readable = KeyFile(*key, 0640);
  auto refused = jc::auth::ReadAdapterKeyFile(readable.string());
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK(std::string(refused.status().message()).find("chmod 600") != std::string::npos);

  auto garbage = KeyFile("not a key\n", 0600);
  CHECK(std::string(jc::auth::ReadAdapterKeyFile(garbage.string()).status().message()).find("holds no adapter key") !=
        std::string::npos);
  // A link to the key is not followed (another account's link could point anywhere).
  auto link = std::filesystem::temp_directory_path() / ("jc-adapter-key-link-" + std::to_string(getpid()));
  std::filesystem::remove(link);
  std::filesystem::create_symlink(good, link);
  CHECK_FALSE(jc::auth::ReadAdapterKeyFile(link.string()).ok());
  CHECK_FALSE(jc::auth::ReadAdapterKeyFile("/nonexistent/key").ok());
  for (const auto& p : {good, readable, garbage, link}) std::filesystem::remove(p);
}

TEST_CASE("a center's adapter key is answered once, never read back with the center, kept through a rotation for "
          "the grace period, and gone with the center [C6]",
          "[C6]") {
  Fixture f;
  REQUIRE(f.registry.Create(jc::testing::MakeCenter("c1")).ok());
  CHECK_FALSE(f.registry.Get("c1")->adapter_key_issued());
  auto none = jc::registry::ReadAdapterKeys(*f.store, "c1");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());

  auto first = f.registry.IssueAdapterKey("c1");
  REQUIRE(first.ok());
  CHECK_FALSE(first->previous_valid_until.has_value());
  auto center = f.registry.Get("c1");
  REQUIRE(center.ok());
  CHECK(center->adapter_key_issued());
  CHECK(center->DebugString().find(first->key) == std::string::npos);
  auto listed = f.registry.List({});
  REQUIRE(listed.ok());
  CHECK(listed->DebugString().find(first->key) == std::string::npos);
  auto keys = jc::registry::ReadAdapterKeys(*f.store, "c1");
  REQUIRE(keys.ok());
  REQUIRE(keys->has_value());
  CHECK((*keys)->current == first->key);

  f.clock.Advance(absl::Minutes(1));
  auto second = f.registry.IssueAdapterKey("c1");
  REQUIRE(second.ok());
  REQUIRE(second->previous_valid_until.has_value());
  CHECK(*second->previous_valid_until == f.clock.Now() + absl::Minutes(10));
  keys = jc::registry::ReadAdapterKeys(*f.store, "c1");
  REQUIRE(keys->has_value());
  CHECK((*keys)->current == second->key);
  CHECK((*keys)->previous == first->key);
  CHECK((*keys)->previous_until == f.clock.Now() + absl::Minutes(10));

  CHECK(absl::IsNotFound(f.registry.IssueAdapterKey("nowhere").status()));
  // A client cannot claim a key was issued.
  auto claimed = jc::testing::MakeCenter("c2");
  claimed.set_adapter_key_issued(true);
  REQUIRE(f.registry.Create(claimed).ok());
  CHECK_FALSE(f.registry.Get("c2")->adapter_key_issued());

  REQUIRE(f.registry.Delete("c1").ok());
  REQUIRE(f.registry.Create(jc::testing::MakeCenter("c1")).ok());
  auto after = jc::registry::ReadAdapterKeys(*f.store, "c1");
  REQUIRE(after.ok());
  CHECK_FALSE(after->has_value());
}
