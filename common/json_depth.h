#pragma once

// How deep a JSON text nests, counted before parsing it. nlohmann's parser is iterative,
// but much of what follows is not: dump(), a copy, a comparison (and freeing, in older
// releases) recurse once per level. A registry's answer of a million '[' would overflow the
// request thread's stack; so did a REST body `{"name": [[[[…]]]]}` 400,000 deep, sent with no
// credential (helper-47 F1). Outside documents are refused past a depth their format never
// needs.

#include "absl/strings/string_view.h"

namespace jc {

inline constexpr int kMaxJsonNesting = 64;  // a request body or a token's claims

// Whether `body` nests arrays and objects deeper than `max` (brackets in strings aside).
inline bool NestsDeeperThan(absl::string_view body, int max) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace jc
