#include "common/store/group_commit.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace jc::store {

namespace {

// Gathers the batch's InsertRow calls into multi-row INSERTs: one statement (one round
// trip, one parse) for a batch of jobs instead of one each. Rows go out, in order, before
// any other statement of the transaction and before its commit.
class RowBatchingTransaction final : public Transaction {
 public:
  // `one_statement`: the store runs data-modifying WITH clauses (PostgreSQL), so INSERTs into
  // several tables go out as one statement: one round trip where there were one a table.
  RowBatchingTransaction(Transaction& inner, bool one_statement) : inner_(inner), one_statement_(one_statement) {}

  absl::StatusOr<Rows> Query(absl::string_view sql, const Params& params) override {
    JC_RETURN_IF_ERROR(Flush());
    return inner_.Query(sql, params);
  }
  absl::StatusOr<int64_t> Exec(absl::string_view sql, const Params& params) override {
    JC_RETURN_IF_ERROR(Flush());
    return inner_.Exec(sql, params);
  }
  absl::Status Commit() override { return CommitWith(TakeStatements()); }
  absl::Status ExecAndCommit(absl::string_view sql, const Params& params) override {
    std::vector<Statement> statements = TakeStatements();
    statements.push_back({std::string(sql), params});
    return CommitWith(std::move(statements));
  }
  absl::Status InsertRow(absl::string_view insert, const Params& row) override {
    if (pending_.empty() || pending_.back().insert != insert || pending_.back().columns != row.size()) {
      pending_.push_back({std::string(insert), row.size(), {}});
    }
    auto& group = pending_.back();
    group.values.insert(group.values.end(), row.begin(), row.end());
    return absl::OkStatus();
  }

 private:
  // PostgreSQL takes at most 65,535 parameters a statement.
  static constexpr size_t kMaxParams = 30000;

  struct Group {
    std::string insert;
    size_t columns;
    Params values;  // rows one after another
  };
  struct Statement {
    std::string sql;
    Params params;
  };

  // The last statement goes out with the commit: a batch of inserts alone is one statement,
  // which the store may send as a transaction of its own (one round trip on PostgreSQL).
  absl::Status CommitWith(std::vector<Statement> statements) {
    if (statements.empty()) return inner_.Commit();
    for (size_t i = 0; i + 1 < statements.size(); ++i) {
      JC_RETURN_IF_ERROR(inner_.Exec(statements[i].sql, statements[i].params).status());
    }
    return inner_.ExecAndCommit(statements.back().sql, statements.back().params);
  }

  absl::Status Flush() {
    for (Statement& statement : TakeStatements()) {
      JC_RETURN_IF_ERROR(inner_.Exec(statement.sql, statement.params).status());
    }
    return absl::OkStatus();
  }

  // The gathered rows as INSERT statements, in order; none are left gathered.
  std::vector<Statement> TakeStatements() {
    std::vector<Statement> statements;
    if (one_statement_ && pending_.size() > 1) {
      size_t total = 0;
      for (const auto& group : pending_) total += group.values.size();
      if (total <= kMaxParams) {
        statements.push_back(AsOneStatement());
        pending_.clear();
        return statements;
      }
    }
    for (auto& group : pending_) {
      size_t per_statement = std::max<size_t>(1, kMaxParams / std::max<size_t>(1, group.columns));
      size_t rows = group.columns == 0 ? 0 : group.values.size() / group.columns;
      for (size_t first = 0; first < rows; first += per_statement) {
        size_t n = std::min(per_statement, rows - first);
        statements.push_back({absl::StrCat(group.insert, " VALUES ", ValuesList(n, group.columns)),
                              Params(std::make_move_iterator(group.values.begin() + first * group.columns),
                                     std::make_move_iterator(group.values.begin() + (first + n) * group.columns))});
      }
    }
    pending_.clear();
    return statements;
  }

  // WITH i1 AS (INSERT INTO a ... VALUES ...), i2 AS (INSERT INTO b ...) INSERT INTO c ...:
  // each sub-statement runs to completion, in the transaction, and a failing one fails the
  // statement as it would have failed its own. The gathered values are moved out.
  Statement AsOneStatement() {
    Statement statement;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Group& group = pending_[i];
      const size_t rows = group.columns == 0 ? 0 : group.values.size() / group.columns;
      std::string insert =
          absl::StrCat(group.insert, " VALUES ", ValuesList(rows, group.columns, statement.params.size() + 1));
      if (i + 1 < pending_.size()) {
        absl::StrAppend(&statement.sql, i == 0 ? "WITH " : ", ", "jc_insert_", i, " AS (", insert, ")");
      } else {
        absl::StrAppend(&statement.sql, " ", insert);
      }
      statement.params.insert(statement.params.end(), std::make_move_iterator(group.values.begin()),
                              std::make_move_iterator(group.values.end()));
    }
    return statement;
  }

  Transaction& inner_;
  const bool one_statement_;
  std::vector<Group> pending_;
};

}  // namespace

absl::Status GroupCommitter::RunBatch(const std::vector<std::shared_ptr<Entry>>& batch) {
  {
    JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
    if (prologue_) JC_RETURN_IF_ERROR(prologue_(*txn));
    RowBatchingTransaction batching(*txn, store_->backend() == "postgres");
    for (const auto& e : batch) JC_RETURN_IF_ERROR(e->write(batching));
    JC_RETURN_IF_ERROR(batching.Commit());
  }
  // After the transaction is gone (an embedded store holds its lock until then), still
  // before the next batch: the leader is one thread at a time.
  if (epilogue_) epilogue_();
  return absl::OkStatus();
}

absl::Status GroupCommitter::Commit(std::function<absl::Status(Transaction&)> write) {
  auto mine = std::make_shared<Entry>();
  mine->write = std::move(write);
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(mine);
  while (!mine->done) {
    if (leader_active_) {
      mine->cv.wait(lock);
      continue;
    }
    // Lead: commit everything queued so far, including this caller's write.
    leader_active_ = true;
    std::vector<std::shared_ptr<Entry>> batch(queue_.begin(), queue_.end());
    queue_.clear();
    lock.unlock();
    absl::Status shared = RunBatch(batch);
    if (shared.ok()) {
      for (auto& e : batch) e->result = absl::OkStatus();
    } else if (batch.size() == 1 || shared.code() == absl::StatusCode::kUnavailable) {
      // Unavailable is the store's or the fence's, not one write's: alone, each would
      // fail the same way.
      for (auto& e : batch) e->result = shared;
    } else {
      for (auto& e : batch) e->result = RunBatch({e});
    }
    lock.lock();
    leader_active_ = false;
    for (auto& e : batch) {
      e->done = true;
      if (e != mine) e->cv.notify_one();
    }
    // The first caller queued meanwhile leads the next batch.
    if (!queue_.empty()) queue_.front()->cv.notify_one();
  }
  return mine->result;
}

}  // namespace jc::store
