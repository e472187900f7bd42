#include "common/oci/token_auth.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/json_depth.h"

namespace jc::oci {
namespace {

constexpr size_t kMaxChallenge = 4096;
constexpr size_t kMaxToken = 64 * 1024;

// RFC 7230's tchar.
bool IsTokenChar(char c) {
  return absl::ascii_isalnum(c) || (c != 0 && std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos);
}

absl::Status Bad(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("WWW-Authenticate challenge: ", why));
}

}  // namespace

absl::StatusOr<Challenge> ParseChallenge(absl::string_view header) {
  if (header.size() > kMaxChallenge) return Bad("longer than 4 KiB");
  size_t i = 0;
  auto skip_space = [&] {
    while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
  };
  auto token = [&] {
    size_t start = i;
    while (i < header.size() && IsTokenChar(header[i])) ++i;
    return header.substr(start, i - start);
  };
  Challenge out;
  skip_space();
  out.scheme = std::string(token());
  if (out.scheme.empty()) return Bad("no scheme");
  while (true) {
    skip_space();
    while (i < header.size() && (header[i] == ',' || header[i] == ' ' || header[i] == '\t')) ++i;
    if (i == header.size()) break;
    std::string name = absl::AsciiStrToLower(token());
    if (name.empty()) return Bad(absl::StrCat("unexpected '", header.substr(i, 1), "' at ", i));
    skip_space();
    if (i == header.size() || header[i] != '=') return Bad(absl::StrCat("parameter ", name, " has no value"));
    ++i;
    skip_space();
    std::string value;
    if (i < header.size() && header[i] == '"') {
      ++i;
      bool closed = false;
      while (i < header.size()) {
        char c = header[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < header.size()) c = header[i++];
        value.push_back(c);
      }
      if (!closed) return Bad(absl::StrCat("the value of ", name, " has no closing quote"));
    } else {
      // Unquoted values are tokens; registries also send URLs unquoted (':' and '/').
      size_t start = i;
      while (i < header.size() && header[i] != ',' && header[i] != ' ' && header[i] != '\t') ++i;
      value = std::string(header.substr(start, i - start));
    }
    out.params.emplace(std::move(name), std::move(value));  // the first of a repeated name
  }
  return out;
}

absl::StatusOr<std::string> ParseTokenAnswer(absl::string_view body) {
  using json = nlohmann::json;
  auto bad = [](absl::string_view why) { return absl::DataLossError(absl::StrCat("token answer: ", why)); };
  if (NestsDeeperThan(body, 8)) return bad("nested deeper than 8 levels");
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return bad("not a JSON object");
  for (const char* key : {"token", "access_token"}) {
    auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) continue;
    if (!it->is_string()) return bad(absl::StrCat("\"", key, "\" is not a string"));
    const std::string& token = it->get_ref<const std::string&>();
    if (token.empty()) continue;
    if (token.size() > kMaxToken) return bad("the token is longer than 64 KiB");
    for (char c : token) {
      // RFC 6750's b64token (JWTs included).
      if (!absl::ascii_isalnum(c) && std::string_view("-._~+/=").find(c) == std::string_view::npos) {
        return bad("the token has characters a bearer token does not");
      }
    }
    return token;
  }
  return bad("no \"token\" or \"access_token\"");
}

}  // namespace jc::oci
