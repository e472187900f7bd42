#include "common/store/store_identity.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace jc::store {

absl::StatusOr<std::string> StoreIdentity(Store& store, absl::string_view name) {
  // Two stores meet by chance once in 2^32 pairs' worth of billions; kept short, as it is
  // in every key.
  std::random_device random;
  std::string candidate;
  for (int i = 0; i < 2; ++i) candidate += absl::StrFormat("%08x", static_cast<uint32_t>(random()));
  // Not through a committer: a standby reads the identity too, and is fenced out of it.
  JC_RETURN_IF_ERROR(
      store.Exec("INSERT INTO store_identity (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                 {std::string(name), candidate})
          .status());
  JC_ASSIGN_OR_RETURN(Rows rows, store.Query("SELECT value FROM store_identity WHERE name = $1", {std::string(name)}));
  if (rows.empty() || !rows[0][0] || rows[0][0]->empty()) {
    return absl::DataLossError(absl::StrCat("the store has no ", name, " identity after writing one"));
  }
  return *rows[0][0];
}

}  // namespace jc::store
