#pragma once

// The agent's image store, as nexec-image-run lays it out: <store>/<hex>/ per image (its
// manifest digest's hex), with rootfs/, size (bytes) and ready (there once it is usable;
// its mtime is the last use). What is ready is reported to the master every heartbeat, so
// adapters can say which images a center holds (CenterInfo.image_digests).

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace jc::nexec {

// "sha256:<hex>" of every ready image in `store`, sorted; none when it cannot be read.
std::vector<std::string> ImagesInStore(const std::string& store);

// Images are unpacked without privilege (issue 44; nexec-image-run says how). Whether
// this host allows it: `store` can be bound onto itself nodev,nosuid in a mount namespace
// of its own (tried in a child, which leaves nothing behind), and `unpack_uid` is a uid no
// account has (it must own nothing and run nothing: what umoci unpacks is that uid's until
// it is given to root). The reason otherwise, for the agent to say it runs no images.
absl::Status CheckUnprivilegedUnpack(const std::string& store, uid_t unpack_uid);

}  // namespace jc::nexec
