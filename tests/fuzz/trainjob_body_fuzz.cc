// libFuzzer harness: a trainjob create's REST body, as the gateway reads it (JSON, then
// the protobuf mapping) and the job manager checks it before anything else sees it.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json_proto.h"
#include "services/jobs/validate_create.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return 0;
  jointcloud::v1::CreateTrainJobRequest request;
  if (!jc::JsonToProto(body, &request).ok()) return 0;
  (void)jc::jobs::ValidateCreate(request);
  return 0;
}
