#include "common/json_proto.h"

#include "common/json_print.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/type.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace jc {
namespace {

namespace pb = google::protobuf;

constexpr char kTypeUrlPrefix[] = "type.googleapis.com";

// protobuf's JSON mapping works on google.protobuf.Type descriptions of the messages, and
// the resolver protobuf uses by default builds them from the descriptors again on every
// call: a fixed cost per message converted, whatever its size, on every REST body, answer
// and stored document. This resolver builds each once and hands out copies (protobuf's
// converter still copies each type once per call): the same output in about a fifth less
// time for a job record, a seventh less for parsing a create body (json_proto_bench,
// docs/benchmarks.md). The types are the program's messages, so the cache stays small.
class CachingTypeResolver final : public pb::util::TypeResolver {
 public:
  CachingTypeResolver()
      : built_(pb::util::NewTypeResolverForDescriptorPool(kTypeUrlPrefix, pb::DescriptorPool::generated_pool())) {}

  pb::util::Status ResolveMessageType(const std::string& type_url, pb::Type* type) override {
    return Resolve(type_url, type, types_, &pb::util::TypeResolver::ResolveMessageType);
  }
  pb::util::Status ResolveEnumType(const std::string& type_url, pb::Enum* enum_type) override {
    return Resolve(type_url, enum_type, enums_, &pb::util::TypeResolver::ResolveEnumType);
  }

 private:
  template <typename T>
  using Cache = absl::flat_hash_map<std::string, std::unique_ptr<const T>>;

  template <typename T>
  pb::util::Status Resolve(const std::string& type_url, T* out, Cache<T>& cache,
                           pb::util::Status (pb::util::TypeResolver::*build)(const std::string&, T*)) {
    {
      absl::ReaderMutexLock lock(&mu_);
      if (auto it = cache.find(type_url); it != cache.end()) {
        *out = *it->second;
        return pb::util::Status();
      }
    }
    auto made = std::make_unique<T>();
    pb::util::Status status = (built_.get()->*build)(type_url, made.get());
    if (!status.ok()) return status;  // unknown types are not cached: they are errors
    *out = *made;
    absl::MutexLock lock(&mu_);
    cache.try_emplace(type_url, std::move(made));
    return status;
  }

  std::unique_ptr<pb::util::TypeResolver> built_;
  absl::Mutex mu_;
  Cache<pb::Type> types_ ABSL_GUARDED_BY(mu_);
  Cache<pb::Enum> enums_ ABSL_GUARDED_BY(mu_);
};

// Never destroyed: messages may be converted by threads still running at exit.
CachingTypeResolver* GeneratedTypes() {
  static auto* resolver = new CachingTypeResolver();
  return resolver;
}

bool IsGenerated(const pb::Message& message) {
  return message.GetDescriptor()->file()->pool() == pb::DescriptorPool::generated_pool();
}

std::string TypeUrl(const pb::Message& message) {
  return absl::StrCat(kTypeUrlPrefix, "/", message.GetDescriptor()->full_name());
}

}  // namespace

absl::StatusOr<std::string> ProtoToJson(const google::protobuf::Message& message,
                                        JsonNames names, bool print_defaults) {
  std::string out;
  // The program's own messages print by reflection (ADR 0015) when they hold nothing that
  // printer leaves to protobuf's.
  if (IsGenerated(message) && PrintJson(message, names == JsonNames::kSnakeCase, print_defaults, &out)) return out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = print_defaults;
  options.preserve_proto_field_names = names == JsonNames::kSnakeCase;
  // What util::MessageToJsonString does, with the cached types (a dynamic message's
  // types are not the program's: those take protobuf's own path).
  auto status = IsGenerated(message)
                    ? google::protobuf::util::BinaryToJsonString(GeneratedTypes(), TypeUrl(message),
                                                                 message.SerializeAsString(), &out, options)
                    : google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return absl::InternalError(absl::StrCat("encoding JSON: ", status.ToString()));
  return out;
}

absl::Status JsonToProto(absl::string_view json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  google::protobuf::StringPiece input(json.data(), json.size());
  google::protobuf::util::Status status;
  if (IsGenerated(*message)) {
    // What util::JsonStringToMessage does, with the cached types.
    std::string binary;
    status = google::protobuf::util::JsonToBinaryString(GeneratedTypes(), TypeUrl(*message), input, &binary, options);
    if (status.ok() && !message->ParseFromString(binary)) {
      status = google::protobuf::util::InvalidArgumentError("JSON transcoder produced invalid protobuf output.");
    }
  } else {
    status = google::protobuf::util::JsonStringToMessage(input, message, options);
  }
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON body: ", std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace jc
