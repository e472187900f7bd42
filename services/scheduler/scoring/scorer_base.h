#pragma once

// The metadata half of a Scorer, so a strategy's file holds only its arithmetic.

#include "services/scheduler/scoring/scorer.h"

namespace jc::scheduler {

struct ScorerInfo {
  absl::string_view id;
  absl::string_view description;
  absl::string_view inputs;
  bool higher_is_better;
};

class ScorerBase : public Scorer {
 public:
  explicit ScorerBase(ScorerInfo info) : info_(info) {}
  absl::string_view id() const final { return info_.id; }
  absl::string_view description() const final { return info_.description; }
  absl::string_view inputs() const final { return info_.inputs; }
  bool higher_is_better() const final { return info_.higher_is_better; }

 private:
  ScorerInfo info_;
};

}  // namespace jc::scheduler
