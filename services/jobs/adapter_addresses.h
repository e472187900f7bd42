#pragma once

// Where each center's adapter answers, read from the registry and kept for a few seconds:
// a center whose adapter moved (re-registered elsewhere) is followed there without a
// restart, and a burst of calls does not read the registry once each. Thread-safe.

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "services/registry/center_directory.h"

namespace jc::jobs {

class AdapterAddresses {
 public:
  static constexpr absl::Duration kTtl = absl::Seconds(5);

  AdapterAddresses(registry::CenterDirectory* centers, const Clock* clock) : centers_(centers), clock_(clock) {}

  absl::StatusOr<std::string> Of(const std::string& center_id);

 private:
  registry::CenterDirectory* centers_;
  const Clock* clock_;
  std::mutex mu_;
  std::map<std::string, std::pair<std::string, absl::Time>> cached_ ABSL_GUARDED_BY(mu_);  // address, read at
};

}  // namespace jc::jobs
