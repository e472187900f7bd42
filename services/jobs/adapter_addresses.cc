#include "services/jobs/adapter_addresses.h"

#include "absl/strings/str_cat.h"

namespace jc::jobs {

absl::StatusOr<std::string> AdapterAddresses::Of(const std::string& center_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cached_.find(center_id);
    if (it != cached_.end() && clock_->Now() - it->second.second < kTtl) return it->second.first;
  }
  auto center = centers_->GetCenter(center_id);
  if (!center.ok()) return center.status();
  if (center->adapter_address().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("center ", center_id, " has no adapter_address"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  cached_[center_id] = {center->adapter_address(), clock_->Now()};
  return center->adapter_address();
}

}  // namespace jc::jobs
