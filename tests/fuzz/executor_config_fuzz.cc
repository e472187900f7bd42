// libFuzzer harness: the nexec master's YAML configuration (queues, host types, hosts).
#include <cstddef>
#include <cstdint>
#include <string>

#include "executor/master/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)jc::nexec::ParseConfig(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
