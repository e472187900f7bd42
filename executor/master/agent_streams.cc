#include "executor/master/agent_streams.h"

#include <grpcpp/server_context.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "executor/auth/stream_session.h"
#include "executor/master/master.h"

namespace jc::nexec {
namespace {

using Frame = pb::AgentStreamFrame;
using Message = pb::AgentStreamMessage;

// A launch batch's results from the agent's answer, as GrpcAgentDialer reads a call's.
std::vector<absl::StatusOr<int>> ResultsOf(const Message& answer, size_t sent) {
  std::vector<absl::StatusOr<int>> out;
  if (answer.has_refused()) {
    const absl::Status refused(static_cast<absl::StatusCode>(answer.refused().code()), answer.refused().message());
    out.assign(sent, refused.ok() ? absl::InternalError("the agent refused the launches without a reason") : refused);
    return out;
  }
  return LaunchResultsOf(answer.launched(), sent);
}

}  // namespace

// What the reactor and the dialer share. Writes go out one at a time, in the order they
// were sealed; StartWrite and Finish are called without the mutex held (gRPC may run a
// reaction inline), and Finish only when no write is in flight, so the reactor lives
// while a write it was given is.
class AgentStreams::Link {
 public:
  using Reactor = grpc::ServerBidiReactor<Frame, Frame>;
  Link(Reactor* reactor, grpc::CallbackServerContext* ctx, CallDeadlines* deadlines)
      : reactor_(reactor), ctx_(ctx), deadlines_(deadlines) {}

  void Opened(StreamSealer sealer) {
    std::lock_guard<std::mutex> lock(mu_);
    sealer_ = std::move(sealer);
  }
  // The opening's welcome, as it is (it is not sealed).
  void SendRaw(Frame frame) { Push(std::move(frame), /*seal=*/nullptr); }
  // A sealed message; false once the stream ended.
  bool Send(const Message& message) { return Push(Frame(), &message); }

  absl::StatusOr<Message> Open(const Frame& frame) {
    std::lock_guard<std::mutex> lock(mu_);
    return sealer_.Open(frame);
  }

