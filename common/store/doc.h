#pragma once

// Resources are stored as protobuf JSON documents (see docs/adr/0002-store-documents.md).

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/json_proto.h"

namespace jc::store {

inline absl::StatusOr<std::string> EncodeDoc(const google::protobuf::Message& message) {
  return ProtoToJson(message, JsonNames::kSnakeCase, /*print_defaults=*/false);
}

template <typename Message>
absl::StatusOr<Message> DecodeDoc(const std::optional<std::string>& column) {
  Message message;
  if (!column.has_value()) return absl::DataLossError("stored document is NULL");
  absl::Status parsed = JsonToProto(*column, &message);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat("stored document does not parse: ", parsed.message()));
  }
  return message;
}

}  // namespace jc::store
