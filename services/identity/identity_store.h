#pragma once

// Users, projects and API tokens (SPEC C6), kept in the store, and what authentication
// needs of them: the principal a presented API token stands for.
//
// Authentication asks no database on the hot path: a token's verdict is cached for
// `cache_ttl` (5 s), so a revocation takes effect at once in this process and within
// `cache_ttl` in another sharing the store. A token's last use is remembered in memory and
// written in one batch every `last_used_flush` (and when the store closes).

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth/principal.h"
#include "common/clock.h"
#include "common/periodic_task.h"
#include "common/store/store.h"
#include "jointcloud/v1/identity.pb.h"

namespace jc::identity {

namespace v1 = ::jointcloud::v1;

struct IdentityOptions {
  absl::Duration cache_ttl = absl::Seconds(5);
  // While the store cannot be asked (PostgreSQL restarting), a verdict older than cache_ttl
  // still stands for this long, so that callers already seen keep working (reads of known
  // jobs, say); a token never seen gets 503 meanwhile. A revocation made before the outage
  // has taken effect already (within cache_ttl).
  absl::Duration stale_ttl = absl::Minutes(10);
  absl::Duration last_used_flush = absl::Seconds(30);
};

class IdentityStore {
 public:
  IdentityStore(store::Store* store, const Clock* clock, IdentityOptions options = {});
  ~IdentityStore();

  absl::StatusOr<v1::User> CreateUser(v1::User user);
  absl::StatusOr<v1::User> GetUser(const std::string& name);
  absl::StatusOr<v1::ListUsersResponse> ListUsers(const v1::ListUsersRequest& request);
  // Revokes the user's tokens in the same transaction.
  absl::Status DeleteUser(const std::string& name);
  absl::StatusOr<v1::User> SetMembership(const v1::SetMembershipRequest& request);

  absl::StatusOr<v1::Project> CreateProject(v1::Project project);
  absl::StatusOr<v1::Project> GetProject(const std::string& name);
  absl::StatusOr<v1::ListProjectsResponse> ListProjects(const v1::ListProjectsRequest& request);
  // Refused while a user is still a member.
  absl::Status DeleteProject(const std::string& name);
  absl::StatusOr<v1::Project> SetProjectQuota(const v1::SetProjectQuotaRequest& req);
  absl::StatusOr<v1::Project> SetProjectBudget(const v1::SetProjectBudgetRequest& req);

  absl::StatusOr<v1::CreateTokenResponse> CreateToken(const v1::CreateTokenRequest& request);
  absl::StatusOr<v1::ListTokensResponse> ListTokens(const v1::ListTokensRequest& request);
  absl::StatusOr<v1::ApiToken> RevokeToken(const std::string& token_id);

  // The principal of an API token ("jc_<id>_<secret>"); Unauthenticated when it is
  // malformed, unknown, wrong, expired or revoked, or its user is gone.
  absl::StatusOr<auth::Principal> PrincipalOfToken(absl::string_view token);
  // The principal of the API token `token_id` as it stands now, its secret not asked: for a
  // token that authenticated a caller before (an endpoint session asks again on every
  // connection whether it is still valid, and what its user may do now).
  absl::StatusOr<auth::Principal> PrincipalOfTokenId(const std::string& token_id);
  // The principal of the stored user an OIDC caller of this name is: nullopt when no such
  // user is stored, or when it does not accept OIDC (User.accepts_oidc). Cached like tokens.
  // `name_taken` (optional): set when a stored user has the name but does not accept OIDC.
  absl::StatusOr<std::optional<auth::Principal>> PrincipalOfOidcUser(const std::string& name,
                                                                     bool* name_taken = nullptr);

  // On a store with no user yet: creates `name` as a federation admin with a token, and
  // returns the token (to show once). nullopt when users already exist.
  absl::StatusOr<std::optional<std::string>> BootstrapAdmin(const std::string& name);

  // Writes the remembered last-use times (the background task calls it).
  absl::Status FlushLastUsed();

 private:
  // Loads the project for update, changes it with `change`, writes it back, in one
  // transaction; NotFound for an unknown project.
  absl::StatusOr<v1::Project> UpdateProject(const std::string& name, const std::function<void(v1::Project&)>& change);
  struct CachedToken {
    absl::StatusOr<std::shared_ptr<const auth::Principal>> principal;  // or why it is refused
    std::string secret_sha256;
    absl::Time fetched;
    absl::Time expires = absl::InfiniteFuture();
  };
  struct CachedUser {
    std::optional<auth::Principal> principal;
    absl::Time fetched;
    bool taken = false;  // a stored user of the name that does not accept OIDC
  };
  absl::StatusOr<CachedToken> LoadToken(const std::string& id);
  // `secret`: compared with the stored hash; null: not asked (PrincipalOfTokenId).
  absl::StatusOr<auth::Principal> PrincipalOfTokenWith(const std::string& id, const std::string* secret);
  void Invalidate();
  // Takes `name` for an identity provider's user unless a stored user took it first; who
  // holds it ("oidc" or "user"). Written once per name (remembered in oidc_names_ after).
  absl::StatusOr<std::string> ClaimOidcName(const std::string& name, absl::Time now);

  store::Store* store_;
  const Clock* clock_;
  IdentityOptions options_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, CachedToken> tokens_;  // by token id
  absl::flat_hash_map<std::string, CachedUser> users_;    // by name
  absl::flat_hash_map<std::string, absl::Time> last_used_;
  absl::flat_hash_set<std::string> oidc_names_;  // names known taken by OIDC identities
  PeriodicTask flusher_;
};

// A stored user as a principal.
auth::Principal PrincipalOf(const v1::User& user);

}  // namespace jc::identity