  // A launch batch's call number, with its waiter registered.
  struct Waiter {
    bool done = false;
    std::vector<absl::StatusOr<int>> results;
  };
  std::optional<std::vector<absl::StatusOr<int>>> Launch(const std::vector<pb::LaunchRequest>& reqs,
                                                         absl::Duration timeout) {
    Message m;
    Waiter waiter;
    uint64_t call = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ended_) return std::nullopt;
      call = ++calls_;
      waiters_[call] = {&waiter, reqs.size()};
    }
    m.set_call(call);
    for (const auto& r : reqs) *m.mutable_launch()->add_launches() = r;
    if (!Send(m)) {
      std::lock_guard<std::mutex> lock(mu_);
      waiters_.erase(call);
      return std::nullopt;  // ended meanwhile: nothing was sent, the dialer calls
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, absl::ToChronoTime(absl::Now() + timeout), [&] { return waiter.done; })) {
      waiters_.erase(call);
      return std::vector<absl::StatusOr<int>>(
          reqs.size(), absl::DeadlineExceededError("the agent did not answer the launches on its stream in time"));
    }
    return std::move(waiter.results);
  }
  // The agent's answer to launch batch `call` (one it was not asked is ignored).
  void Answered(const Message& answer) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiters_.find(answer.call());
    if (it == waiters_.end()) return;
    it->second.waiter->results = ResultsOf(answer, it->second.sent);
    it->second.waiter->done = true;
    waiters_.erase(it);
    cv_.notify_all();
  }

  // Ends the stream with `status` (the first reason stands); every launch waiting fails.
  void End(const grpc::Status& status) {
    bool cancel = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancel = !ended_ && writing_;
      EndLocked(status);
      if (cancel) cancelling_ = true;
    }
    // A write in flight to an agent that does not read would never complete: cancelled if
    // it has not within 5 s, it does, and the call finishes (with `status` when it did).
    if (cancel) CancelSoon();
    FinishIfIdle();
  }
  void WriteDone(bool ok) {
    const Frame* next = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued_bytes_ -= queue_.front().ByteSizeLong();
      queue_.pop_front();
      if (!ok) EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the agent's stream broke"));
      if (!ended_ && !queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
      }
    }
    if (next != nullptr) reactor_->StartWrite(next);
    FinishIfIdle();
  }
  bool ended() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  // One heartbeat at a time on a stream (an agent waits for each answer): false when one is
  // still being answered. Bounds what a stream holds in the master's loop.
  bool TakeHeartbeat() {
    std::lock_guard<std::mutex> lock(mu_);
    if (heartbeat_in_flight_) return false;
    heartbeat_in_flight_ = true;
    return true;
  }
  void HeartbeatAnswered() {
    std::lock_guard<std::mutex> lock(mu_);
    heartbeat_in_flight_ = false;
  }

 private:
  bool Push(Frame frame, const Message* seal) {
    const Frame* first = nullptr;
    bool queued = false;
    bool cancel = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ended_) return false;
      queue_.push_back(seal != nullptr ? sealer_.Seal(*seal) : std::move(frame));
      queued_bytes_ += queue_.back().ByteSizeLong();
      if (queue_.size() > AgentStreams::kMaxQueuedFrames || queued_bytes_ > AgentStreams::kMaxQueuedBytes) {
        EndLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                               absl::StrCat("the agent does not read its stream: ", queue_.size(), " frames, ",
                                            queued_bytes_, " bytes unsent")));
        cancel = writing_;
        if (cancel) cancelling_ = true;
      } else {
        queued = true;
        if (!writing_) {
          writing_ = true;
          first = &queue_.front();  // stays put until its OnWriteDone pops it
        }
      }
    }
    if (first != nullptr) reactor_->StartWrite(first);
    if (cancel) CancelSoon();
    FinishIfIdle();
    return queued;
  }
  // The call cancelled in 5 s unless done by then (a write in flight may never complete
  // otherwise); no Finish until the cancel is set, so that OnDone forgets it (ForgetCancel).
  void CancelSoon() {
    CallDeadlines::Ticket ticket = deadlines_->CancelAt(ctx_, absl::Now() + absl::Seconds(5));
    std::lock_guard<std::mutex> lock(mu_);
    stuck_cancel_ = std::move(ticket);
    cancelling_ = false;
  }

 public:
  // The reactor's OnDone: its context goes.
  void ForgetCancel() {
    CallDeadlines::Ticket ticket;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ticket = std::move(stuck_cancel_);
    }
    ticket.Forget();
  }

 private:
  // Finish once ended with no write in flight nor a cancel being made, once.
  void FinishIfIdle() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!ended_ || writing_ || cancelling_ || finished_) return;
      finished_ = true;
    }
    reactor_->Finish(status_);
  }
  void EndLocked(const grpc::Status& status) {
    if (ended_) return;
    ended_ = true;
    status_ = status;
    for (auto& [call, w] : waiters_) {
      w.waiter->results.assign(
          w.sent, absl::UnavailableError("the agent's stream ended before it answered the launches (the agent may "
                                         "have started them: its heartbeats say)"));
      w.waiter->done = true;
    }
    waiters_.clear();
    cv_.notify_all();
  }

  struct Waiting {
    Waiter* waiter;
    size_t sent;
  };
  Reactor* const reactor_;
  grpc::CallbackServerContext* const ctx_;  // used only before the call finished (then OnDone may have run)
  CallDeadlines* const deadlines_;
  CallDeadlines::Ticket stuck_cancel_;  // a write stuck after the stream ended
  mutable std::mutex mu_;
  std::condition_variable cv_;
  StreamSealer sealer_ = StreamSealer::Unsigned(false);
  std::deque<Frame> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool heartbeat_in_flight_ = false;
  bool cancelling_ = false;
  bool ended_ = false;
  bool finished_ = false;
  grpc::Status status_;
  uint64_t calls_ = 0;
  std::map<uint64_t, Waiting> waiters_;
};

