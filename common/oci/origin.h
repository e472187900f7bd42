#pragma once

// Where the registry client sends a request: an HTTPS origin, and the addresses registries
// hand it (a redirect's Location, a token service's realm). Pure functions of the text, so
// tests/fuzz/oci_token_fuzz.cc feeds them what a lying registry might send.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::oci {

// An HTTPS origin: host and port (the scheme is always https).
struct Origin {
  std::string host;  // lower case; an IPv6 address without brackets
  int port = 443;
  bool operator==(const Origin&) const = default;
  std::string ToString() const;  // host:port ([v6]:port)
};

// "host", "host:port", "[v6]:port" -> Origin (443 without a port). InvalidArgument for an
// empty host or a port that is not 1..65535.
absl::StatusOr<Origin> ParseHostPort(absl::string_view host_port);

// Where a redirect's Location points: `https` false for plain http://.
struct Location {
  bool https = true;
  Origin origin;
  std::string path;  // with its query
};

// A Location header, absolute (http:// or https://) or an absolute path on `base`.
// InvalidArgument for anything else (another scheme, a relative path, a bad host).
absl::StatusOr<Location> ParseLocation(absl::string_view location, const Origin& base);

}  // namespace jc::oci
