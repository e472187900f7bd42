#include "common/oci/registry_client.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace jc::oci {
namespace {

using json = nlohmann::json;

constexpr char kOciManifest[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kOciIndex[] = "application/vnd.oci.image.index.v1+json";
constexpr char kDockerManifest[] = "application/vnd.docker.distribution.manifest.v2+json";
constexpr char kDockerList[] = "application/vnd.docker.distribution.manifest.list.v2+json";

// The parameters of a WWW-Authenticate challenge: Bearer realm="...",service="...".
std::map<std::string, std::string> ChallengeParams(absl::string_view challenge) {
  std::map<std::string, std::string> out;
  if (auto space = challenge.find(' '); space != absl::string_view::npos) challenge.remove_prefix(space + 1);
  for (absl::string_view item : absl::StrSplit(challenge, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::string value(absl::StripAsciiWhitespace(kv.second));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    out[absl::AsciiStrToLower(absl::StripAsciiWhitespace(kv.first))] = value;
  }
  return out;
}

// host[:port] -> (host, port); 443 without one.
std::pair<std::string, int> HostPort(const std::string& host) {
  auto colon = host.rfind(':');
  int port = 443;
  if (colon != std::string::npos && absl::SimpleAtoi(host.substr(colon + 1), &port)) return {host.substr(0, colon), port};
  return {host, 443};
}

}  // namespace

std::string Sha256Digest(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return absl::StrCat("sha256:", absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(md), len)));
}

absl::StatusOr<RegistryClient> RegistryClient::Create(RegistryOptions options) {
  RegistryClient client(std::move(options));
  if (client.options_.auth_file.empty()) return client;
  std::ifstream in(client.options_.auth_file);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the registry credentials ", client.options_.auth_file));
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, false);
  if (!doc.is_object() || !doc.contains("auths") || !doc["auths"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(client.options_.auth_file,
                                                   ": expected Docker's config.json form, {\"auths\": {\"host\": {\"auth\": ...}}}"));
  }
  for (const auto& [host, entry] : doc["auths"].items()) {
    std::string auth = entry.value("auth", "");
    if (auth.empty() && entry.contains("username")) {
      auth = absl::Base64Escape(absl::StrCat(entry.value("username", ""), ":", entry.value("password", "")));
    }
    std::string name = host;
    for (const char* scheme : {"https://", "http://"}) {
      if (absl::StartsWith(name, scheme)) name = name.substr(std::strlen(scheme));
    }
    if (auto slash = name.find('/'); slash != std::string::npos) name = name.substr(0, slash);
    if (!auth.empty()) client.basic_[name] = auth;
  }
  return client;
}

std::unique_ptr<httplib::SSLClient> RegistryClient::Connect(const std::string& host) const {
  auto [name, port] = HostPort(host);
  auto client = std::make_unique<httplib::SSLClient>(name, port);
  client->enable_server_certificate_verification(true);
  if (!options_.ca_file.empty()) client->set_ca_cert_path(options_.ca_file.c_str());
  const int seconds = static_cast<int>(absl::ToInt64Seconds(options_.timeout));
  client->set_connection_timeout(seconds, 0);
  client->set_read_timeout(seconds, 0);
  return client;
}