namespace {

class AgentStreamReactor final : public grpc::ServerBidiReactor<Frame, Frame> {
 public:
  AgentStreamReactor(grpc::CallbackServerContext* ctx, Master* master, const MungeAuth& auth, uid_t agent_uid,
                     AgentStreams* streams)
      : master_(master), auth_(auth), agent_uid_(agent_uid), streams_(streams),
        link_(std::make_shared<AgentStreams::Link>(this, ctx, &streams->deadlines())),
        hello_due_(streams->deadlines().CancelAt(ctx, absl::Now() + AgentStreams::kHelloWithin)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return link_->End(grpc::Status::OK);  // the agent closed it (or went)
    grpc::Status refused = opened_ ? Take() : Open();
    if (!refused.ok()) return link_->End(refused);
    if (!link_->ended()) StartRead(&in_);
  }
  void OnWriteDone(bool ok) override { link_->WriteDone(ok); }
  void OnCancel() override { link_->End(grpc::Status(grpc::StatusCode::CANCELLED, "the agent's stream was cancelled")); }
  void OnDone() override {
    hello_due_.Forget();
    link_->ForgetCancel();
    streams_->Forget(link_.get());
    if (opened_) spdlog::info("agent {}: its stream ended", host_);
    delete this;
  }

 private:
  grpc::Status Open() {
    auto accepted = AcceptAgentStream(auth_, in_, agent_uid_, master_->identity(), master_->term());
    if (!accepted.ok()) return ToGrpcStatus(accepted.status());
    hello_due_.Forget();
    host_ = accepted->host;
    link_->Opened(std::move(accepted->sealer));
    link_->SendRaw(std::move(accepted->welcome));
    opened_ = true;
    spdlog::info("agent {}: streams its heartbeats and takes its launches on one call", host_);
    return grpc::Status::OK;
  }

  grpc::Status Take() {
    auto m = link_->Open(in_);
    if (!m.ok()) return ToGrpcStatus(m.status());
    if (m->has_launched() || m->has_refused()) {
      link_->Answered(*m);
      return grpc::Status::OK;
    }
    if (!m->has_heartbeat()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "an agent's stream carries heartbeats and launch answers");
    }
    auto req = std::make_shared<pb::HeartbeatRequest>(std::move(*m->mutable_heartbeat()));
    if (req->info().host() != host_) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("a heartbeat for ", req->info().host(), " on the stream of ", host_));
    }
    if (!link_->TakeHeartbeat()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "one heartbeat at a time on an agent's stream: the last is not answered yet");
    }
    const uint64_t call = m->call();
    // `req` lives until the answer: the loop reads it before it is answered. The stream
    // takes the host's launches only once the master took the heartbeat as that host at
    // the address it reported.
    master_->StreamedHeartbeatThen(*req, [link = link_, req, call, streams = streams_](
                                             absl::StatusOr<Master::StreamedHeartbeat> answer) {
      if (answer.ok() && answer->host_at_address) {
        streams->Register(req->info().host(), req->info().address(), link);
      } else {
        streams->Forget(link.get());
      }
      Message out;
      out.set_call(call);
      link->HeartbeatAnswered();
      if (answer.ok()) {
        *out.mutable_heartbeat_answer() = std::move(answer->response);
      } else {
        out.mutable_refused()->set_code(static_cast<int>(answer.status().code()));
        out.mutable_refused()->set_message(std::string(answer.status().message()));
      }
      link->Send(out);
    });
    return grpc::Status::OK;
  }

  Master* const master_;
  const MungeAuth& auth_;
  const uid_t agent_uid_;
  AgentStreams* const streams_;
  std::shared_ptr<AgentStreams::Link> link_;
  Frame in_;
  bool opened_ = false;
  std::string host_;
  CallDeadlines::Ticket hello_due_;  // until the hello is taken
};

