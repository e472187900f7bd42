#include "services/jobs/burst_writer.h"

namespace jc::jobs {

WriteOutcome CommitBurst(JobStore& store, const JobWrites& writes) {
  WriteOutcome out;
  out.status = store.Write(writes);
  out.inserts.assign(writes.inserts.size(), out.status);
  // Unavailable is the store's or the lease fence's, not one row's: alone, each would
  // fail the same way.
  if (out.status.ok() || writes.inserts.empty() || absl::IsUnavailable(out.status)) return out;
  // One bad row fails its transaction; alone, each create gets its own answer (a key
  // taken by a create that raced this one is AlreadyExists, its neighbours go through).
  JobWrites rest;
  rest.saves = writes.saves;
  rest.cursors = writes.cursors;
  rest.audits = writes.audits;
  rest.events = writes.events;
  rest.usage = writes.usage;
  rest.durations = writes.durations;
  rest.durations_at = writes.durations_at;
  rest.keep_durations = writes.keep_durations;
  rest.prune_events_below = writes.prune_events_below;
  out.status = store.Write(rest);
  for (size_t i = 0; i < writes.inserts.size(); ++i) {
    JobWrites one;
    one.inserts.push_back(writes.inserts[i]);
    out.inserts[i] = store.Write(one);
  }
  return out;
}

}  // namespace jc::jobs
