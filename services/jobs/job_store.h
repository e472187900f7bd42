#pragma once

// Persistence of job records and adapter watch cursors. The job manager's writer
// (burst_writer.h) is its one writer; writes go through a group committer, which fences
// them with the lease and turns a batch's new jobs into multi-row INSERTs.

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
#include "services/estimator/duration_estimator.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

struct JobWrites;  // burst_writer.h

// The jobs table's `centers` column: every center a replica of the job was placed at, at any
// attempt, sorted, each between commas (",east,west,"; "" when none), so a center is
// found as ",east," whatever the others.
std::string CentersColumn(const v1::JobRecord& job);

class JobStore {
 public:
  explicit JobStore(store::Store* store) : store_(store), committer_(store) {}

  // From here on, every write (creates included) first checks, in its transaction, that
  // `lease` is held: a job manager that lost its lease cannot write. Call before writing.
  void FenceWith(const store::Lease* lease);

  // One transaction: new jobs (AlreadyExists when an idempotency key is taken), saves of
  // jobs whose version is newer than the stored one, and watch cursors that moved on.
  absl::Status Write(const JobWrites& writes);

  // Fills the list columns (created_us, centers: migration 26) of rows written before they
  // existed, from their documents, a thousand rows a transaction; returns how many. Called
  // before leading, so no write of this job manager races it.
  absl::StatusOr<int64_t> BackfillListColumns();

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
  // The duration estimator's rows (SPEC A16), most recently updated first, at most `limit`.
  absl::StatusOr<std::vector<estimator::DurationEstimator::Row>> LoadDurations(int64_t limit);
  // One page by job id, filtered by user, status and project; with `projects`, only jobs
  // of those projects (what the caller may see).
  absl::StatusOr<std::pair<std::vector<v1::JobRecord>, std::string>> List(
      const v1::ListTrainJobsRequest& req, const std::optional<std::vector<std::string>>& projects = std::nullopt);

 private:
  store::Store* store_;
  store::GroupCommitter committer_;
};

}  // namespace jc::jobs
