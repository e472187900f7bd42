#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/store/store.h"

namespace jc::store {

// PostgreSQL through libpqxx with a small connection pool. `uri` is a libpq connection
// URI; `schema`, when set, is created if missing and put first on every connection's
// search_path.
absl::StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& uri,
                                                         const std::string& schema,
                                                         int pool_size = 4);

}  // namespace jc::store
