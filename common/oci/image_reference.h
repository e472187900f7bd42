#pragma once

// An OCI image reference as users write it (`registry/repository:tag`, `...@sha256:...`),
// in the normalised form registries are asked with: Docker's rules (no registry: docker.io;
// a one-part repository there: library/<name>; no tag: latest).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::oci {

struct ImageReference {
  std::string registry;    // host[:port], e.g. "registry.example.com:5000"
  std::string repository;  // e.g. "team/pytorch"
  std::string tag;         // empty when pinned by digest alone
  std::string digest;      // "sha256:<64 hex>", or empty

  // InvalidArgument naming what is wrong: an empty reference, an upper-case repository, a
  // tag or digest of the wrong shape.
  static absl::StatusOr<ImageReference> Parse(absl::string_view text);
  // registry/repository[:tag][@digest]
  std::string ToString() const;
  // What a manifest is asked by: the digest when pinned, else the tag.
  const std::string& Selector() const { return digest.empty() ? tag : digest; }
  // The host the registry's API answers at (docker.io's is registry-1.docker.io).
  std::string ApiHost() const;
};

// Whether `text` is "sha256:" and 64 lower-case hex digits.
bool IsDigest(absl::string_view text);

}  // namespace jc::oci
