// The control plane's gRPC edge toward adapters.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/replica_forgotten.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "spdlog/spdlog.h"
#include "jointcloud/adapter/v1/adapter.grpc.pb.h"
#include "services/southbound/adapter_client.h"

namespace jc::southbound {
namespace {

constexpr auto kCallTimeout = std::chrono::seconds(10);

absl::Status Failure(const AdapterAt& adapter, const grpc::Status& s) {
  absl::Status st = FromGrpcStatus(s);
  return absl::Status(st.code(), absl::StrCat("adapter at ", adapter.address, ": ", st.message()));
}

// OpenTunnel over one gRPC stream; its context lives as long as it does.
class GrpcTunnel final : public Tunnel {
 public:
  GrpcTunnel(AdapterAt adapter, std::unique_ptr<grpc::ClientContext> ctx,
             std::unique_ptr<grpc::ClientReaderWriter<apb::TunnelFrame, apb::TunnelFrame>> stream)
      : adapter_(std::move(adapter)), ctx_(std::move(ctx)), stream_(std::move(stream)) {}
  ~GrpcTunnel() override {
    Cancel();
    if (!finished_) stream_->Finish().ok();
  }
  bool Send(std::string_view data) override {
    constexpr size_t kFrame = 64 << 10;
    for (size_t at = 0; at < data.size(); at += kFrame) {
      apb::TunnelFrame frame;
      frame.set_data(std::string(data.substr(at, kFrame)));
      if (!stream_->Write(frame)) return false;
    }
    return true;
  }
  void CloseSend() override {
    apb::TunnelFrame frame;
    frame.set_close(true);
    stream_->Write(frame);
  }
  absl::Status AwaitConnected() override {
    apb::TunnelFrame frame;
    while (stream_->Read(&frame)) {
      if (frame.connected()) return absl::OkStatus();
      if (!frame.data().empty()) {
        stashed_ = std::move(*frame.mutable_data());  // an adapter that does not say: it answered
        return absl::OkStatus();
      }
      if (frame.close()) break;
    }
    absl::Status why = Finish();
    return why.ok() ? absl::UnavailableError(absl::StrCat("adapter at ", adapter_.address,
                                                          ": the endpoint closed before it took the connection"))
                    : why;
  }
  std::optional<std::string> Receive() override {
    if (stashed_.has_value()) {
      std::optional<std::string> out = std::move(stashed_);
      stashed_.reset();
      return out;
    }
    apb::TunnelFrame frame;
    while (stream_->Read(&frame)) {
      if (!frame.data().empty()) {
        // A close after data comes as its own frame (the adapter sends data, then close).
        return std::move(*frame.mutable_data());
      }
      if (frame.close()) break;
    }
    return std::nullopt;
  }
  void Cancel() override { ctx_->TryCancel(); }
  absl::Status Finish() override {
    if (finished_) return finish_;  // once: gRPC's Finish may not be called again
    stream_->WritesDone();
    grpc::Status s = stream_->Finish();
    finished_ = true;
    finish_ = s.ok() || s.error_code() == grpc::StatusCode::CANCELLED ? absl::OkStatus() : Failure(adapter_, s);
    return finish_;
  }

