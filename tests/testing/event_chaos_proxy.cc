#include "tests/testing/event_chaos_proxy.h"

#include "common/replica_forgotten.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "jointcloud/adapter/v1/adapter.grpc.pb.h"

namespace jc::testing {

namespace apb = ::jointcloud::adapter::v1;

class EventChaosProxy::Service final : public apb::Adapter::Service {
 public:
  Service(const std::string& upstream, uint64_t seed, Odds odds)
      : stub_(apb::Adapter::NewStub(grpc::CreateChannel(upstream, grpc::InsecureChannelCredentials()))),
        seed_(seed),
        odds_(odds) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~Service() override { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1)); }

  int port() const { return port_; }
  std::atomic<int64_t> duplicated{0}, reordered{0}, injected_written{0};

  void Inject(const apb::ReplicaEvent& e) {
    std::lock_guard<std::mutex> lock(mu_);
    injected_.push_back(e);
  }
  apb::ReplicaKey LastSubmittedKey() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_key_;
  }

  grpc::Status GetCenterInfo(grpc::ServerContext* c, const apb::GetCenterInfoRequest* q, apb::CenterInfo* a) override {
    return Forward(c, *q, a, &apb::Adapter::Stub::GetCenterInfo);
  }
  grpc::Status GetUsage(grpc::ServerContext* c, const apb::GetUsageRequest* q, apb::Usage* a) override {
    grpc::Status s = Forward(c, *q, a, &apb::Adapter::Stub::GetUsage);
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok() && forged_estimates_) {
      a->clear_start_estimates();
      for (const auto& e : *forged_estimates_) *a->add_start_estimates() = e;
    }
    if (s.ok() && forged_at_) *a->mutable_at() = *forged_at_;
    return s;
  }
  void ForgeUsageAt(const google::protobuf::Timestamp& at) {
    std::lock_guard<std::mutex> lock(mu_);
    forged_at_ = at;
  }
  void ForgeStartEstimates(std::vector<apb::SpecStartEstimate> estimates) {
    std::lock_guard<std::mutex> lock(mu_);
    forged_estimates_ = std::move(estimates);
  }
  grpc::Status SubmitReplica(grpc::ServerContext* c, const apb::SubmitReplicaRequest* q, apb::Replica* a) override {
    Remember(q->key());
    if (auto forged = ForgedSubmitAnswer(q->key())) {
      *a = *forged;
      return grpc::Status::OK;
    }
    return Forward(c, *q, a, &apb::Adapter::Stub::SubmitReplica);
  }
  grpc::Status SubmitGang(grpc::ServerContext* c, const apb::SubmitGangRequest* q,
                          apb::SubmitGangResponse* a) override {
    return Forward(c, *q, a, &apb::Adapter::Stub::SubmitGang);
  }
  grpc::Status SubmitReplicas(grpc::ServerContext* c, const apb::SubmitReplicasRequest* q,
                              apb::SubmitReplicasResponse* a) override {
    ++submit_replicas_calls;
    if (refuse_submit_replicas.load()) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "an older adapter (test proxy)");
    }
    for (const auto& r : q->replicas()) Remember(r.key());
    if (ForgedSubmitAnswer(apb::ReplicaKey())) {
      for (const auto& r : q->replicas()) *a->add_results()->mutable_replica() = *ForgedSubmitAnswer(r.key());
      return grpc::Status::OK;
    }
    return Forward(c, *q, a, &apb::Adapter::Stub::SubmitReplicas);
  }
  grpc::Status StopReplica(grpc::ServerContext* c, const apb::ReplicaRef* q, apb::Replica* a) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stops_to_lose_ > 0) {  // lost on the way: the center never hears of it
        --stops_to_lose_;
        ++stops_lost_;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stop was lost on the way (test proxy)");
      }
    }
    return Forward(c, *q, a, &apb::Adapter::Stub::StopReplica);
  }
  grpc::Status WithdrawReplica(grpc::ServerContext* c, const apb::ReplicaRef* q, apb::Replica* a) override {
    return Forward(c, *q, a, &apb::Adapter::Stub::WithdrawReplica);
  }
  grpc::Status GetReplica(grpc::ServerContext* c, const apb::ReplicaRef* q, apb::Replica* a) override {
    if (claim_forgotten_) {
      c->AddTrailingMetadata(kReplicaForgottenMetadata, "1");  // as an SDK adapter marks it
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "replica " + q->key().job_id() + " is not in this center's book, which forgets a replica "
                          "after it ended (replica_retention) (test proxy)");
    }
    return Forward(c, *q, a, &apb::Adapter::Stub::GetReplica);
  }
  grpc::Status ListImages(grpc::ServerContext* c, const apb::ListImagesRequest* q,
                          apb::ListImagesResponse* a) override {
    return Forward(c, *q, a, &apb::Adapter::Stub::ListImages);
  }
  grpc::Status ListDatasets(grpc::ServerContext* c, const apb::ListDatasetsRequest* q,
                            apb::ListDatasetsResponse* a) override {
    return Forward(c, *q, a, &apb::Adapter::Stub::ListDatasets);
  }
  grpc::Status StageDataset(grpc::ServerContext* c, const apb::StageDatasetRequest* q,
                            apb::StageDatasetResponse* a) override {
    return Forward(c, *q, a, &apb::Adapter::Stub::StageDataset);
  }
  grpc::Status StageImage(grpc::ServerContext* c, const apb::StageImageRequest* q,
                          apb::StageImageResponse* a) override {
    return Forward(c, *q, a, &apb::Adapter::Stub::StageImage);
  }

  grpc::Status ReadLog(grpc::ServerContext* c, const apb::ReadLogRequest* q,
                       grpc::ServerWriter<apb::LogChunk>* out) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(c->deadline());
    auto reader = stub_->ReadLog(&ctx, *q);
    apb::LogChunk chunk;
    while (reader->Read(&chunk)) {
      if (!out->Write(chunk)) ctx.TryCancel();
    }
    return reader->Finish();
  }

  // As an adapter built before WatchBatches unless told to serve it: then the upstream's
  // batches as they come (no chaos), or, forged, one message the test made.
  grpc::Status WatchBatches(grpc::ServerContext* c, const apb::WatchRequest* q,
                            grpc::ServerWriter<apb::ReplicaEvents>* out) override {
    ++watch_batches_calls;
    std::optional<apb::ReplicaEvents> forged;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!serve_watch_batches_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "an older adapter (test proxy)");
      forged = forged_batch_;
    }
    if (forged) {
      out->Write(*forged);
      while (!c->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return grpc::Status::OK;
    }
    grpc::ClientContext ctx;
    auto reader = stub_->WatchBatches(&ctx, *q);
    std::thread cancel([&] {
      while (!c->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ctx.TryCancel();
    });
    apb::ReplicaEvents batch;
    while (reader->Read(&batch) && out->Write(batch)) {
    }
    ctx.TryCancel();
    cancel.join();
    grpc::Status upstream = reader->Finish();
    return upstream.error_code() == grpc::StatusCode::CANCELLED ? grpc::Status::OK : upstream;
  }
  void ServeWatchBatches(std::optional<apb::ReplicaEvents> forged) {
    std::lock_guard<std::mutex> lock(mu_);
    serve_watch_batches_ = true;
    forged_batch_ = std::move(forged);
  }
  std::atomic<int64_t> watch_calls{0}, watch_batches_calls{0};
  std::atomic<int64_t> submit_replicas_calls{0};
  std::atomic<bool> refuse_submit_replicas{false};

  grpc::Status Watch(grpc::ServerContext* c, const apb::WatchRequest* q,
                     grpc::ServerWriter<apb::ReplicaEvent>* out) override {
    ++watch_calls;
    const grpc::Status forgot(grpc::StatusCode::OUT_OF_RANGE,
                              "events after since_cursor are no longer kept (test proxy)");
    if (claim_forgotten_) return forgot;
    grpc::ClientContext ctx;
    auto reader = stub_->Watch(&ctx, *q);
    // A reader thread feeds a queue, so a held event is let go after a short quiet time
    // instead of waiting for an event that may never come.
    std::mutex mu;
    std::condition_variable cv;
    std::deque<apb::ReplicaEvent> queue;
    bool ended = false;
    std::thread pump([&] {
      apb::ReplicaEvent e;
      while (reader->Read(&e)) {
        std::lock_guard<std::mutex> lock(mu);
        queue.push_back(e);
        cv.notify_one();
      }
      std::lock_guard<std::mutex> lock(mu);
      ended = true;
      cv.notify_one();
    });
    std::mt19937_64 rng(seed_ + streams_.fetch_add(1));
    std::uniform_real_distribution<double> draw(0, 1);
    std::optional<apb::ReplicaEvent> held;
    bool writing = true;
    auto write = [&](const apb::ReplicaEvent& e) {
      if (writing && !out->Write(e)) writing = false;
    };
    size_t injected_seen = 0;
    while (writing) {
      for (const apb::ReplicaEvent& e : InjectedAfter(&injected_seen)) {
        write(e);
        if (writing) ++injected_written;
      }
      std::optional<apb::ReplicaEvent> next;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return !queue.empty() || ended; });
        if (!queue.empty()) {
          next = std::move(queue.front());
          queue.pop_front();
        } else if (ended) {
          break;
        }
      }
      if (c->IsCancelled() || claim_forgotten_) break;
      if (!next) {  // quiet: what was held goes now
        if (held) write(*held);
        held.reset();
        continue;
      }
      if (held) {
        write(*next);  // the later event first, then the one held back
        write(*held);
        held.reset();
        ++reordered;
      } else if (draw(rng) < odds_.reorder) {
        held = std::move(next);
        continue;
      } else {
        write(*next);
      }
      if (draw(rng) < odds_.duplicate) {
        write(*next);
        ++duplicated;
      }
    }
    if (held) write(*held);
    ctx.TryCancel();
    pump.join();
    grpc::Status upstream = reader->Finish();
    if (claim_forgotten_) return forgot;
    return upstream.error_code() == grpc::StatusCode::CANCELLED ? grpc::Status::OK : upstream;
  }
  void ClaimForgotten(bool on) { claim_forgotten_ = on; }

  void AnswerSubmitsWith(const apb::Replica& answer) {
    std::lock_guard<std::mutex> lock(mu_);
    submit_answer_ = answer;
  }
  void LoseStops(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    stops_to_lose_ = n;
  }
  int64_t stops_lost() {
    std::lock_guard<std::mutex> lock(mu_);
    return stops_lost_;
  }

 private:
  template <typename Request, typename Response, typename Call>
  grpc::Status Forward(grpc::ServerContext* c, const Request& q, Response* a, Call call) {
    grpc::ClientContext ctx;
    ctx.set_deadline(c->deadline());
    return (stub_.get()->*call)(&ctx, q, a);
  }

  // The forged answer to a submit of `key` (nullopt: forward it).
  std::optional<apb::Replica> ForgedSubmitAnswer(const apb::ReplicaKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!submit_answer_) return std::nullopt;
    apb::Replica answer = *submit_answer_;
    *answer.mutable_key() = key;
    return answer;
  }
  void Remember(const apb::ReplicaKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    last_key_ = key;
  }
  std::vector<apb::ReplicaEvent> InjectedAfter(size_t* seen) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<apb::ReplicaEvent> out(injected_.begin() + static_cast<std::ptrdiff_t>(*seen), injected_.end());
    *seen = injected_.size();
    return out;
  }

  bool serve_watch_batches_ = false;               // under mu_
  std::optional<apb::ReplicaEvents> forged_batch_;  // under mu_
  std::mutex mu_;
  std::optional<apb::Replica> submit_answer_;  // under mu_
  int stops_to_lose_ = 0;   // under mu_
  int64_t stops_lost_ = 0;  // under mu_
  std::optional<std::vector<apb::SpecStartEstimate>> forged_estimates_;
  std::optional<google::protobuf::Timestamp> forged_at_;  // under mu_
  std::vector<apb::ReplicaEvent> injected_;
  apb::ReplicaKey last_key_;
  std::unique_ptr<apb::Adapter::Stub> stub_;
  uint64_t seed_;
  Odds odds_;
  std::atomic<uint64_t> streams_{0};
  std::atomic<bool> claim_forgotten_{false};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

