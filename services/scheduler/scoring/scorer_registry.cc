#include "services/scheduler/scoring/scorer_registry.h"

#include "absl/strings/str_cat.h"

namespace jc::scheduler {

absl::Status ScorerRegistry::Register(std::unique_ptr<Scorer> scorer) {
  std::string id(scorer->id());
  if (index_.contains(id)) return absl::AlreadyExistsError(absl::StrCat("scoring algorithm ", id, " is registered twice"));
  index_[id] = static_cast<int>(scorers_.size());
  scorers_.push_back(std::move(scorer));
  return absl::OkStatus();
}

const Scorer* ScorerRegistry::Find(absl::string_view id) const {
  int i = IndexOf(id);
  return i < 0 ? nullptr : scorers_[i].get();
}

int ScorerRegistry::IndexOf(absl::string_view id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

}  // namespace jc::scheduler
