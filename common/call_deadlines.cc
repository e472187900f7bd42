#include "common/call_deadlines.h"

#include <grpcpp/server_context.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace jc {

CallDeadlines::CallDeadlines() : thread_([this] { Run(); }) {}

CallDeadlines::~CallDeadlines() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

CallDeadlines::Ticket& CallDeadlines::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Forget();
    owner_ = other.owner_;
    id_ = other.id_;
    other.owner_ = nullptr;
  }
  return *this;
}

void CallDeadlines::Ticket::Forget() {
  if (owner_ != nullptr) owner_->Remove(id_);
  owner_ = nullptr;
}

CallDeadlines::Ticket CallDeadlines::CancelAt(grpc::ServerContextBase* ctx, absl::Time when) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  entries_[id] = Entry{when, ctx};
  return Ticket(this, id);
}

void CallDeadlines::Remove(uint64_t id) {
  // Under the lock the cancelling thread holds while it cancels: once this returns, the
  // context is never touched again.
  absl::MutexLock lock(&mu_);
  entries_.erase(id);
}

void CallDeadlines::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time next = absl::InfiniteFuture();
    const absl::Time now = absl::Now();
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.when <= now) {
        it->second.ctx->TryCancel();
        it = entries_.erase(it);
      } else {
        next = std::min(next, it->second.when);
        ++it;
      }
    }
    // Woken at the earliest deadline, or every second (a new, earlier one, or the end).
    mu_.AwaitWithDeadline(absl::Condition(&stopping_), std::min(next, absl::Now() + absl::Seconds(1)));
  }
}

}  // namespace jc
