#include "services/jobs/dispatcher.h"

#include "absl/strings/str_cat.h"
#include <spdlog/spdlog.h>

namespace jc::jobs {

void Dispatcher::Submit(std::vector<SubmitItem> items) {
  if (items.empty()) return;
  std::vector<std::pair<std::string, SubmitItem>> queued;
  queued.reserve(items.size());
  const auto now = std::chrono::steady_clock::now();
  for (auto& item : items) {
    item.queued_at = now;
    std::string center = item.dispatch.center_id;
    queued.emplace_back(std::move(center), std::move(item));
  }
  for (const auto& center : outboxes_.AddAll(std::move(queued))) {
    pool_->Run([this, center] { SendBatches(center); });
  }
}

void Dispatcher::SendBatches(const std::string& center) {
  while (true) {
    std::vector<SubmitItem> batch = outboxes_.Take(center);
    if (batch.empty()) return;  // this sender is done
    const auto taken = std::chrono::steady_clock::now();
    prometheus::Histogram* outbox_time = outbox_time_.load();
    std::vector<apb::SubmitReplicaRequest> requests;
    requests.reserve(batch.size());
    for (auto& item : batch) {
      if (outbox_time != nullptr) outbox_time->Observe(std::chrono::duration<double>(taken - item.queued_at).count());
      requests.push_back(std::move(item.request));  // sent, not needed back
    }
    auto address = addresses_->Of(center);
    std::vector<absl::StatusOr<apb::Replica>> results =
        address.ok() ? adapters_->SubmitMany({center, *address}, requests)
                     : std::vector<absl::StatusOr<apb::Replica>>(requests.size(), address.status());
    if (prometheus::Histogram* call_time = call_time_.load(); call_time != nullptr && address.ok()) {
      call_time->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - taken).count());
    }
    answers_(center, std::move(batch), std::move(results));
  }
}

void Dispatcher::StopReplica(const std::string& center, const apb::ReplicaKey& key,
                             std::function<void(absl::Status)> answered) {
  pool_->Run([this, center, key, answered = std::move(answered)] {
    auto address = addresses_->Of(center);
    // A center the registry no longer has (deleted) is not a stop done: it is asked again
    // until it is back, as an unreachable one is.
    absl::Status s = address.ok() ? adapters_->Stop({center, *address}, key)
                                  : absl::UnavailableError(absl::StrCat("center ", center, ": ", address.status().message()));
    if (!s.ok()) spdlog::info("job manager: stopping {} at {}: {}", key.job_id(), center, s.ToString());
    answered(s);
  });
}

}  // namespace jc::jobs
