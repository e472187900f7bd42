#pragma once

// Strategies by algorithm id, in registration order (the order of scores in a decision).

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "services/scheduler/scoring/scorer.h"

namespace jc::scheduler {

class ScorerRegistry {
 public:
  // AlreadyExists when the id is taken.
  absl::Status Register(std::unique_ptr<Scorer> scorer);
  const Scorer* Find(absl::string_view id) const;
  int IndexOf(absl::string_view id) const;  // -1 when unknown
  const std::vector<std::unique_ptr<Scorer>>& scorers() const { return scorers_; }
  size_t size() const { return scorers_.size(); }

 private:
  std::vector<std::unique_ptr<Scorer>> scorers_;
  absl::flat_hash_map<std::string, int> index_;
};

}  // namespace jc::scheduler
