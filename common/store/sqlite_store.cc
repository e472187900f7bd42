#include "absl/strings/string_view.h"
#include "common/store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace jc::store {
namespace {

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  int ext = db != nullptr ? sqlite3_extended_errcode(db) : rc;
  std::string msg = absl::StrCat(what, ": ", db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE) {
    return absl::AlreadyExistsError(msg);
  }
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return absl::UnavailableError(msg);
  return absl::InternalError(msg);
}

// Rewrites PostgreSQL's $N placeholders into SQLite's equivalent ?N.
std::string RewritePlaceholders(absl::string_view sql) {
  std::string out(sql);
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '$' && std::isdigit(static_cast<unsigned char>(out[i + 1]))) out[i] = '?';
  }
  return out;
}

// Prepared statements by SQL text, kept for the connection's life: preparing was a
// quarter of the adapter's store time. Used only under the store's mutex.
class StatementCache {
 public:
  static constexpr size_t kMaxStatements = 256;
  ~StatementCache() {
    for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  }
  // The cached statement for `sql`, or null when the cache is full.
  sqlite3_stmt* Find(const std::string& sql) const {
    auto it = statements_.find(sql);
    return it == statements_.end() ? nullptr : it->second;
  }
  bool Add(const std::string& sql, sqlite3_stmt* stmt) {
    if (statements_.size() >= kMaxStatements) return false;
    statements_.emplace(sql, stmt);
    return true;
  }

 private:
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

class SqliteTransaction final : public Transaction {
 public:
  SqliteTransaction(sqlite3* db, StatementCache* cache, std::unique_lock<std::mutex> lock)
      : db_(db), cache_(cache), lock_(std::move(lock)) {}
  ~SqliteTransaction() override {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  absl::StatusOr<Rows> Query(absl::string_view sql, const Params& params) override {
    if (done_) return absl::FailedPreconditionError("transaction already committed");
    Rows rows;
    JC_RETURN_IF_ERROR(Run(sql, params, &rows));
    return rows;
  }

  absl::StatusOr<int64_t> Exec(absl::string_view sql, const Params& params) override {
    if (done_) return absl::FailedPreconditionError("transaction already committed");
    NoteWrite();
    JC_RETURN_IF_ERROR(Run(sql, params, nullptr));
    return static_cast<int64_t>(sqlite3_changes(db_));
  }

  absl::Status Commit() override {
    if (done_) return absl::FailedPreconditionError("transaction already committed");
    JC_RETURN_IF_ERROR(BeforeCommit());
    int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db_, rc, "commit");
    done_ = true;
    AfterCommit();
    // Let the next transaction in at once, even while this object lives on.
    lock_.unlock();
    return absl::OkStatus();
  }

 private:
  // A cached statement is reset (and its bindings cleared) after use; an uncached one
  // is finalized.
  struct StatementGuard {
    sqlite3_stmt* stmt;
    bool cached;
    ~StatementGuard() {
      if (cached) {
        sqlite3_reset(stmt);
        sqlite3_clear_bindings(stmt);
      } else {
        sqlite3_finalize(stmt);
      }
    }
  };

  absl::Status Run(absl::string_view sql, const Params& params, Rows* rows) {
    std::string text(sql);
    sqlite3_stmt* stmt = cache_->Find(text);
    bool cached = stmt != nullptr;
    int rc = SQLITE_OK;
    if (!cached) {
      std::string rewritten = RewritePlaceholders(sql);
      rc = sqlite3_prepare_v3(db_, rewritten.c_str(), static_cast<int>(rewritten.size()), SQLITE_PREPARE_PERSISTENT,
                              &stmt, nullptr);
      if (rc != SQLITE_OK) return SqliteError(db_, rc, "prepare");
      // A statement of several commands (migrations) runs only its first; not cached.
      cached = stmt != nullptr && cache_->Add(text, stmt);
    }
    if (stmt == nullptr) return absl::OkStatus();  // empty SQL
    StatementGuard guard{stmt, cached};
    for (size_t i = 0; i < params.size(); ++i) {
      int idx = static_cast<int>(i) + 1;
      const SqlValue& v = params[i];
      if (std::holds_alternative<std::nullptr_t>(v)) {
        rc = sqlite3_bind_null(stmt, idx);
      } else if (auto* n = std::get_if<int64_t>(&v)) {
        rc = sqlite3_bind_int64(stmt, idx, *n);
      } else if (auto* d = std::get_if<double>(&v)) {
        rc = sqlite3_bind_double(stmt, idx, *d);
      } else {
        const std::string& s = std::get<std::string>(v);
        rc = sqlite3_bind_text(stmt, idx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) return SqliteError(db_, rc, "bind");
    }
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (rows == nullptr) continue;
      int n = sqlite3_column_count(stmt);
      Row row(n);
      for (int c = 0; c < n; ++c) {
        if (sqlite3_column_type(stmt, c) == SQLITE_NULL) continue;
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
        row[c] = std::string(p, sqlite3_column_bytes(stmt, c));
      }
      rows->push_back(std::move(row));
    }
    if (rc != SQLITE_DONE) return SqliteError(db_, rc, "step");
    return absl::OkStatus();
  }

