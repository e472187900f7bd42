#include "common/store/group_commit.h"

#include "common/status_macros.h"

namespace jc::store {

absl::Status GroupCommitter::RunBatch(const std::vector<std::shared_ptr<Entry>>& batch) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  for (const auto& e : batch) JC_RETURN_IF_ERROR(e->write(*txn));
  return txn->Commit();
}

absl::Status GroupCommitter::Commit(std::function<absl::Status(Transaction&)> write) {
  auto mine = std::make_shared<Entry>();
  mine->write = std::move(write);
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(mine);
  while (!mine->done) {
    if (leader_active_) {
      cv_.wait(lock);
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
    } else if (batch.size() == 1) {
      batch[0]->result = shared;
    } else {
      for (auto& e : batch) e->result = RunBatch({e});
    }
    lock.lock();
    for (auto& e : batch) e->done = true;
    leader_active_ = false;
    cv_.notify_all();
  }
  return mine->result;
}

}  // namespace jc::store
