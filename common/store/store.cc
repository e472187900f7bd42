#include "common/store/store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace jc::store {
namespace {

thread_local RiderRow* rider = nullptr;

}  // namespace

RiderScope::RiderScope(RiderRow* row) : previous_(rider) { rider = row; }
RiderScope::~RiderScope() { rider = previous_; }

absl::Status Transaction::BeforeCommit() {
  if (!wrote_ || rider == nullptr || rider->committed || carried_ != nullptr) return absl::OkStatus();
  RiderRow* row = rider;
  Params values = row->values();
  JC_RETURN_IF_ERROR(Exec(absl::StrCat(row->insert, " VALUES ", ValuesList(1, values.size())), values).status());
  carried_ = row;
  return absl::OkStatus();
}

void Transaction::AfterCommit() {
  if (carried_ != nullptr) carried_->committed = true;
}

bool Transaction::WouldCarryRider() const { return rider != nullptr && !rider->committed && carried_ == nullptr; }

absl::Status Transaction::ExecAndCommit(absl::string_view sql, const Params& params) {
  JC_RETURN_IF_ERROR(Exec(sql, params).status());
  return Commit();
}

absl::StatusOr<Rows> Store::Query(absl::string_view sql, const Params& params) {
  JC_ASSIGN_OR_RETURN(auto txn, Begin());
  JC_ASSIGN_OR_RETURN(Rows rows, txn->Query(sql, params));
  JC_RETURN_IF_ERROR(txn->Commit());
  return rows;
}

absl::Status Transaction::InsertRow(absl::string_view insert, const Params& row) {
  return Exec(absl::StrCat(insert, " VALUES ", ValuesList(1, row.size())), row).status();
}

std::string ValuesList(size_t rows, size_t columns, size_t first_param) {
  // Written into room reserved once, each number's digits by hand: a burst's statements
  // number thousands of parameters, and StrAppend per parameter was most of their text's cost.
  std::string out;
  const size_t last = first_param + rows * columns;
  size_t digits = 1;
  for (size_t p = last; p >= 10; p /= 10) ++digits;
  out.reserve(rows * (columns * (digits + 3) + 4));
  char number[24];
  size_t n = first_param;
  for (size_t r = 0; r < rows; ++r) {
    out.append(r == 0 ? "(" : ", (");
    for (size_t c = 0; c < columns; ++c, ++n) {
      out.append(c == 0 ? "$" : ", $");
      char* end = number + sizeof(number);
      char* at = end;
      size_t v = n;
      do {
        *--at = static_cast<char>('0' + v % 10);
        v /= 10;
      } while (v != 0);
      out.append(at, static_cast<size_t>(end - at));
    }
    out.push_back(')');
  }
  return out;
}

absl::StatusOr<int64_t> Store::Exec(absl::string_view sql, const Params& params) {
  JC_ASSIGN_OR_RETURN(auto txn, Begin());
  JC_ASSIGN_OR_RETURN(int64_t affected, txn->Exec(sql, params));
  JC_RETURN_IF_ERROR(txn->Commit());
  return affected;
}

}  // namespace jc::store
