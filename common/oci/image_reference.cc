#include "common/oci/image_reference.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/oci/origin.h"

namespace jc::oci {
namespace {

// A path component: [a-z0-9]+ with single '.', '_', '__' or '-'+ between runs.
bool IsComponent(absl::string_view c) {
  if (c.empty() || !absl::ascii_isalnum(c.front()) || !absl::ascii_isalnum(c.back())) return false;
  for (char ch : c) {
    if (absl::ascii_isupper(ch)) return false;
    if (!absl::ascii_isalnum(ch) && ch != '.' && ch != '_' && ch != '-') return false;
  }
  return true;
}

bool IsTag(absl::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  if (!absl::ascii_isalnum(t[0]) && t[0] != '_') return false;
  for (char ch : t) {
    if (!absl::ascii_isalnum(ch) && ch != '_' && ch != '.' && ch != '-') return false;
  }
  return true;
}

}  // namespace

bool IsDigest(absl::string_view text) {
  if (!absl::StartsWith(text, "sha256:") || text.size() != 7 + 64) return false;
  for (char ch : text.substr(7)) {
    if (!absl::ascii_isdigit(ch) && !(ch >= 'a' && ch <= 'f')) return false;
  }
  return true;
}

absl::StatusOr<ImageReference> ImageReference::Parse(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("image reference \"", text, "\": ", why));
  };
  if (text.empty()) return bad("empty");
  if (text.size() > 512) return bad("longer than 512 characters");
  ImageReference ref;
  absl::string_view rest = text;
  if (auto at = rest.find('@'); at != absl::string_view::npos) {
    ref.digest = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
    if (!IsDigest(ref.digest)) return bad("a digest is sha256: and 64 lower-case hex digits");
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  // The first part is a registry when it looks like a host: a dot, a port, or localhost.
  if (parts.size() > 1 && (absl::StrContains(parts[0], '.') || absl::StrContains(parts[0], ':') ||
                           parts[0] == "localhost")) {
    ref.registry = std::string(parts[0]);
    parts.erase(parts.begin());
    // The registry is where the control plane connects: a host and a numeric port.
    if (auto origin = ParseHostPort(ref.registry); !origin.ok()) {
      return bad(absl::StrCat("the registry ", origin.status().message()));
    }
  } else {
    ref.registry = "docker.io";
  }
  // A tag follows the last ':' of the last part.
  absl::string_view& last = parts.back();
  if (auto colon = last.rfind(':'); colon != absl::string_view::npos) {
    ref.tag = std::string(last.substr(colon + 1));
    last = last.substr(0, colon);
    if (!IsTag(ref.tag)) return bad("a tag is up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'");
  } else if (ref.digest.empty()) {
    ref.tag = "latest";
  }
  for (absl::string_view c : parts) {
    if (!IsComponent(c)) {
      return bad(absl::StrCat("\"", c, "\" is not a repository name part (lower-case letters, digits, '.', '_', '-')"));
    }
  }
  if (ref.registry == "docker.io" && parts.size() == 1) parts.insert(parts.begin(), "library");
  ref.repository = absl::StrJoin(parts, "/");
  // What is recorded is the normalised form (docker.io/library/..., :latest): it too must
  // parse again (found by image_reference_fuzz).
  if (ref.ToString().size() > 512) return bad("longer than 512 characters once normalised");
  return ref;
}

std::string ImageReference::ToString() const {
  std::string out = absl::StrCat(registry, "/", repository);
  if (!tag.empty()) absl::StrAppend(&out, ":", tag);
  if (!digest.empty()) absl::StrAppend(&out, "@", digest);
  return out;
}

std::string ImageReference::ApiHost() const { return registry == "docker.io" ? "registry-1.docker.io" : registry; }

}  // namespace jc::oci
