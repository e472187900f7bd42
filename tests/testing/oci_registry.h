#pragma once

// A real OCI registry for tests (issue 30): Debian's docker-registry (the CNCF
// distribution registry) on 127.0.0.1, a port of its own, with TLS from a CA of its own
// and a pull credential (htpasswd, bcrypt), as a center's registry would have. Images are
// built here from busybox (tests/testing/make-oci-image.sh) and pushed with skopeo: nothing
// is fetched from outside.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/testing/process.h"

namespace jc::testing {

class OciRegistry {
 public:
  // In `dir` (made): its certificates, credentials, storage and log. `source_dir` is the
  // project's (for scripts/dev-ca.sh and the image script).
  static absl::StatusOr<std::unique_ptr<OciRegistry>> Start(const std::string& dir, const std::string& source_dir);

  const std::string& host() const { return host_; }            // 127.0.0.1:PORT
  const std::string& ca_file() const { return ca_file_; }      // the CA that signed its certificate
  const std::string& auth_file() const { return auth_file_; }  // Docker config.json with its credential

  // Builds an image whose /etc/jc-image holds `text`, for linux/`arch`, and pushes it as
  // host()/repository:tag. Returns its manifest's digest.
  absl::StatusOr<std::string> Push(const std::string& repository, const std::string& tag, const std::string& text,
                                   const std::string& arch = "amd64");
  // The same, with `env` ("NAME=value") for make-oci-image.sh (JC_IMAGE_HOSTILE=1: an image
  // holding device nodes and set-id files, for the attacks of issue 44).
  absl::StatusOr<std::string> PushWith(const std::string& repository, const std::string& tag, const std::string& text,
                                       const std::vector<std::string>& env);
  // Pushes the image `layout_tag` of the OCI layout `layout` (one made elsewhere: the
  // notebook image) as host()/repository:tag. Returns its manifest's digest.
  absl::StatusOr<std::string> PushLayout(const std::string& layout, const std::string& layout_tag,
                                         const std::string& repository, const std::string& tag);

 private:
  OciRegistry() = default;
  absl::StatusOr<std::string> PushImage(const std::string& repository, const std::string& tag, const std::string& text,
                                   const std::string& arch, const std::vector<std::string>& env);
  std::string dir_, source_dir_, host_, ca_file_, ca_dir_, auth_file_;
  std::unique_ptr<Process> server_;
  int pushes_ = 0;
};

}  // namespace jc::testing
