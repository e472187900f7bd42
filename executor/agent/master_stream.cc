#include "executor/agent/master_stream.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "executor/client/master_list.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

struct MasterStream::Open {
  std::string address;
  std::shared_ptr<pb::Master::Stub> stub;  // its channel, kept while the stream is (MasterList drops failed ones)
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<pb::AgentStreamFrame, pb::AgentStreamFrame>> stream;
  AgentStreamOpening opening;
  std::thread reader;
  std::thread launcher;
  std::thread watchdog;
  std::atomic<bool> reader_done{false};
  std::atomic<bool> launcher_done{false};
  std::atomic<bool> watchdog_done{false};
  absl::Duration write_timeout;

  std::mutex mu;  // what the reader tells the heartbeat loop and the launcher
  // A condition each, so that what wakes one thread wakes no other: at a few thousand tasks
  // a second, one condition for all had every launch batch and every write wake the
  // launcher, the watchdog and the heartbeat loop alike (perf, issue 48).
  std::condition_variable answered;  // the welcome, a heartbeat's answer, or the end: the heartbeat loop
  std::condition_variable launch;    // a launch batch, or stopping: the launcher
  std::condition_variable watch;     // a write to time, or stopping: the watchdog
  std::optional<StreamSealer> sealer;  // once the welcome was proven; its Open is the reader's
  bool ended = false;
  grpc::Status status;  // why it ended
  std::string leader_named;
  uint64_t waiting = 0;  // the heartbeat whose answer is awaited
  std::optional<pb::AgentStreamMessage> answer;
  std::deque<pb::AgentStreamMessage> launches;  // for the launcher
  bool stopping = false;                        // the launcher and the watchdog end
  // The stream's start or a write under way, and by when it must be through: past it the
  // watchdog cancels the stream (timed_out says so).
  std::optional<absl::Time> busy_until;
  bool timed_out = false;
  // The watchdog waits until a deadline (a write's, maybe past by now): it looks again then,
  // so a write that starts meanwhile need not wake it (the writes come every few
  // milliseconds, and each is over long before the timeout).
  bool watch_timed = false;

  void WakeAll() {  // with mu held
    answered.notify_all();
    launch.notify_all();
    watch.notify_all();
  }

  std::mutex write_mu;  // one write at a time, in the order sealed (the loop's heartbeats, the reader's answers)
  uint64_t calls = 0;   // with write_mu

  // gRPC's Write waits for the peer's flow-control window, and the stream's start for the
  // peer to allow a stream: a peer that grants neither (whoever took a down master's port,
  // attacker helper-60) held the heartbeat loop for good — no heartbeat, no deadline
  // enforced, no exit recorded, and a SIGTERM that never ended the agent. Each is bounded
  // by write_timeout: the watchdog cancels the stream past it, which ends the wait.
  void Busy() {
    std::lock_guard<std::mutex> lock(mu);
    busy_until = absl::Now() + write_timeout;
    if (!watch_timed) watch.notify_one();
  }
  void Idle() {
    std::lock_guard<std::mutex> lock(mu);
    busy_until.reset();
  }
  // With write_mu held.
  bool BoundedWrite(const pb::AgentStreamFrame& frame) {
    Busy();
    const bool written = stream->Write(frame);
    Idle();
    return written;
  }
  bool Write(const pb::AgentStreamMessage& m) {
    std::lock_guard<std::mutex> lock(write_mu);
    return BoundedWrite(sealer->Seal(m));
  }
};

MasterStream::MasterStream(MungeAuth auth, std::string host, std::vector<uid_t> master_uids, LaunchHandler on_launch)
    : auth_(std::move(auth)), host_(std::move(host)), master_uids_(std::move(master_uids)),
      on_launch_(std::move(on_launch)) {}

MasterStream::~MasterStream() {
  Close();
  for (auto& o : closing_) {
    if (o->reader.joinable()) o->reader.join();
    if (o->launcher.joinable()) o->launcher.join();
    if (o->watchdog.joinable()) o->watchdog.join();
  }
}