absl::StatusOr<std::string> RegistryClient::PullToken(const ImageReference& ref, const std::string& challenge) const {
  auto params = ChallengeParams(challenge);
  const std::string realm = params["realm"];
  if (!absl::StartsWith(realm, "https://")) {
    return absl::PermissionDeniedError(absl::StrCat("registry ", ref.registry, " asks for a token from \"", realm,
                                                    "\", which is not an https:// address"));
  }
  std::string rest = realm.substr(8);
  std::string host = rest.substr(0, rest.find('/'));
  std::string path = rest.find('/') == std::string::npos ? "/" : rest.substr(rest.find('/'));
  auto client_ptr = Connect(host);
  httplib::SSLClient& client = *client_ptr;
  httplib::Headers headers;
  if (auto basic = basic_.find(ref.registry); basic != basic_.end()) {
    headers.emplace("Authorization", "Basic " + basic->second);
  }
  std::string query = absl::StrCat(path, path.find('?') == std::string::npos ? "?" : "&", "service=",
                                   httplib::detail::encode_query_param(params["service"]), "&scope=",
                                   httplib::detail::encode_query_param(absl::StrCat("repository:", ref.repository, ":pull")));
  auto res = client.Get(query.c_str(), headers);
  if (!res) return absl::UnavailableError(absl::StrCat("cannot reach the token service of ", ref.registry, " (", realm, ")"));
  if (res->status == 401 || res->status == 403) {
    return absl::PermissionDeniedError(absl::StrCat("registry ", ref.registry, " refused ",
                                                    basic_.count(ref.registry) ? "the credentials" : "to give a token without credentials",
                                                    " for ", ref.repository));
  }
  json doc = json::parse(res->body, nullptr, false);
  std::string token = doc.is_object() ? doc.value("token", doc.value("access_token", "")) : "";
  if (res->status != 200 || token.empty()) {
    return absl::UnavailableError(absl::StrCat("the token service of ", ref.registry, " answered ", res->status));
  }
  return token;
}

absl::StatusOr<RegistryClient::Answer> RegistryClient::Get(const ImageReference& ref, const std::string& path,
                                                           const std::string& accept) const {
  auto client_ptr = Connect(ref.ApiHost());
  httplib::SSLClient& client = *client_ptr;
  client.set_follow_location(true);  // blobs may be served from elsewhere
  httplib::Headers headers{{"Accept", accept}};
  auto basic = basic_.find(ref.registry);
  if (basic != basic_.end()) headers.emplace("Authorization", "Basic " + basic->second);
  for (int round = 0; round < 2; ++round) {
    auto res = client.Get(path.c_str(), headers);
    if (!res) {
      if (res.error() == httplib::Error::Read || res.error() == httplib::Error::Connection) {
        return absl::UnavailableError(absl::StrCat("cannot reach registry ", ref.registry, ": ", httplib::to_string(res.error())));
      }
      return absl::UnavailableError(absl::StrCat("registry ", ref.registry, ": ", httplib::to_string(res.error()),
                                                 res.error() == httplib::Error::SSLServerVerification
                                                     ? " (its certificate is not signed by a trusted CA: --registry_ca_file)"
                                                     : ""));
    }
    if (res->status == 401 && round == 0) {
      std::string challenge = res->get_header_value("WWW-Authenticate");
      if (absl::StartsWithIgnoreCase(challenge, "Bearer")) {
        JC_ASSIGN_OR_RETURN(std::string token, PullToken(ref, challenge));
        headers.erase("Authorization");
        headers.emplace("Authorization", "Bearer " + token);
        continue;
      }
    }
    if (res->status == 401 || res->status == 403) {
      return absl::PermissionDeniedError(absl::StrCat(
          "no access to ", ref.repository, " at registry ", ref.registry, ": ",
          basic == basic_.end() ? "it wants credentials and none are configured for it (--registry_auth_file)"
                                : "it refused the configured credentials"));
    }
    Answer answer{res->status, res->body, {}};
    for (const auto& [k, v] : res->headers) answer.headers[absl::AsciiStrToLower(k)] = v;
    return answer;
  }
  return absl::PermissionDeniedError(absl::StrCat("no access to ", ref.repository, " at registry ", ref.registry));
}

