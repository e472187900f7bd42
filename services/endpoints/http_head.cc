#include "services/endpoints/http_head.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace jc::endpoints {
namespace {

bool TokenChar(char c) {
  return absl::ascii_isalnum(c) || absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool FieldValueOk(absl::string_view v) {
  for (unsigned char c : v) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

// Splits the head into its first line and its fields; the caller reads the first line.
absl::StatusOr<HttpHead> ParseFields(absl::string_view head, std::string* first_line) {
  if (!absl::ConsumeSuffix(&head, "\r\n\r\n")) return absl::InvalidArgumentError("the head does not end in CRLF CRLF");
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  HttpHead out;
  *first_line = std::string(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    if (line.find('\n') != absl::string_view::npos || line.find('\r') != absl::string_view::npos) {
      return absl::InvalidArgumentError("a bare CR or LF in the head");
    }
    if (line.empty() || line[0] == ' ' || line[0] == '\t') {
      return absl::InvalidArgumentError("a folded or empty field line");
    }
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos || colon == 0) return absl::InvalidArgumentError("a field line without a name");
    absl::string_view name = line.substr(0, colon);
    for (char c : name) {
      if (!TokenChar(c)) return absl::InvalidArgumentError("a field name that is not a token");
    }
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (!FieldValueOk(value)) return absl::InvalidArgumentError("a control character in a field value");
    out.fields.emplace_back(std::string(name), std::string(value));
  }
  return out;
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string PercentDecode(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && Hex(s[i + 1]) >= 0 && Hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2])));
      i += 2;
    } else if (s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> HttpHead::Values(absl::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : fields) {
    if (absl::EqualsIgnoreCase(n, name)) out.push_back(v);
  }
  return out;
}

std::optional<std::string> HttpHead::Value(absl::string_view name) const {
  for (const auto& [n, v] : fields) {
    if (absl::EqualsIgnoreCase(n, name)) return v;
  }
  return std::nullopt;
}

void HttpHead::Remove(absl::string_view name) {
  std::erase_if(fields, [&](const auto& f) { return absl::EqualsIgnoreCase(f.first, name); });
}

void HttpHead::RemoveLike(absl::string_view name) {
  auto normal = [](absl::string_view n) {
    std::string out = absl::AsciiStrToLower(n);
    for (char& c : out) {
      if (c == '_') c = '-';
    }
    return out;
  };
  const std::string want = normal(name);
  std::erase_if(fields, [&](const auto& f) { return normal(f.first) == want; });
}

bool HttpHead::Lists(absl::string_view name, absl::string_view token) const {
  for (const std::string& v : Values(name)) {
    for (absl::string_view t : absl::StrSplit(v, ',')) {
      if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(t), token)) return true;
    }
  }
  return false;
}

std::string HttpHead::Serialize() const {
  std::string out = absl::StrCat(first, " ", second, " ", third, "\r\n");
  for (const auto& [n, v] : fields) absl::StrAppend(&out, n, ": ", v, "\r\n");
  out += "\r\n";
  return out;
}

std::optional<size_t> HeadEnd(absl::string_view buffer) {
  size_t at = buffer.find("\r\n\r\n");
  if (at == absl::string_view::npos) return std::nullopt;
  return at + 4;
}

absl::StatusOr<HttpHead> ParseRequestHead(absl::string_view head) {
  std::string line;
  auto out = ParseFields(head, &line);
  if (!out.ok()) return out.status();
  std::vector<std::string> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty()) {
    return absl::InvalidArgumentError("the request line is not METHOD TARGET VERSION");
  }
  for (char c : parts[0]) {
    if (!TokenChar(c)) return absl::InvalidArgumentError("the method is not a token");
  }
  for (unsigned char c : parts[1]) {
    if (c <= 0x20 || c >= 0x7f) return absl::InvalidArgumentError("the target holds a space or control byte");
  }
  if (parts[1][0] != '/') return absl::InvalidArgumentError("the target is not a path (origin-form)");
  if (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") return absl::InvalidArgumentError("not HTTP/1.0 or 1.1");
  out->first = parts[0];
  out->second = parts[1];
  out->third = parts[2];
  if (out->Values("Host").size() != 1) return absl::InvalidArgumentError("a request needs exactly one Host field");
  return out;
}

absl::StatusOr<HttpHead> ParseResponseHead(absl::string_view head) {
  std::string line;
  auto out = ParseFields(head, &line);
  if (!out.ok()) return out.status();
  std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 2));
  if (parts.size() < 2 || !absl::StartsWith(parts[0], "HTTP/1.") || parts[1].size() != 3) {
    return absl::InvalidArgumentError("the status line is not VERSION CODE REASON");
  }
  out->first = parts[0];
  out->second = parts[1];
  out->third = parts.size() == 3 ? parts[2] : "";
  return out;
}

