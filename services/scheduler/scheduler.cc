#include "services/scheduler/scheduler.h"

#include <spdlog/spdlog.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "services/scheduler/filters.h"
#include "services/scheduler/scoring/builtin_scorers.h"

namespace jc::scheduler {

Scheduler::Scheduler(InputsSource* source, const Clock* clock, SchedulerOptions options)
    : source_(source), clock_(clock), options_(std::move(options)) {
  RegisterBuiltinScorers(scorers_);
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  loop_.Start(options_.refresh_interval, [this] {
    if (absl::Status s = Refresh(); !s.ok()) spdlog::warn("scheduler: cannot refresh its view: {}", s.ToString());
  });
}

void Scheduler::Stop() { loop_.Stop(); }

absl::Status Scheduler::Refresh() {
  auto inputs = source_->Fetch();
  std::lock_guard<std::mutex> lock(mu_);
  if (!inputs.ok()) {
    last_refresh_ = inputs.status();
    return inputs.status();
  }
  snapshot_ = BuildSnapshot(*inputs);
  inputs_ = std::move(*inputs);
  last_refresh_ = absl::OkStatus();
  return absl::OkStatus();
}

absl::StatusOr<int> Scheduler::AlgorithmScore(const std::string& algorithm_id, const std::string& center_id,
                                              const std::string& spec_id) {
  const Scorer* scorer = scorers_.Find(algorithm_id);
  if (scorer == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown algorithm \"", algorithm_id,
                                            "\"; GET /openapi/v1/scheduler/algorithms lists them"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (snapshot_.Find(center_id) == nullptr) {
    if (!last_refresh_.ok()) return last_refresh_;
    return absl::NotFoundError(absl::StrCat("unknown center \"", center_id, "\""));
  }
  if (!spec_id.empty() && !std::any_of(inputs_.specs.begin(), inputs_.specs.end(),
                                       [&](const auto& s) { return s.resource_spec_id() == spec_id; })) {
    return absl::NotFoundError(absl::StrCat("unknown resource spec \"", spec_id, "\""));
  }
  // Candidates: available centers that offer the spec (or anything, without one). Free
  // capacity does not matter here: the score is the center's standing, not a placement.
  static const SpecAtCenter kNoOffer;
  std::vector<const CenterView*> centers;
  std::vector<const SpecAtCenter*> specs;
  int index = -1;
  std::string why;
  for (const auto& c : snapshot_.centers()) {
    const SpecAtCenter* spec = nullptr;
    if (!spec_id.empty()) {
      auto it = c.specs.find(spec_id);
      if (it != c.specs.end()) spec = &it->second;
    } else {
      for (const auto& [id, s] : c.specs) {
        if (spec == nullptr || s.price < spec->price) spec = &s;
      }
      if (spec == nullptr) spec = &kNoOffer;
    }
    if (!c.available || spec == nullptr) {
      if (c.id == center_id) {
        why = !c.available ? "the center is not available" : absl::StrCat("the center does not offer ", spec_id);
      }
      continue;
    }
    if (c.id == center_id) index = static_cast<int>(centers.size());
    centers.push_back(&c);
    specs.push_back(spec);
  }
  if (index < 0) return absl::FailedPreconditionError(absl::StrCat("center ", center_id, " is not scored: ", why));
  PlacementRequest request;
  request.spec_id = spec_id;
  request.now = clock_->Now();
  std::vector<CandidateFacts> facts;
  for (const auto* c : centers) facts.push_back(FactsFor(request, *c));
  ScoringContext ctx{&request, &snapshot_, centers, specs, {}, facts};
  std::vector<double> raw(centers.size());
  std::vector<int> normalized(centers.size());
  scorer->Score(ctx, absl::MakeSpan(raw));
  NormalizeScores(raw, scorer->higher_is_better(), absl::MakeSpan(normalized));
  return normalized[index];
}

absl::StatusOr<int> Scheduler::EvaluateScore(const std::string& center_id,
                                             const std::vector<std::string>& algorithm_ids,
                                             const std::vector<int>& scores, const std::string& profile) {
  if (algorithm_ids.empty()) return absl::InvalidArgumentError("algorithmIds: at least one algorithm is required");
  if (algorithm_ids.size() != scores.size()) {
    return absl::InvalidArgumentError(absl::StrCat("algorithmScores: ", scores.size(), " scores for ",
                                                   algorithm_ids.size(), " algorithmIds; give one score each"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (snapshot_.Find(center_id) == nullptr) {
      if (!last_refresh_.ok()) return last_refresh_;
      return absl::NotFoundError(absl::StrCat("unknown center \"", center_id, "\""));
    }
  }
  auto weights = options_.profiles.Resolve(profile, {}, scorers_);
  if (!weights.ok()) return weights.status();
  std::vector<int> all(scorers_.size(), 0);
  std::vector<bool> given(scorers_.size(), false);
  for (size_t i = 0; i < algorithm_ids.size(); ++i) {
    int k = scorers_.IndexOf(algorithm_ids[i]);
    if (k < 0) return absl::InvalidArgumentError(absl::StrCat("algorithmIds: unknown algorithm \"", algorithm_ids[i], "\""));
    if (given[k]) return absl::InvalidArgumentError(absl::StrCat("algorithmIds: \"", algorithm_ids[i], "\" is given twice"));
    if (scores[i] < 0 || scores[i] > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("algorithmScores: ", scores[i], " for ", algorithm_ids[i], " is outside 0..100"));
    }
    all[k] = scores[i];
    given[k] = true;
  }
  // Only the strategies given take part: the others weigh nothing here.
  std::vector<double> w = *weights;
  for (size_t k = 0; k < w.size(); ++k) {
    if (!given[k]) w[k] = 0;
  }
  return static_cast<int>(std::lround(model_.Evaluate(all, w)));
}

std::vector<v1::Algorithm> Scheduler::ListAlgorithms() const {
  std::vector<v1::Algorithm> out;
  for (const auto& s : scorers_.scorers()) {
    v1::Algorithm a;
    a.set_algorithm_id(std::string(s->id()));
    a.set_description(std::string(s->description()));
    a.set_inputs(std::string(s->inputs()));
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<v1::WeightProfile> Scheduler::ListWeightProfiles() const {
  std::vector<v1::WeightProfile> out;
  for (const auto& [name, listed] : options_.profiles.profiles()) {
    v1::WeightProfile p;
    p.set_name(name);
    auto weights = options_.profiles.Resolve(name, {}, scorers_);
    if (weights.ok()) {
      for (size_t k = 0; k < scorers_.size(); ++k) {
        if ((*weights)[k] != 0) (*p.mutable_weights())[std::string(scorers_.scorers()[k]->id())] = (*weights)[k];
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<v1::Placement> Scheduler::Plan(const v1::CreateTrainJobRequest& job) {
  std::map<std::string, double> overrides(job.scheduling().weights().begin(), job.scheduling().weights().end());
  auto weights = options_.profiles.Resolve(job.scheduling().weight_profile(), overrides, scorers_);
  if (!weights.ok()) return weights.status();
  Snapshot snapshot;
  std::vector<PlacementRequest> requests;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!last_refresh_.ok() && snapshot_.centers().empty()) return last_refresh_;
    auto r = RequestsForJob("", job, inputs_, clock_->Now());
    if (!r.ok()) return r.status();
    requests = std::move(*r);
    snapshot = snapshot_;  // a dry run works on a copy
  }
  Placer placer(scorers_, model_);
  v1::Placement placement;
  placer.PlaceJob(requests, snapshot, *weights, job.scheduling().gang(), &placement);
  return placement;
}

}  // namespace jc::scheduler
