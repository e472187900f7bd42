#pragma once

// Reconciliation (issue 31): the federation's usage records of one center for a period
// against the center's own accounting of the same replicas (the adapter asks its backend
// afresh: Slurm's squeue and sacct, nexec's job record, the example adapter's files), and
// every difference listed — a run the federation has no record of ("missing"), a record
// of a run the center does not know or says never happened ("extra"), and figures apart
// beyond a tolerance ("different") — so that a center and the federation can agree on a
// bill before it is closed.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jointcloud/adapter/v1/adapter.pb.h"
#include "jointcloud/v1/accounting.pb.h"
#include "services/accounting/usage_book.h"

namespace jc::accounting {

namespace apb = ::jointcloud::adapter::v1;

// Pure: `records` (the federation's) and `center` (the center's accounting) of replicas
// that ended around [from, to); only what ended inside it, by either side's clock, is
// compared. `origin`: this control plane's store identity (other keys are not ours).
v1::ReconcileResponse Compare(const std::string& center_id, const std::vector<v1::UsageRecord>& records,
                              const apb::ListAccountingResponse& center, absl::Time from, absl::Time to,
                              const std::string& origin, double tolerance_seconds, double tolerance_ratio);

class Reconciler {
 public:
  using FetchCenter = std::function<absl::StatusOr<apb::ListAccountingResponse>(
      const std::string& center_id, absl::Time from, absl::Time to)>;
  Reconciler(UsageBook* book, FetchCenter fetch, std::function<std::string()> origin)
      : book_(book), fetch_(std::move(fetch)), origin_(std::move(origin)) {}

  absl::StatusOr<v1::ReconcileResponse> Reconcile(const v1::ReconcileRequest& request);

 private:
  UsageBook* book_;
  FetchCenter fetch_;
  std::function<std::string()> origin_;
};

}  // namespace jc::accounting
