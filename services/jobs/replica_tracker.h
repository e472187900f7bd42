#pragma once

// The job manager's replica tracker: follows each center's event stream (SPEC C5) from
// the cursor the job manager last committed, and asks adapters by key for replicas whose
// stream is down or that a new term must check (polling as the fallback). It keeps no
// job state: events and answers go to the job manager's event loop, tagged with the term
// that asked, so a term that ended never applies them.
//
// A stream resumes where the last event it delivered left off; a new term (Restart)
// resumes every stream from the cursors the store has, so events delivered to a term that
// did not commit them are delivered again.

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "services/jobs/adapter_addresses.h"
#include "services/southbound/adapter_client.h"

namespace jc::jobs {

namespace apb = ::jointcloud::adapter::v1;

class ReplicaTracker {
 public:
  struct Callbacks {
    // An event of `center`'s stream (on its watcher thread).
    std::function<void(const std::string& center, uint64_t term, const apb::ReplicaEvent& event)> event;
    // The adapter no longer has the events after the cursor: the stream starts over from
    // its first event, and every replica there should be read again.
    std::function<void(const std::string& center, uint64_t term)> resync;
  };
  // One replica to read by key.
  struct Ask {
    std::string job_id;
    int index = 0;
    std::string center;
    apb::ReplicaKey key;
  };
  using Answer = std::function<void(const Ask& ask, absl::StatusOr<apb::Replica> replica)>;

  ReplicaTracker(southbound::AdapterClient* adapters, AdapterAddresses* addresses, ThreadPool* pool,
                 Callbacks callbacks)
      : adapters_(adapters), addresses_(addresses), pool_(pool), callbacks_(std::move(callbacks)) {}
  ~ReplicaTracker() { Stop(); }

  // A new term leads: every stream resumes from `committed` (the store's cursors).
  void Restart(uint64_t term, std::map<std::string, uint64_t> committed);
  // Stepped down: streams end and wait for the next term.
  void Pause();
  // Starts following `center` if not yet.
  void Follow(const std::string& center);
  // Centers whose stream is connected now.
  std::set<std::string> Connected();
  // Reads each replica by key, one after another on a pool thread; `answer` gets each
  // reply, NotFound included (the center does not know it).
  void Read(std::vector<Ask> asks, Answer answer);
  void Stop();

 private:
  void WatchLoop(const std::string& center);

  southbound::AdapterClient* adapters_;
  AdapterAddresses* addresses_;
  ThreadPool* pool_;
  Callbacks callbacks_;
  std::atomic<uint64_t> term_{0};  // 0: paused
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<std::string, uint64_t> cursors_ ABSL_GUARDED_BY(mu_);  // where each stream resumes
  std::set<std::string> connected_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::thread> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace jc::jobs
