#pragma once

// Resources are stored as protobuf JSON documents (see docs/adr/0002-store-documents.md);
// those only their own writer reads back, on its busiest path, as base64 protobuf.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_proto.h"

namespace jc::store {

inline absl::StatusOr<std::string> EncodeDoc(const google::protobuf::Message& message) {
  return ProtoToJson(message, JsonNames::kSnakeCase, /*print_defaults=*/false);
}

// `doc` (a JSON object) with the field `name` set to `value` (JSON). A document whose big
// part never changes (a job's request) is encoded once for it and spliced in at each
// write; field order does not matter to the decoder.
inline std::string SpliceDocField(absl::string_view name, absl::string_view value, absl::string_view doc) {
  bool empty = doc.size() <= 2;  // "{}"
  return absl::StrCat("{\"", name, "\":", value, empty ? "}" : ",", empty ? "" : doc.substr(1));
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

// Documents only their own writer reads back, written on its busiest path (the control
// plane's job events, the nexec master's jobs): the message's protobuf encoding in base64,
// still TEXT. protobuf's JSON printer has a fixed cost per message that such a path pays
// several times per job (ADR 0002, amendments).
inline std::string EncodeBinaryDoc(const google::protobuf::Message& message) {
  return absl::Base64Escape(message.SerializeAsString());
}

// EncodeBinaryDoc of `message` with its field `field_number` (a message field `message`
// leaves unset) holding `field_bytes`, that field's message already encoded: the binary
// counterpart of SpliceDocField (a field may come anywhere in protobuf's encoding).
inline std::string EncodeBinaryDocWith(const google::protobuf::Message& message, int field_number,
                                       absl::string_view field_bytes) {
  std::string bytes = message.SerializeAsString();
  auto varint = [&bytes](uint64_t v) {
    while (v >= 0x80) {
      bytes.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    bytes.push_back(static_cast<char>(v));
  };
  varint((static_cast<uint64_t>(field_number) << 3) | 2);  // wire type 2: length-delimited
  varint(field_bytes.size());
  bytes.append(field_bytes.data(), field_bytes.size());
  return absl::Base64Escape(bytes);
}

// A document in either form: JSON (written before, or by EncodeDoc) or base64 protobuf.
template <typename Message>
absl::StatusOr<Message> DecodeAnyDoc(const std::optional<std::string>& column) {
  if (column.has_value() && absl::StartsWith(*column, "{")) return DecodeDoc<Message>(column);
  std::string bytes;
  Message message;
  if (!column.has_value() || !absl::Base64Unescape(*column, &bytes) || !message.ParseFromString(bytes)) {
    return absl::DataLossError(
        absl::StrCat("a stored ", Message::descriptor()->name(), " is neither base64 protobuf nor JSON"));
  }
  return message;
}

}  // namespace jc::store
