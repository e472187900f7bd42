#pragma once

// What a registry serves for an image reference, read as pure functions of the bytes (so
// that tests/fuzz/oci_manifest_fuzz.cc can feed them anything): OCI image manifests and
// indexes, Docker's v2 manifests and manifest lists, and an image's config. A registry's
// document is outside input: every field is checked for its JSON type, and a document of
// the wrong shape is a DataLoss error naming the field — never a library exception, which
// would escape an RPC handler as "500 Unexpected error in RPC handling" (issue 44 hole 13).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::oci {

// One entry of an index: a manifest and the platform it is for ("os/architecture"; "?"
// for a part the entry leaves out).
struct IndexEntry {
  std::string digest;
  std::string platform;
};

// A manifest or an index, as far as the control plane reads it.
struct Manifest {
  bool is_index = false;
  std::vector<IndexEntry> entries;  // an index's
  std::string config_digest;        // an image manifest's
  int64_t size_bytes = 0;           // an image manifest's config and layers, compressed
};

// DataLoss naming what is wrong: not a JSON object, nesting deeper than a manifest has, a
// field of the wrong type ("manifests": 5, "size": "x", "layers": {}), a negative or
// absurd size, an entry or config without a digest of the form sha256:<64 hex>.
absl::StatusOr<Manifest> ParseManifest(absl::string_view body);

// The digest of the entry for `platform` ("linux/amd64"), the first when several are.
// FailedPrecondition listing what the index offers when none is for it.
absl::StatusOr<std::string> ChooseFromIndex(const Manifest& index, absl::string_view platform);

// The platform ("os/architecture") an image's config says it is for; DataLoss for a config
// that is not a JSON object or whose os or architecture is not a string.
absl::StatusOr<std::string> ParseConfigPlatform(absl::string_view body);

}  // namespace jc::oci
