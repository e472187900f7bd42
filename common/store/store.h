#pragma once

// The persistence interface every service uses. Two backends implement it: PostgreSQL
// through libpqxx for real deployments and SQLite as the zero-setup embedded default.
// Repositories write portable SQL with $1, $2 ... placeholders; the SQLite backend
// rewrites them. Both backends run the same versioned migrations (schema.cc).

#include "absl/strings/string_view.h"
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jc::store {

using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string>;
using Params = std::vector<SqlValue>;

// One result row; every column is returned as text (NULL as nullopt).
using Row = std::vector<std::optional<std::string>>;
using Rows = std::vector<Row>;

// A row that rides along with a change: the next transaction this thread commits after
// writing also inserts it, in that transaction (the audit row of the request being served,
// common/audit). `committed` says whether one did.
struct RiderRow {
  std::string insert;                   // "INSERT INTO t (a, b, c)"
  std::function<Params()> values;       // read when the row is written
  bool committed = false;
};

// Makes `row` ride along with this thread's writing transactions until the scope ends.
class RiderScope {
 public:
  explicit RiderScope(RiderRow* row);
  ~RiderScope();
  RiderScope(const RiderScope&) = delete;
  RiderScope& operator=(const RiderScope&) = delete;

 private:
  RiderRow* previous_;
};

// A unit of work. Destroying it without Commit() rolls back.
class Transaction {
 public:
  virtual ~Transaction() = default;
  virtual absl::StatusOr<Rows> Query(absl::string_view sql, const Params& params = {}) = 0;
  // Returns the number of rows affected. A unique-key violation is AlreadyExists.
  virtual absl::StatusOr<int64_t> Exec(absl::string_view sql, const Params& params = {}) = 0;
  virtual absl::Status Commit() = 0;
  // Runs `sql` as the transaction's last statement and commits. A backend that has sent
  // nothing of the transaction yet may send the statement alone, as its own transaction
  // (PostgreSQL: one round trip where BEGIN, the statement and COMMIT took three; one
  // statement is atomic). As Exec then Commit otherwise.
  virtual absl::Status ExecAndCommit(absl::string_view sql, const Params& params);
  // Inserts one row: `insert` is "INSERT INTO t (a, b, c)" and `row` its values. A
  // transaction may gather rows and send them as one multi-row INSERT before its next
  // statement or its commit (group commits do: one statement for many jobs). A
  // unique-key violation is AlreadyExists, then or at that later statement.
  virtual absl::Status InsertRow(absl::string_view insert, const Params& row);

 protected:
  // Backends call NoteWrite() from every statement that may change rows, BeforeCommit()
  // first thing in Commit() (it inserts this thread's rider row when the transaction
  // wrote), and AfterCommit() once the commit succeeded.
  void NoteWrite() { wrote_ = true; }
  absl::Status BeforeCommit();
  void AfterCommit();
  // Whether BeforeCommit() would add this thread's rider row to a transaction that wrote.
  bool WouldCarryRider() const;

 private:
  bool wrote_ = false;
  RiderRow* carried_ = nullptr;
};

// "($1, $2, ...), ($3, $4, ...)": the VALUES list of `rows` rows of `columns` values, its
// parameters numbered from `first_param`.
std::string ValuesList(size_t rows, size_t columns, size_t first_param = 1);

class Store {
 public:
  virtual ~Store() = default;
  virtual absl::StatusOr<std::unique_ptr<Transaction>> Begin() = 0;
  // "sqlite" or "postgres".
  virtual absl::string_view backend() const = 0;
  // Cheap liveness probe used by /readyz.
  virtual absl::Status Ping() = 0;
  // Row-lock suffix for a read-modify-write SELECT (" FOR UPDATE" on PostgreSQL;
  // empty on SQLite, whose transactions already hold the database's write lock).
  virtual absl::string_view for_update() const = 0;

  // One-statement conveniences, each in its own transaction.
  absl::StatusOr<Rows> Query(absl::string_view sql, const Params& params = {});
  absl::StatusOr<int64_t> Exec(absl::string_view sql, const Params& params = {});
};

// Opens a store from a URI and brings its schema to the newest version:
//   sqlite:///abs/path/jointcloud.db   sqlite::memory:
//   postgresql://user@host:port/db[?options]   (libpq connection URI)
// For PostgreSQL, `schema` selects a schema inside the database (created if missing);
// tests use it to get an isolated namespace per test.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& uri,
                                                 const std::string& schema = "");

}  // namespace jc::store
