#pragma once

// Who a call is and whether it may run: decided once per call, the same way whichever way
// the call came. Over gRPC the auth interceptor (auth_interceptor.h) reads the call's
// metadata and connection; from the REST gateway in this process, a direct call of a
// co-located service's handler (ADR 0014, local_call.h) hands over what the gateway's
// client sent. Both ask this class, so authentication, method access, rate limits and the
// audit have one place.

#include <memory>
#include <optional>
#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/audit/audit_log.h"
#include "common/auth/principal.h"
#include "common/auth/rate_limiter.h"

namespace jc::auth {

// Who may call a method at all; finer checks (the object's project, the center a user
// operates) are the handler's, on the object as stored.
enum class Access {
  kPublic,         // no credentials needed (health checks)
  kAuthenticated,  // any known caller
  kAdmin,          // federation admins and Jointcloud's own services
};

struct MethodRule {
  Access access;
  // A mutation: its calls by users (not by Jointcloud's services) get an audit row, in the
  // transaction of the change, or on their own when they changed nothing.
  bool audited = false;
};

// Full method name ("/jointcloud.v1.JobService/CreateTrainJob") -> rule. A method not in
// the table is refused (PERMISSION_DENIED): a new method cannot be open by omission.
using MethodAccess = absl::flat_hash_map<std::string, MethodRule>;

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // `authorization` is the header's value ("Bearer ..."), empty when there is none.
  // Unauthenticated, with a reason a client can act on, when it proves no one.
  virtual absl::StatusOr<Principal> Authenticate(absl::string_view authorization) const = 0;
};

// What the edge decided for a call: its caller, or why it was refused (UNAUTHENTICATED,
// PERMISSION_DENIED, RESOURCE_EXHAUSTED); and its audit, when audited.
struct CallDecision {
  absl::StatusOr<std::shared_ptr<const Principal>> caller;
  std::shared_ptr<audit::CallAudit> audit;
};

// What a call shows where it enters.
struct CallFacts {
  absl::string_view method;     // full method name
  absl::string_view authorization;  // the Authorization header's value, empty when none
  // The REST client's address, when the call came through the gateway (which forwards it;
  // empty when the kernel no longer knew it: a client that reset its connection).
  absl::string_view forwarded_for;
  absl::string_view request_id;
  // The gRPC call, for its peer and transport security; null for a direct call in this
  // process (ADR 0014), which is what an in-process channel is too.
  const grpc::ServerContextBase* connection = nullptr;
  // The call is made for a REST request (the gateway says so, whatever the client's
  // address): the service secret never counts then.
  bool via_rest = false;
};

// OK when every string field of `message` (at any depth) is UTF-8, as a protobuf parse
// requires; else INVALID_ARGUMENT naming the first field that is not. A message handed to a
// handler directly (ADR 0014) was never parsed, and what came from a header, a path or a
// query could otherwise be stored in a form no later read parses.
absl::Status CheckStringsAreUtf8(const google::protobuf::Message& message);

class CallAdmission {
 public:
  // `limiter`, when given, holds each user to its request rate (federation admins and
  // Jointcloud's services are not limited). `audit`, when given, records the audited
  // methods' calls. With `service_needs_certificate` (a server with TLS), the service secret
  // counts only from a peer that presented a client certificate the CA signed, or from this
  // process's own in-process channels, never through the REST gateway.
  CallAdmission(std::shared_ptr<const Authenticator> authenticator, std::shared_ptr<const MethodAccess> access,
                std::shared_ptr<RateLimiter> limiter = nullptr, std::shared_ptr<audit::AuditLog> audit = nullptr,
                bool service_needs_certificate = false);

  // The decision for a call; an audited method's call by a user begins its audit record
  // (actor, action, request id, source).
  CallDecision Decide(const CallFacts& facts) const;
  // The audit names the object the request is about (no-op when the call is not audited).
  static void DescribeRequest(const CallDecision& decision, const google::protobuf::Message& request);
  // After the handler: a call whose change committed has its row; any other gets one now.
  void Conclude(const CallDecision& decision, const grpc::Status& status) const;

 private:
  // `proven`: who the credential proved, when it did, even if the call is refused after
  // (an admin-only method, the rate limit): the audit names them, not what they claimed.
  absl::StatusOr<std::shared_ptr<const Principal>> Caller(const CallFacts& facts, std::optional<Principal>* proven) const;
  void Describe(const CallFacts& facts, const CallDecision& decision, const std::optional<Principal>& proven) const;

  std::shared_ptr<const Authenticator> authenticator_;
  std::shared_ptr<const MethodAccess> access_;
  std::shared_ptr<RateLimiter> limiter_;
  std::shared_ptr<audit::AuditLog> audit_;
  bool service_needs_certificate_;
};

}  // namespace jc::auth
