#include "common/oci/registry_client.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/oci/manifest.h"
#include "common/oci/token_auth.h"
#include "common/status_macros.h"

namespace jc::oci {
namespace {

using json = nlohmann::json;

constexpr char kOciManifest[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kOciIndex[] = "application/vnd.oci.image.index.v1+json";
constexpr char kDockerManifest[] = "application/vnd.docker.distribution.manifest.v2+json";
constexpr char kDockerList[] = "application/vnd.docker.distribution.manifest.list.v2+json";

// `s` with its message prefixed.
absl::Status Prefixed(const absl::Status& s, absl::string_view prefix) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

}  // namespace

// Resolves under way, against max_concurrent.
struct RegistryClient::Slots {
  absl::Mutex mu;
  int in_use ABSL_GUARDED_BY(mu) = 0;
  std::atomic<bool> stopping{false};  // read by every call's watchdog
};

// One Resolve: its call (deadline, cancellation, watchdog), where the registry's API is,
// and the Authorization it has earned so far (Basic, then a Bearer token once asked).
struct RegistryClient::Session {
  Session(const ImageReference& r, absl::Duration timeout, Cancelled cancelled)
      : ref(r), call(timeout, std::move(cancelled)) {}
  const ImageReference& ref;
  RegistryCall call;
  Origin origin;
  std::string authorization;
  bool has_credentials = false;
  std::string withheld_from;  // a token service on another host, asked without credentials
};

std::string Sha256Digest(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return absl::StrCat("sha256:", absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(md), len)));
}

RegistryClient::RegistryClient(RegistryOptions options)
    : options_(std::move(options)), slots_(std::make_shared<Slots>()) {}

absl::StatusOr<RegistryClient> RegistryClient::Create(RegistryOptions options) {
  if (options.max_concurrent < 1) return absl::InvalidArgumentError("registry client: max_concurrent must be at least 1");
  if (options.max_manifest_bytes < 1024) {
    return absl::InvalidArgumentError("registry client: max_manifest_bytes must be at least 1024");
  }
  RegistryClient client(std::move(options));
  if (client.options_.auth_file.empty()) return client;
  std::ifstream in(client.options_.auth_file);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the registry credentials ", client.options_.auth_file));
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, false);
  const std::string form = absl::StrCat(client.options_.auth_file,
                                        ": expected Docker's config.json form, {\"auths\": {\"host\": {\"auth\": ...}}}");
  if (!doc.is_object() || !doc.contains("auths") || !doc["auths"].is_object()) return absl::InvalidArgumentError(form);
  for (const auto& item : doc["auths"].items()) {
    const std::string& host = item.key();
    const json& entry = item.value();  // a plain reference: lambdas may not capture bindings (C++17)
    // Every field is type-checked: json's value() throws on a wrong type.
    auto str = [&](const char* key) -> std::string {
      auto it = entry.find(key);
      return it != entry.end() && it->is_string() ? it->get<std::string>() : "";
    };
    if (!entry.is_object()) return absl::InvalidArgumentError(form);
    std::string auth = str("auth");
    if (auth.empty() && !str("username").empty()) auth = absl::Base64Escape(absl::StrCat(str("username"), ":", str("password")));
    std::string name = host;
    for (const char* scheme : {"https://", "http://"}) {
      if (absl::StartsWith(name, scheme)) name = name.substr(std::strlen(scheme));
    }
    if (auto slash = name.find('/'); slash != std::string::npos) name = name.substr(0, slash);
    if (!auth.empty()) client.basic_[absl::AsciiStrToLower(name)] = auth;
  }
  return client;
}

const std::string* RegistryClient::Basic(const std::string& host) const {
  auto it = basic_.find(absl::AsciiStrToLower(host));
  return it == basic_.end() ? nullptr : &it->second;
}

