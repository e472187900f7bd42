// libFuzzer harness: what a registry serves for an image reference (issue 44 hole 13):
// manifests, indexes (and the choice of the federation's platform in one), and image
// configs. Any bytes must give a manifest or a clear error, never an exception (one escaped
// RPC handlers as "500 Unexpected error in RPC handling"), a crash or deep recursion.
#include <cstddef>
#include <cstdint>

#include "common/oci/image_reference.h"
#include "common/oci/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view body(reinterpret_cast<const char*>(data), size);
  auto manifest = jc::oci::ParseManifest(body);
  if (manifest.ok()) {
    if (manifest->size_bytes < 0 || manifest->size_bytes > (int64_t{1} << 50)) __builtin_trap();
    if (manifest->is_index) {
      for (const auto& e : manifest->entries) {
        if (!jc::oci::IsDigest(e.digest)) __builtin_trap();
      }
      auto chosen = jc::oci::ChooseFromIndex(*manifest, "linux/amd64");
      if (chosen.ok() && !jc::oci::IsDigest(*chosen)) __builtin_trap();
    } else if (!jc::oci::IsDigest(manifest->config_digest)) {
      __builtin_trap();
    }
  }
  (void)jc::oci::ParseConfigPlatform(body);
  return 0;
}
