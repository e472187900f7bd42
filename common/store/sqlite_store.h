#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/store/store.h"

namespace jc::store {

// Embedded store: one SQLite database file in WAL mode. Transactions are serialized
// (SQLite allows one writer at a time anyway); "path" may be ":memory:".
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);

}  // namespace jc::store
