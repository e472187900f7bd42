#include "executor/agent/task_book.h"

#include <algorithm>

namespace jc::nexec {

void TaskBook::Add(const std::string& key, Task task) {
  logs_[{task.job_id, task.task_index}] = task;
  tasks_[key] = std::move(task);
}

void TaskBook::Finish(const std::string& key) {
  tasks_.erase(key);
  finished_.insert(key);
  finished_order_.push_back(key);
  if (finished_order_.size() > kFinishedKept) {
    finished_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
}

void TaskBook::Inherit(const std::string& key, const ::nexec::v1::TaskReport& exit) {
  // Not trimmed here: the next task to finish trims. Inherited exits come first (at start).
  unacked_exits_.push_back(exit);
  ++inherited_unacked_;
  finished_.insert(key);
  finished_order_.push_back(key);
}

void TaskBook::ForgetStore() {
  logs_.clear();
  finished_.clear();
  finished_order_.clear();
  unacked_exits_.clear();
  unacked_notes_.clear();
  inherited_unacked_ = 0;
}

const TaskBook::Task* TaskBook::LogOf(int64_t job_id, int32_t task_index) const {
  auto it = logs_.find({job_id, task_index});
  return it == logs_.end() ? nullptr : &it->second;
}

void TaskBook::Acknowledge(size_t exits, size_t notes) {
  // Never past what is held (a store change may have dropped them meanwhile).
  exits = std::min(exits, unacked_exits_.size());
  notes = std::min(notes, unacked_notes_.size());
  unacked_exits_.erase(unacked_exits_.begin(), unacked_exits_.begin() + static_cast<long>(exits));
  inherited_unacked_ -= std::min(inherited_unacked_, exits);
  unacked_notes_.erase(unacked_notes_.begin(), unacked_notes_.begin() + static_cast<long>(notes));
}

}  // namespace jc::nexec
