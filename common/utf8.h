#pragma once

// UTF-8 as protobuf's string fields require it (proto3 refuses to parse a string that is
// not). What reaches a string field from outside a protobuf parse (an HTTP header, a path
// or query parameter, a handler called directly: ADR 0014) is checked or made valid here.

#include <string>

#include "absl/strings/string_view.h"

namespace jc {

// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool IsUtf8(absl::string_view s);

// `s` with every byte that is not part of a well-formed sequence replaced by U+FFFD.
std::string ToUtf8(absl::string_view s);

// The length of the well-formed sequence at the start of `s` (1 to 4), or 0 when it is not
// one; `*code_point` is its value.
int Utf8Sequence(absl::string_view s, uint32_t* code_point);

}  // namespace jc