absl::StatusOr<ResolvedImage> RegistryClient::Resolve(const ImageReference& ref) const {
  const std::string accept = absl::StrJoin({kOciManifest, kOciIndex, kDockerManifest, kDockerList}, ", ");
  auto fetch = [&](const std::string& selector) -> absl::StatusOr<std::pair<json, std::string>> {
    JC_ASSIGN_OR_RETURN(Answer a, Get(ref, absl::StrCat("/v2/", ref.repository, "/manifests/", selector), accept));
    if (a.status == 404) {
      return absl::InvalidArgumentError(absl::StrCat("unknown image reference ", ref.ToString(), ": registry ",
                                                     ref.registry, " has no ", ref.repository, " ", selector));
    }
    if (a.status != 200) {
      return absl::UnavailableError(absl::StrCat("registry ", ref.registry, " answered ", a.status, " for ",
                                                 ref.repository, " ", selector));
    }
    // The digest is of the bytes as served: they must be what the registry names, and
    // what the reference pins.
    std::string digest = Sha256Digest(a.body);
    std::string named = a.headers.count("docker-content-digest") ? a.headers["docker-content-digest"] : "";
    if ((!named.empty() && named != digest) || (IsDigest(selector) && selector != digest)) {
      return absl::DataLossError(absl::StrCat("registry ", ref.registry, " served a manifest of ", ref.repository,
                                              " whose digest is ", digest, ", not ", named.empty() ? selector : named));
    }
    json doc = json::parse(a.body, nullptr, false);
    if (!doc.is_object()) return absl::DataLossError(absl::StrCat("registry ", ref.registry, " served a manifest that is not JSON"));
    return std::make_pair(std::move(doc), digest);
  };
  JC_ASSIGN_OR_RETURN(auto top, fetch(ref.Selector()));
  auto [manifest, digest] = std::move(top);
  std::string media = manifest.value("mediaType", "");
  if (media == kOciIndex || media == kDockerList || (media.empty() && manifest.contains("manifests"))) {
    // An index: the entry for the federation's platform is what runs.
    std::vector<std::string> offered;
    std::string chosen;
    for (const auto& m : manifest.value("manifests", json::array())) {
      const json p = m.value("platform", json::object());
      std::string platform = absl::StrCat(p.value("os", "?"), "/", p.value("architecture", "?"));
      offered.push_back(platform);
      if (platform == options_.platform && chosen.empty()) chosen = m.value("digest", "");
    }
    if (chosen.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("image ", ref.ToString(), " has no ", options_.platform,
                                                        " variant (it has: ", absl::StrJoin(offered, ", "), ")"));
    }
    JC_ASSIGN_OR_RETURN(auto one, fetch(chosen));
    manifest = std::move(one.first);
    digest = std::move(one.second);
  }
  ResolvedImage out;
  out.digest = digest;
  const json config = manifest.value("config", json::object());
  out.size_bytes = config.value("size", int64_t{0});
  for (const auto& layer : manifest.value("layers", json::array())) out.size_bytes += layer.value("size", int64_t{0});
  // The platform an image manifest is for is in its config.
  const std::string config_digest = config.value("digest", "");
  if (!IsDigest(config_digest)) return absl::DataLossError(absl::StrCat("image ", ref.ToString(), " has no config"));
  JC_ASSIGN_OR_RETURN(Answer c, Get(ref, absl::StrCat("/v2/", ref.repository, "/blobs/", config_digest), "*/*"));
  if (c.status != 200) {
    return absl::UnavailableError(absl::StrCat("registry ", ref.registry, " answered ", c.status, " for the config of ",
                                               ref.ToString()));
  }
  if (Sha256Digest(c.body) != config_digest) {
    return absl::DataLossError(absl::StrCat("registry ", ref.registry, " served a config of ", ref.ToString(),
                                            " that does not match its digest"));
  }
  json cfg = json::parse(c.body, nullptr, false);
  out.platform = cfg.is_object() ? absl::StrCat(cfg.value("os", "?"), "/", cfg.value("architecture", "?")) : "?/?";
  if (out.platform != options_.platform) {
    return absl::FailedPreconditionError(absl::StrCat("image ", ref.ToString(), " is for ", out.platform, ", not ",
                                                      options_.platform, " as the federation's hosts"));
  }
  return out;
}

}  // namespace jc::oci
