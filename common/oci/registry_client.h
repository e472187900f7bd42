#pragma once

// What a registry says an image reference is (the OCI distribution API, as Docker's,
// Harbor's and the CNCF registry's): the digest of the manifest that runs, the platform
// it is for, and its size. Credentials come from a file in Docker's config.json form
// ({"auths": {"host:port": {"auth": base64("user:password")}}}); a registry that answers
// 401 with a Bearer challenge is asked for a pull token first, with those credentials.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/oci/image_reference.h"

namespace httplib {
class SSLClient;
}

namespace jc::oci {

struct RegistryOptions {
  std::string ca_file;    // PEM of CAs trusted besides the system's; empty: the system's
  std::string auth_file;  // Docker's config.json form; empty: no credentials
  std::string platform = "linux/amd64";  // what the federation's hosts run
  absl::Duration timeout = absl::Seconds(10);
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

  // Errors say what a user can act on: InvalidArgument for an unknown reference or a
  // platform the image lacks, PermissionDenied for credentials the registry refused (or
  // none given), DataLoss for a manifest that does not match its digest, Unavailable or
  // DeadlineExceeded for a registry that cannot be reached or did not answer.
  absl::StatusOr<ResolvedImage> Resolve(const ImageReference& ref) const;

 private:
  explicit RegistryClient(RegistryOptions options) : options_(std::move(options)) {}
  struct Answer {
    int status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // lower-case names
  };
  absl::StatusOr<Answer> Get(const ImageReference& ref, const std::string& path, const std::string& accept) const;
  absl::StatusOr<std::string> PullToken(const ImageReference& ref, const std::string& challenge) const;
  // A client of host[:port] over TLS, verifying the server against the system's CAs and
  // ca_file, with the timeouts.
  std::unique_ptr<httplib::SSLClient> Connect(const std::string& host) const;

  RegistryOptions options_;
  std::map<std::string, std::string> basic_;  // host -> base64(user:password)
};

// sha256:<hex> of `data`.
std::string Sha256Digest(const std::string& data);

}  // namespace jc::oci
