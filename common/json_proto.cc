#include "common/json_proto.h"

#include "common/json_fill.h"
#include "common/json_print.h"

#include <nlohmann/json.hpp>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/type.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <memory>
#include <random>
#include <regex>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

// ---- Decimal fields (the `decimal` option: exact prices as text, JSON numbers at REST) ----

// Whether `f` carries the option `jointcloud.v1.decimal` (proto/jointcloud/v1/options.proto),
// read by reflection: this library sits below the generated API code. A program without
// the option linked in has no decimal fields.
bool IsDecimal(const pb::FieldDescriptor* f) {
  static const pb::FieldDescriptor* option =
      pb::DescriptorPool::generated_pool()->FindExtensionByName("jointcloud.v1.decimal");
  if (option == nullptr || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING) return false;
  const pb::FieldOptions& options = f->options();
  return options.GetReflection()->GetBool(options, option);
}

// Whether `d`, or a message it holds at any depth, has a decimal field: only those messages
// pay for the pass below (the catalog's; never a job's). Cached per type.
bool ReachesDecimal(const pb::Descriptor* d, absl::flat_hash_set<const pb::Descriptor*>* visited) {
  if (!visited->insert(d).second) return false;  // seen on this walk: what it reaches is counted there
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (IsDecimal(f)) return true;
    if (f->message_type() != nullptr && f->message_type()->file()->pool() == d->file()->pool() &&
        ReachesDecimal(f->message_type(), visited)) {
      return true;
    }
  }
  return false;
}

// Cached per thread: every answer and stored document asks, so no lock on that path (the
// program's own types only: their descriptors live as long as the program).
bool HoldsDecimal(const pb::Descriptor* d) {
  thread_local absl::flat_hash_map<const pb::Descriptor*, bool> known;
  if (auto it = known.find(d); it != known.end()) return it->second;
  absl::flat_hash_set<const pb::Descriptor*> visited;
  const bool holds = ReachesDecimal(d, &visited);
  known.emplace(d, holds);
  return holds;
}

using Json = nlohmann::ordered_json;

const pb::FieldDescriptor* FieldNamed(const pb::Descriptor* d, const std::string& key) {
  if (const pb::FieldDescriptor* f = d->FindFieldByName(key)) return f;
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->json_name() == key) return d->field(i);
  }
  return nullptr;
}

// Walks `json` as a `d`, calling `at` with every value of a decimal field (each element of
// a repeated one).
template <typename Visit>
void EachDecimal(Json& json, const pb::Descriptor* d, const Visit& at, int depth = 0) {
  if (!json.is_object() || depth > 64) return;
  for (auto& [key, value] : json.items()) {
    const pb::FieldDescriptor* f = FieldNamed(d, key);
    if (f == nullptr) continue;
    if (IsDecimal(f)) {
      if (f->is_repeated() && value.is_array()) {
        for (auto& v : value) at(v);
      } else {
        at(value);
      }
    } else if (f->message_type() != nullptr && !f->is_map() && HoldsDecimal(f->message_type())) {
      if (f->is_repeated() && value.is_array()) {
        for (auto& v : value) EachDecimal(v, f->message_type(), at, depth + 1);
      } else {
        EachDecimal(value, f->message_type(), at, depth + 1);
      }
    }
  }
}

// A JSON number's text: what a decimal's text may be written as, unquoted.
bool IsJsonNumber(const std::string& text) {
  static const std::regex* number = new std::regex(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?)");
  return text.size() <= 64 && std::regex_match(text, *number);
}

// Stands for a decimal's text in the tree until it is written out unquoted: nlohmann would
// write a number through a double, and so 0.00005 as 5e-05 (helper-52 F2). The nonce is the
// process's own and secret, so no string of a caller's can pass for one.
const std::string& PlaceholderMark() {
  static const std::string* mark = [] {
    std::random_device random;
    return new std::string(absl::StrCat("\x01jc-decimal-", absl::Hex(random(), absl::kZeroPad8),
                                        absl::Hex(random(), absl::kZeroPad8), absl::Hex(random(), absl::kZeroPad8), ":"));
  }();
  return *mark;
}

