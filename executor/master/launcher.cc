#include "executor/master/launcher.h"

namespace jc::nexec {

void Launcher::Launch(const std::string& address, pb::LaunchRequest request) {
  if (outboxes_.Add(address, std::move(request))) {
    pool_->Run([this, address] { Drain(address); });
  }
}

void Launcher::Drain(const std::string& address) {
  while (true) {
    std::vector<pb::LaunchRequest> batch = outboxes_.Take(address);
    if (batch.empty()) return;
    std::vector<absl::StatusOr<int>> pids = dialer_->LaunchBatch(address, batch);
    pids.resize(batch.size(), absl::InternalError("the agent returned fewer results than launches"));
    answered_(std::move(batch), std::move(pids));
  }
}

}  // namespace jc::nexec