void MasterStream::Close() {
  if (open_ != nullptr) {
    open_->ctx.TryCancel();
    {
      std::lock_guard<std::mutex> lock(open_->mu);
      open_->stopping = true;
      open_->WakeAll();
    }
    closing_.push_back(std::move(open_));
  }
  Reap();
}

void MasterStream::Reap() {
  for (auto it = closing_.begin(); it != closing_.end();) {
    Open* o = it->get();
    if (!o->reader_done || !o->launcher_done || !o->watchdog_done) {
      ++it;
      continue;
    }
    if (o->reader.joinable()) o->reader.join();
    if (o->launcher.joinable()) o->launcher.join();
    if (o->watchdog.joinable()) o->watchdog.join();
    it = closing_.erase(it);
  }
}

void MasterStream::Launch(Open* o) {
  while (true) {
    pb::AgentStreamMessage m;
    {
      std::unique_lock<std::mutex> lock(o->mu);
      o->launch.wait(lock, [o] { return o->stopping || !o->launches.empty(); });
      if (o->stopping) break;  // the stream ended: no answer could go; the heartbeats tell
      m = std::move(o->launches.front());
      o->launches.pop_front();
    }
    pb::AgentStreamMessage out;
    out.set_call(m.call());
    *out.mutable_launched() = on_launch_(m.launch());
    if (!o->Write(out)) break;  // the stream broke: the reader says how
  }
  o->launcher_done = true;
}

void MasterStream::Watch(Open* o) {
  {
    std::unique_lock<std::mutex> lock(o->mu);
    while (!o->stopping) {
      if (o->busy_until && absl::Now() >= *o->busy_until) {
        o->timed_out = true;
        o->ctx.TryCancel();  // the write or start returns; the reader ends, saying why
        break;
      }
      if (o->busy_until) {
        o->watch_timed = true;
        o->watch.wait_until(lock, absl::ToChronoTime(*o->busy_until));
        o->watch_timed = false;
      } else {
        o->watch.wait(lock);
      }
    }
  }
  o->watchdog_done = true;
}

// The reader: the welcome, then heartbeat answers for the loop and launch batches, each
// answered here. Any frame that does not hold ends the stream (cancelled), saying why.
void MasterStream::Read(Open* o) {
  grpc::Status failed;
  pb::AgentStreamFrame frame;
  while (failed.ok() && o->stream->Read(&frame)) {
    if (!o->sealer) {
      pb::AgentStreamWelcome welcome;
      auto sealer = CheckWelcome(auth_, o->opening, frame, master_uids_, &welcome);
      if (!sealer.ok()) {
        failed = grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                              absl::StrCat(sealer.status().message(), "; the stream is ignored"));
        break;
      }
      std::lock_guard<std::mutex> lock(o->mu);
      o->sealer = std::move(*sealer);
      o->answered.notify_all();
      continue;
    }
    auto m = o->sealer->Open(frame);
    if (!m.ok()) {
      failed = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(m.status().message()));
    } else if (m->has_launch()) {
      std::lock_guard<std::mutex> lock(o->mu);
      o->launches.push_back(std::move(*m));
      o->launch.notify_one();
    } else if (m->has_heartbeat_answer() || m->has_refused()) {
      std::lock_guard<std::mutex> lock(o->mu);
      if (m->call() == o->waiting) {
        o->answer = std::move(*m);
        o->answered.notify_all();
      }
    } else {
      failed = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "the nexec master sent the agent's stream something other than answers and launches");
    }
  }
  if (!failed.ok()) o->ctx.TryCancel();
  grpc::Status finished;
  {
    std::lock_guard<std::mutex> lock(o->write_mu);  // no write in flight while it finishes
    finished = o->stream->Finish();
  }
  {
    std::lock_guard<std::mutex> lock(o->mu);
    o->ended = true;
    o->stopping = true;
    o->status = o->timed_out
                    ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                   absl::StrCat("the nexec master at ", o->address, " took nothing sent on the agent's stream for ",
                                                absl::FormatDuration(o->write_timeout), ": the stream was cancelled"))
                : !failed.ok() ? failed
                : finished.ok()
                    ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the nexec master ended the agent's stream")
                    : finished;
    o->leader_named = MasterList::LeaderNamed(o->ctx);
    o->WakeAll();
  }
  o->reader_done = true;
}

