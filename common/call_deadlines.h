#pragma once

// Deadlines a server sets on its own calls (not the caller's): a synchronous bidi stream's
// handler holds a thread while it waits to read, so a caller that never sends its first
// message, or never leaves once it has its answer, would hold that thread for good (an
// attacker helper's finding against nexec's Exec: 300 silent streams took every thread of
// the master and the agents, no credential needed). One thread for every call of a server
// cancels each that overstays.

#include <cstdint>
#include <map>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace grpc {
class ServerContextBase;
}

namespace jc {

class CallDeadlines {
 public:
  CallDeadlines();
  ~CallDeadlines();
  CallDeadlines(const CallDeadlines&) = delete;
  CallDeadlines& operator=(const CallDeadlines&) = delete;

  // Cancels `ctx`'s call at `when` unless forgotten first; `ctx` must live until then.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept : owner_(other.owner_), id_(other.id_) { other.owner_ = nullptr; }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Forget(); }
    // No cancel any more (before the context goes, at the latest).
    void Forget();

   private:
    friend class CallDeadlines;
    Ticket(CallDeadlines* owner, uint64_t id) : owner_(owner), id_(id) {}
    CallDeadlines* owner_ = nullptr;
    uint64_t id_ = 0;
  };
  [[nodiscard]] Ticket CancelAt(grpc::ServerContextBase* ctx, absl::Time when) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Remove(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void Run();

  absl::Mutex mu_;
  struct Entry {
    absl::Time when;
    grpc::ServerContextBase* ctx;
  };
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace jc
