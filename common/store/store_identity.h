#pragma once

// A store's identity: 64 random bits as 16 hex digits, made once with the data by the
// first process to start on it, read by every later one (and by standbys). The control
// plane puts it in every replica key (its `origin`); the nexec master in every launch, so
// an agent never takes one store's job 1 for another's.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/store/store.h"

namespace jc::store {

// The identity named `name` ("control_plane", "nexec_master") in `store`'s store_identity
// table, made now if the store has none yet (the first writer wins; the others read it).
absl::StatusOr<std::string> StoreIdentity(Store& store, absl::string_view name);

}  // namespace jc::store
