#include "absl/strings/string_view.h"
#include "common/quantity.h"

#include <array>
#include <cctype>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace jc {
namespace {

struct Suffix {
  absl::string_view text;
  // Multiplier applied to the value in thousandths: "m" divides by 1000, so the
  // thousandths multiplier is 1; "k" multiplies by 1000, so it is 1,000,000.
  __int128 milli_multiplier;
};

constexpr __int128 Pow(__int128 base, int exp) {
  __int128 r = 1;
  for (int i = 0; i < exp; ++i) r *= base;
  return r;
}

// Longest suffixes first so "Mi" is not read as "M" followed by junk.
constexpr std::array<Suffix, 14> kSuffixes = {{
    {"Ki", Pow(1024, 1) * 1000}, {"Mi", Pow(1024, 2) * 1000}, {"Gi", Pow(1024, 3) * 1000},
    {"Ti", Pow(1024, 4) * 1000}, {"Pi", Pow(1024, 5) * 1000}, {"Ei", Pow(1024, 6) * 1000},
    {"m", 1},                    {"k", Pow(1000, 1) * 1000},  {"M", Pow(1000, 2) * 1000},
    {"G", Pow(1000, 3) * 1000},  {"T", Pow(1000, 4) * 1000},  {"P", Pow(1000, 5) * 1000},
    {"E", Pow(1000, 6) * 1000},  {"", 1000},
}};

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid quantity \"", text, "\": ", why,
                   " (expected a non-negative number with an optional suffix such as "
                   "500m, 2Gi, 1.5Ti, 100M)"));
}

}  // namespace

absl::StatusOr<Quantity> Quantity::Parse(absl::string_view text) {
  if (text.empty()) return Bad(text, "empty");
  size_t i = 0;
  if (text[0] == '-') return Bad(text, "negative quantities are not allowed");
  if (text[0] == '+') ++i;
  __int128 whole = 0;
  __int128 frac = 0;
  __int128 frac_scale = 1;
  size_t digits = 0;
  constexpr __int128 kLimit = static_cast<__int128>(1) << 100;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
    whole = whole * 10 + (text[i] - '0');
    if (whole > kLimit) return Bad(text, "too large");
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
      if (frac_scale < Pow(10, 12)) {  // 12 digits: frac * Ei (2^70) stays inside 128 bits
        frac = frac * 10 + (text[i] - '0');
        frac_scale *= 10;
      }
    }
  }
  if (digits == 0) return Bad(text, "no digits");
  absl::string_view rest = text.substr(i);
  const Suffix* suffix = nullptr;
  for (const Suffix& s : kSuffixes) {
    if (rest == s.text) {
      suffix = &s;
      break;
    }
  }
  if (suffix == nullptr) return Bad(text, absl::StrCat("unknown suffix \"", rest, "\""));
  // Checked before multiplying: 2^100 (the digits' limit) times 2^70 (Ei in milli) does
  // not fit in 128 bits (found by tests/fuzz/quantity_fuzz).
  if (whole > std::numeric_limits<int64_t>::max() / suffix->milli_multiplier) return Bad(text, "too large");
  __int128 milli = whole * suffix->milli_multiplier;
  // Fractions below one thousandth round up, so "0.0001" CPU is never free.
  __int128 frac_milli = (frac * suffix->milli_multiplier + frac_scale - 1) / frac_scale;
  milli += frac_milli;
  if (milli > std::numeric_limits<int64_t>::max()) return Bad(text, "too large");
  return Quantity(static_cast<int64_t>(milli));
}

int64_t Quantity::CeilMebibytes() const {
  constexpr int64_t kMilliPerMiB = int64_t{1024} * 1024 * 1000;
  return (milli_ + kMilliPerMiB - 1) / kMilliPerMiB;
}

int64_t Quantity::CeilGibibytes() const {
  constexpr int64_t kMilliPerGiB = int64_t{1024} * 1024 * 1024 * 1000;
  return (milli_ + kMilliPerGiB - 1) / kMilliPerGiB;
}

std::string Quantity::ToString() const {
  if (milli_ % kMilliPerUnit != 0) return absl::StrCat(milli_, "m");
  return absl::StrCat(milli_ / kMilliPerUnit);
}

}  // namespace jc
