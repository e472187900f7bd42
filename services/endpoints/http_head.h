#pragma once

// HTTP/1.1 message heads, as the endpoint listener needs them (RFC 9112): a request's
// line and fields, read strictly (CRLF lines, token names, no folding, one Host), changed
// and written back; a response's status line, to tell an upgrade from an answer. Bodies are
// never parsed: the listener passes what follows a head through untouched.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::endpoints {

// The most a head may take; a longer one is refused (431).
inline constexpr size_t kMaxHeadBytes = 16 << 10;

struct HttpHead {
  // Request: method, target, version ("HTTP/1.1"). Response: version, status code, reason.
  std::string first, second, third;
  std::vector<std::pair<std::string, std::string>> fields;  // in order, names as sent

  // The values of the fields named `name` (any case).
  std::vector<std::string> Values(absl::string_view name) const;
  std::optional<std::string> Value(absl::string_view name) const;
  void Remove(absl::string_view name);
  void Add(std::string name, std::string value) { fields.emplace_back(std::move(name), std::move(value)); }
  // Whether a comma-separated field (Connection, Upgrade) lists `token` (any case).
  bool Lists(absl::string_view name, absl::string_view token) const;
  std::string Serialize() const;
};

// Where the head in `buffer` ends (the index past its blank line); nullopt while it has
// not ended yet.
std::optional<size_t> HeadEnd(absl::string_view buffer);

// A request head (its bytes up to and including the blank line). InvalidArgument saying
// what is wrong.
absl::StatusOr<HttpHead> ParseRequestHead(absl::string_view head);
absl::StatusOr<HttpHead> ParseResponseHead(absl::string_view head);

// The value of each cookie named `name` in the request's Cookie fields; `rest` (if given)
// gets the Cookie field without them ("" when none is left).
std::vector<std::string> TakeCookies(const HttpHead& request, absl::string_view name, std::string* rest);

// The query parameter `name` of a request target ("/path?a=1&b=2"), percent-decoded.
std::optional<std::string> QueryParam(absl::string_view target, absl::string_view name);
// The target's path, without its query.
absl::string_view TargetPath(absl::string_view target);

}  // namespace jc::endpoints
