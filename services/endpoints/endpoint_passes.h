#pragma once

// The endpoint listener's links and sessions (SPEC A17), kept in the store so that any
// control-plane process redeems a link another issued, and a browser's session outlives a
// restart. A link (ticket) is a 256-bit secret good once, for one endpoint, for
// `ticket_ttl`; redeeming it gives a session secret the browser keeps as a host-only
// cookie, good for that endpoint until `session_ttl` from then. Only SHA-256s of both
// secrets are stored. Who the link was issued to is kept with it: the listener checks them
// again on every connection (endpoint_proxy.h).

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth/principal.h"
#include "common/clock.h"
#include "common/store/store.h"
#include "services/endpoints/endpoint_name.h"

namespace jc::endpoints {

struct PassOptions {
  absl::Duration ticket_ttl = absl::Seconds(60);
  absl::Duration session_ttl = absl::Hours(12);
  // A caller known only by an identity provider's token, whose roles came from that token
  // and cannot be looked up again: its session lasts at most this.
  absl::Duration provider_session_ttl = absl::Hours(1);
  absl::Duration cache_ttl = absl::Seconds(5);
  size_t max_cached = 10000;
};

// The command a link runs in a replica (`jcctl job exec`; a key with no port name).
struct ExecSpec {
  std::vector<std::string> command;
  bool tty = false;
};

// What a session stands for.
struct EndpointPass {
  EndpointKey key;
  std::string landing_path;
  std::string project;
  std::string user_name;
  std::string auth_method;  // "token", "oidc", "none" (Principal::auth_method)
  std::string token_id;     // the API token the link was issued to, if one
  auth::ProjectRole role = auth::ProjectRole::kNone;  // in `project` when the link was issued
  absl::Time expires;
  std::optional<ExecSpec> exec;  // for a command's link: the one command it runs
};

struct IssuedTicket {
  std::string secret;
  absl::Time expires;
};

struct RedeemedTicket {
  std::string session_secret;
  std::string landing_path;
  absl::Time expires;
};

class EndpointPasses {
 public:
  EndpointPasses(store::Store* store, const Clock* clock, PassOptions options = {});

  // A new link for `caller` in `project` to `key`, landing at `landing_path`. Passes past
  // their expiry are deleted in the same write.
  absl::StatusOr<IssuedTicket> Issue(const auth::Principal& caller, const std::string& project,
                                     const EndpointKey& key, const std::string& landing_path,
                                     const std::optional<ExecSpec>& exec = std::nullopt);
  // Exchanges the link's secret for a session, once. PermissionDenied (saying which) for a
  // secret unknown, used, expired or issued for another endpoint; nothing changes then.
  absl::StatusOr<RedeemedTicket> Redeem(absl::string_view ticket_secret, const EndpointKey& key);
  // The pass of a session secret; Unauthenticated when unknown or expired. Cached for
  // cache_ttl (unknown secrets too, so that guessing costs the store nothing more).
  absl::StatusOr<EndpointPass> PassOf(absl::string_view session_secret);

  const PassOptions& options() const { return options_; }

 private:
  struct Cached {
    absl::StatusOr<EndpointPass> pass;
    absl::Time fetched;
  };
  absl::StatusOr<EndpointPass> Load(const std::string& session_sha256);

  store::Store* store_;
  const Clock* clock_;
  PassOptions options_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, Cached> cache_;  // by the session secret's SHA-256
};

}  // namespace jc::endpoints
