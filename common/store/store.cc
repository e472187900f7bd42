#include "absl/strings/string_view.h"
#include "common/store/store.h"

#include "common/status_macros.h"

namespace jc::store {

absl::StatusOr<Rows> Store::Query(absl::string_view sql, const Params& params) {
  JC_ASSIGN_OR_RETURN(auto txn, Begin());
  JC_ASSIGN_OR_RETURN(Rows rows, txn->Query(sql, params));
  JC_RETURN_IF_ERROR(txn->Commit());
  return rows;
}

absl::StatusOr<int64_t> Store::Exec(absl::string_view sql, const Params& params) {
  JC_ASSIGN_OR_RETURN(auto txn, Begin());
  JC_ASSIGN_OR_RETURN(int64_t affected, txn->Exec(sql, params));
  JC_RETURN_IF_ERROR(txn->Commit());
  return affected;
}

}  // namespace jc::store
