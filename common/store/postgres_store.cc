#include "absl/strings/string_view.h"
#include "common/store/postgres_store.h"

#include <condition_variable>
#include <mutex>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace jc::store {
namespace {

// Maps a libpqxx exception to a status; the SQL text is left out of the message because
// it can carry user data.
absl::Status FromPqxx(const std::exception& e, absl::string_view what) {
  std::string msg = absl::StrCat(what, ": ", e.what());
  if (dynamic_cast<const pqxx::unique_violation*>(&e) != nullptr) {
    return absl::AlreadyExistsError(msg);
  }
  if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) {
    return absl::UnavailableError(msg);
  }
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr) {
    // The connection broke during the commit: it may or may not have landed. Callers
    // treat it as not written (a create is retried under its key; the job manager
    // reloads from the store).
    return absl::UnavailableError(absl::StrCat(msg, " (the commit's outcome is unknown)"));
  }
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e); sql != nullptr) {
    const std::string& state = sql->sqlstate();
    // Class 08 (connection exception), 57P (the server shutting down or starting up)
    // and 53300 (too many connections) pass: the store is away, not the request wrong.
    if (state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0 || state == "53300") {
      return absl::UnavailableError(msg);
    }
    if (state == "40001" || state == "40P01") return absl::AbortedError(msg);
  }
  if (dynamic_cast<const pqxx::serialization_failure*>(&e) != nullptr) {
    return absl::AbortedError(msg);
  }
  return absl::InternalError(msg);
}

class PostgresStore;

class PostgresTransaction final : public Transaction {
 public:
  PostgresTransaction(PostgresStore* store, std::unique_ptr<pqxx::connection> conn);
  ~PostgresTransaction() override;

  absl::StatusOr<Rows> Query(absl::string_view sql, const Params& params) override {
    if (committed_) return absl::FailedPreconditionError("transaction already committed");
    try {
      pqxx::result r = Run(Work(), sql, params);
      Rows rows;
      rows.reserve(r.size());
      for (const auto& pg_row : r) {
        Row row(pg_row.size());
        for (size_t c = 0; c < pg_row.size(); ++c) {
          if (!pg_row[static_cast<pqxx::row::size_type>(c)].is_null()) {
            row[c] = pg_row[static_cast<pqxx::row::size_type>(c)].c_str();
          }
        }
        rows.push_back(std::move(row));
      }
      return rows;
    } catch (const std::exception& e) {
      failed_ = true;
      return FromPqxx(e, "query");
    }
  }

  absl::StatusOr<int64_t> Exec(absl::string_view sql, const Params& params) override {
    if (committed_) return absl::FailedPreconditionError("transaction already committed");
    NoteWrite();
    try {
      return static_cast<int64_t>(Run(Work(), sql, params).affected_rows());
    } catch (const std::exception& e) {
      failed_ = true;
      return FromPqxx(e, "exec");
    }
  }

  absl::Status Commit() override;
  absl::Status ExecAndCommit(absl::string_view sql, const Params& params) override;

 private:
  // BEGIN goes out with the first statement, not when the transaction is made: a
  // transaction of one statement then needs neither BEGIN nor COMMIT (ExecAndCommit).
  pqxx::work& Work() {
    if (work_ == nullptr) work_ = std::make_unique<pqxx::work>(*conn_);
    return *work_;
  }
  // Hands the connection back once the transaction is over, so it serves others while
  // this object lives on.
  void Finish();

  static pqxx::result Run(pqxx::transaction_base& txn, absl::string_view sql, const Params& params) {
    // Text parameters are sent from where they lie (a burst's documents are most of its
    // bytes); only numbers are printed, into storage that stops moving before it is pointed to.
    std::vector<std::string> numbers;
    numbers.reserve(params.size());
    for (const SqlValue& v : params) {
      if (auto* n = std::get_if<int64_t>(&v)) {
        numbers.push_back(std::to_string(*n));
      } else if (auto* d = std::get_if<double>(&v)) {
        numbers.push_back(absl::StrCat(*d));
      }
    }
    std::vector<const char*> pointers;
    pointers.reserve(params.size());
    size_t next_number = 0;
    for (const SqlValue& v : params) {
      if (std::holds_alternative<std::nullptr_t>(v)) {
        pointers.push_back(nullptr);
      } else if (auto* text = std::get_if<std::string>(&v)) {
        pointers.push_back(text->c_str());
      } else {
        pointers.push_back(numbers[next_number++].c_str());
      }
    }
    return txn.exec_params(std::string(sql), pqxx::prepare::make_dynamic_params(pointers));
  }

  PostgresStore* store_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<pqxx::work> work_;  // made by the first statement (Work())
  bool committed_ = false;
  bool failed_ = false;
};