class StreamingDialer final : public AgentDialer {
 public:
  StreamingDialer(std::unique_ptr<AgentDialer> calls, std::shared_ptr<AgentStreams> streams)
      : calls_(std::move(calls)), streams_(std::move(streams)) {}
  absl::StatusOr<int> Launch(const std::string& address, const pb::LaunchRequest& req) override {
    return LaunchBatch(address, {req})[0];
  }
  std::vector<absl::StatusOr<int>> LaunchBatch(const std::string& address,
                                               const std::vector<pb::LaunchRequest>& reqs) override {
    // As long as a call would wait (GrpcAgentDialer's deadline).
    if (auto sent = streams_->LaunchBatch(address, reqs, absl::Seconds(10))) return std::move(*sent);
    return calls_->LaunchBatch(address, reqs);
  }
  absl::Status Signal(const std::string& address, const pb::SignalRequest& req) override {
    return calls_->Signal(address, req);
  }
  absl::Status Lead(const std::string& address, const pb::LeadRequest& req) override {
    return calls_->Lead(address, req);
  }
  absl::StatusOr<int64_t> SendInput(const std::string& address, const pb::InputRequest& req) override {
    return calls_->SendInput(address, req);
  }
  absl::StatusOr<std::string> ReadLog(const std::string& address, const pb::ReadLogRequest& req,
                                      int64_t max_bytes) override {
    return calls_->ReadLog(address, req, max_bytes);
  }

 private:
  std::unique_ptr<AgentDialer> calls_;
  std::shared_ptr<AgentStreams> streams_;
};

}  // namespace

grpc::ServerBidiReactor<Frame, Frame>* AgentStreams::Serve(grpc::CallbackServerContext* ctx, Master* master,
                                                           const MungeAuth& auth, uid_t agent_uid) {
  return new AgentStreamReactor(ctx, master, auth, agent_uid, this);
}

std::optional<std::vector<absl::StatusOr<int>>> AgentStreams::LaunchBatch(const std::string& address,
                                                                          const std::vector<pb::LaunchRequest>& reqs,
                                                                          absl::Duration timeout) {
  if (reqs.empty() || reqs[0].host().empty()) return std::nullopt;
  for (const auto& r : reqs) {
    if (r.host() != reqs[0].host()) return std::nullopt;  // one agent's batch, or calls
  }
  std::shared_ptr<Link> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_host_.find(reqs[0].host());
    if (it == by_host_.end() || it->second.address != address) return std::nullopt;
    link = it->second.link;
  }
  auto sent = link->Launch(reqs, timeout);
  if (sent && launched_ != nullptr) launched_->Increment(static_cast<double>(reqs.size()));
  return sent;
}

void AgentStreams::EnableMetrics(prometheus::Registry& registry) {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = &prometheus::BuildGauge()
               .Name("nexec_agent_streams")
               .Help("Agents holding a stream open with this master: their heartbeats and launches go on it")
               .Register(registry)
               .Add({});
  launched_ = &prometheus::BuildCounter()
                   .Name("nexec_agent_stream_launches_total")
                   .Help("Tasks this master launched down agents' streams (not by a call to the agent)")
                   .Register(registry)
                   .Add({});
  open_->Set(static_cast<double>(by_host_.size()));
}

size_t AgentStreams::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_host_.size();
}

void AgentStreams::Register(const std::string& host, const std::string& address, const std::shared_ptr<Link>& link) {
  std::lock_guard<std::mutex> lock(mu_);
  // A stream that ended is not kept: its OnDone forgot it already, or is about to (it ends
  // before it is done, and Forget takes this lock).
  if (link->ended()) return;
  if (auto was = host_of_.find(link.get()); was != host_of_.end() && was->second != host) {
    by_host_.erase(was->second);  // one host per stream: the last it was taken as
  }
  if (auto old = by_host_.find(host); old != by_host_.end() && old->second.link != link) {
    host_of_.erase(old->second.link.get());  // an agent's newer stream (it restarted) replaces the older
  }
  by_host_[host] = Registered{address, link};
  host_of_[link.get()] = host;
  if (open_ != nullptr) open_->Set(static_cast<double>(by_host_.size()));
}

void AgentStreams::Forget(const Link* link) {
  std::lock_guard<std::mutex> lock(mu_);
  auto was = host_of_.find(link);
  if (was == host_of_.end()) return;
  if (auto it = by_host_.find(was->second); it != by_host_.end() && it->second.link.get() == link) by_host_.erase(it);
  host_of_.erase(was);
  if (open_ != nullptr) open_->Set(static_cast<double>(by_host_.size()));
}

std::unique_ptr<AgentDialer> MakeStreamingDialer(std::unique_ptr<AgentDialer> calls,
                                                 std::shared_ptr<AgentStreams> streams) {
  return std::make_unique<StreamingDialer>(std::move(calls), std::move(streams));
}

}  // namespace jc::nexec
