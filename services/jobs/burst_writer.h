#pragma once

// How the job manager's event loop writes a burst: every row the burst changed (new
// jobs, saved jobs, watch cursors) in one transaction, and when that fails for a reason
// of one row (an idempotency key a racing create took), the rows again one by one so
// that each create gets its own answer. The loop commits each burst before it acts on
// it (docs/adr/0006, commit or stop); messages that arrive meanwhile form the next burst,
// so under load one commit (one fsync, one round trip) carries many jobs.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "jointcloud/v1/accounting.pb.h"
#include "services/jobs/job_store.h"

namespace jc::jobs {

// Rows to write, their documents already encoded.
struct JobWrites {
  // A row of job_events (job_events.h).
  struct Event {
    int64_t revision = 0;
    std::string job_id;
    std::string doc;
  };
  struct NewJob {
    std::string job_id;
    int64_t seq = 0;
    std::string user_name;
    std::string project;
    std::string status;
    std::string idempotency_key;
    int64_t version = 1;
    int64_t open_attempts = 0;  // 1: attempts it placed have not reported their end
    std::string doc;
    int64_t created_us = 0;  // received (unix microseconds): the list's time filter
    std::string centers;     // CentersColumn: the list's center filter
    store::Params audit;  // the audit row of the create (common/audit), if audited
    Event event;          // its CREATED event
  };
  struct Save {
    std::string job_id;
    std::string status;
    int64_t version = 0;
    std::string doc;
    int64_t open_attempts = 0;  // 1: attempts it placed have not reported their end
    std::string centers;        // CentersColumn
  };
  std::vector<NewJob> inserts;
  std::vector<Save> saves;
  std::map<std::string, uint64_t> cursors;  // watch cursor by center
  std::vector<store::Params> audits;        // audit rows of the stops the burst applied
  std::vector<Event> events;                // the events of the saves
  int64_t prune_events_below = 0;           // deletes older events (0: none)
  // Usage records of the attempts the saves closed (services/accounting/usage_book.h).
  std::vector<v1::UsageRecord> usage;
  // What the duration estimator learned from the attempts the saves closed (SPEC A16): its
  // changed keys' sketches, by key; an empty sketch deletes its key's row (evicted).
  std::map<std::string, std::string> durations;
  int64_t durations_at = 0;  // unix seconds, their updated_at
  // When the estimator is full (it evicts), now and then: rows older than the newest
  // `keep_durations` are deleted, so the store holds what memory does (0: none).
  int64_t keep_durations = 0;

  bool empty() const {
    return inserts.empty() && saves.empty() && cursors.empty() && audits.empty() && events.empty() &&
           usage.empty() && durations.empty();
  }
};

struct WriteOutcome {
  // The saves and cursors; not OK: none of them may be assumed written.
  absl::Status status;
  // One per insert: OK, AlreadyExists (its idempotency key was taken meanwhile), or why
  // it was not written.
  std::vector<absl::Status> inserts;
};

// Returns once `writes` committed or failed.
WriteOutcome CommitBurst(JobStore& store, const JobWrites& writes);

}  // namespace jc::jobs
