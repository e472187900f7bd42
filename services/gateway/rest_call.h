#pragma once

// Glue shared by the route files: parse a JSON body into a message, read query
// parameters, and call a unary RPC turning its outcome into a RestResult.

#include <chrono>
#include <functional>
#include <string>

#include <google/protobuf/field_mask.pb.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/impl/codegen/service_type.h>
#include <httplib.h>
#include <google/protobuf/timestamp.pb.h>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/auth/local_call.h"
#include "common/grpc_status.h"
#include "common/json_proto.h"
#include "services/gateway/route.h"

namespace jc::gateway {

inline constexpr auto kRpcTimeout = std::chrono::seconds(30);
// The largest answer a handler called directly may give: what the in-process gRPC channel
// would carry (its default receive limit), so a page of huge jobs is refused both ways.
inline constexpr size_t kMaxAnswerBytes = 4 << 20;

// Whether a header's value may go on as gRPC metadata (printable ASCII, 0x20-0x7E): gRPC
// aborts the process on any other byte, so what the gateway forwards is checked first.
bool IsForwardableHeaderValue(absl::string_view value);

// The first value of header `name` (any case), or null: one look-up, where httplib's
// has_header and get_header_value are two, and the second copies the value. A walk of the
// request's few headers, lengths first: the map's own find compares names through
// `tolower` a character at a time, a dozen names a request.
inline const std::string* FindHeader(const httplib::Request& request, absl::string_view name) {
  for (const auto& [key, value] : request.headers) {
    if (key.size() == name.size() && absl::EqualsIgnoreCase(key, name)) return &value;
  }
  return nullptr;
}

// The REST request this thread is serving, for the duration of its handler: its caller's
// credentials travel with every gRPC call the handler makes (the gRPC servers behind the
// gateway authenticate them; the gateway itself decides nothing about identity).
class ServingRequest {
 public:
  // `request_id` identifies the request in logs and the audit log (the client's
  // X-Request-Id, or one the gateway made).
  // `on_stop` (the gateway's): takes what CancelOnStop registers for this request.
  ServingRequest(const httplib::Request& request, const std::string& request_id,
                 std::function<void(std::function<void()>)> on_stop = nullptr);
  ~ServingRequest();
  ServingRequest(const ServingRequest&) = delete;
  ServingRequest& operator=(const ServingRequest&) = delete;

 private:
  std::function<void(std::function<void()>)> on_stop_;
};

// For the rest of the request being served: `cancel` is called when the gateway stops (at
// once if it is stopping), so that a handler blocked in a call before it has an answer (a
// watch waiting for a remote jobs service's first headers, which a stalled service never
// sends) lets the stop go on. Without a gateway serving (a handler called directly), nothing.
void CancelOnStop(std::function<void()> cancel);

// A call's deadline, and the Authorization header and client address of the REST request
// being served (ServingRequest), as gRPC metadata.
void PrepareContext(grpc::ClientContext* ctx);

// What the REST request being served (ServingRequest) sent that a call made for it carries:
// the same Authorization header, client address and request id PrepareContext puts in a
// gRPC call's metadata.
struct ServingFacts {
  std::string authorization;
  std::string forwarded_for;
  std::string request_id;
  auth::CallFacts For(absl::string_view method) const {
    return {method, authorization, forwarded_for, request_id, nullptr, /*via_rest=*/true};
  }
};
ServingFacts CurrentServingFacts();

// A service in this process whose unary handlers the gateway calls directly (ADR 0014),
// through the same admission as the gRPC server's interceptor; none when `service` is null.
struct LocalService {
  grpc::Service* service = nullptr;
  std::shared_ptr<const auth::CallAdmission> admission;
};

// Parses the request body into `message`. With `mask` set, also records the top-level
// fields the body names, so PATCH changes exactly those.
absl::Status ParseBody(const httplib::Request& request, google::protobuf::Message* message,
                       google::protobuf::FieldMask* mask = nullptr);

// Reads an optional integer query parameter into *out (left alone when absent).
absl::Status QueryInt(const httplib::Request& request, const std::string& name, int32_t* out);
std::string QueryString(const httplib::Request& request, const std::string& name);
// A time query parameter: a date (2026-12-01, midnight UTC) or an RFC 3339 instant with its
// zone (ask only when the request has it). InvalidArgument names the parameter.
absl::Status QueryTime(const httplib::Request& request, const std::string& name, google::protobuf::Timestamp* out);

// Reads page_size and page_token into a List request.
template <typename Req>
absl::Status ReadPaging(const httplib::Request& request, Req* req) {
  req->set_page_token(QueryString(request, "page_token"));
  int32_t size = 0;
  absl::Status s = QueryInt(request, "page_size", &size);
  req->set_page_size(size);
  return s;
}

template <typename Stub, typename Req, typename Resp>
RestResult CallUnary(Stub* stub,
                     grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                     const Req& req, JsonNames names, bool with_data = true) {
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  Resp resp;
  grpc::Status status = (stub->*method)(&ctx, req, &resp);
  if (!status.ok()) return {FromGrpcStatus(status), ""};
  if (!with_data) return {absl::OkStatus(), ""};
  auto json = ProtoToJson(resp, names);
  if (!json.ok()) return {json.status(), ""};
  return {absl::OkStatus(), std::move(json).value()};
}

// A unary method by either way: directly, when the service runs in this process
// (`local`), else over the gRPC channel of `stub`. `method` is its full gRPC name, which
// the access table knows it by.
template <typename Stub, typename Service, typename Req, typename Resp>
RestResult CallUnary(Stub* stub, grpc::Status (Stub::*remote)(grpc::ClientContext*, const Req&, Resp*),
                     Service* local, const auth::CallAdmission* admission,
                     grpc::Status (Service::*handler)(grpc::ServerContext*, const Req*, Resp*),
                     absl::string_view method, const Req& req, JsonNames names, bool with_data = true) {
  if (local == nullptr) return CallUnary(stub, remote, req, names, with_data);
  Resp resp;
  grpc::Status status = auth::CallInProcess(*admission, CurrentServingFacts().For(method), local, handler, req, &resp);
  if (!status.ok()) return {FromGrpcStatus(status), ""};
  if (size_t bytes = resp.ByteSizeLong(); bytes > kMaxAnswerBytes) {
    return {absl::ResourceExhaustedError(absl::StrCat("the answer is ", bytes, " bytes, more than the ", kMaxAnswerBytes,
                                                      " an answer may be: ask for less (a smaller pageSize)")),
            ""};
  }
  if (!with_data) return {absl::OkStatus(), ""};
  auto json = ProtoToJson(resp, names);
  if (!json.ok()) return {json.status(), ""};
  return {absl::OkStatus(), std::move(json).value()};
}

// Routes a body-less request: the status of `s` or the result of `fn`.
template <typename Fn>
RestResult IfOk(const absl::Status& s, Fn&& fn) {
  if (!s.ok()) return {s, ""};
  return fn();
}

}  // namespace jc::gateway
