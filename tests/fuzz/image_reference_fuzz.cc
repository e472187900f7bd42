// libFuzzer harness: OCI image references as users write them in an image's `reference`
// (issue 44). Parse must return a reference or an error, never crash; a reference it
// accepts must print to a text that parses back to the same reference.
#include <cstddef>
#include <cstdint>

#include "common/oci/image_reference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto ref = jc::oci::ImageReference::Parse(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!ref.ok()) return 0;
  auto again = jc::oci::ImageReference::Parse(ref->ToString());
  if (!again.ok() || again->registry != ref->registry || again->repository != ref->repository ||
      again->tag != ref->tag || again->digest != ref->digest) {
    __builtin_trap();  // what the catalog records would not name what the user gave
  }
  if (ref->Selector().empty() || ref->ApiHost().empty()) __builtin_trap();
  return 0;
}
