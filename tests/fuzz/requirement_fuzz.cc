// libFuzzer harness: nexec requirement strings (-R "select[...] rusage[...] span[...]"),
// which any submitter sends to the master.
#include <cstddef>
#include <cstdint>

#include "executor/reqstr/requirement.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)jc::nexec::ParseRequirement(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
