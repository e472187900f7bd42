#pragma once

// Job events (SPEC C8): what the job manager committed about each job (accepted, a replica
// placed, started, ended, ...), numbered by one revision that only grows. The events are
// rows of the store written in the transaction of the change they describe, so a watcher's
// cursor (a revision) means the same after a restart or on another instance; the newest
// are also kept in memory on the leading instance, where a watcher waits for them without
// touching the store. Like etcd's watch: a cursor older than what is kept is refused and
// the watcher re-reads the job.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/event_log.h"
#include "common/store/store.h"
#include "jointcloud/v1/job_record.pb.h"
#include "jointcloud/v1/jobs.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

// The event a change of one job makes, without its revision: CREATED when `before` is
// null, ENDED when the job reached completed or failed, UPDATED when its status, reason
// or a replica's phase, center or attempt changed; nullopt when nothing a watcher sees
// changed (a new waiting reason, a version bump).
std::optional<v1::TrainJobEvent> EventOf(const v1::JobRecord* before, const v1::JobRecord& after, absl::Time at);

// The MOVED events a change of one job makes (SPEC A16), without their revisions: one for
// each replica that `after` places at a center for the first time since its center took
// it back as asked (its previous attempt was asked back and never started; a gang's other
// replicas go with the one withdrawn), naming where it was withdrawn, where it goes and
// why. None for a new job, a replica placed again after a failure, or a change that
// placed nothing.
std::vector<v1::TrainJobEvent> MovedEventsOf(const v1::JobRecord* before, const v1::JobRecord& after, absl::Time at);

// The replica's finer state as events name it: waiting, staging, dispatching, ...
std::string PhaseName(v1::ReplicaRecord::State state);

// An event as a row of job_events stores it: the message's protobuf encoding, base64 (the
// column is text). Not the JSON of the resources' documents: events are a log only the
// server reads back, and the JSON printer's fixed cost per message was paid twice per job
// (docs/benchmarks.md, ADR 0002).
std::string EncodeEvent(const v1::TrainJobEvent& event);
// Reads a row back; a JSON document is read too (the rows written before the encoding
// changed). DataLoss when it is neither.
absl::StatusOr<v1::TrainJobEvent> DecodeEvent(const std::optional<std::string>& column);

struct JobEventsOptions {
  size_t memory_window = 4096;   // the newest events kept in memory
  int64_t retention = 100'000;   // the newest events kept in the store
};

class JobEvents {
 public:
  JobEvents(store::Store* store, JobEventsOptions options = {});

  // ---- The job manager's loop ----
  // A new term: numbering goes on after the store's newest event, and the newest events
  // come back into memory, so watchers are served from memory again.
  absl::Status Restore();
  // Not leading: watchers read the store (another instance writes it).
  void Pause() { live_ = false; }
  // The revision for the next event a burst writes (not taken back when the write fails:
  // revisions leave a gap there).
  uint64_t Take() { return ++next_; }
  // Below which revision stored events may be deleted, once in a while; 0: not now.
  int64_t PruneBelow();
  // Events whose write committed.
  void Publish(std::vector<v1::TrainJobEvent> events) { log_.AppendStamped(std::move(events)); }

  // ---- Watchers (any thread) ----
  // Events after `since`, oldest first (at most a store page), waiting up to `timeout`
  // for one. OutOfRange when `since` is ahead of every event or older than those kept.
  absl::StatusOr<std::vector<v1::TrainJobEvent>> Read(uint64_t since, absl::Duration timeout);
  // The events of one job up to revision `upto`, oldest first, as the store keeps them
  // (its story for a watch with history).
  absl::StatusOr<std::vector<v1::TrainJobEvent>> OfJob(const std::string& job_id, uint64_t upto);
  // The newest revision committed (what a snapshot taken now is at).
  absl::StatusOr<uint64_t> LastRevision();
  // Wakes every watcher for shutdown.
  void Close() { closed_ = true; log_.Close(); }
  // Told after each publish (WatchHub::Wake); set before the manager starts.
  void SetListener(std::function<void()> listener) { log_.SetListener(std::move(listener)); }

 private:
  absl::StatusOr<std::vector<v1::TrainJobEvent>> ReadStore(uint64_t since, int64_t limit);
  absl::StatusOr<std::pair<uint64_t, uint64_t>> StoredRange();  // min, max; 0, 0 when none
  // The same, at most 200 ms old.
  absl::StatusOr<std::pair<uint64_t, uint64_t>> RecentStoredRange();

  store::Store* store_;
  JobEventsOptions options_;
  EventLog<v1::TrainJobEvent> log_;
  uint64_t next_ = 0;           // the loop's
  int64_t pruned_at_ = 0;       // the loop's: `next_` at the last prune
  std::atomic<bool> live_{false};
  std::atomic<bool> closed_{false};
  std::mutex range_mu_;
  std::pair<uint64_t, uint64_t> range_{0, 0};
  absl::Time range_at_ = absl::InfinitePast();
};

}  // namespace jc::jobs
