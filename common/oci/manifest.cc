#include "common/oci/manifest.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/oci/image_reference.h"
#include "common/json_depth.h"

namespace jc::oci {
namespace {

using json = nlohmann::json;

constexpr char kOciIndex[] = "application/vnd.oci.image.index.v1+json";
constexpr char kDockerList[] = "application/vnd.docker.distribution.manifest.list.v2+json";
// A manifest nests three levels (index > entry > platform); annotations may add a few.
constexpr int kMaxDepth = 16;
// No image is a pebibyte: past it a size is a lie, and sums stay far from overflow.
constexpr int64_t kMaxBytes = int64_t{1} << 50;

absl::Status Bad(absl::string_view what) { return absl::DataLossError(absl::StrCat("manifest: ", what)); }

absl::StatusOr<json> ParseObject(absl::string_view body, absl::string_view what) {
  if (NestsDeeperThan(body, kMaxDepth)) return absl::DataLossError(absl::StrCat(what, ": nested deeper than ", kMaxDepth, " levels"));
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return absl::DataLossError(absl::StrCat(what, ": not a JSON object"));
  return doc;
}

// obj[key] as a string: "" when absent, DataLoss when of another type. `where` names the
// object for the error ("manifest", "manifests[2].platform").
absl::StatusOr<std::string> OptionalString(const json& obj, const char* key, absl::string_view where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Bad(absl::StrCat(where, ".", key, " is not a string"));
  return it->get<std::string>();
}

// obj[key] as a digest: DataLoss when absent, of another type or not sha256:<64 hex>.
absl::StatusOr<std::string> RequiredDigest(const json& obj, const char* key, absl::string_view where) {
  auto value = OptionalString(obj, key, where);
  if (!value.ok()) return value.status();
  if (!IsDigest(*value)) return Bad(absl::StrCat(where, ".", key, " is not sha256: and 64 lower-case hex digits"));
  return value;
}

// obj["size"]: 0 when absent, DataLoss when not a whole number in [0, kMaxBytes].
absl::StatusOr<int64_t> Size(const json& obj, absl::string_view where) {
  auto it = obj.find("size");
  if (it == obj.end() || it->is_null()) return int64_t{0};
  if (it->is_number_unsigned()) {
    uint64_t v = it->get<uint64_t>();
    if (v <= static_cast<uint64_t>(kMaxBytes)) return static_cast<int64_t>(v);
  }
  if (it->is_number_integer() || it->is_number_unsigned()) return Bad(absl::StrCat(where, ".size is out of range"));
  return Bad(absl::StrCat(where, ".size is not a whole number"));
}

absl::StatusOr<Manifest> ParseIndex(const json& doc) {
  Manifest out;
  out.is_index = true;
  auto list = doc.find("manifests");
  if (list == doc.end() || !list->is_array()) return Bad("\"manifests\" of an index is not a list");
  for (size_t i = 0; i < list->size(); ++i) {
    const json& entry = (*list)[i];
    const std::string where = absl::StrCat("manifests[", i, "]");
    if (!entry.is_object()) return Bad(absl::StrCat(where, " is not an object"));
    IndexEntry e;
    auto digest = RequiredDigest(entry, "digest", where);
    if (!digest.ok()) return digest.status();
    e.digest = *std::move(digest);
    std::string os = "?", arch = "?";
    if (auto p = entry.find("platform"); p != entry.end() && !p->is_null()) {
      if (!p->is_object()) return Bad(absl::StrCat(where, ".platform is not an object"));
      auto o = OptionalString(*p, "os", where + ".platform");
      auto a = OptionalString(*p, "architecture", where + ".platform");
      if (!o.ok()) return o.status();
      if (!a.ok()) return a.status();
      if (!o->empty()) os = *o;
      if (!a->empty()) arch = *a;
    }
    e.platform = absl::StrCat(os, "/", arch);
    out.entries.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<Manifest> ParseImageManifest(const json& doc) {
  Manifest out;
  auto config = doc.find("config");
  if (config == doc.end() || !config->is_object()) return Bad("\"config\" is missing or not an object");
  auto digest = RequiredDigest(*config, "digest", "config");
  if (!digest.ok()) return digest.status();
  out.config_digest = *std::move(digest);
  auto size = Size(*config, "config");
  if (!size.ok()) return size.status();
  out.size_bytes = *size;
  if (auto layers = doc.find("layers"); layers != doc.end() && !layers->is_null()) {
    if (!layers->is_array()) return Bad("\"layers\" is not a list");
    for (size_t i = 0; i < layers->size(); ++i) {
      const json& layer = (*layers)[i];
      const std::string where = absl::StrCat("layers[", i, "]");
      if (!layer.is_object()) return Bad(absl::StrCat(where, " is not an object"));
      auto s = Size(layer, where);
      if (!s.ok()) return s.status();
      if (*s > kMaxBytes - out.size_bytes) return Bad("the layers' sizes add up past a pebibyte");
      out.size_bytes += *s;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Manifest> ParseManifest(absl::string_view body) {
  auto doc = ParseObject(body, "manifest");
  if (!doc.ok()) return doc.status();
  auto media = OptionalString(*doc, "mediaType", "manifest");
  if (!media.ok()) return media.status();
  if (*media == kOciIndex || *media == kDockerList || (media->empty() && doc->contains("manifests"))) {
    return ParseIndex(*doc);
  }
  return ParseImageManifest(*doc);
}

absl::StatusOr<std::string> ChooseFromIndex(const Manifest& index, absl::string_view platform) {
  if (!index.is_index) return absl::InvalidArgumentError("not an index: an image manifest is for one platform");
  std::vector<std::string> offered;
  for (const IndexEntry& e : index.entries) {
    if (e.platform == platform) return e.digest;
    if (offered.size() < 8) offered.push_back(e.platform);
  }
  // A lying index may list thousands: the error names a few.
  if (index.entries.size() > offered.size()) offered.push_back(absl::StrCat("and ", index.entries.size() - offered.size(), " more"));
  return absl::FailedPreconditionError(
      absl::StrCat("no ", platform, " variant (it has: ", offered.empty() ? "none" : absl::StrJoin(offered, ", "), ")"));
}

absl::StatusOr<std::string> ParseConfigPlatform(absl::string_view body) {
  auto doc = ParseObject(body, "image config");
  if (!doc.ok()) return doc.status();
  auto os = OptionalString(*doc, "os", "image config");
  auto arch = OptionalString(*doc, "architecture", "image config");
  if (!os.ok()) return absl::DataLossError(absl::StrCat("image config: \"os\" is not a string"));
  if (!arch.ok()) return absl::DataLossError(absl::StrCat("image config: \"architecture\" is not a string"));
  return absl::StrCat(os->empty() ? "?" : *os, "/", arch->empty() ? "?" : *arch);
}

}  // namespace jc::oci
