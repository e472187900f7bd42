#include "services/gateway/unknown_field.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace jc::gateway {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Edit distance, letters compared without case (`Command` is a slip of `command`).
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = absl::ascii_tolower(static_cast<unsigned char>(a[i - 1])) ==
                  absl::ascii_tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Messages whose JSON form is not an object of their fields (Timestamp is a string,
// Struct any object, ...): their insides are protobuf's to judge.
bool OpaqueInJson(const Descriptor* desc) { return absl::StartsWith(desc->full_name(), "google.protobuf."); }

// A key as a path shows it: plain when it is a name, else quoted in brackets (`["a.b"]`),
// so that a key holding dots or brackets is not taken for a path; control characters
// and quotes escaped, and at most 64 characters of it.
// A key quoted in brackets (`["a.b"]`): control characters, quotes and backslashes
// escaped, at most 64 characters of it.
std::string Bracketed(const std::string& key) {
  std::string shown;
  for (size_t i = 0; i < key.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      absl::StrAppend(&shown, absl::StrFormat("\\x%02x", c));
    } else {
      shown += static_cast<char>(c);
    }
  }
  if (key.size() > 64) shown += "...";
  return absl::StrCat("[\"", shown, "\"]");
}

// A key as a path shows it: plain when it is a name, else bracketed, so that a key
// holding dots or brackets is not taken for a path.
std::string PathPart(const std::string& path, const std::string& key) {
  const bool plain = !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  if (plain) return path.empty() ? key : absl::StrCat(path, ".", key);
  return absl::StrCat(path, Bracketed(key));
}

UnknownField Describe(const std::string& path, const std::string& key, const Descriptor* desc) {
  UnknownField out;
  out.path = PathPart(path, key);
  std::vector<std::string> names;
  size_t best = std::string::npos;
  size_t longest = 0;
  for (int i = 0; i < desc->field_count(); ++i) longest = std::max(longest, desc->field(i)->name().size());
  // A key far longer than any name is near none of them (and measuring a megabyte-long
  // key against every name would cost a request's worth of CPU many times over).
  const bool may_be_near = key.size() <= 2 * longest + 2;
  for (int i = 0; i < desc->field_count(); ++i) {
    const std::string& name = desc->field(i)->json_name();
    names.push_back(name);
    if (!may_be_near) continue;
    for (const std::string& spelling : {name, desc->field(i)->name()}) {
      size_t d = Distance(key, spelling);
      // Near: a slip of a third of the name at most (two letters in a short one).
      if (d <= std::max<size_t>(2, spelling.size() / 3) && d < best) {
        best = d;
        out.suggestion = spelling;
      }
    }
  }
  std::sort(names.begin(), names.end());
  out.known = absl::StrJoin(names, ", ");
  return out;
}

// `depth` bounds the walk on a message that holds itself: what lies deeper is left to
// protobuf's parser, which has its own bound.
std::optional<UnknownField> Walk(const nlohmann::json& doc, const Descriptor* desc, const std::string& path,
                                 int depth = 0) {
  if (!doc.is_object() || depth > 64) return std::nullopt;
  for (const auto& [key, value] : doc.items()) {
    const FieldDescriptor* field = FieldOfJsonKey(desc, key);
    if (field == nullptr) return Describe(path, key, desc);
    if (field->type() != FieldDescriptor::TYPE_MESSAGE) continue;
    const std::string here = PathPart(path, key);  // as the body names it
    if (field->is_map()) {
      const FieldDescriptor* mapped = field->message_type()->map_value();
      if (mapped->type() != FieldDescriptor::TYPE_MESSAGE || OpaqueInJson(mapped->message_type()) || !value.is_object()) {
        continue;
      }
      for (const auto& [k, v] : value.items()) {
        if (auto found = Walk(v, mapped->message_type(), absl::StrCat(here, Bracketed(k)), depth + 1)) {
          return found;
        }
      }
      continue;
    }
    if (OpaqueInJson(field->message_type())) continue;
    if (field->is_repeated() && value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        if (auto found = Walk(value[i], field->message_type(), absl::StrCat(here, "[", i, "]"), depth + 1)) return found;
      }
    } else if (auto found = Walk(value, field->message_type(), here, depth + 1)) {
      return found;
    }
  }
  return std::nullopt;
}

}  // namespace

const FieldDescriptor* FieldOfJsonKey(const Descriptor* desc, const std::string& key) {
  if (const FieldDescriptor* f = desc->FindFieldByName(key)) return f;
  for (int i = 0; i < desc->field_count(); ++i) {
    if (desc->field(i)->json_name() == key) return desc->field(i);
  }
  return nullptr;
}

std::string UnknownField::Message() const {
  return suggestion.empty() ? absl::StrCat(path, ": no such field (the fields here: ", known, ")")
                            : absl::StrCat(path, ": no such field; did you mean \"", suggestion, "\"?");
}

std::optional<UnknownField> FindUnknownField(const nlohmann::json& doc, const Descriptor* desc) {
  return Walk(doc, desc, "");
}

}  // namespace jc::gateway
