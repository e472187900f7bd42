#include "services/endpoints/http_head.h"

#include "absl/strings/ascii.h"
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
