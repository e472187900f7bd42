#pragma once

// The federation's usage records (issue 31) in the store: one row per replica attempt that
// ran, appended in the job manager's transaction that closes the attempt, with a daily and
// a monthly rollup per (period, project, user, center, spec) kept in the same transaction,
// as slurmdbd keeps its usage tables: reports read the coarsest rollup that covers their
// period, so a month of millions of records is summed from a few thousand rows. Records
// are never updated or deleted.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "common/store/store.h"
#include "jointcloud/v1/accounting.pb.h"

namespace jc::accounting {

namespace v1 = ::jointcloud::v1;

// "2026-11-26" for a record's end (UTC): its day in the rollup and in daily reports.
std::string DayOf(const v1::UsageRecord& record);

// Adds `t` to `into` (sums; the largest peak memory).
void AddTotals(v1::UsageTotals* into, const v1::UsageTotals& t);

// "2026-12" after "2026-11".
absl::StatusOr<std::string> NextMonth(const std::string& month);

// Appends `records` and adds them to the daily rollup and the billing sums; a record whose
// billing month is already closed is billed in the first month still open. Inside the caller's transaction:
// a record already there (same record_id) fails it, so nothing is ever counted twice.
absl::Status AppendUsage(store::Transaction& txn, const std::vector<v1::UsageRecord>& records);

// Checks a report request: the period (both ends, from before to), the groupings and the
// granularity. InvalidArgument names the field.
absl::Status ValidateReportRequest(const v1::GetUsageReportRequest& request);

class UsageBook {
 public:
  explicit UsageBook(store::Store* store) : store_(store) {}

  // `visible`: the projects whose records the caller may see (nullopt: all).
  absl::StatusOr<v1::ListUsageRecordsResponse> List(const v1::ListUsageRecordsRequest& request,
                                                    const std::optional<std::vector<std::string>>& visible);
  absl::StatusOr<v1::GetUsageReportResponse> Report(const v1::GetUsageReportRequest& request,
                                                    const std::optional<std::vector<std::string>>& visible);
  // Per project, the cost of the records of attempts that ended on the days [from, to): what
  // budgets are spent by (the daily rollup: a few rows per project and day).
  absl::StatusOr<std::map<std::string, double>> SpentByProject(absl::CivilDay from, absl::CivilDay to);

 private:
  store::Store* store_;
};

}  // namespace jc::accounting