// Answers carry a decimal as a JSON number whose text is the decimal's, exactly: "0.75" ->
// 0.75, "0.00005" -> 0.00005. Stored documents too: they read back the same.
void DecimalsAsNumbers(std::string* out, const pb::Descriptor* d) {
  Json json = Json::parse(*out, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return;
  bool marked = false;
  EachDecimal(json, d, [&](Json& v) {
    if (!v.is_string()) return;
    const std::string text = v.get<std::string>();
    if (text.empty()) {
      v = 0;
    } else if (IsJsonNumber(text)) {
      v = PlaceholderMark() + text;
      marked = true;
    }  // else: not a number's text (never written by the catalog): left a string
  });
  std::string dumped;
  try {
    dumped = json.dump();
  } catch (const Json::exception&) {
    return;  // text that is not UTF-8 (protobuf printed it escaped): left as protobuf printed it
  }
  if (marked) {
    // Each placeholder is written "\u0001jc-decimal-<nonce>:<text>": the quotes and mark go.
    const std::string quoted_mark = "\"\\u0001" + PlaceholderMark().substr(1);
    std::string written;
    size_t from = 0;
    for (size_t at; (at = dumped.find(quoted_mark, from)) != std::string::npos;) {
      const size_t text_at = at + quoted_mark.size();
      const size_t close = dumped.find('"', text_at);
      if (close == std::string::npos) break;
      absl::StrAppend(&written, absl::string_view(dumped).substr(from, at - from),
                      absl::string_view(dumped).substr(text_at, close - text_at));
      from = close + 1;
    }
    written.append(dumped, from, std::string::npos);
    dumped = std::move(written);
  }
  *out = std::move(dumped);
}

// The decimal a JSON number was written as. nlohmann reads a number as a double, which
// holds every decimal of up to 15 digits exactly enough to say which one it was: the one of
// at most six decimals that reads back to the same double (0.00005, not 5e-05; 1e3 is
// 1000). A double no such decimal reads back to is spelled out with its further decimals,
// for the catalog to refuse as more than six.
std::string DecimalOfDouble(double v) {
  auto trimmed = [](std::string text) {
    if (text.find('.') != std::string::npos) {
      while (!text.empty() && text.back() == '0') text.pop_back();
      if (!text.empty() && text.back() == '.') text.pop_back();
    }
    return text;
  };
  std::string six = trimmed(absl::StrFormat("%.6f", v));
  double back = 0;
  if (absl::SimpleAtod(six, &back) && back == v) return six;
  return trimmed(absl::StrFormat("%.17f", v));
}

// Bodies may give a decimal as a number or a string; protobuf's parser takes text.
absl::Status DecimalsAsText(absl::string_view in, const pb::Descriptor* d, std::string* out) {
  Json json = Json::parse(in.begin(), in.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    *out = std::string(in);  // protobuf's parser says what is wrong with it
    return absl::OkStatus();
  }
  EachDecimal(json, d, [](Json& v) {
    if (v.is_number_integer()) {
      v = v.dump();
    } else if (v.is_number_float()) {
      v = DecimalOfDouble(v.get<double>());
    }
  });
  try {
    *out = json.dump();
  } catch (const Json::exception&) {
    *out = std::string(in);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ProtoToJson(const google::protobuf::Message& message,
                                        JsonNames names, bool print_defaults) {
  std::string out;
  const bool decimals = IsGenerated(message) && HoldsDecimal(message.GetDescriptor());
  // The program's own messages print by reflection (ADR 0015) when they hold nothing that
  // printer leaves to protobuf's.
  if (IsGenerated(message) && PrintJson(message, names == JsonNames::kSnakeCase, print_defaults, &out)) {
    if (decimals) DecimalsAsNumbers(&out, message.GetDescriptor());
    return out;
  }
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
  if (decimals) DecimalsAsNumbers(&out, message.GetDescriptor());
  return out;
}

absl::Status JsonToProto(absl::string_view json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  std::string with_text;
  if (IsGenerated(*message) && HoldsDecimal(message->GetDescriptor())) {
    if (absl::Status s = DecimalsAsText(json, message->GetDescriptor(), &with_text); !s.ok()) return s;
    json = with_text;
  }
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

absl::Status JsonDocToProto(const nlohmann::json& doc, google::protobuf::Message* message) {
  // Decimal fields take numbers or text (DecimalsAsText): the catalog's, read as before.
  if (IsGenerated(*message) && !HoldsDecimal(message->GetDescriptor()) && FillFromJson(doc, message)) {
    return absl::OkStatus();
  }
  return JsonToProto(doc.dump(), message);
}

}  // namespace jc
