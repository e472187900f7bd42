#include "common/rest_envelope.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace jc {

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kFailedPrecondition: return 409;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

namespace {

std::string Render(int http_status, const std::string& code, const std::string& message,
                   const std::string& data_json) {
  // The data part is spliced in verbatim: it is protobuf's JSON output, and parsing it
  // again only to print it would double the gateway's per-request work.
  std::string out = R"({"status":)" + std::to_string(http_status) + R"(,"code":)" +
                    nlohmann::json(code).dump() + R"(,"errorMsg":)" +
                    nlohmann::json(message).dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace) +
                    R"(,"data":)" + (data_json.empty() ? "null" : data_json) + "}";
  return out;
}

}  // namespace

std::string MakeEnvelope(const absl::Status& status, const std::string& data_json) {
  if (status.ok()) {
    // Most answers: Render's text for them written at once, the data copied once (Render
    // copied it into a temporary and again with each concatenation).
    static constexpr absl::string_view kOk = R"({"status":200,"code":"OK","errorMsg":"","data":)";
    const absl::string_view data = data_json.empty() ? absl::string_view("null") : absl::string_view(data_json);
    std::string out;
    out.reserve(kOk.size() + data.size() + 1);
    out.append(kOk.data(), kOk.size()).append(data.data(), data.size()).push_back('}');
    return out;
  }
  return Render(HttpStatusFor(status.code()), StatusCodeName(status.code()), std::string(status.message()), "null");
}

std::string MakeHttpErrorEnvelope(int http_status, const std::string& message) {
  std::string code = "UNKNOWN";
  switch (http_status) {
    case 400: code = "INVALID_ARGUMENT"; break;
    case 404: code = "NOT_FOUND"; break;
    case 405: code = "METHOD_NOT_ALLOWED"; break;
    case 413: code = "PAYLOAD_TOO_LARGE"; break;
    case 415: code = "UNSUPPORTED_MEDIA_TYPE"; break;
    default: code = http_status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT";
  }
  return Render(http_status, code, message, "null");
}

std::string StatusCodeName(absl::StatusCode code) {
  // absl names codes in CamelCase ("NotFound"); the envelope uses the gRPC
  // constant style ("NOT_FOUND") that clients of both APIs already know.
  switch (code) {
    case absl::StatusCode::kOk: return "OK";
    case absl::StatusCode::kCancelled: return "CANCELLED";
    case absl::StatusCode::kUnknown: return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound: return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted: return "ABORTED";
    case absl::StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal: return "INTERNAL";
    case absl::StatusCode::kUnavailable: return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss: return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

}  // namespace jc