class PostgresStore final : public Store {
 public:
  PostgresStore(std::string uri, std::string schema, int pool_size)
      : uri_(std::move(uri)), schema_(std::move(schema)), pool_size_(pool_size) {}

  absl::StatusOr<std::unique_ptr<Transaction>> Begin() override {
    JC_ASSIGN_OR_RETURN(auto conn, Acquire());
    try {
      return std::unique_ptr<Transaction>(new PostgresTransaction(this, std::move(conn)));
    } catch (const std::exception& e) {
      Release(nullptr);
      return FromPqxx(e, "begin");
    }
  }

  absl::string_view backend() const override { return "postgres"; }
  absl::string_view for_update() const override { return " FOR UPDATE"; }

  absl::Status Ping() override {
    JC_ASSIGN_OR_RETURN(auto txn, Begin());
    JC_ASSIGN_OR_RETURN(auto rows, txn->Query("SELECT 1"));
    return txn->Commit();
  }

  absl::StatusOr<std::unique_ptr<pqxx::connection>> Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !idle_.empty() || open_ < pool_size_; });
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
    ++open_;
    lock.unlock();
    try {
      auto conn = std::make_unique<pqxx::connection>(uri_);
      if (!schema_.empty()) {
        pqxx::nontransaction n(*conn);
        n.exec("SET search_path TO " + n.quote_name(schema_) + ", public");
      }
      return conn;
    } catch (const std::exception& e) {
      Release(nullptr);
      return absl::UnavailableError(absl::StrCat("cannot connect to PostgreSQL: ", e.what()));
    }
  }

  // Returns a connection to the pool; nullptr (or a broken one) frees its slot.
  void Release(std::unique_ptr<pqxx::connection> conn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (conn != nullptr && conn->is_open()) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
    }
    cv_.notify_one();
  }

  const std::string& schema() const { return schema_; }

 private:
  std::string uri_;
  std::string schema_;
  int pool_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
  int open_ = 0;
};

PostgresTransaction::PostgresTransaction(PostgresStore* store,
                                         std::unique_ptr<pqxx::connection> conn)
    : store_(store), conn_(std::move(conn)) {}

PostgresTransaction::~PostgresTransaction() {
  // Aborting an unfinished pqxx::work happens in its destructor; it must go before the
  // connection is handed back.
  if (conn_ == nullptr) return;  // committed: already handed back
  work_.reset();
  store_->Release(failed_ && !conn_->is_open() ? nullptr : std::move(conn_));
}

void PostgresTransaction::Finish() {
  committed_ = true;
  AfterCommit();
  work_.reset();
  store_->Release(std::move(conn_));
}

absl::Status PostgresTransaction::Commit() {
  if (committed_) return absl::FailedPreconditionError("transaction already committed");
  JC_RETURN_IF_ERROR(BeforeCommit());
  try {
    if (work_ != nullptr) work_->commit();  // else nothing was sent: nothing to commit
    Finish();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    failed_ = true;
    return FromPqxx(e, "commit");
  }
}

absl::Status PostgresTransaction::ExecAndCommit(absl::string_view sql, const Params& params) {
  if (committed_) return absl::FailedPreconditionError("transaction already committed");
  // Something already sent, or this thread's rider row to add: a transaction of its own.
  if (work_ != nullptr || WouldCarryRider()) return Transaction::ExecAndCommit(sql, params);
  NoteWrite();
  try {
    // Autocommit: PostgreSQL runs one statement as a transaction of its own, all or nothing.
    pqxx::nontransaction alone(*conn_);
    Run(alone, sql, params);
  } catch (const pqxx::broken_connection& e) {
    failed_ = true;
    // As for a commit in doubt: the statement may have committed before the connection broke.
    return absl::UnavailableError(absl::StrCat("exec: ", e.what(), " (the commit's outcome is unknown)"));
  } catch (const std::exception& e) {
    failed_ = true;
    return FromPqxx(e, "exec");
  }
  Finish();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& uri,
                                                         const std::string& schema,
                                                         int pool_size) {
  if (!schema.empty()) {
    try {
      pqxx::connection conn(uri);
      // Processes that start together on one database race in CREATE SCHEMA IF NOT
      // EXISTS: the loser fails on pg_namespace's unique index instead of finding the
      // schema. The migrations' advisory lock (schema.cc) makes them take turns.
      pqxx::work w(conn);
      w.exec("SELECT pg_advisory_xact_lock(74120001)");
      w.exec("CREATE SCHEMA IF NOT EXISTS " + w.quote_name(schema));
      w.commit();
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("cannot create schema ", schema, " in PostgreSQL: ", e.what()));
    }
  }
  auto store = std::make_unique<PostgresStore>(uri, schema, pool_size);
  JC_RETURN_IF_ERROR(store->Ping());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace jc::store
