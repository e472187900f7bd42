#pragma once

// A store that fails job writes on demand, for tests of "commit or stop" (ADR 0006):
// while `FailJobWrites(true)`, every transaction that wrote to the jobs table fails at its
// commit (Unavailable, as a store gone away would) and writes nothing; reads and other
// tables' writes go through. While `HoldJobWrites(true)`, such a commit waits instead, as
// on a database that stopped answering, until the hold is lifted (then it commits). After
// `CommitInDoubtOnce()`, the next transaction that wrote a job (the control plane's or
// nexec's) commits and is then answered Unavailable, as PostgreSQL's store answers a commit
// whose connection broke before its outcome came (pqxx's in_doubt_error): written, and told
// it may not be. The real store (SQLite or PostgreSQL) does the work.

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "common/store/store.h"

namespace jc::testing {

class FaultyStore final : public store::Store {
 public:
  explicit FaultyStore(std::unique_ptr<store::Store> inner) : inner_(std::move(inner)) {}

  void FailJobWrites(bool fail) { fail_ = fail; }
  int failed_commits() const { return failed_commits_; }
  void HoldJobWrites(bool hold) {
    {
      std::lock_guard<std::mutex> lock(hold_mu_);
      hold_ = hold;
    }
    hold_cv_.notify_all();
  }
  // Commits waiting on the hold now.
  int held_commits() const { return held_commits_; }
  void CommitInDoubtOnce() { in_doubt_ = true; }
  // Transactions that wrote a job (the control plane's or nexec's) and committed.
  int job_commits() const { return job_commits_; }
  int in_doubt_commits() const { return in_doubt_commits_; }

  absl::StatusOr<std::unique_ptr<store::Transaction>> Begin() override {
    auto txn = inner_->Begin();
    if (!txn.ok()) return txn.status();
    return std::unique_ptr<store::Transaction>(new Txn(std::move(*txn), this));
  }
  absl::string_view backend() const override { return inner_->backend(); }
  absl::Status Ping() override { return inner_->Ping(); }
  absl::string_view for_update() const override { return inner_->for_update(); }

 private:
  class Txn final : public store::Transaction {
   public:
    Txn(std::unique_ptr<store::Transaction> inner, FaultyStore* store) : inner_(std::move(inner)), store_(store) {}
    absl::StatusOr<store::Rows> Query(absl::string_view sql, const store::Params& params) override {
      return inner_->Query(sql, params);
    }
    absl::StatusOr<int64_t> Exec(absl::string_view sql, const store::Params& params) override {
      Note(sql);
      return inner_->Exec(sql, params);
    }
    absl::Status InsertRow(absl::string_view insert, const store::Params& row) override {
      Note(insert);
      return inner_->InsertRow(insert, row);
    }
    absl::Status Commit() override {
      if (wrote_jobs_ && store_->fail_) {
        ++store_->failed_commits_;
        return absl::UnavailableError("injected: the store failed this commit");  // rolled back on destruction
      }
      if (wrote_jobs_) {
        std::unique_lock<std::mutex> lock(store_->hold_mu_);
        ++store_->held_commits_;
        store_->hold_cv_.wait(lock, [this] { return !store_->hold_; });
        --store_->held_commits_;
      }
      absl::Status committed = inner_->Commit();
      if (committed.ok() && wrote_any_job_) ++store_->job_commits_;
      if (committed.ok() && wrote_any_job_ && store_->in_doubt_.exchange(false)) {
        ++store_->in_doubt_commits_;
        return absl::UnavailableError("injected: the connection broke while committing (the commit's outcome is unknown)");
      }
      return committed;
    }

   private:
    void Note(absl::string_view sql) {
      wrote_jobs_ = wrote_jobs_ || absl::StrContains(sql, "INTO jobs ") || absl::StrContains(sql, "UPDATE jobs ");
      wrote_any_job_ = wrote_any_job_ || wrote_jobs_ || absl::StrContains(sql, "nexec_jobs");
    }
    std::unique_ptr<store::Transaction> inner_;
    FaultyStore* store_;
    bool wrote_jobs_ = false;
    bool wrote_any_job_ = false;
  };

  std::unique_ptr<store::Store> inner_;
  std::atomic<bool> fail_{false};
  std::atomic<int> failed_commits_{0};
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  bool hold_ = false;
  std::atomic<int> held_commits_{0};
  std::atomic<bool> in_doubt_{false};
  std::atomic<int> in_doubt_commits_{0};
  std::atomic<int> job_commits_{0};
};

}  // namespace jc::testing
