// libFuzzer harness: resource quantities ("500m", "64Gi", "1.5") as REST bodies and center
// YAML carry them. Parse must return a value or an error, never crash or overflow.
#include <cstddef>
#include <cstdint>

#include "common/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto q = jc::Quantity::Parse(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (q.ok()) (void)q->CeilMebibytes();
  return 0;
}
