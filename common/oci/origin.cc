#include "common/oci/origin.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace jc::oci {
namespace {

// host[:port] with `default_port` when it names none.
absl::StatusOr<Origin> HostPort(absl::string_view text, int default_port) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text.substr(0, 200), "\" is not host[:port]: ", why));
  };
  Origin out;
  out.port = default_port;
  absl::string_view host = text, port;
  bool bracketed = false;
  if (absl::StartsWith(text, "[")) {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return bad("no ']'");
    host = text.substr(1, close - 1);
    bracketed = true;
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad("text after ']'");
      port = rest.substr(1);
      if (port.empty()) return bad("an empty port");
    }
  } else if (size_t colon = text.rfind(':'); colon != absl::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) return bad("an empty port");
  }
  if (host.empty()) return bad("no host");
  for (char c : host) {
    const bool ok = absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_' || (bracketed && c == ':');
    if (!ok) return bad("a character hosts do not have");
  }
  if (!port.empty()) {
    for (char c : port) {
      if (!absl::ascii_isdigit(c)) return bad("a port is a number");
    }
    if (port.size() > 5 || !absl::SimpleAtoi(port, &out.port) || out.port < 1 || out.port > 65535) {
      return bad("a port is 1 to 65535");
    }
  }
  out.host = absl::AsciiStrToLower(host);
  return out;
}

}  // namespace

std::string Origin::ToString() const {
  return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::StatusOr<Origin> ParseHostPort(absl::string_view text) { return HostPort(text, 443); }

absl::StatusOr<Location> ParseLocation(absl::string_view location, const Origin& base) {
  for (char c : location) {
    // What goes on a request line: no spaces, no control characters.
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return absl::InvalidArgumentError("an address has no spaces or control characters");
    }
  }
  Location out;
  if (absl::StartsWith(location, "/") && !absl::StartsWith(location, "//")) {
    out.origin = base;
    out.path = std::string(location);
  } else {
    absl::string_view rest = location;
    int default_port = 443;
    if (absl::StartsWithIgnoreCase(rest, "https://")) {
      rest.remove_prefix(8);
    } else if (absl::StartsWithIgnoreCase(rest, "http://")) {
      out.https = false;
      default_port = 80;
      rest.remove_prefix(7);
    } else {
      return absl::InvalidArgumentError("an address is https://... or an absolute path");
    }
    size_t end = rest.find_first_of("/?#");
    absl::string_view authority = rest.substr(0, end);
    if (absl::StrContains(authority, '@')) return absl::InvalidArgumentError("an address has no user information");
    auto origin = HostPort(authority, default_port);
    if (!origin.ok()) return origin.status();
    out.origin = *std::move(origin);
    out.path = end == absl::string_view::npos ? "" : std::string(rest.substr(end));
  }
  if (size_t hash = out.path.find('#'); hash != std::string::npos) out.path.resize(hash);
  if (out.path.empty() || out.path[0] != '/') out.path = "/" + out.path;
  return out;
}

}  // namespace jc::oci
