#pragma once

// A center's own registry as the image mover for images with content (issue 30 item 5):
// staging an image copies it by digest from the registry its reference names into the
// center's (skopeo copy --preserve-digests: the same manifest, the same digest), and the
// center's replicas then pull it from there — near, and even when the source is out of
// reach — under the digest the catalog resolved, so what runs is what was registered.
//
// Center YAML:
//   image_mirror:
//     registry: harbor.bj-1:5000/jointcloud   # host[:port][/prefix]; the source repository goes below it
//     auth_file: /etc/jc/mirror-auth.json     # optional: to push there (Docker's config.json form)
//     cert_dir: /etc/jc/mirror-ca             # optional: its CA (*.crt)
//     source_auth_file: /etc/jc/registries-auth.json  # optional: to pull from the sources
//     source_cert_dir: /etc/jc/registries-ca         # optional
// The center's hosts must trust and may pull from the mirror (nexec agents'
// --registry_cert_dir and --registry_auth_file, the Slurm adapter's likewise).

#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"

namespace jc::adapter {

struct ImageMirrorConfig {
  std::string registry;
  std::string auth_file;
  std::string cert_dir;
  std::string source_auth_file;
  std::string source_cert_dir;
};

class ImageMirror {
 public:
  // `work_dir`: where the copy's output is kept meanwhile.
  ImageMirror(ImageMirrorConfig config, std::string work_dir)
      : config_(std::move(config)), work_dir_(std::move(work_dir)) {}

  bool configured() const { return !config_.registry.empty(); }
  // Where `image` (registry/repository@sha256:...) is in the mirror: registry/prefix/repository@sha256:...
  absl::StatusOr<std::string> MirrorReference(const std::string& image) const;
  // Copies `image` into the mirror by digest (once: a later call for it answers at once);
  // returns the mirror's reference. Errors carry skopeo's reason.
  absl::StatusOr<std::string> Copy(const std::string& image);
  // The mirror's reference when `image` is in the mirror, else nothing (the replica then
  // pulls from the source). Known from this adapter's copies; an image it has not copied
  // since it started is looked up in the mirror once (skopeo inspect), so a restarted
  // adapter still hands out the mirror's copies.
  std::optional<std::string> Copied(const std::string& image) const;

 private:
  ImageMirrorConfig config_;
  std::string work_dir_;
  mutable std::mutex mu_;
  mutable std::set<std::string> copied_;   // source references, under mu_
  mutable std::set<std::string> checked_;  // looked up in the mirror, under mu_
  std::mutex one_copy_at_a_time_;
};

}  // namespace jc::adapter
