#include "common/utf8.h"

namespace jc {

int Utf8Sequence(absl::string_view s, uint32_t* code_point) {
  if (s.empty()) return 0;
  unsigned char c = static_cast<unsigned char>(s[0]);
  if (c < 0x80) {
    *code_point = c;
    return 1;
  }
  int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (len == 0 || c > 0xf4 || static_cast<size_t>(len) > s.size()) return 0;
  uint32_t cp = c & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  static constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kLeast[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  *code_point = cp;
  return len;
}

bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = 0;
    int len = Utf8Sequence(s.substr(i), &cp);
    if (len == 0) return false;
    i += static_cast<size_t>(len);
  }
  return true;
}

std::string ToUtf8(absl::string_view s) {
  if (IsUtf8(s)) return std::string(s);
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp = 0;
    int len = Utf8Sequence(s.substr(i), &cp);
    if (len == 0) {
      out.append("\xef\xbf\xbd");  // U+FFFD
      ++i;
      continue;
    }
    out.append(s.data() + i, static_cast<size_t>(len));
    i += static_cast<size_t>(len);
  }
  return out;
}

}  // namespace jc