std::vector<std::string> TakeCookies(const HttpHead& request, absl::string_view name, std::string* rest) {
  std::vector<std::string> found;
  std::vector<std::string> kept;
  for (const std::string& field : request.Values("Cookie")) {
    for (absl::string_view pair : absl::StrSplit(field, ';')) {
      pair = absl::StripAsciiWhitespace(pair);
      if (pair.empty()) continue;
      size_t eq = pair.find('=');
      absl::string_view n = absl::StripAsciiWhitespace(pair.substr(0, eq));
      if (eq != absl::string_view::npos && n == name) {
        absl::string_view v = absl::StripAsciiWhitespace(pair.substr(eq + 1));
        absl::ConsumePrefix(&v, "\"");
        absl::ConsumeSuffix(&v, "\"");
        found.emplace_back(v);
      } else {
        kept.emplace_back(pair);
      }
    }
  }
  if (rest != nullptr) *rest = absl::StrJoin(kept, "; ");
  return found;
}

absl::StatusOr<BodyFraming> RequestBodyFraming(const HttpHead& request) {
  std::vector<std::string> coding = request.Values("Transfer-Encoding");
  std::vector<std::string> lengths = request.Values("Content-Length");
  BodyFraming out;
  if (!coding.empty()) {
    if (!lengths.empty()) return absl::InvalidArgumentError("both Content-Length and Transfer-Encoding");
    if (coding.size() != 1 || !absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(coding[0]), "chunked")) {
      return absl::InvalidArgumentError("a Transfer-Encoding other than chunked");
    }
    out.chunked = true;
    return out;
  }
  if (lengths.empty()) return out;
  if (lengths.size() != 1 || lengths[0].empty() || lengths[0].size() > 15 ||
      !std::all_of(lengths[0].begin(), lengths[0].end(), [](char c) { return absl::ascii_isdigit(c); }) ||
      !absl::SimpleAtoi(lengths[0], &out.length)) {
    return absl::InvalidArgumentError("a Content-Length that is not one number");
  }
  return out;
}

absl::StatusOr<BodyFraming> ResponseBodyFraming(const HttpHead& response, absl::string_view method) {
  if (method == "HEAD" || response.second == "204" || response.second == "304") return BodyFraming{};
  auto framing = RequestBodyFraming(response);
  if (!framing.ok()) return framing.status();
  if (!framing->chunked && response.Values("Content-Length").empty()) framing->until_close = true;
  return framing;
}

absl::StatusOr<size_t> ChunkedBody::Take(absl::string_view data) {
  auto bad = [] { return absl::InvalidArgumentError("a malformed chunk"); };
  size_t i = 0;
  while (i < data.size() && state_ != kDone) {
    const char c = data[i];
    switch (state_) {
      case kSize:
        if (absl::ascii_isxdigit(c)) {
          if (++digits_ > 15) return bad();
          size_ = size_ * 16 + static_cast<uint64_t>(absl::ascii_isdigit(c) ? c - '0' : absl::ascii_tolower(c) - 'a' + 10);
        } else if (digits_ > 0 && (c == ';' || c == ' ' || c == '\t')) {
          state_ = kExtension;
        } else if (digits_ > 0 && c == '\r') {
          state_ = kSizeLF;
        } else {
          return bad();
        }
        ++i;
        break;
      case kExtension:
        if (c == '\n' || ++extension_ > 1024) return bad();
        if (c == '\r') state_ = kSizeLF;
        ++i;
        break;
      case kSizeLF:
        if (c != '\n') return bad();
        state_ = size_ == 0 ? kTrailerStart : kData;
        ++i;
        break;
      case kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(size_, data.size() - i));
        size_ -= n;
        i += n;
        if (size_ == 0) state_ = kDataCR;
        break;
      }
      case kDataCR:
        if (c != '\r') return bad();
        state_ = kDataLF;
        ++i;
        break;
      case kDataLF:
        if (c != '\n') return bad();
        state_ = kSize;
        digits_ = 0;
        extension_ = 0;
        ++i;
        break;
      case kTrailerStart:
        // Trailers are not passed: a backend that merges them into the head would take
        // fields (X-Forwarded-User) no check saw. Browsers send none.
        if (c != '\r') return absl::InvalidArgumentError("a chunked body with trailers");
        state_ = kEndLF;
        ++i;
        break;
      case kTrailer:
        if (c == '\n') return bad();
        if (c == '\r') state_ = kTrailerLF;
        ++i;
        break;
      case kTrailerLF:
        if (c != '\n') return bad();
        state_ = kTrailerStart;
        ++i;
        break;
      case kEndLF:
        if (c != '\n') return bad();
        state_ = kDone;
        ++i;
        break;
      case kDone:
        break;
    }
  }
  return i;
}

absl::string_view TargetPath(absl::string_view target) { return target.substr(0, target.find('?')); }

std::optional<std::string> QueryParam(absl::string_view target, absl::string_view name) {
  size_t q = target.find('?');
  if (q == absl::string_view::npos) return std::nullopt;
  for (absl::string_view pair : absl::StrSplit(target.substr(q + 1), '&')) {
    size_t eq = pair.find('=');
    if (PercentDecode(pair.substr(0, eq)) == name) {
      return eq == absl::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1));
    }
  }
  return std::nullopt;
}

}  // namespace jc::endpoints