// The token service a registry names gets credentials only when it is on the registry's own
// host (any port: a registry and its token service often share a host, as docker_auth on
// :5001), or when the credentials file has an entry for the token service's host itself
// (the operator said so; that entry's credentials are sent). A lying registry that names
// another host's realm gets a token asked without credentials — and so nothing secret.
absl::StatusOr<std::string> RegistryClient::PullToken(Session& s, const std::string& header) const {
  const ImageReference& ref = s.ref;
  auto challenge = ParseChallenge(header);
  if (!challenge.ok()) return Prefixed(challenge.status(), absl::StrCat("registry ", ref.registry, ": "));
  const std::string realm = challenge->params["realm"];
  if (!absl::StartsWithIgnoreCase(realm, "https://")) {
    return absl::PermissionDeniedError(absl::StrCat("registry ", ref.registry, " asks for a token from \"",
                                                    realm.substr(0, 200), "\", which is not an https:// address"));
  }
  auto at = ParseLocation(realm, s.origin);
  if (!at.ok()) {
    return absl::DataLossError(absl::StrCat("registry ", ref.registry, " names a token service at \"", realm.substr(0, 200),
                                            "\": ", at.status().message()));
  }
  std::string authorization;
  const std::string* basic = Basic(at->origin.port == 443 ? at->origin.host : at->origin.ToString());
  if (basic == nullptr && at->origin.host == s.origin.host) basic = Basic(ref.registry);
  if (basic != nullptr) authorization = "Basic " + *basic;
  const bool withheld = basic == nullptr && Basic(ref.registry) != nullptr;
  if (withheld) s.withheld_from = at->origin.ToString();
  std::string path = at->path;
  absl::StrAppend(&path, absl::StrContains(path, '?') ? "&" : "?",
                  "service=", httplib::detail::encode_query_param(challenge->params["service"]), "&scope=",
                  httplib::detail::encode_query_param(absl::StrCat("repository:", ref.repository, ":pull")));
  JC_ASSIGN_OR_RETURN(HttpAnswer answer, Fetch(s.call, {options_.ca_file, options_.max_manifest_bytes}, at->origin, path,
                                               {}, authorization, ref.registry, "a pull token"));
  if (answer.status == 401 || answer.status == 403) {
    return absl::PermissionDeniedError(absl::StrCat(
        "registry ", ref.registry, " refused ",
        withheld ? absl::StrCat("to give a token without credentials for ", ref.repository,
                                "; its token service is on another host (", at->origin.ToString(),
                                "), and the registry's credentials go only to the registry's own host (add an entry "
                                "for that host to --registry_auth_file if it is yours)")
        : basic != nullptr ? absl::StrCat("the credentials for ", ref.repository)
                           : absl::StrCat("to give a token without credentials for ", ref.repository)));
  }
  if (answer.status != 200) {
    return absl::UnavailableError(absl::StrCat("the token service of ", ref.registry, " answered ", answer.status));
  }
  auto token = ParseTokenAnswer(answer.body);
  if (!token.ok()) return Prefixed(token.status(), absl::StrCat("the token service of ", ref.registry, ": "));
  return token;
}

absl::StatusOr<HttpAnswer> RegistryClient::Get(Session& s, const std::string& path, const std::string& accept,
                                               absl::string_view what) const {
  const FetchOptions fetch{options_.ca_file, options_.max_manifest_bytes};
  for (int round = 0; round < 2; ++round) {
    JC_ASSIGN_OR_RETURN(HttpAnswer answer,
                        Fetch(s.call, fetch, s.origin, path, {{"Accept", accept}}, s.authorization, s.ref.registry, what));
    if (answer.status == 401 && round == 0) {
      std::string challenge = answer.Header("www-authenticate");
      if (absl::StartsWithIgnoreCase(challenge, "Bearer")) {
        JC_ASSIGN_OR_RETURN(std::string token, PullToken(s, challenge));
        s.authorization = "Bearer " + token;
        continue;
      }
    }
    if (answer.status == 401 || answer.status == 403) {
      return absl::PermissionDeniedError(absl::StrCat(
          "no access to ", s.ref.repository, " at registry ", s.ref.registry, ": ",
          !s.has_credentials ? "it wants credentials and none are configured for it (--registry_auth_file)"
          : !s.withheld_from.empty()
              ? absl::StrCat("its token service is on another host (", s.withheld_from,
                             "), and the registry's credentials go only to the registry's own host (add an entry for "
                             "that host to --registry_auth_file if it is yours)")
              : "it refused the configured credentials"));
    }
    return answer;
  }
  return absl::PermissionDeniedError(absl::StrCat("no access to ", s.ref.repository, " at registry ", s.ref.registry));
}

absl::StatusOr<std::pair<std::string, std::string>> RegistryClient::FetchManifest(Session& s,
                                                                                  const std::string& selector) const {
  const ImageReference& ref = s.ref;
  const std::string accept = absl::StrJoin({kOciManifest, kOciIndex, kDockerManifest, kDockerList}, ", ");
  JC_ASSIGN_OR_RETURN(HttpAnswer a, Get(s, absl::StrCat("/v2/", ref.repository, "/manifests/", selector), accept,
                                        absl::StrCat("the manifest of ", ref.repository, " ", selector)));
  if (a.status == 404) {
    return absl::InvalidArgumentError(absl::StrCat("unknown image reference ", ref.ToString(), ": registry ",
                                                   ref.registry, " has no ", ref.repository, " ", selector));
  }
  if (a.status != 200) {
    return absl::UnavailableError(absl::StrCat("registry ", ref.registry, " answered ", a.status, " for ",
                                               ref.repository, " ", selector));
  }
  // The digest is of the bytes as served: they must be what the registry names, and what
  // the reference pins.
  std::string digest = Sha256Digest(a.body);
  std::string named = a.Header("docker-content-digest");
  if ((!named.empty() && named != digest) || (IsDigest(selector) && selector != digest)) {
    return absl::DataLossError(absl::StrCat("registry ", ref.registry, " served a manifest of ", ref.repository,
                                            " whose digest is ", digest, ", not ",
                                            named.empty() ? selector : named.substr(0, 100)));
  }
  return std::make_pair(std::move(a.body), std::move(digest));
}

