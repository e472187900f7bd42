#include "executor/agent/image_store.h"

#include <algorithm>
#include <filesystem>

namespace jc::nexec {

std::vector<std::string> ImagesInStore(const std::string& store) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(store, ec)) {
    const std::string name = entry.path().filename().string();
    const bool hex = name.size() == 64 && std::all_of(name.begin(), name.end(), [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                     });
    if (hex && std::filesystem::exists(entry.path() / "ready", ec)) out.push_back("sha256:" + name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace jc::nexec
