#pragma once

// Centers' adapter keys in the store (issue 44, hole 5; common/auth/adapter_proof.h says
// how an adapter proves itself with one). Kept in their own table, never in a center's
// document: no read, list or watch of centers carries a key.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth/adapter_proof.h"
#include "common/store/store.h"

namespace jc::registry {

struct IssuedAdapterKey {
  std::string key;  // answered once
  std::optional<absl::Time> previous_valid_until;  // when a key was replaced
};

// Replaces the center's key with a new one inside `txn`; the replaced one stays valid for
// `grace` after `now`.
absl::StatusOr<IssuedAdapterKey> IssueAdapterKeyIn(store::Transaction& txn, const std::string& center,
                                                   absl::Time now, absl::Duration grace);
// Drops the center's keys inside `txn` (the center left; an id registered again starts
// without a key).
absl::Status DropAdapterKeysIn(store::Transaction& txn, const std::string& center);
// The center's keys; nullopt when none was issued.
absl::StatusOr<std::optional<auth::AdapterKeys>> ReadAdapterKeys(store::Store& store, const std::string& center);

}  // namespace jc::registry
