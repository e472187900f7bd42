// libFuzzer harness: a trainjob create's REST body, as the gateway reads it (JSON, the
// unknown-field check, then the protobuf mapping) and the job manager checks it before
// anything else sees it.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json_proto.h"
#include "services/gateway/unknown_field.h"
#include "services/jobs/validate_create.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return 0;
  jointcloud::v1::CreateTrainJobRequest request;
  // What the gateway says of an unknown field stays short and shows no control character
  // (it is echoed to REST clients and jcctl's terminal).
  if (auto unknown = jc::gateway::FindUnknownField(doc, request.GetDescriptor())) {
    const std::string message = unknown->Message();
    for (unsigned char c : unknown->path) {
      if (c < 0x20 || c == 0x7f) __builtin_trap();
    }
    if (unknown->path.size() > 4096) __builtin_trap();
    (void)message;
    return 0;
  }
  if (!jc::JsonToProto(body, &request).ok()) return 0;
  (void)jc::jobs::ValidateCreate(request);
  return 0;
}
