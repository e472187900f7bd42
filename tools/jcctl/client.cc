#include "tools/jcctl/client.h"

#include "common/sse_parser.h"

#include <httplib.h>

#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace jc::jcctl {

namespace {

using nlohmann::json;

absl::StatusCode CodeOf(const std::string& name, int http_status) {
  static const std::map<std::string, absl::StatusCode> kCodes = {
      {"INVALID_ARGUMENT", absl::StatusCode::kInvalidArgument},
      {"OUT_OF_RANGE", absl::StatusCode::kOutOfRange},
      {"NOT_FOUND", absl::StatusCode::kNotFound},
      {"ALREADY_EXISTS", absl::StatusCode::kAlreadyExists},
      {"PERMISSION_DENIED", absl::StatusCode::kPermissionDenied},
      {"UNAUTHENTICATED", absl::StatusCode::kUnauthenticated},
      {"FAILED_PRECONDITION", absl::StatusCode::kFailedPrecondition},
      {"RESOURCE_EXHAUSTED", absl::StatusCode::kResourceExhausted},
      {"UNAVAILABLE", absl::StatusCode::kUnavailable},
      {"ABORTED", absl::StatusCode::kAborted},
      {"DEADLINE_EXCEEDED", absl::StatusCode::kDeadlineExceeded},
      {"UNIMPLEMENTED", absl::StatusCode::kUnimplemented},
  };
  if (auto it = kCodes.find(name); it != kCodes.end()) return it->second;
  switch (http_status) {
    case 400: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 503: return absl::StatusCode::kUnavailable;
    default: return absl::StatusCode::kInternal;
  }
}

// The envelope's error as a Status (the server's own words).
absl::Status EnvelopeError(int http_status, const std::string& body) {
  json envelope = json::parse(body, nullptr, false);
  std::string code, message;
  if (envelope.is_object()) {
    code = envelope.value("code", "");
    message = envelope.value("errorMsg", "");
  }
  if (message.empty()) message = absl::StrCat("HTTP ", http_status);
  if (http_status == 401) message += " (give a token with --token, $JCCTL_TOKEN or the config file)";
  return absl::Status(CodeOf(code, http_status), message);
}

}  // namespace

int ExitCode(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return 0;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 2;
    case absl::StatusCode::kUnavailable: return 3;
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied: return 4;
    case absl::StatusCode::kNotFound: return 5;
    default: return 1;
  }
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ServerConfig& config) {
  static const std::regex kUrl(R"(^(https?)://([A-Za-z0-9.\-]+|\[[0-9a-fA-F:]+\])(:\d{1,5})?/?$)");
  std::smatch m;
  if (!std::regex_match(config.url, m, kUrl)) {
    return absl::InvalidArgumentError(
        absl::StrCat("server: \"", config.url, "\" is not a URL like http://host:port or https://host:port"));
  }
  auto http = std::make_unique<httplib::Client>(config.url);
  http->set_connection_timeout(5, 0);
  http->set_read_timeout(60, 0);
  http->set_tcp_nodelay(true);
  if (!config.token.empty()) http->set_bearer_token_auth(config.token);
  if (m[1] == "https") {
    if (!config.ca_file.empty()) http->set_ca_cert_path(config.ca_file.c_str());
    http->enable_server_certificate_verification(true);
  }
  return std::unique_ptr<Client>(new Client(config.url, std::move(http), config.ca_file));
}

Client::Client(std::string url, std::unique_ptr<httplib::Client> http, std::string ca_file)
    : url_(std::move(url)), ca_file_(std::move(ca_file)), http_(std::move(http)) {}
Client::~Client() = default;

absl::Status Client::Unreachable(int error) const {
  // httplib names the error in a word ("Connection"); say what it means and what to try.
  std::string why;
  switch (static_cast<httplib::Error>(error)) {
    case httplib::Error::Connection:
      why = "the connection was refused or the host cannot be reached (is jointcloud running there? --server or "
            "$JCCTL_SERVER)";
      break;
    case httplib::Error::ConnectionTimeout:
      why = "connecting timed out";
      break;
    case httplib::Error::Read:
    case httplib::Error::Write:
      why = "the connection broke (the server stopped, or it speaks https and --server says http)";
      break;
    case httplib::Error::SSLConnection:
      why = "the TLS handshake failed (does the server speak https?)";
      break;
    case httplib::Error::SSLServerVerification:
      why = "the server's certificate is not one jcctl trusts (give its CA with --ca_file)";
      break;
    case httplib::Error::SSLLoadingCerts:
      why = "the CA file could not be read (--ca_file)";
      break;
    default:
      why = httplib::to_string(static_cast<httplib::Error>(error));
  }
  return absl::UnavailableError(absl::StrCat("cannot reach the server at ", url_, ": ", why));
}

absl::StatusOr<json> Client::Call(const std::string& method, const std::string& path, const json* body,
                                  const std::vector<std::pair<std::string, std::string>>& extra_headers) {
  std::string payload = body != nullptr ? body->dump() : "";
  httplib::Headers headers(extra_headers.begin(), extra_headers.end());
  httplib::Result res = method == "GET"      ? http_->Get(path, headers)
                        : method == "DELETE" ? http_->Delete(path, headers)
                        : method == "PUT"    ? http_->Put(path, headers, payload, "application/json")
                        : method == "PATCH"  ? http_->Patch(path, headers, payload, "application/json")
                                             : http_->Post(path, headers, payload.empty() ? "{}" : payload,
                                                           "application/json");
  if (!res) return Unreachable(static_cast<int>(res.error()));
  if (res->status != 200) return EnvelopeError(res->status, res->body);
  json envelope = json::parse(res->body, nullptr, false);
  if (!envelope.is_object()) return absl::InternalError(absl::StrCat("the server answered ", path, " with no JSON"));
  return envelope.contains("data") ? envelope["data"] : json(nullptr);
}

absl::StatusOr<std::string> Client::Text(const std::string& path) {
  httplib::Result res = http_->Get(path.c_str());
  if (!res) return Unreachable(static_cast<int>(res.error()));
  if (res->status != 200) return EnvelopeError(res->status, res->body);
  return res->body;
}

absl::Status Client::Stream(const std::string& path, const std::string& last_event_id,
                            const std::function<bool(const std::string&, const std::string&, const json&)>& on_event) {
  httplib::Headers headers;
  if (!last_event_id.empty()) headers.emplace("Last-Event-ID", last_event_id);
  http_->set_read_timeout(120, 0);  // heartbeats come every 15 s
  int status = 0;
  std::string error_body;
  SseParser parser;
  bool stopped = false;
  httplib::Result res = http_->Get(
      path.c_str(), headers,
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (status != 200) {
          error_body.append(data, n);
          return true;
        }
        return parser.Feed(
            std::string_view(data, n),
            [&](const SseEvent& e) {
              if (e.event == "error") {  // the server's envelope, ending the stream
                error_body = e.data;
                stopped = true;
                return false;
              }
              if (!on_event(e.id, e.event, json::parse(e.data, nullptr, false))) {
                stopped = true;
                return false;
              }
              return true;
            },
            [](std::string_view) {});  // heartbeats
      });
  if (status != 0 && status != 200) return EnvelopeError(status, error_body);
  if (!error_body.empty()) {
    json e = json::parse(error_body, nullptr, false);
    return absl::Status(CodeOf(e.is_object() ? e.value("code", "") : "", 500),
                        e.is_object() ? e.value("errorMsg", "the stream failed") : "the stream failed");
  }
  if (!res && !stopped) return Unreachable(static_cast<int>(res.error()));
  return absl::OkStatus();
}

}  // namespace jc::jcctl
