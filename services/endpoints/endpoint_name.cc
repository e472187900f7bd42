#include "services/endpoints/endpoint_name.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace jc::endpoints {
namespace {

constexpr size_t kMaxLabel = 63;

bool Digits(absl::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

bool PortName(absl::string_view s) {
  if (s.empty() || s.size() > 15 || !absl::ascii_islower(s[0])) return false;
  for (char c : s) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') return false;
  }
  return true;
}

bool JobId(absl::string_view s) { return absl::ConsumePrefix(&s, "job-") && Digits(s, 18); }

}  // namespace

std::string HostLabel(const EndpointKey& key) {
  if (!JobId(key.job_id) || key.task_index < 0 || key.replica_index < kTaskEndpoint) return "";
  if (key.port_name.empty()) {  // commands in a replica: one replica's, no port
    if (key.replica_index == kTaskEndpoint) return "";
    return absl::StrCat(key.job_id, "-", key.task_index, "-", key.replica_index);
  }
  if (!PortName(key.port_name)) return "";
  std::string label =
      key.replica_index == kTaskEndpoint
          ? absl::StrCat(key.job_id, "-", key.task_index, "-", key.port_name)
          : absl::StrCat(key.job_id, "-", key.task_index, "-", key.replica_index, "-", key.port_name);
  return label.size() <= kMaxLabel ? label : "";
}

std::optional<EndpointKey> ParseHostLabel(absl::string_view label) {
  if (label.size() > kMaxLabel) return std::nullopt;
  // job-<digits>-<task>[-<replica>]-<port name, a letter first, which may hold '-'>, or
  // job-<digits>-<task>-<replica> for commands in the replica (a port name is no number)
  std::vector<absl::string_view> parts = absl::StrSplit(label, absl::MaxSplits('-', 3));
  if (parts.size() != 4 || parts[0] != "job" || !Digits(parts[1], 18) || !Digits(parts[2], 4)) return std::nullopt;
  EndpointKey key;
  key.job_id = absl::StrCat("job-", parts[1]);
  if (!absl::SimpleAtoi(parts[2], &key.task_index)) return std::nullopt;
  absl::string_view rest = parts[3];
  if (Digits(rest, 4)) {
    if (!absl::SimpleAtoi(rest, &key.replica_index)) return std::nullopt;
    if (HostLabel(key) != label) return std::nullopt;
    return key;
  }
  key.replica_index = kTaskEndpoint;
  if (size_t dash = rest.find('-'); dash != absl::string_view::npos && Digits(rest.substr(0, dash), 4)) {
    if (!absl::SimpleAtoi(rest.substr(0, dash), &key.replica_index)) return std::nullopt;
    rest = rest.substr(dash + 1);
  }
  if (!PortName(rest)) return std::nullopt;
  key.port_name = std::string(rest);
  if (HostLabel(key) != label) return std::nullopt;  // "07" for 7: one name per endpoint
  return key;
}

std::optional<EndpointKey> EndpointOfHost(absl::string_view host_header, absl::string_view domain) {
  std::string host = absl::AsciiStrToLower(absl::StripAsciiWhitespace(host_header));
  absl::string_view h = host;
  if (size_t colon = h.rfind(':'); colon != absl::string_view::npos) {
    if (!Digits(h.substr(colon + 1), 5)) return std::nullopt;
    h = h.substr(0, colon);
  }
  absl::ConsumeSuffix(&h, ".");  // a fully qualified name
  std::string suffix = absl::StrCat(".", absl::AsciiStrToLower(domain));
  if (domain.empty() || !absl::ConsumeSuffix(&h, suffix) || h.find('.') != absl::string_view::npos) {
    return std::nullopt;
  }
  return ParseHostLabel(h);
}

std::string Describe(const EndpointKey& key) {
  if (key.port_name.empty()) {
    return absl::StrCat(key.job_id, ", task ", key.task_index, ", replica ", key.replica_index, " (a command in it)");
  }
  return absl::StrCat(key.job_id, ", task ", key.task_index, ", ",
                      key.replica_index == kTaskEndpoint ? std::string("every ready replica")
                                                         : absl::StrCat("replica ", key.replica_index),
                      ", port \"", key.port_name, "\"");
}

}  // namespace jc::endpoints
