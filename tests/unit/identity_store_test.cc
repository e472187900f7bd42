// The identity store's tokens and users under concurrency (issue 44): a token
// made while its user is being deleted must never outlive that user, or a later
// user given the same name inherits it. Runs on both stores (JC_TEST_STORE);
// the race shows on PostgreSQL, where a token's insert and a user's delete run
// side by side under READ COMMITTED.
#include "services/identity/identity_store.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "tests/testing/test_store.h"

namespace jc::identity {
namespace {

v1::User Named(const std::string& name) {
  v1::User u;
  u.set_name(name);
  return u;
}

TEST_CASE("a token made while its user is deleted never authenticates a later user of that name [C6]",
          "[C6][security]") {
  auto store = testing::MakeTestStore();
  // No cache: each check reads the store, as a second control plane instance would.
  IdentityOptions options;
  options.cache_ttl = absl::ZeroDuration();
  options.stale_ttl = absl::ZeroDuration();
  IdentityStore identity(store.get(), RealClock::Get(), options);

  int orphans = 0, made_and_deleted = 0;
  for (int round = 0; round < 60; ++round) {
    const std::string name = absl::StrCat("victim", round);
    REQUIRE(identity.CreateUser(Named(name)).ok());
    // Several tokens race one delete: each either fails (the user is gone) or
    // lands before the delete, which then removes it.
    std::vector<std::string> secrets(4);
    std::atomic<bool> go{false};
    std::vector<std::thread> makers;
    for (size_t i = 0; i < secrets.size(); ++i) {
      makers.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        v1::CreateTokenRequest req;
        req.set_user_name(name);
        auto made = identity.CreateToken(req);
        if (made.ok()) secrets[i] = made->secret();
      });
    }
    absl::Status deleted;
    std::thread deleter([&] {
      while (!go.load()) std::this_thread::yield();
      deleted = identity.DeleteUser(name);
    });
    go = true;
    for (auto& t : makers) t.join();
    deleter.join();
    REQUIRE(deleted.ok());
    // Someone else is given the name afterwards.
    REQUIRE(identity.CreateUser(Named(name)).ok());
    for (const std::string& secret : secrets) {
      if (secret.empty()) continue;
      ++made_and_deleted;
      if (identity.PrincipalOfToken(secret).ok()) ++orphans;
    }
  }
  INFO(made_and_deleted << " tokens were made by the racing creates");
  CHECK(orphans == 0);
}

TEST_CASE("a project is not named \"-\" (the federation's in requests) or with a leading '.' [C6]", "[C6]") {
  auto store = testing::MakeTestStore();
  IdentityStore identity(store.get(), RealClock::Get());
  for (const char* name : {"-", ".projects", ".hidden"}) {
    v1::Project p;
    p.set_name(name);
    INFO(name);
    CHECK(absl::IsInvalidArgument(identity.CreateProject(p).status()));
  }
  v1::Project ok;
  ok.set_name("vision");
  CHECK(identity.CreateProject(ok).ok());
}

}  // namespace
}  // namespace jc::identity
