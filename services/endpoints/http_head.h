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
  // Also the spellings with '_' for '-', which some servers read as the same field (CGI,
  // WSGI: X_Forwarded_User is HTTP_X_FORWARDED_USER, as X-Forwarded-User is).
  void RemoveLike(absl::string_view name);
  void Add(std::string name, std::string value) { fields.emplace_back(std::move(name), std::move(value)); }
  // Whether a comma-separated field (Connection, Upgrade) lists `token` (any case).
  bool Lists(absl::string_view name, absl::string_view token) const;
  std::string Serialize() const;
};

// How a request's body is delimited (RFC 9112 section 6): chunked, or a length (0 when it
// says neither). InvalidArgument for what a server and the listener might read apart (both
// Content-Length and Transfer-Encoding, two lengths, a coding other than chunked).
struct BodyFraming {
  bool chunked = false;
  uint64_t length = 0;
  bool until_close = false;  // an answer that says neither: it ends when its sender closes
};
absl::StatusOr<BodyFraming> RequestBodyFraming(const HttpHead& request);
// The same of a final answer to a request of `method` (none for HEAD, 204 and 304).
absl::StatusOr<BodyFraming> ResponseBodyFraming(const HttpHead& response, absl::string_view method);

// Follows a chunked body as its bytes pass, to tell where it ends.
class ChunkedBody {
 public:
  // How many leading bytes of `data` are the body's (all of them while it goes on);
  // InvalidArgument for a malformed chunk, an extension over 1 KiB, or trailers (never
  // passed).
  absl::StatusOr<size_t> Take(absl::string_view data);
  bool done() const { return state_ == kDone; }

 private:
  enum State { kSize, kExtension, kSizeLF, kData, kDataCR, kDataLF, kTrailerStart, kTrailer, kTrailerLF, kEndLF, kDone };
  State state_ = kSize;
  uint64_t size_ = 0;
  int digits_ = 0;
  int extension_ = 0;  // bytes of the current chunk's extension
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