 private:
  std::optional<std::string> stashed_;  // bytes AwaitConnected read before any Receive
  AdapterAt adapter_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<apb::TunnelFrame, apb::TunnelFrame>> stream_;
  bool finished_ = false;
  absl::Status finish_;
};

class GrpcAdapterClient final : public AdapterClient {
 public:
  GrpcAdapterClient(std::shared_ptr<const auth::TlsMaterial> tls, AdapterProofOptions proof)
      : tls_(std::move(tls)), proof_(std::move(proof)) {
    if (proof_.metrics != nullptr) {
      refusals_ = &prometheus::BuildCounter()
                       .Name("jc_adapter_refusals_total")
                       .Help("Calls to centers' adapters refused because the adapter did not prove the center it was "
                             "called for, by center and reason (wrong_center, no_proof, bad_proof, no_key)")
                       .Register(*proof_.metrics);
    }
  }
  absl::StatusOr<apb::Usage> GetUsage(const AdapterAt& adapter, absl::Duration timeout) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    apb::Usage out;
    auto stub = Verified(adapter);
    if (!stub.ok()) return stub.status();
    grpc::Status s = (*stub)->GetUsage(&ctx, apb::GetUsageRequest(), &out);
    if (!s.ok()) return Failure(adapter, s);
    return out;
  }
  absl::StatusOr<apb::CenterInfo> GetCenterInfo(const AdapterAt& adapter, absl::Duration timeout) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    // Asked of the monitor every round: the answer is also the center's proof.
    return AskAndProve(adapter, Stub(adapter), ctx);
  }
  absl::StatusOr<apb::ListAccountingResponse> ListAccounting(const AdapterAt& adapter,
                                                             const apb::ListAccountingRequest& req) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));  // a center asks its accounting
    apb::ListAccountingResponse out;
    auto stub = Verified(adapter);
    if (!stub.ok()) return stub.status();
    grpc::Status s = (*stub)->ListAccounting(&ctx, req, &out);
    if (!s.ok()) return Failure(adapter, s);
    return out;
  }
  absl::StatusOr<apb::Replica> Submit(const AdapterAt& adapter, const apb::SubmitReplicaRequest& req) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    apb::Replica out;
    auto stub = Verified(adapter);
    if (!stub.ok()) return stub.status();
    grpc::Status s = (*stub)->SubmitReplica(&ctx, req, &out);
    if (!s.ok()) return Failure(adapter, s);
    return out;
  }
  std::vector<absl::StatusOr<apb::Replica>> SubmitMany(const AdapterAt& adapter,
                                                       const std::vector<apb::SubmitReplicaRequest>& reqs) override {
    if (auto stub = Verified(adapter); !stub.ok()) {
      return std::vector<absl::StatusOr<apb::Replica>>(reqs.size(), stub.status());
    }
    if (reqs.size() == 1 || !Batches(adapter)) return AdapterClient::SubmitMany(adapter, reqs);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    apb::SubmitReplicasRequest req;
    for (const auto& r : reqs) *req.add_replicas() = r;
    apb::SubmitReplicasResponse resp;
    auto stub = Verified(adapter);
    if (!stub.ok()) return std::vector<absl::StatusOr<apb::Replica>>(reqs.size(), stub.status());
    grpc::Status s = (*stub)->SubmitReplicas(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      // An adapter built before SubmitReplicas: one call per replica from now on. Those calls
      // go without mu_, which each takes for its stub (helper-72: holding it here hung every
      // call of this client, to every center, on the first such batch).
      {
        absl::MutexLock lock(&mu_);
        no_batches_.insert(adapter.address);
      }
      return AdapterClient::SubmitMany(adapter, reqs);
    }
    std::vector<absl::StatusOr<apb::Replica>> out;
    if (s.ok() && resp.results_size() != static_cast<int>(reqs.size())) {
      s = grpc::Status(grpc::StatusCode::INTERNAL,
                       absl::StrCat("SubmitReplicas answered ", resp.results_size(), " of ", reqs.size(), " replicas"));
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (!s.ok()) {
        out.push_back(Failure(adapter, s));
        continue;
      }
      auto& result = *resp.mutable_results(static_cast<int>(i));
      if (result.code() == 0) {
        out.push_back(std::move(*result.mutable_replica()));
      } else {
        out.push_back(absl::Status(static_cast<absl::StatusCode>(result.code()),
                                   absl::StrCat("adapter at ", adapter.address, ": ", result.message())));
      }
    }
    return out;
  }
  absl::Status Stop(const AdapterAt& adapter, const apb::ReplicaKey& key) override {
    return OnReplica(adapter, key, &apb::Adapter::Stub::StopReplica).status();
  }
  absl::StatusOr<apb::Replica> Withdraw(const AdapterAt& adapter, const apb::ReplicaKey& key) override {
    return OnReplica(adapter, key, &apb::Adapter::Stub::WithdrawReplica);
  }
  absl::StatusOr<apb::Replica> Get(const AdapterAt& adapter, const apb::ReplicaKey& key) override {
    return OnReplica(adapter, key, &apb::Adapter::Stub::GetReplica);
  }
  absl::StatusOr<std::unique_ptr<Tunnel>> OpenTunnel(const AdapterAt& adapter, const apb::ReplicaKey& key,
                                                     const std::string& port_name) override {
    apb::TunnelFrame hello;
    *hello.mutable_key() = key;
    hello.set_port_name(port_name);
    return Open(adapter, hello);
  }
  absl::StatusOr<std::unique_ptr<Tunnel>> OpenExec(const AdapterAt& adapter, const apb::ReplicaKey& key,
                                                   const apb::ExecStart& exec) override {
    apb::TunnelFrame hello;
    *hello.mutable_key() = key;
    *hello.mutable_exec() = exec;
    return Open(adapter, hello);
  }
  absl::StatusOr<std::unique_ptr<Tunnel>> Open(const AdapterAt& adapter, const apb::TunnelFrame& hello) {
    auto stub = Verified(adapter);
    if (!stub.ok()) return stub.status();
    auto ctx = std::make_unique<grpc::ClientContext>();
    auto stream = (*stub)->OpenTunnel(ctx.get());
    stream->Write(hello);  // a refusal comes with the first Read
    return std::unique_ptr<Tunnel>(std::make_unique<GrpcTunnel>(adapter, std::move(ctx), std::move(stream)));
  }
  // One call about one replica (stop, withdraw, get), answered with the replica.
  using ReplicaCall = grpc::Status (apb::Adapter::Stub::*)(grpc::ClientContext*, const apb::ReplicaRef&,
                                                           apb::Replica*);
  absl::StatusOr<apb::Replica> OnReplica(const AdapterAt& adapter, const apb::ReplicaKey& key, ReplicaCall call) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    apb::ReplicaRef ref;
    *ref.mutable_key() = key;
    apb::Replica out;
    auto stub = Verified(adapter);
    if (!stub.ok()) return stub.status();
    grpc::Status s = ((**stub).*call)(&ctx, ref, &out);
    if (!s.ok()) {
      absl::Status failed = Failure(adapter, s);
      // Only the adapter's own mark says "forgotten" (common/replica_forgotten.h).
      const auto& trailing = ctx.GetServerTrailingMetadata();
      if (trailing.find(kReplicaForgottenMetadata) != trailing.end()) {
        failed = MarkReplicaForgotten(failed);
      }
      return failed;
    }
    return out;
  }
  absl::Status Watch(const AdapterAt& adapter, uint64_t since_cursor,
                     const std::function<void(const apb::ReplicaEvent&)>& on_event,
                     const std::function<bool()>& cancelled) override {
    apb::WatchRequest req;
    req.set_since_cursor(since_cursor);
    auto stub = Verified(adapter);
    if (!stub.ok()) return stub.status();
    if (WatchesInBatches(adapter)) {
      // A group commit's events in one message (WatchBatches), else one each.
      grpc::ClientContext ctx;
      bool received = false;
      absl::Status s = ReadWatch<apb::ReplicaEvents>(adapter, *stub, ctx, (*stub)->WatchBatches(&ctx, req), on_event,
                                                     cancelled, &received);
      if (received || !absl::IsUnimplemented(s)) return s;
      // An adapter built before WatchBatches: Watch, until it is asked again.
      absl::MutexLock lock(&mu_);
      no_watch_batches_[adapter.address] = absl::Now();
    }
    grpc::ClientContext ctx;
    return ReadWatch<apb::ReplicaEvent>(adapter, *stub, ctx, (*stub)->Watch(&ctx, req), on_event, cancelled);
  }
  absl::StatusOr<apb::StageDatasetResponse> Stage(const AdapterAt& adapter,
                                                 const apb::StageDatasetRequest& req) override {
    grpc::ClientContext ctx;
    // Copying data takes as long as it takes; an hour bounds a stuck mover.
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(1));
    apb::StageDatasetResponse out;
    auto stub = Verified(adapter);
    if (!stub.ok()) return stub.status();
    grpc::Status s = (*stub)->StageDataset(&ctx, req, &out);
    if (!s.ok()) return Failure(adapter, s);
    return out;
  }
  absl::StatusOr<apb::StageImageResponse> StageImage(const AdapterAt& adapter,
                                                     const apb::StageImageRequest& req) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(1));  // as datasets
    apb::StageImageResponse out;
    auto stub = Verified(adapter);
    if (!stub.ok()) return stub.status();
    grpc::Status s = (*stub)->StageImage(&ctx, req, &out);
    if (!s.ok()) return Failure(adapter, s);
    return out;
  }
  absl::StatusOr<std::string> ReadLog(const AdapterAt& adapter, const apb::ReplicaKey& key,
                                      int64_t max_bytes) override {
    std::string out;
    for (bool stderr : {false, true}) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
      apb::ReadLogRequest req;
      *req.mutable_key() = key;
      req.set_stderr(stderr);
      auto stub = Verified(adapter);
      if (!stub.ok()) return stub.status();
      auto reader = (*stub)->ReadLog(&ctx, req);
      apb::LogChunk chunk;
      std::string part;
      while (reader->Read(&chunk) && static_cast<int64_t>(out.size() + part.size()) < max_bytes) {
        part += chunk.data();
      }
      grpc::Status s = reader->Finish();
      if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) return Failure(adapter, s);
      if (stderr && !part.empty()) out += "\n--- stderr ---\n";
      out += part;
    }
    if (static_cast<int64_t>(out.size()) > max_bytes) out.resize(static_cast<size_t>(max_bytes));
    return out;
  }

 private:
  // One channel per center and address. Over TLS the adapter's certificate is checked
  // against the center's name (the target name override), not the address.
  apb::Adapter::Stub* Stub(const AdapterAt& adapter) {
    absl::MutexLock lock(&mu_);
    auto& stub = stubs_[adapter.center_id + "@" + adapter.address];
    if (stub == nullptr) {
      grpc::ChannelArguments args;
      if (tls_ != nullptr && !adapter.center_id.empty()) {
        args.SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, adapter.center_id);
      }
      // A unix: address is a local adapter's socket: it knows the caller from the kernel
      // (SO_PEERCRED), and TLS on it would add nothing.
      const bool unix_socket = absl::StartsWith(adapter.address, "unix:");
      auto channel = grpc::CreateCustomChannel(
          adapter.address, unix_socket ? grpc::InsecureChannelCredentials() : auth::ChannelCredentials(tls_.get()),
          args);
      channels_[adapter.center_id + "@" + adapter.address] = channel;
      stub = apb::Adapter::NewStub(channel);
    }
    return stub.get();
  }
  // Whether the channel holds a connection now: one that is not (never made, dropped,
  // failed) makes a new connection on the next call, maybe to another process behind the
  // same address, which must prove the center again.
  bool Connected(const std::string& key) {
    absl::MutexLock lock(&mu_);
    auto it = channels_.find(key);
    return it != channels_.end() && it->second->GetState(false) == GRPC_CHANNEL_READY;
  }
  // The adapter must be the center it is called for (issue 44, hole 5: a center pointed
  // at another center's adapter got that center's replicas, events and usage; a process
  // that took over an adapter's socket would get its jobs' commands and secrets). Its own
  // center id (GetCenterInfo's ai_center_id) must be the registered center's; over TLS its
  // certificate must also name the center (the target name override above); and a center
  // issued an adapter key must answer a fresh challenge with the key's proof — which no
  // other center's adapter, impostor or proxy can make, whatever id it claims.
  absl::StatusOr<apb::CenterInfo> AskAndProve(const AdapterAt& adapter, apb::Adapter::Stub* stub,
                                              grpc::ClientContext& ctx) {
    std::optional<auth::AdapterKeys> keys;
    if (proof_.keys && !adapter.center_id.empty()) {
      auto read = proof_.keys(adapter.center_id);
      if (!read.ok()) {
        // Not a refusal: the store is away; nothing is asked of the adapter meanwhile.
        return absl::UnavailableError(absl::StrCat("adapter key of center ", adapter.center_id,
                                                   " not read: ", read.status().message()));
      }
      keys = std::move(*read);
      if (!keys && proof_.require_keys) {
        return Refuse(adapter, "no_key",
                      absl::StrCat("center ", adapter.center_id,
                                   " was issued no adapter key and this control plane requires one "
                                   "(--require_adapter_key): issue one (POST /openapi/v1/centers/",
                                   adapter.center_id, "/adapterkey) and give it to its adapter (--center_key_file)"));
      }
    }
    apb::GetCenterInfoRequest req;
    if (keys) {
      auto challenge = auth::NewAdapterChallenge();
      if (!challenge.ok()) return challenge.status();
      req.set_challenge(*challenge);
    }
    apb::CenterInfo info;
    grpc::Status s = stub->GetCenterInfo(&ctx, req, &info);
    if (!s.ok()) return Failure(adapter, s);
    if (!adapter.center_id.empty() && info.ai_center_id() != adapter.center_id) {
      return Refuse(adapter, "wrong_center",
                    absl::StrCat("adapter at ", adapter.address, " is center \"", info.ai_center_id(), "\", not ",
                                 adapter.center_id, ": refused (a center must point at its own adapter)"));
    }
    if (keys) {
      if (info.center_proof().empty()) {
        return Refuse(adapter, "no_proof",
                      absl::StrCat("adapter at ", adapter.address, " gave no proof that it is center ",
                                   adapter.center_id, ", which was issued an adapter key: refused (start the adapter "
                                   "with --center_key_file holding that key)"));
      }
      if (!auth::AdapterProofMatches(*keys, absl::Now(), adapter.center_id, req.challenge(), info.center_proof())) {
        return Refuse(adapter, "bad_proof",
                      absl::StrCat("adapter at ", adapter.address, " failed to prove it is center ", adapter.center_id,
                                   ": its key is not the one issued to the center (not the center's adapter, or a "
                                   "key replaced more than the grace period ago): refused"));
      }
    }
    if (!adapter.center_id.empty()) {
      absl::MutexLock lock(&mu_);
      verified_at_[adapter.center_id + "@" + adapter.address] = absl::Now();
    }
    return info;
  }
  absl::Status Refuse(const AdapterAt& adapter, const std::string& reason, const std::string& message) {
    if (refusals_ != nullptr) refusals_->Add({{"center", adapter.center_id}, {"reason", reason}}).Increment();
    const std::string key = adapter.center_id + "@" + adapter.address;
    bool log = false;
    {
      absl::MutexLock lock(&mu_);
      verified_at_.erase(key);
      // Logged once a minute per adapter and reason: a dispatcher retrying every cycle
      // would flood the log (the metric counts each refusal).
      auto& [last_reason, logged_at] = refusal_logged_[key];
      if (last_reason != reason || absl::Now() - logged_at >= absl::Minutes(1)) {
        last_reason = reason;
        logged_at = absl::Now();
        log = true;
      }
    }
    if (log) spdlog::warn("refusing the adapter at {} for center {}: {}", adapter.address, adapter.center_id, message);
    absl::Status refused = absl::PermissionDeniedError(message);
    refused.SetPayload(kUnprovenAdapterPayload, absl::Cord(reason));
    return refused;
  }
  absl::StatusOr<apb::Adapter::Stub*> Verified(const AdapterAt& adapter) {
    apb::Adapter::Stub* stub = Stub(adapter);
    if (adapter.center_id.empty()) return stub;  // tests naming an address alone
    const std::string key = adapter.center_id + "@" + adapter.address;
    if (Connected(key)) {
      absl::MutexLock lock(&mu_);
      auto it = verified_at_.find(key);
      if (it != verified_at_.end() && absl::Now() - it->second < kReverify) return stub;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    auto info = AskAndProve(adapter, stub, ctx);
    if (!info.ok()) return info.status();
    return stub;
  }
  bool Batches(const AdapterAt& adapter) {
    absl::MutexLock lock(&mu_);
    return !no_batches_.contains(adapter.address);
  }
  // An adapter that answered WatchBatches UNIMPLEMENTED is asked again after
  // kAskWatchBatchesAgain (upgraded in place, it batches again without a restart here).
  bool WatchesInBatches(const AdapterAt& adapter) {
    absl::MutexLock lock(&mu_);
    auto it = no_watch_batches_.find(adapter.address);
    if (it == no_watch_batches_.end()) return true;
    if (absl::Now() - it->second < kAskWatchBatchesAgain) return false;
    no_watch_batches_.erase(it);
    return true;
  }
  // The events of a watch's message: one (Watch), or a batch (WatchBatches) of at most
  // kMaxWatchBatchEvents — a rogue adapter's 4 MiB of empty events (two million objects, each
  // a closure on the job manager's loop) ends the stream instead.
  static absl::Status EventsOf(const apb::ReplicaEvent& event, std::vector<const apb::ReplicaEvent*>& out) {
    out.assign(1, &event);
    return absl::OkStatus();
  }
  static absl::Status EventsOf(const apb::ReplicaEvents& batch, std::vector<const apb::ReplicaEvent*>& out) {
    if (batch.events_size() > kMaxWatchBatchEvents) {
      return absl::ResourceExhaustedError(absl::StrCat("a WatchBatches message of ", batch.events_size(),
                                                       " events, more than the ", kMaxWatchBatchEvents, " read"));
    }
    out.clear();
    for (const auto& e : batch.events()) out.push_back(&e);
    return absl::OkStatus();
  }
  // Reads a watch's messages, each event to `on_event`, until the stream ends, `cancelled`
  // says so or the adapter stops proving its center (Watch and WatchBatches alike); nothing
  // more of a message is delivered once either happened. `received`: whether any message came.
  template <typename Message>
  absl::Status ReadWatch(const AdapterAt& adapter, apb::Adapter::Stub* stub, grpc::ClientContext& ctx,
                         std::unique_ptr<grpc::ClientReader<Message>> reader,
                         const std::function<void(const apb::ReplicaEvent&)>& on_event,
                         const std::function<bool()>& cancelled, bool* received = nullptr) {
    std::atomic<bool> finished{false};
    std::atomic<bool> stopped{false};  // cancelled or refused: deliver nothing more
    // A reader blocks in Read; a side thread cancels the call when asked to stop, and asks
    // the adapter to prove its center again every kReverify while the watch is open (a
    // key rotated past its grace, a center pointed elsewhere, end the watch).
    absl::Status refused;
    std::thread canceller([&] {
      absl::Time proved = absl::Now();
      while (!finished.load()) {
        if (cancelled()) {
          stopped = true;
          ctx.TryCancel();
          return;
        }
        if (!adapter.center_id.empty() && absl::Now() - proved >= kReverify) {
          proved = absl::Now();
          grpc::ClientContext check;
          check.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
          auto info = AskAndProve(adapter, stub, check);
          if (!info.ok() && absl::IsPermissionDenied(info.status())) {
            refused = info.status();
            stopped = true;
            ctx.TryCancel();
            return;
          }
          if (!info.ok() && (absl::IsDeadlineExceeded(info.status()) || absl::IsUnavailable(info.status()))) {
            // The adapter no longer answers (a partition holds the connection open and
            // silent): the watch is as good as down, and is said to be, so that its center's
            // replicas are asked directly and a lost center is noticed.
            refused = absl::UnavailableError(absl::StrCat("adapter at ", adapter.address,
                                                          " stopped answering: ", info.status().message()));
            stopped = true;
            ctx.TryCancel();
            return;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    Message message;
    std::vector<const apb::ReplicaEvent*> events;
    absl::Status malformed;
    while (!stopped && reader->Read(&message)) {
      if (received != nullptr) *received = true;
      malformed = EventsOf(message, events);
      if (!malformed.ok()) {
        ctx.TryCancel();
        break;
      }
      for (const apb::ReplicaEvent* e : events) {
        if (stopped) break;
        on_event(*e);
      }
      message.Clear();
    }
    finished = true;
    canceller.join();
    grpc::Status s = reader->Finish();
    if (!refused.ok()) return refused;
    if (!malformed.ok()) {
      return absl::Status(malformed.code(), absl::StrCat("adapter at ", adapter.address, ": ", malformed.message()));
    }
    if (s.error_code() == grpc::StatusCode::CANCELLED) return absl::CancelledError("watch cancelled");
    return s.ok() ? absl::OkStatus() : Failure(adapter, s);
  }
  std::shared_ptr<const auth::TlsMaterial> tls_;
  const AdapterProofOptions proof_;
  prometheus::Family<prometheus::Counter>* refusals_ = nullptr;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<apb::Adapter::Stub>> stubs_;
  absl::flat_hash_set<std::string> no_batches_;  // adapters that answered SubmitReplicas UNIMPLEMENTED
  // Adapters that answered WatchBatches UNIMPLEMENTED, and when.
  absl::flat_hash_map<std::string, absl::Time> no_watch_batches_ ABSL_GUARDED_BY(mu_);
  static constexpr absl::Duration kAskWatchBatchesAgain = absl::Minutes(10);
  static constexpr int kMaxWatchBatchEvents = 16384;  // the SDK sends about a megabyte a message
  static constexpr absl::Duration kReverify = absl::Seconds(10);
  absl::flat_hash_map<std::string, absl::Time> verified_at_ ABSL_GUARDED_BY(mu_);  // center@address -> proved at
  absl::flat_hash_map<std::string, std::pair<std::string, absl::Time>> refusal_logged_
      ABSL_GUARDED_BY(mu_);  // center@address -> the reason last logged, when
};

}  // namespace

std::unique_ptr<AdapterClient> MakeGrpcAdapterClient(std::shared_ptr<const auth::TlsMaterial> tls,
                                                     AdapterProofOptions proof) {
  return std::make_unique<GrpcAdapterClient>(std::move(tls), std::move(proof));
}

}  // namespace jc::southbound
