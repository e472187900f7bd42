#pragma once

// A REST answer's RFC 3339 timestamp ("createdAt") as Unix seconds, for harnesses that
// measure job completion times from the server's own clock.

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace jc::testing {

inline absl::StatusOr<double> UnixSeconds(const nlohmann::json& timestamp) {
  if (!timestamp.is_string()) return absl::InvalidArgumentError("no timestamp");
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, timestamp.get<std::string>(), &t, &err)) {
    return absl::InvalidArgumentError(err);
  }
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

}  // namespace jc::testing
