#pragma once

// Resource quantities in the Kubernetes notation the standard's Table 3 uses:
// "1", "500m", "2Gi", "1.5Ti", "100M". Values are kept exactly, in thousandths.

#include "absl/strings/string_view.h"
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace jc {

class Quantity {
 public:
  static constexpr int64_t kMilliPerUnit = 1000;

  // Parses a non-negative quantity: digits with an optional fraction, then an optional
  // suffix m | k M G T P E (powers of 1000) | Ki Mi Gi Ti Pi Ei (powers of 1024).
  // Anything else ("2Gx", "-1", "", "1..5", overflow) is an InvalidArgument error that
  // names the offending text.
  static absl::StatusOr<Quantity> Parse(absl::string_view text);

  static Quantity FromMilli(int64_t milli) { return Quantity(milli); }
  static Quantity FromUnits(int64_t units) { return Quantity(units * kMilliPerUnit); }

  int64_t milli() const { return milli_; }
  // Whole units, rounded up: a request for 500m CPU occupies one core.
  int64_t CeilUnits() const { return (milli_ + kMilliPerUnit - 1) / kMilliPerUnit; }
  // A byte quantity in MiB, rounded up (Table 2 counts memory in MB).
  int64_t CeilMebibytes() const;
  // A byte quantity in GiB, rounded up (Table 2 counts storage in GB).
  int64_t CeilGibibytes() const;

  std::string ToString() const;

  friend bool operator==(Quantity a, Quantity b) { return a.milli_ == b.milli_; }
  friend auto operator<=>(Quantity a, Quantity b) { return a.milli_ <=> b.milli_; }

 private:
  explicit Quantity(int64_t milli) : milli_(milli) {}
  int64_t milli_ = 0;
};

}  // namespace jc
