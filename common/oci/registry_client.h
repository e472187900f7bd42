#pragma once

// What a registry says an image reference is (the OCI distribution API, as Docker's,
// Harbor's and the CNCF registry's): the digest of the manifest that runs, the platform
// it is for, and its size. Credentials come from a file in Docker's config.json form
// ({"auths": {"host:port": {"auth": base64("user:password")}}}); a registry that answers
// 401 with a Bearer challenge is asked for a pull token first, with those credentials.
//
// A registry is trusted to say what an image is, and with nothing else (docs/security.md,
// "a registry the control plane is configured to trust"; the HTTP side is in
// registry_http.h): one Resolve has one deadline in all and stops when its caller gives
// up; it reads at most max_manifest_bytes of any answer; at most max_concurrent Resolves
// run at once, so registries can never hold every request thread; credentials go only to
// the registry's own origin (never along a redirect, never in clear) and to a token
// service on the registry's own host (or one the credentials file names itself).

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/oci/image_reference.h"
#include "common/oci/registry_http.h"

namespace jc::oci {

struct RegistryOptions {
  std::string ca_file;    // PEM of CAs trusted besides the system's; empty: the system's
  std::string auth_file;  // Docker's config.json form; empty: no credentials
  std::string platform = "linux/amd64";  // what the federation's hosts run
  // One Resolve in all: its token, manifests and config, however the registry drips them.
  absl::Duration timeout = absl::Seconds(10);
  // The most read of any one answer (a manifest, an index, a config, a token): past it the
  // answer is refused and the connection closed.
  size_t max_manifest_bytes = 4 << 20;
  // Resolves at once; one more is refused at once with ResourceExhausted.
  int max_concurrent = 8;
};

struct ResolvedImage {
  std::string digest;    // of the manifest for `platform`: what runs
  std::string platform;  // "linux/amd64"
  int64_t size_bytes = 0;  // config and layers, compressed
};

class RegistryClient {
 public:
  // InvalidArgument when the credentials file cannot be read.
  static absl::StatusOr<RegistryClient> Create(RegistryOptions options);

  // Errors say what a user can act on: InvalidArgument for an unknown reference,
  // FailedPrecondition for a platform the image lacks or an answer past the size limit,
  // PermissionDenied for credentials the registry refused (or none given) or a redirect to
  // plain HTTP, DataLoss for a manifest that does not match its digest or is malformed,
  // Unavailable for a registry that cannot be reached, DeadlineExceeded for one that did not
  // answer in `timeout`, Cancelled when `cancelled` said so, ResourceExhausted when
  // max_concurrent Resolves are under way.
  absl::StatusOr<ResolvedImage> Resolve(const ImageReference& ref, Cancelled cancelled = nullptr) const;

  // The server is stopping: every Resolve under way ends now (Cancelled), and later ones are
  // refused (Unavailable), so no registry holds up the shutdown.
  void StopAll();

 private:
  struct Session;
  struct Slots;
  explicit RegistryClient(RegistryOptions options);
  absl::StatusOr<HttpAnswer> Get(Session& s, const std::string& path, const std::string& accept,
                                 absl::string_view what) const;
  absl::StatusOr<std::string> PullToken(Session& s, const std::string& challenge) const;
  // The manifest `selector` names, checked against its digest: (body, digest).
  absl::StatusOr<std::pair<std::string, std::string>> FetchManifest(Session& s, const std::string& selector) const;
  // The credentials (base64 user:password) configured for host[:port], if any.
  const std::string* Basic(const std::string& host) const;

  RegistryOptions options_;
  std::map<std::string, std::string> basic_;  // host -> base64(user:password)
  std::shared_ptr<Slots> slots_;
};

// sha256:<hex> of `data`.
std::string Sha256Digest(const std::string& data);

}  // namespace jc::oci
