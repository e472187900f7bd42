// libFuzzer harness: a center's YAML configuration (adapters/sdk/center_config.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "adapters/sdk/center_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)jc::adapter::ParseCenterConfig(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