  sqlite3* db_;
  StatementCache* cache_;
  std::unique_lock<std::mutex> lock_;
  bool done_ = false;
};

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(sqlite3* db) : db_(db) {}
  ~SqliteStore() override {
    cache_.reset();  // statements go before the connection
    sqlite3_close_v2(db_);
  }

  absl::StatusOr<std::unique_ptr<Transaction>> Begin() override {
    std::unique_lock<std::mutex> lock(mu_);
    // IMMEDIATE takes the write lock up front, so a transaction never fails half-way
    // with SQLITE_BUSY when it turns from reading to writing.
    int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db_, rc, "begin");
    return std::unique_ptr<Transaction>(new SqliteTransaction(db_, cache_.get(), std::move(lock)));
  }

  absl::string_view backend() const override { return "sqlite"; }
  absl::string_view for_update() const override { return ""; }

  absl::Status Ping() override {
    std::lock_guard<std::mutex> lock(mu_);
    int rc = sqlite3_exec(db_, "SELECT 1", nullptr, nullptr, nullptr);
    return rc == SQLITE_OK ? absl::OkStatus() : SqliteError(db_, rc, "ping");
  }

 private:
  std::mutex mu_;
  sqlite3* db_;
  std::unique_ptr<StatementCache> cache_ = std::make_unique<StatementCache>();
};

}  // namespace

namespace {

// The store holds token hashes, audit records and every job's command and environment:
// only its owner may read it. SQLite creates a database file with the umask's mode
// (0644 as a rule) and its -wal and -shm files with the database's mode, so the file is
// made 0600 before SQLite opens it, and files an older build left readable to others are
// narrowed (when this process owns them; another owner's are the operator's choice).
absl::Status MakeOwnerOnly(const std::string& path) {
  if (path.empty() || path == ":memory:" || absl::StartsWith(path, "file:")) return absl::OkStatus();
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    close(fd);
    return absl::OkStatus();
  }
  if (errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create SQLite database \"", path, "\": ", std::strerror(errno)));
  }
  for (const std::string& file : {path, path + "-wal", path + "-shm"}) {
    struct stat st;
    if (lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
    if ((st.st_mode & 077) != 0 && chmod(file.c_str(), st.st_mode & 0700) != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot make \"", file, "\" readable by its owner only: ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
  JC_RETURN_IF_ERROR(MakeOwnerOnly(path));
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("cannot open SQLite database \"", path, "\": ", sqlite3_errstr(rc)));
    sqlite3_close_v2(db);
    return s;
  }
  // WAL lets readers of other processes (sqlite3 CLI) look while we write; FULL sync
  // makes every acknowledged commit survive power loss, not just a process crash. The
  // busy timeout comes first: switching to WAL takes the database's lock, which another
  // process opening it at the same moment may hold for a few milliseconds.
  for (const char* pragma : {"PRAGMA busy_timeout=5000", "PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                             "PRAGMA foreign_keys=ON"}) {
    rc = sqlite3_exec(db, pragma, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      absl::Status s = SqliteError(db, rc, pragma);
      sqlite3_close_v2(db);
      return s;
    }
  }
  return std::unique_ptr<Store>(new SqliteStore(db));
}

}  // namespace jc::store
