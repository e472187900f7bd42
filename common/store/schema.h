#pragma once

#include "absl/strings/string_view.h"
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/store/store.h"

namespace jc::store {

struct Migration {
  int version;
  absl::string_view description;
  // Statements run in order inside one transaction; portable between SQLite and
  // PostgreSQL (TEXT, BIGINT, INTEGER, DOUBLE PRECISION only).
  std::vector<absl::string_view> statements;
};

// Every migration, oldest first. Append only: a released version never changes.
const std::vector<Migration>& Migrations();

// Applies what is missing, each version in its own transaction, and records it in
// schema_migrations. A database newer than this binary is refused.
absl::Status Migrate(Store& store);

// The version the database is at (0 for a new one).
absl::StatusOr<int> SchemaVersion(Store& store);

}  // namespace jc::store
