#pragma once

// Prices are exact decimals (issue 49 item 5): money is settled, so a price is never a
// double on its way in. Inside, a price is a whole number of millionths of the catalog's
// unit (int64: exact, and sums of prices stay exact); on the wire it is its decimal text
// ("12", "0.75": ResourceSpec.price); REST takes a JSON number or string and answers a
// number (common/json_proto.cc, the `decimal` field option).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc {

inline constexpr int64_t kPriceScale = 1000000;       // millionths: six decimals
// Table 3's int held up to 2^31 - 1: every price kept before prices were decimals is one.
inline constexpr int64_t kMaxPriceUnits = 2147483647;

// "12", "0.75", "1.000001", "12." and ".5" are read; so is "" (0: no price). Refused, naming
// `field`: a sign, an exponent, more than six decimals, spaces, more than kMaxPriceUnits.
absl::StatusOr<int64_t> ParsePrice(absl::string_view text, absl::string_view field = "price");

// The canonical text: no trailing zeros, no point for a whole price ("12", "0.75").
std::string FormatPrice(int64_t micros);

// For arithmetic on costs, which the usage records keep as doubles: exact for every price
// ParsePrice accepts (below 2^53 millionths).
inline double PriceAsDouble(int64_t micros) { return static_cast<double>(micros) / kPriceScale; }

// A price read from text the program wrote itself (a stored document, the catalog's answer):
// 0 when it cannot be read (never, unless the store was edited by hand). Where a price
// bills or admits, callers that can refuse use ParsePrice (the scheduler's snapshot leaves
// an offer whose price cannot be read out: a spec nowhere priced runs nowhere).
int64_t StoredPrice(absl::string_view text);

}  // namespace jc
