#include "services/endpoints/activity_probe.h"
#include "common/json_depth.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/southbound/adapter_client.h"

namespace jc::endpoints {

std::string ActivityRequest(absl::string_view host, absl::string_view path, absl::string_view token) {
  return absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host,
                      token.empty() ? "" : absl::StrCat("\r\nAuthorization: token ", token),
                      "\r\nAccept: application/json\r\nConnection: close\r\nUser-Agent: jointcloud-idle-check\r\n\r\n");
}

absl::StatusOr<absl::Time> LastActivityOf(absl::string_view answer) {
  size_t head_end = answer.find("\r\n\r\n");
  if (head_end == absl::string_view::npos) return absl::InvalidArgumentError("the answer has no complete head");
  absl::string_view status_line = answer.substr(0, answer.find("\r\n"));
  if (!absl::StartsWith(status_line, "HTTP/1.") || status_line.size() < 12 || status_line.substr(9, 3) != "200") {
    return absl::InvalidArgumentError(absl::StrCat("the answer is \"", status_line.substr(0, 60), "\", not 200"));
  }
  // The replica's server answers: what it sends is the user's.
  if (NestsDeeperThan(answer.substr(head_end + 4), 16)) {
    return absl::InvalidArgumentError("the answer nests deeper than 16 levels");
  }
  auto body = nlohmann::json::parse(answer.substr(head_end + 4), nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return absl::InvalidArgumentError("the answer is not a JSON object");
  auto it = body.find("last_activity");
  if (it == body.end() || !it->is_string()) {
    return absl::InvalidArgumentError("the answer has no \"last_activity\" string");
  }
  absl::Time at;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, it->get<std::string>(), &at, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("\"last_activity\" is no RFC 3339 time: ", error));
  }
  return at;
}

absl::StatusOr<absl::Time> ProbeActivity(southbound::Tunnel& tunnel, absl::string_view host, absl::string_view path,
                                         absl::string_view token) {
  if (!tunnel.Send(ActivityRequest(host, path, token))) return absl::UnavailableError("the tunnel ended");
  tunnel.CloseSend();
  std::string answer;
  while (auto bytes = tunnel.Receive()) {
    answer += *bytes;
    if (answer.size() > kMaxActivityAnswer) {
      tunnel.Cancel();
      return absl::InvalidArgumentError("the answer is over 64 KiB");
    }
  }
  if (absl::Status s = tunnel.Finish(); !s.ok() && answer.empty()) return s;
  return LastActivityOf(answer);
}

}  // namespace jc::endpoints
