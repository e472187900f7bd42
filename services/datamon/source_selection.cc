#include "services/datamon/source_selection.h"

#include <algorithm>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace jc::datamon {
namespace {

struct Candidate {
  const v1::DatasetLocation* location;
  std::map<std::string, double> raw;  // per evaluator, higher is better
  std::map<std::string, double> score;
  double total = 0;
};

// Min-max normalization to 0..100 over the candidates; all equal -> 100 for all, so an
// evaluator that cannot tell candidates apart neither helps nor hurts any of them.
void Normalize(std::vector<Candidate>& cands, const std::string& evaluator) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (const auto& c : cands) {
    lo = std::min(lo, c.raw.at(evaluator));
    hi = std::max(hi, c.raw.at(evaluator));
  }
  for (auto& c : cands) {
    double v = c.raw.at(evaluator);
    c.score[evaluator] = hi > lo ? 100.0 * (v - lo) / (hi - lo) : 100.0;
  }
}

}  // namespace

const std::vector<std::string>& EvaluatorNames() {
  static const auto* names = new std::vector<std::string>{kLeastLoad, kLeastTime, kTopologyAffinity,
                                                          kSuccessRate, kRateLimit};
  return *names;
}

std::map<std::string, double> DefaultWeights() {
  std::map<std::string, double> w;
  for (const auto& n : EvaluatorNames()) w[n] = 1.0;
  return w;
}

absl::StatusOr<std::map<std::string, double>> ParseWeights(const std::string& text) {
  auto weights = DefaultWeights();
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::string name(absl::StripAsciiWhitespace(kv.first));
    double w = 0;
    if (!weights.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown migration evaluator \"", name,
                                                     "\"; known: ",
                                                     absl::StrJoin(EvaluatorNames(), ", ")));
    }
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(kv.second), &w) || w < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("weight of \"", name, "\" must be a non-negative number"));
    }
    weights[name] = w;
  }
  return weights;
}

void RecordDownload(v1::DatasetLocation* location, bool succeeded, double seconds) {
  auto* state = location->mutable_download_state();
  if (!succeeded) {
    state->set_failed(state->failed() + 1);
    return;
  }
  double n = state->succeeded();
  location->set_download_cost((location->download_cost() * n + seconds) / (n + 1));
  state->set_succeeded(state->succeeded() + 1);
}

int SharedTopologyDepth(const std::string& a, const std::string& b) {
  std::vector<absl::string_view> pa = absl::StrSplit(a, '/', absl::SkipEmpty());
  std::vector<absl::string_view> pb = absl::StrSplit(b, '/', absl::SkipEmpty());
  int depth = 0;
  while (depth < static_cast<int>(std::min(pa.size(), pb.size())) && pa[depth] == pb[depth]) {
    ++depth;
  }
  return depth;
}

v1::SelectMigrationSourcesResponse SelectSources(const SelectionInput& in) {
  v1::SelectMigrationSourcesResponse out;
  for (const auto& [name, w] : in.weights) (*out.mutable_weights())[name] = w;
  auto reject = [&](const std::string& center, const std::string& reason) {
    auto* r = out.add_rejected();
    r->set_ai_center_id(center);
    r->set_reason(reason);
  };

  std::vector<Candidate> cands;
  for (const auto& loc : in.dataset.location()) {
    if (loc.ai_center_id() == in.target_center_id) {
      out.set_target_has_data(true);
      continue;
    }
    if (in.dataset.is_private()) {
      reject(loc.ai_center_id(), "dataset is private and never leaves its center");
      continue;
    }
    if (loc.access() != "r" && loc.access() != "rw") {
      reject(loc.ai_center_id(), "location is not readable by other centers");
      continue;
    }
    auto it = in.centers.find(loc.ai_center_id());
    if (it == in.centers.end() || !it->second.registered) {
      reject(loc.ai_center_id(), "source center is not registered");
      continue;
    }
    if (it->second.status != 1) {
      reject(loc.ai_center_id(), it->second.status == 0 ? "source center is unavailable"
                                                        : "source center status is unknown");
      continue;
    }
    cands.push_back({&loc, {}, {}, 0});
  }
  if (out.target_has_data() || cands.empty()) return out;

  // Raw values, each oriented so that higher is better.
  double known_cost_sum = 0;
  int known_cost_n = 0;
  for (const auto& c : cands) {
    if (c.location->download_cost() > 0) {
      known_cost_sum += c.location->download_cost();
      ++known_cost_n;
    }
  }
  double neutral_cost = known_cost_n ? known_cost_sum / known_cost_n : 0;
  // "No limit" (0) ranks above every limited source without flattening the others.
  double fastest_limit = 0;
  for (const auto& c : cands) fastest_limit = std::max(fastest_limit, c.location->download_rate_limit());
  double unlimited = fastest_limit > 0 ? 2 * fastest_limit : 1;
  for (auto& c : cands) {
    const auto& l = *c.location;
    double load = l.concurrency_limit() > 0
                      ? static_cast<double>(l.current_downloads()) / l.concurrency_limit()
                      : 0.0;  // no limit: never saturated
    c.raw[kLeastLoad] = -load;
    // A source without history is judged as the average of those with one.
    c.raw[kLeastTime] = -(l.download_cost() > 0 ? l.download_cost() : neutral_cost);
    c.raw[kTopologyAffinity] = SharedTopologyDepth(l.network_topology(), in.target_topology);
    const auto& h = l.download_state();
    double attempts = h.succeeded() + h.interrupted() + h.failed();
    // Laplace smoothing: no history reads as 50%, one success does not read as 100%.
    c.raw[kSuccessRate] = (h.succeeded() + 1.0) / (attempts + 2.0);
    c.raw[kRateLimit] = l.download_rate_limit() > 0 ? l.download_rate_limit() : unlimited;
  }
  for (const auto& name : EvaluatorNames()) Normalize(cands, name);
  for (auto& c : cands) {
    for (const auto& [name, score] : c.score) c.total += in.weights.at(name) * score;
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.total != b.total) return a.total > b.total;
    return a.location->ai_center_id() < b.location->ai_center_id();
  });
  for (const auto& c : cands) {
    auto* s = out.add_sources();
    s->set_ai_center_id(c.location->ai_center_id());
    s->set_dataset_url(c.location->dataset_url());
    s->set_total_score(c.total);
    for (const auto& [name, score] : c.score) (*s->mutable_scores())[name] = score;
  }
  return out;
}

}  // namespace jc::datamon
