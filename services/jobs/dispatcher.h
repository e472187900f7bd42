#pragma once

// The job manager's dispatcher: sends replicas to their centers' adapters and stops to
// them. One outbox per center (common/outbox.h, the component the nexec master uses for
// its per-agent launches): what is dispatched while a center's senders are busy goes
// together as one SubmitReplicas call. Answers go back to the job manager's event loop,
// which decides what they mean; the dispatcher keeps no job state.

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/outbox.h"
#include "common/thread_pool.h"
#include "prometheus/histogram.h"
#include "services/jobs/adapter_addresses.h"
#include "services/southbound/adapter_client.h"

namespace jc::jobs {

namespace apb = ::jointcloud::adapter::v1;

// One replica attempt to hand to a center.
struct Dispatch {
  std::string job_id;
  int replica = 0;  // index into the job record's replicas
  int attempt = 0;
  std::string center_id;
  bool stage = false;  // copy the task's missing datasets first
};

struct SubmitItem {
  Dispatch dispatch;
  apb::SubmitReplicaRequest request;
  apb::ReplicaKey key;  // the request's, kept when the request is sent
  uint64_t term = 0;  // the job manager's term that decided it
  std::chrono::steady_clock::time_point queued_at{};  // set by Dispatcher::Submit
};

class Dispatcher {
 public:
  // Called on a sender's thread with a batch sent to `center` (their requests moved out)
  // and the adapter's answers, one per item.
  using Answers = std::function<void(const std::string& center, std::vector<SubmitItem> items,
                                     std::vector<absl::StatusOr<apb::Replica>> results)>;

  static constexpr int kSendersPerCenter = 4;
  static constexpr size_t kBatch = 256;

  Dispatcher(southbound::AdapterClient* adapters, AdapterAddresses* addresses, ThreadPool* pool, Answers answers)
      : adapters_(adapters), addresses_(addresses), pool_(pool), answers_(std::move(answers)) {}

  void Submit(std::vector<SubmitItem> items);
  // Sends a stop; `answered` gets the adapter's answer (on a sender's thread): the job
  // manager sends it again until the center confirms (a service's replica never ends by
  // itself).
  void StopReplica(const std::string& center, const apb::ReplicaKey& key,
                   std::function<void(absl::Status)> answered);
  // Drops what has not been sent (a step-down: the next term decides again).
  void Clear() { outboxes_.Clear(); }
  // Where each replica's time goes from here (jc_handover_stage_seconds): its wait for a
  // sender and its batch's call. Either may be null.
  void SetTimings(prometheus::Histogram* outbox, prometheus::Histogram* call) {
    outbox_time_.store(outbox);
    call_time_.store(call);
  }

 private:
  void SendBatches(const std::string& center);

  southbound::AdapterClient* adapters_;
  AdapterAddresses* addresses_;
  ThreadPool* pool_;
  Answers answers_;
  Outboxes<SubmitItem> outboxes_{kBatch, kSendersPerCenter};
  std::atomic<prometheus::Histogram*> outbox_time_{nullptr};
  std::atomic<prometheus::Histogram*> call_time_{nullptr};
};

}  // namespace jc::jobs
