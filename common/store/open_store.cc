#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/store/postgres_store.h"
#include "common/store/schema.h"
#include "common/store/sqlite_store.h"
#include "common/store/store.h"

namespace jc::store {

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& uri,
                                                 const std::string& schema) {
  std::unique_ptr<Store> store;
  if (absl::StartsWith(uri, "sqlite://")) {
    JC_ASSIGN_OR_RETURN(store, OpenSqliteStore(uri.substr(9)));
  } else if (uri == "sqlite::memory:") {
    JC_ASSIGN_OR_RETURN(store, OpenSqliteStore(":memory:"));
  } else if (absl::StartsWith(uri, "postgresql://") || absl::StartsWith(uri, "postgres://")) {
    JC_ASSIGN_OR_RETURN(store, OpenPostgresStore(uri, schema));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("store URI \"", uri,
                     "\" is neither sqlite:///path, sqlite::memory: nor postgresql://..."));
  }
  JC_RETURN_IF_ERROR(Migrate(*store));
  return store;
}

}  // namespace jc::store
