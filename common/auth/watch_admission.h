#pragma once

// The first lines of every watch handler on the callback API: the caller as the auth
// interceptor decided (JC_GRPC_CALLER's counterpart, which cannot return a reactor), its
// seat among the open streams (WatchHub::Admit: users are held to their limit, Jointcloud's
// own services and a server without authentication are not), then the stream on the hub.

#include <memory>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "common/auth/auth_interceptor.h"
#include "common/grpc_status.h"
#include "common/watch_call.h"

namespace jc::auth {

template <typename Event>
grpc::ServerWriteReactor<Event>* StartWatch(
    WatchHub* hub, grpc::CallbackServerContext* ctx, const std::string& what,
    absl::FunctionRef<absl::StatusOr<std::unique_ptr<WatchFeed<Event>>>(std::shared_ptr<const Principal>)> make_feed) {
  using Call = WatchCall<Event>;
  CallDecision decision = DecisionOf(ctx);
  if (!decision.caller.ok()) return Call::Refuse(ToGrpcStatus(decision.caller.status()));
  std::shared_ptr<const Principal> caller = *decision.caller;
  auto feed = make_feed(caller);
  if (!feed.ok()) return Call::Refuse(ToGrpcStatus(feed.status()));
  bool counted = caller->kind != Principal::Kind::kService && caller->auth_method != "none";
  auto seat = hub->Admit(caller->name, counted, what);
  if (!seat.ok()) return Call::Refuse(ToGrpcStatus(seat.status()));
  return Call::Start(hub, ctx, std::move(*feed), std::move(*seat));
}

}  // namespace jc::auth
