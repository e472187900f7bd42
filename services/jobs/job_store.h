#pragma once

// Persistence of job records and adapter watch cursors. Writes go through one group
// committer, so concurrent updates share transactions and fsyncs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/store/group_commit.h"
#include "common/store/lease.h"
#include "common/store/store.h"
#include "jointcloud/v1/job_record.pb.h"
#include "jointcloud/v1/jobs.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

class JobStore {
 public:
  explicit JobStore(store::Store* store) : store_(store), committer_(store) {}

  // From here on, every write (creates included) first checks, in its transaction, that
  // `lease` is held: a job manager that lost its lease cannot write. Call before writing.
  void FenceWith(const store::Lease* lease);

  // Inserts a new job. AlreadyExists when `idempotency_key` is taken.
  absl::Status Insert(const v1::JobRecord& job, const std::string& idempotency_key, int64_t version);
  // Writes the job if `version` is newer than the stored one; with `cursor_center`, also
  // the watch cursor of that center, in the same transaction.
  absl::Status Save(const v1::JobRecord& job, int64_t version, const std::string& cursor_center = "",
                    uint64_t cursor = 0);
  // Several jobs in one transaction (a scheduling cycle's decisions, a batch of submits).
  absl::Status SaveMany(const std::vector<std::pair<v1::JobRecord, int64_t>>& jobs);
  absl::Status SaveCursor(const std::string& center_id, uint64_t cursor);

  absl::StatusOr<v1::JobRecord> Get(const std::string& job_id);
  // The job a key created, if any.
  absl::StatusOr<std::optional<v1::JobRecord>> FindByKey(const std::string& idempotency_key);
  // Jobs not ended (pending, running), in submission order, with their stored versions:
  // the next write of a reloaded job must be newer than the last one that landed.
  absl::StatusOr<std::vector<std::pair<v1::JobRecord, int64_t>>> LoadActive();
  // This store's identity: created once (at random) with the data and kept with it, so
  // replica keys of two control planes, or of one whose store was re-initialised, never
  // meet at a center.
  absl::StatusOr<std::string> Identity();
  absl::StatusOr<int64_t> MaxSeq();
  absl::StatusOr<std::map<std::string, uint64_t>> Cursors();
  // One page by job id, filtered by user and status.
  absl::StatusOr<std::pair<std::vector<v1::JobRecord>, std::string>> List(const v1::ListTrainJobsRequest& req);

 private:
  store::Store* store_;
  store::GroupCommitter committer_;
};

}  // namespace jc::jobs