void RegistryClient::StopAll() { slots_->stopping = true; }

absl::StatusOr<ResolvedImage> RegistryClient::Resolve(const ImageReference& ref, Cancelled cancelled) const {
  // A few resolutions at once, never every request thread: past that, refuse at once.
  {
    absl::MutexLock lock(&slots_->mu);
    if (slots_->stopping) return absl::UnavailableError("the control plane is stopping: it asks no registry now");
    if (slots_->in_use >= options_.max_concurrent) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the control plane is already asking registries about ", options_.max_concurrent,
                       " image references (--registry_max_concurrent); try again shortly"));
    }
    ++slots_->in_use;
  }
  struct Release {
    Slots* slots;
    ~Release() {
      absl::MutexLock lock(&slots->mu);
      --slots->in_use;
    }
  } release{slots_.get()};

  auto origin = ParseHostPort(ref.ApiHost());
  if (!origin.ok()) return absl::InvalidArgumentError(absl::StrCat("image reference ", ref.ToString(), ": ", origin.status().message()));
  // The caller's cancellation, and the server's stopping.
  Session s(ref, options_.timeout, [slots = slots_, cancelled = std::move(cancelled)] {
    return slots->stopping.load() || (cancelled && cancelled());
  });
  s.origin = *origin;
  if (const std::string* basic = Basic(ref.registry)) {
    s.authorization = "Basic " + *basic;
    s.has_credentials = true;
  }
  const std::string served = absl::StrCat("registry ", ref.registry, " served ");

  JC_ASSIGN_OR_RETURN(auto top, FetchManifest(s, ref.Selector()));
  auto manifest = ParseManifest(top.first);
  if (!manifest.ok()) return Prefixed(manifest.status(), absl::StrCat(served, "a malformed manifest of ", ref.ToString(), ": "));
  std::string digest = std::move(top.second);
  if (manifest->is_index) {
    // An index: the entry for the federation's platform is what runs.
    auto chosen = ChooseFromIndex(*manifest, options_.platform);
    if (!chosen.ok()) return Prefixed(chosen.status(), absl::StrCat("image ", ref.ToString(), " has "));
    JC_ASSIGN_OR_RETURN(auto one, FetchManifest(s, *chosen));
    manifest = ParseManifest(one.first);
    if (!manifest.ok()) return Prefixed(manifest.status(), absl::StrCat(served, "a malformed manifest of ", ref.ToString(), ": "));
    if (manifest->is_index) {
      return absl::DataLossError(absl::StrCat(served, "an index of ", ref.ToString(), " whose ", options_.platform,
                                              " entry is an index again"));
    }
    digest = std::move(one.second);
  }
  ResolvedImage out;
  out.digest = digest;
  out.size_bytes = manifest->size_bytes;
  // The platform an image manifest is for is in its config.
  const std::string& config_digest = manifest->config_digest;
  JC_ASSIGN_OR_RETURN(HttpAnswer c, Get(s, absl::StrCat("/v2/", ref.repository, "/blobs/", config_digest), "*/*",
                                        absl::StrCat("the config of ", ref.ToString())));
  if (c.status != 200) {
    return absl::UnavailableError(absl::StrCat("registry ", ref.registry, " answered ", c.status, " for the config of ",
                                               ref.ToString()));
  }
  if (Sha256Digest(c.body) != config_digest) {
    return absl::DataLossError(absl::StrCat(served, "a config of ", ref.ToString(), " that does not match its digest"));
  }
  auto platform = ParseConfigPlatform(c.body);
  if (!platform.ok()) return Prefixed(platform.status(), absl::StrCat(served, "a malformed config of ", ref.ToString(), ": "));
  out.platform = *platform;
  if (out.platform != options_.platform) {
    return absl::FailedPreconditionError(absl::StrCat("image ", ref.ToString(), " is for ", out.platform, ", not ",
                                                      options_.platform, " as the federation's hosts"));
  }
  return out;
}

}  // namespace jc::oci
