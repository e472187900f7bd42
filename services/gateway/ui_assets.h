#pragma once

// The operator console's static files (services/gateway/ui/), built into the binary by
// cmake/embed_files.cmake and served by the gateway at /ui/.

#include <cstddef>
#include <vector>

namespace jc::gateway {

struct UiAsset {
  const char* path;  // "index.html"
  const char* content_type;
  const unsigned char* data;
  size_t size;
};

const std::vector<UiAsset>& UiAssets();

}  // namespace jc::gateway
