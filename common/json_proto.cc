#include "absl/strings/string_view.h"
#include "common/json_proto.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"

namespace jc {

absl::StatusOr<std::string> ProtoToJson(const google::protobuf::Message& message,
                                        JsonNames names, bool print_defaults) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = print_defaults;
  options.preserve_proto_field_names = names == JsonNames::kSnakeCase;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return absl::InternalError(absl::StrCat("encoding JSON: ", status.ToString()));
  return out;
}

absl::Status JsonToProto(absl::string_view json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON body: ", std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace jc
