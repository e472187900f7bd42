#pragma once

// Settlement between the federation and its centers (issue 31): per period, what each
// project owes each center, from the usage records billed in it. Closing a month freezes
// its statement — lines, totals and a SHA-256 digest over them — in the transaction that
// moves the last closed month on; usage records appended meanwhile wait for it (both update
// the one accounting row), and a record of a month already closed is billed in the first
// month still open (usage_book.h). So a closed statement never changes, and every record
// is in exactly one.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/store/store.h"
#include "jointcloud/v1/accounting.pb.h"

namespace jc::accounting {

namespace v1 = ::jointcloud::v1;

class Settlements {
 public:
  Settlements(store::Store* store, const Clock* clock) : store_(store), clock_(clock) {}

  // Which lines a caller sees: every line (admins), else those of the projects it views
  // and of the centers it operates.
  struct Viewer {
    bool all = false;
    std::vector<std::string> projects;
    std::vector<std::string> centers;
  };
  // The month's statement: the frozen one once closed, else what it holds now ("open"),
  // with the lines `viewer` may see (of `center` only, when given).
  absl::StatusOr<v1::SettlementStatement> Get(const std::string& month, const std::string& center,
                                              const Viewer& viewer);
  // Closes every month through `month`: InvalidArgument for a month not ended yet,
  // FailedPrecondition for one already closed (or before the last closed).
  absl::StatusOr<v1::SettlementStatement> Close(const std::string& month, const std::string& closed_by);
  absl::StatusOr<std::vector<v1::SettlementStatement>> ListClosed();

 private:
  store::Store* store_;
  const Clock* clock_;
};

// The statement's lines summed per center, and overall.
void FillTotals(v1::SettlementStatement* statement);
// SHA-256 (hex) over the lines in order: what a center and the federation sign off on.
std::string StatementDigest(const v1::SettlementStatement& statement);

}  // namespace jc::accounting