EventChaosProxy::EventChaosProxy(const std::string& upstream, uint64_t seed, Odds odds)
    : service_(std::make_unique<Service>(upstream, seed, odds)) {}
EventChaosProxy::~EventChaosProxy() = default;
int EventChaosProxy::port() const { return service_->port(); }
int64_t EventChaosProxy::duplicated() const { return service_->duplicated; }
int64_t EventChaosProxy::reordered() const { return service_->reordered; }
void EventChaosProxy::Inject(const apb::ReplicaEvent& e) { service_->Inject(e); }
void EventChaosProxy::ForgeStartEstimates(std::vector<apb::SpecStartEstimate> estimates) {
  service_->ForgeStartEstimates(std::move(estimates));
}
void EventChaosProxy::ForgeUsageAt(const google::protobuf::Timestamp& at) { service_->ForgeUsageAt(at); }
int64_t EventChaosProxy::injected_written() const { return service_->injected_written; }
apb::ReplicaKey EventChaosProxy::LastSubmittedKey() const { return service_->LastSubmittedKey(); }
void EventChaosProxy::AnswerSubmitsWith(const apb::Replica& answer) { service_->AnswerSubmitsWith(answer); }
void EventChaosProxy::LoseStops(int n) { service_->LoseStops(n); }
void EventChaosProxy::ClaimForgotten(bool on) { service_->ClaimForgotten(on); }
int64_t EventChaosProxy::stops_lost() const { return service_->stops_lost(); }
void EventChaosProxy::ServeWatchBatches(std::optional<apb::ReplicaEvents> forged) {
  service_->ServeWatchBatches(std::move(forged));
}
int64_t EventChaosProxy::watch_calls() const { return service_->watch_calls; }
int64_t EventChaosProxy::watch_batches_calls() const { return service_->watch_batches_calls; }
void EventChaosProxy::RefuseSubmitReplicas() { service_->refuse_submit_replicas = true; }
int64_t EventChaosProxy::submit_replicas_calls() const { return service_->submit_replicas_calls; }

}  // namespace jc::testing
