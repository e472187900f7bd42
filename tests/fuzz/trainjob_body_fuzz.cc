// libFuzzer harness: a trainjob create's REST body, as the gateway reads it (JSON, the
// unknown-field check, then the protobuf mapping) and the job manager checks it before
// anything else sees it. The mapping is read both ways (ADR 0016): where jc::FillFromJson
// reads the document, protobuf's parser must read its text into the same message.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/message_differencer.h>

#include "common/json_fill.h"
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
  jointcloud::v1::CreateTrainJobRequest by_reflection;
  const bool filled = jc::FillFromJson(doc, &by_reflection);
  jointcloud::v1::CreateTrainJobRequest by_protobuf;
  const bool parsed = jc::JsonToProto(doc.dump(), &by_protobuf).ok();
  // Maps serialise in an order of their own unless asked to be deterministic (helper-61).
  auto bytes = [](const google::protobuf::Message& m) {
    std::string out;
    {
      google::protobuf::io::StringOutputStream stream(&out);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      m.SerializeToCodedStream(&coded);
    }
    return out;
  };
  if (filled && (!parsed || !google::protobuf::util::MessageDifferencer::Equals(by_reflection, by_protobuf) ||
                 bytes(by_reflection) != bytes(by_protobuf))) {
    __builtin_trap();
  }
  if (!jc::JsonToProto(body, &request).ok()) return 0;
  (void)jc::jobs::ValidateCreate(request);
  return 0;
}
