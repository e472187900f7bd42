#include "common/price.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace jc {

absl::StatusOr<int64_t> ParsePrice(absl::string_view text, absl::string_view field) {
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", text.substr(0, 40), "\" ", why));
  };
  if (text.empty()) return 0;
  if (text.size() > 40) return refuse("is not a price");
  if (text.front() == '-') return refuse("is negative: a price is 0 or more");
  int64_t units = 0, fraction = 0;
  int digits = 0, decimals = 0;
  bool point = false;
  for (char c : text) {
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return refuse("is not a price: digits with at most one decimal point (\"12\", \"0.75\")");
    }
    ++digits;
    if (point) {
      if (++decimals > 6) return refuse("has more than six decimals");
      fraction = fraction * 10 + (c - '0');
    } else {
      units = units * 10 + (c - '0');
      if (units > kMaxPriceUnits) return refuse(absl::StrCat("is more than ", kMaxPriceUnits, " an hour"));
    }
  }
  if (digits == 0) return refuse("is not a price: digits with at most one decimal point (\"12\", \"0.75\")");
  for (int d = decimals; d < 6; ++d) fraction *= 10;
  const int64_t micros = units * kPriceScale + fraction;
  if (micros > kMaxPriceUnits * kPriceScale) return refuse(absl::StrCat("is more than ", kMaxPriceUnits, " an hour"));
  return micros;
}

std::string FormatPrice(int64_t micros) {
  const bool negative = micros < 0;  // never a price; a difference of two may be
  const uint64_t v = negative ? 0 - static_cast<uint64_t>(micros) : static_cast<uint64_t>(micros);
  std::string out = absl::StrCat(negative ? "-" : "", v / kPriceScale);
  uint64_t fraction = v % kPriceScale;
  if (fraction == 0) return out;
  std::string digits = std::to_string(fraction);
  digits.insert(0, 6 - digits.size(), '0');
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return absl::StrCat(out, ".", digits);
}

int64_t StoredPrice(absl::string_view text) {
  auto p = ParsePrice(text);
  return p.ok() ? *p : 0;
}

}  // namespace jc