grpc::Status MasterStream::OpenTo(const std::string& address, std::shared_ptr<pb::Master::Stub> stub,
                                  absl::Duration timeout) {
  auto opening = OpenAgentStream(auth_, host_);
  if (!opening.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(opening.status().message()));
  open_ = std::make_unique<Open>();
  Open* o = open_.get();
  o->address = address;
  o->stub = std::move(stub);
  o->write_timeout = timeout;
  o->opening = std::move(*opening);
  o->watchdog = std::thread([this, o] { Watch(o); });
  {
    std::lock_guard<std::mutex> lock(o->write_mu);
    o->Busy();  // the start waits until the peer allows a stream
    o->stream = o->stub->AgentStream(&o->ctx);
    o->stream->Write(o->opening.frame);  // a failure shows in the reader's Read
    o->Idle();
  }
  o->reader = std::thread([this, o] { Read(o); });
  o->launcher = std::thread([this, o] { Launch(o); });
  std::unique_lock<std::mutex> lock(o->mu);
  if (!o->answered.wait_until(lock, absl::ToChronoTime(absl::Now() + timeout), [o] { return o->sealer || o->ended; })) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the nexec master did not welcome the agent's stream in time");
  }
  if (o->ended) return o->status;
  spdlog::info("nexec agent {}: heartbeats and launches on one stream with the master at {}", host_, address);
  return grpc::Status::OK;
}

grpc::Status MasterStream::Heartbeat(const std::string& address, std::shared_ptr<pb::Master::Stub> stub,
                                     const pb::HeartbeatRequest& req, pb::HeartbeatResponse* resp,
                                     std::string* leader_named, absl::Duration timeout) {
  Reap();
  if (open_ != nullptr) {
    bool ended;
    {
      std::lock_guard<std::mutex> lock(open_->mu);
      ended = open_->ended;
    }
    if (ended || open_->address != address) Close();
  }
  auto give_up = [&](grpc::Status status) {
    if (open_ != nullptr) {
      std::lock_guard<std::mutex> lock(open_->mu);
      *leader_named = open_->leader_named;
    }
    Close();
    return status;
  };
  if (open_ == nullptr) {
    grpc::Status opened = OpenTo(address, std::move(stub), timeout);
    if (!opened.ok()) return give_up(opened);
  }
  Open* o = open_.get();
  pb::AgentStreamMessage m;
  *m.mutable_heartbeat() = req;
  {
    // The call's number is taken with the write: answers carry it back.
    std::lock_guard<std::mutex> write(o->write_mu);
    m.set_call(++o->calls);
    {
      std::lock_guard<std::mutex> lock(o->mu);
      o->waiting = m.call();
      o->answer.reset();
    }
    o->BoundedWrite(o->sealer->Seal(m));  // a failure ends the reader, which says why
  }
  std::unique_lock<std::mutex> lock(o->mu);
  if (!o->answered.wait_until(lock, absl::ToChronoTime(absl::Now() + timeout), [o] { return o->answer || o->ended; })) {
    lock.unlock();
    return give_up(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                "the heartbeat on the agent's stream was not answered in time"));
  }
  if (!o->answer) {
    grpc::Status status = o->status;
    lock.unlock();
    return give_up(status);
  }
  if (o->answer->has_refused()) {
    return grpc::Status(static_cast<grpc::StatusCode>(o->answer->refused().code()), o->answer->refused().message());
  }
  *resp = std::move(*o->answer->mutable_heartbeat_answer());
  return grpc::Status::OK;
}

}  // namespace jc::nexec
