#include "services/registry/adapter_keys.h"

#include "absl/strings/numbers.h"
#include "common/status_macros.h"

namespace jc::registry {

absl::StatusOr<IssuedAdapterKey> IssueAdapterKeyIn(store::Transaction& txn, const std::string& center,
                                                   absl::Time now, absl::Duration grace) {
  JC_ASSIGN_OR_RETURN(std::string key, auth::NewAdapterKey());
  JC_ASSIGN_OR_RETURN(store::Rows rows, txn.Query("SELECT current_key FROM adapter_keys WHERE center_id = $1", {center}));
  IssuedAdapterKey issued;
  issued.key = key;
  std::string previous;
  int64_t previous_until = 0;
  if (!rows.empty() && rows[0][0].has_value()) {
    previous = *rows[0][0];
    issued.previous_valid_until = now + grace;
    previous_until = absl::ToUnixMicros(now + grace);
  }
  JC_RETURN_IF_ERROR(txn.Exec("DELETE FROM adapter_keys WHERE center_id = $1", {center}).status());
  JC_RETURN_IF_ERROR(txn.Exec("INSERT INTO adapter_keys (center_id, current_key, previous_key, previous_until, issued_at) "
                              "VALUES ($1, $2, $3, $4, $5)",
                              {center, key, previous, previous_until, absl::ToUnixMicros(now)})
                         .status());
  return issued;
}

absl::Status DropAdapterKeysIn(store::Transaction& txn, const std::string& center) {
  return txn.Exec("DELETE FROM adapter_keys WHERE center_id = $1", {center}).status();
}

absl::StatusOr<std::optional<auth::AdapterKeys>> ReadAdapterKeys(store::Store& store, const std::string& center) {
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      store.Query("SELECT current_key, previous_key, previous_until FROM adapter_keys WHERE center_id = $1",
                                  {center}));
  if (rows.empty()) return std::nullopt;
  auth::AdapterKeys keys;
  keys.current = rows[0][0].value_or("");
  keys.previous = rows[0][1].value_or("");
  int64_t until = 0;
  if (rows[0][2].has_value() && absl::SimpleAtoi(*rows[0][2], &until) && !keys.previous.empty()) {
    keys.previous_until = absl::FromUnixMicros(until);
  }
  return keys;
}

}  // namespace jc::registry
