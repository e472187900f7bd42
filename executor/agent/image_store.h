#pragma once

// The agent's image store, as nexec-image-run lays it out: <store>/<hex>/ per image (its
// manifest digest's hex), with rootfs/, size (bytes) and ready (there once it is usable;
// its mtime is the last use). What is ready is reported to the master every heartbeat, so
// adapters can say which images a center holds (CenterInfo.image_digests).

#include <string>
#include <vector>

namespace jc::nexec {

// "sha256:<hex>" of every ready image in `store`, sorted; none when it cannot be read.
std::vector<std::string> ImagesInStore(const std::string& store);

}  // namespace jc::nexec
