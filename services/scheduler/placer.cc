#include "services/scheduler/placer.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/scheduler/filters.h"
#include "services/scheduler/scoring/factors.h"
#include "services/scheduler/scoring/expected_completion.h"

namespace jc::scheduler {
namespace {

namespace pb = ::jointcloud::v1;

std::string NothingFits(const std::vector<std::pair<const char*, int>>& removed_by, size_t centers) {
  if (centers == 0) return "no centers are registered";
  std::vector<std::string> parts;
  for (const auto& [filter, n] : removed_by) parts.push_back(absl::StrCat(filter, ": ", n));
  return absl::StrCat("no center can run it now (", centers, " centers; removed by ", absl::StrJoin(parts, ", "),
                      ")");
}

}  // namespace

ReplicaDecision Placer::Place(const PlacementRequest& request, const Snapshot& snapshot,
                              absl::Span<const double> weights, pb::ReplicaPlacement* explain,
                              const EvaluationModel* model) {
  if (explain == nullptr) return Decide(request, snapshot, weights, nullptr, model);
  // The record is the placer's, kept between explanations: its rows and scores keep their
  // room (an explanation at 100 centers spent a fifth of its time allocating).
  ReplicaDecision decision = Decide(request, snapshot, weights, &shown_, model);
  ToProto(shown_, scorers_, explain);
  return decision;
}

ReplicaDecision Placer::Decide(const PlacementRequest& request, const Snapshot& snapshot,
                               absl::Span<const double> weights, ReplicaRecord* explain,
                               const EvaluationModel* model_override) {
  const EvaluationModel& model = model_override != nullptr ? *model_override : model_;
  const auto& centers = snapshot.centers();
  ReplicaDecision decision;

  // Filters. Earlier failures only steer a retry elsewhere: when they would leave
  // nothing, the retry may go back (to a center that refused it, only when no other center
  // could ever run it).
  const RequestKeys keys(request);
  // A decision visits only the centers that could pass (the snapshot's indexes: those
  // offering the spec, or the pinned ones): every other center fails a filter whatever
  // `ignore_avoid` says (its explanation says which, from the snapshot's gates). When those
  // leave nothing, every center is visited again, so that the reason counts what each
  // filter removed of all of them.
  const std::vector<int>* source = CandidateCenters(request, snapshot, keys, &pinned_);
  if (explain) reasons_.resize(centers.size());
  failed_.resize(centers.size());  // written and read only for the centers visited
  bool avoided = false;
  // In the fallback, whether the centers that refused an earlier attempt stay avoided:
  // while another center could ever run the replica, it waits for that one.
  bool refused_stay_avoided = false;
  auto visit = [&](size_t i, bool ignore_avoid) {
    const CenterView& c = centers[i];
    const SpecAtCenter* spec = nullptr;
    const char* failed = FilterCenter(request, c, ignore_avoid, nullptr, &spec, &keys);
    if (failed == nullptr && ignore_avoid && refused_stay_avoided && request.refused_centers.contains(c.id)) {
      failed = kFilterAvoid;
    }
    failed_[i] = failed;
    // An explanation keeps a sentence of the center's own only where the filter's is not
    // the same for every center it removes (most centers fail spec_offered).
    if (failed != nullptr && explain && SentenceFor(failed, request, c) == Sentence::kOwn) {
      FilterCenter(request, c, ignore_avoid, &reasons_[i], nullptr, &keys);
    }
    if (failed != nullptr) {
      CountRemoved(failed);
      avoided |= failed == kFilterAvoid;
      return;
    }
    candidates_.push_back(&c);
    specs_.push_back(spec);
  };
  auto run_filters = [&](bool ignore_avoid) {
    candidates_.clear();
    specs_.clear();
    removed_by_.clear();
    if (source != nullptr) {
      for (int i : *source) visit(static_cast<size_t>(i), ignore_avoid);
    } else {
      for (size_t i = 0; i < centers.size(); ++i) visit(i, ignore_avoid);
    }
  };
  bool refusals_weighed = false;  // the same answer for both fallbacks below: asked once
  auto fall_back = [&] {
    if (!refusals_weighed && !request.refused_centers.empty()) {
      refused_stay_avoided = UnrefusedCenterCouldEverTake(request, snapshot, keys);
    }
    refusals_weighed = true;
    run_filters(true);
  };
  run_filters(false);
  if (candidates_.empty() && avoided) fall_back();
  if (candidates_.empty() && source != nullptr) {
    source = nullptr;
    avoided = false;
    run_filters(false);
    if (candidates_.empty() && avoided) fall_back();
  }
  if ((!request.kept_centers.empty() || (request.scarce_centers && !request.scarce_centers->empty())) &&
      candidates_.size() > 1) {
    PreferUnkept(request, keys, snapshot, explain != nullptr);
  }

  const size_t n = candidates_.size();
  const size_t m = scorers_.size();
  scores_.assign(n * m, 0);
  raw_.resize(n);
  column_.resize(n);

  if (n > 0) {
    sibling_topologies_.clear();
    for (const auto& id : request.sibling_centers) {
      if (const CenterView* c = snapshot.Find(id)) sibling_topologies_.push_back(&c->topology_path);
    }
    facts_.resize(n);
    for (size_t i = 0; i < n; ++i) facts_[i] = FactsFor(request, keys, *candidates_[i]);
    ScoringContext ctx{&request, &snapshot, candidates_, specs_, sibling_topologies_, facts_};
    scorer_nanos_.resize(m, 0);
    // One decision in kTimingSample is timed, and counts for kTimingSample: reading the
    // clock around every scorer of every decision cost 4% of a decision.
    const bool timed = decisions_++ % kTimingSample == 0;
    for (size_t s = 0; s < m; ++s) {
      if (weights[s] == 0 && explain == nullptr) continue;  // cannot change the total
      const Scorer& scorer = *scorers_.scorers()[s];
      auto started = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      scorer.Score(ctx, absl::MakeSpan(raw_));
      if (timed) {
        scorer_nanos_[s] += kTimingSample * std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now() - started)
                                                .count();
      }
      NormalizeScores(raw_, scorer.higher_is_better(), absl::MakeSpan(column_));
      for (size_t i = 0; i < n; ++i) scores_[i * m + s] = column_[i];
    }
    // Select: the best by the model (the highest total, for a model whose totals order
    // the centers); on a tie the less loaded center (but for first fit), then the first. `only_free`: among
    // the centers whose free capacity holds the spec.
    size_t best = 0;
    const bool scalar = model.scalar();
    auto fits = [&](size_t i) { return candidates_[i]->free.Covers(specs_[i]->quantity); };
    auto select = [&](bool only_free) {
      decision.center = -1;
      for (size_t i = 0; i < n; ++i) {
        if (only_free && !fits(i)) continue;
        auto row = absl::MakeConstSpan(&scores_[i * m], m);
        double total = model.Evaluate(row, weights);
        int index = static_cast<int>(candidates_[i] - centers.data());
        bool better = decision.center < 0;
        if (!better) {
          int c = scalar ? (total > decision.total) - (total < decision.total)
                         : model.Compare(row, absl::MakeConstSpan(&scores_[best * m], m), weights);
          better = c > 0 || (c == 0 && model.breaks_ties_by_load() &&
                                       candidates_[i]->JobLoad() < centers[decision.center].JobLoad());
        }
        if (better) {
          decision.center = index;
          decision.total = total;
          best = i;
        }
      }
    };
    select(false);
    if (decision.center >= 0 && request.consider_busy_centers && !fits(best)) {
      // Waiting for a busy center pays only when it is expected to finish the replica
      // before every center that can start it now: the other strategies may prefer a busy
      // center (a faster, greener one) but never make a replica wait for it on their own.
      ScoringContext ctx{&request, &snapshot, candidates_, specs_, sibling_topologies_, facts_};
      const double waited_finish = EstimateCompletion(ctx, best).finish_s;
      bool sooner_now = false;
      for (size_t i = 0; i < n && !sooner_now; ++i) {
        sooner_now = fits(i) && EstimateCompletion(ctx, i).finish_s <= waited_finish;
      }
      if (sooner_now) select(true);
      decision.fits_now = fits(best);
    }
  } else {
    decision.reason = NothingFits(removed_by_, centers.size());
  }

  if (explain) {
    explain->task_index = request.task_index;
    explain->replica_index = request.replica_index;
    explain->spec_id = request.spec_id;
    explain->gate = {request.pinned_centers, request.excluded_center, request.min_security_grade, request.project,
                     request.user};
    explain->centers = snapshot.gates();
    explain->weights.assign(weights.begin(), weights.begin() + std::min(m, weights.size()));
    explain->scores.assign(scores_.begin(), scores_.end());
    const size_t visited = source != nullptr ? source->size() : centers.size();
    explain->rows.clear();
    explain->rows.resize(visited);
    size_t next = 0;
    ScoringContext ctx{&request, &snapshot, candidates_, specs_, sibling_topologies_, facts_};
    for (size_t k = 0; k < visited; ++k) {
      const size_t i = source != nullptr ? static_cast<size_t>((*source)[k]) : k;
      CenterRow& e = explain->rows[k];
      e.center = static_cast<int>(i);
      if (failed_[i] != nullptr) {
        e.filtered_by = failed_[i];
        e.sentence = SentenceFor(failed_[i], request, centers[i]);
        if (e.sentence == Sentence::kOwn) e.reason = std::move(reasons_[i]);
        continue;
      }
      const size_t row = next++;
      e.scores_row = static_cast<int>(row);
      e.total = model.Evaluate(absl::MakeConstSpan(&scores_[row * m], m), weights);
      // What the strategies found there beyond their scores (expected start and finish).
      e.reason.clear();
      for (size_t s = 0; s < m; ++s) {
        std::string note = scorers_.scorers()[s]->Explain(ctx, row);
        if (note.empty()) continue;
        absl::StrAppend(&e.reason, e.reason.empty() ? "" : "; ", scorers_.scorers()[s]->id(), ": ", note);
      }
      const CompletionEstimate when = EstimateCompletion(ctx, row);
      e.expected_start_seconds = when.start_s;
      e.expected_finish_seconds = when.finish_s;
      e.expected_cost = specs_[row]->price * (facts_[row].transfer_seconds + facts_[row].run_seconds) / 3600;
    }
    explain->chosen = explain->picked = decision.center;
  }
  return decision;
}

void Placer::CountRemoved(const char* filter) {
  auto it = std::find_if(removed_by_.begin(), removed_by_.end(), [&](const auto& p) { return p.first == filter; });
  if (it == removed_by_.end()) {
    removed_by_.emplace_back(filter, 1);
  } else {
    ++it->second;
  }
}

void Placer::PreferUnkept(const PlacementRequest& request, const RequestKeys& keys, const Snapshot& snapshot,
                          bool explain) {
  // Which candidates a waiting job or a scarce spec placed lately needs. A center the
  // job's own replicas run at is not kept from it for a scarce spec (its trainer's center,
  // for its CPU task).
  const ScarceCenters* scarce = request.scarce_centers.get();
  kept_.assign(candidates_.size(), 0);  // the waiting keeper's breadth; 0: not kept
  scarce_.assign(candidates_.size(), nullptr);
  if (scarce != nullptr && scarce->empty()) scarce = nullptr;
  const bool waiting = !request.kept_centers.empty();
  bool any_kept = false, any_free = false;
  // The most a comparison below asks of the replica's breadth: counting past it tells nothing.
  int breadth_limit = 0;
  for (size_t j = 0; j < candidates_.size(); ++j) {
    const std::string& id = candidates_[j]->id;
    if (auto it = waiting ? request.kept_centers.find(id) : request.kept_centers.end();
        it != request.kept_centers.end()) {
      kept_[j] = it->second;
      any_kept = true;
      breadth_limit = std::max(breadth_limit, it->second + 1);
    }
    if (scarce != nullptr) {
      auto it = scarce->find(id);
      if (it != scarce->end() &&
          std::find(request.sibling_centers.begin(), request.sibling_centers.end(), id) ==
              request.sibling_centers.end()) {
        scarce_[j] = &it->second;
        any_kept = true;
        breadth_limit = std::max(breadth_limit, it->second.breadth * kScarceBreadthRatio + 1);
      }
    }
    any_free = any_free || candidates_[j]->free.Covers(specs_[j]->quantity);
  }
  if (!any_kept || !any_free) return;
  // Only a replica that could run at more centers than the waiting job gives way (two jobs
  // that need the same H100s are ordered by the queue, not by this), and at five times as
  // many as a scarce spec.
  //
  // Every candidate could ever take it too (the same filters, each at least as strict), so
  // when they alone reach the limit nothing need be counted; an explanation says the
  // breadth itself.
  const int breadth = !explain && static_cast<int>(candidates_.size()) >= breadth_limit
                          ? breadth_limit
                          : BreadthOf(request, keys, snapshot, explain ? std::numeric_limits<int>::max() : breadth_limit);
  // A waiting job's keep first, as before scarce specs were kept: it holds when a center no
  // waiting job keeps can start the replica now (a scarce spec's center counts: the job that
  // waits comes before the one that may come).
  bool free_of_waiting = false;
  for (size_t j = 0; j < candidates_.size(); ++j) {
    if (kept_[j] == 0 && candidates_[j]->free.Covers(specs_[j]->quantity)) free_of_waiting = true;
  }
  const double backfill_seconds = absl::ToDoubleSeconds(request.backfill_runtime);
  for (size_t j = 0; j < candidates_.size(); ++j) {
    const bool waiting_holds = kept_[j] > 0 && kept_[j] < breadth && free_of_waiting;
    if (scarce_[j] != nullptr && (waiting_holds || scarce_[j]->breadth * kScarceBreadthRatio > breadth)) {
      scarce_[j] = nullptr;
    }
    if (scarce_[j] != nullptr) {
      // Bound to end there within the hour, from its start there (data and image moved
      // first): by its time limit, else its history's 90th percentile; never its own word.
      const CenterView& c = *candidates_[j];
      const double perf = c.performance_factor > 0 ? c.performance_factor : 1;
      const double transfer = TransferSeconds(MissingDataMb(request, keys, c), c);
      // A history plainly past the hour needs no exact sum (absl's division is the slow
      // part of this loop); near it, the sum decides as it always has.
      const bool plainly_long = !request.time_limit && transfer >= 0 &&
                                backfill_seconds / perf > absl::ToDoubleSeconds(kKeptCenterShortRun) + 1;
      if (!plainly_long) {
        const absl::Duration run = request.time_limit ? *request.time_limit : request.backfill_runtime / perf;
        if (absl::Seconds(transfer) + run <= kKeptCenterShortRun) scarce_[j] = nullptr;
      }
    }
    // From here kept_ is what a waiting job's keep takes off: nothing else.
    if (!waiting_holds) kept_[j] = 0;
  }
  // Then a scarce spec's: when a center neither keeps can start the replica now.
  bool free_of_both = false;
  for (size_t j = 0; j < candidates_.size(); ++j) {
    const bool named = waiting && request.kept_centers.contains(candidates_[j]->id);
    if (!named && scarce_[j] == nullptr && candidates_[j]->free.Covers(specs_[j]->quantity)) free_of_both = true;
  }
  if (!free_of_both) std::fill(scarce_.begin(), scarce_.end(), nullptr);
  const auto& centers = snapshot.centers();
  size_t out = 0;
  for (size_t j = 0; j < candidates_.size(); ++j) {
    if (kept_[j] > 0 || scarce_[j] != nullptr) {
      const size_t i = static_cast<size_t>(candidates_[j] - centers.data());
      if (explain) {
        failed_[i] = kFilterKept;
        reasons_[i] =
            kept_[j] > 0
                ? absl::StrCat("kept for a waiting job that can run at only ", kept_[j],
                               kept_[j] == 1 ? " center" : " centers", " (this replica can run at ", breadth,
                               ", and another center can start it now)")
                : absl::StrCat("kept for spec ", scarce_[j]->spec_id, ", placed within the last day, which only ",
                               scarce_[j]->breadth, scarce_[j]->breadth == 1 ? " center" : " centers",
                               " could run (this replica can run at ", breadth,
                               ", may run past an hour here, and another center can start it now)");
      }
      CountRemoved(kFilterKept);
      ++kept_off_;
      continue;
    }
    candidates_[out] = candidates_[j];
    specs_[out] = specs_[j];
    ++out;
  }
  candidates_.resize(out);
  specs_.resize(out);
}

int Placer::BreadthOf(const PlacementRequest& request, const RequestKeys& keys, const Snapshot& snapshot,
                      int limit) {
  // What else could make one replica's breadth differ from another's of its spec, project,
  // user and grade: centers it names or leaves, ports, an image (present or pulled), data
  // that must not move (a private dataset's copies change between generations).
  bool plain = request.scarce_centers != nullptr && request.pinned_centers.empty() &&
               request.excluded_center.empty() && request.ports == 0 && request.image_id.empty() &&
               request.image_content.empty();
  for (const auto& d : request.datasets) plain = plain && !d.is_private;
  if (!plain) return CentersThatCouldEverTake(request, snapshot, keys, limit, nullptr);
  // A breadth counted in one generation of the federation's centers, capacities and offers
  // (ScarceSpecs::Centers') stands while it does, for the same snapshot.
  // The snapshot's stamp: a refresh between two decisions of one pass builds it anew at the
  // same address while the scarce centers still carry the pass's generation.
  if (breadth_generation_ != request.scarce_centers->generation || request.scarce_centers->generation == 0 ||
      breadth_snapshot_ != &snapshot || breadth_stamp_ != snapshot.stamp() ||
      breadth_by_shape_.size() > kMaxBreadthShapes) {
    breadth_generation_ = request.scarce_centers->generation;
    breadth_snapshot_ = &snapshot;
    breadth_stamp_ = snapshot.stamp();
    breadth_by_shape_.clear();
  }
  shape_.clear();  // each part's length first: no two shapes spell the same key
  absl::StrAppend(&shape_, request.spec_id.size(), ":", request.spec_id, request.project.size(), ":",
                  request.project, request.user.size(), ":", request.user, request.min_security_grade);
  if (auto it = breadth_by_shape_.find(shape_); it != breadth_by_shape_.end()) return it->second;
  bool free_beyond_capacity = false;
  const int breadth = CentersThatCouldEverTake(request, snapshot, keys, std::numeric_limits<int>::max(), nullptr,
                                               &free_beyond_capacity);
  if (!free_beyond_capacity) breadth_by_shape_.emplace(shape_, breadth);
  return breadth;
}

JobDecision Placer::PlaceJob(absl::Span<const PlacementRequest> replicas, Snapshot& snapshot,
                             absl::Span<const double> weights, bool gang, pb::Placement* explain,
                             const EvaluationModel* model) {
  if (explain == nullptr) return DecideJob(replicas, snapshot, weights, gang, nullptr, model);
  PlacementRecord record;
  JobDecision job = DecideJob(replicas, snapshot, weights, gang, &record, model);
  AppendTo(record, scorers_, explain);
  return job;
}

JobDecision Placer::DecideJob(absl::Span<const PlacementRequest> replicas, Snapshot& snapshot,
                              absl::Span<const double> weights, bool gang, PlacementRecord* explain,
                              const EvaluationModel* model) {
  std::vector<size_t> order(replicas.size());
  std::iota(order.begin(), order.end(), 0);
  const std::vector<size_t> as_submitted = order;
  JobDecision job = PlaceJobInOrder(replicas, order, snapshot, weights, gang, explain, model);
  if (job.placed || !gang || replicas.size() < 2) return job;
  // A gang placed greedily in task order may not fit where it would in another order: a
  // replica that could go anywhere takes the room of one only a single center can hold.
  // Again, the narrowest first (the fewest centers that could ever take it, those that
  // refused it left out while any other could, as Decide leaves them out).
  std::vector<size_t> breadth(replicas.size());
  for (size_t i = 0; i < replicas.size(); ++i) {
    const PlacementRequest& r = replicas[i];
    const std::vector<int> ever = CentersThatCouldEverTake(r, snapshot);
    const size_t unrefused = r.refused_centers.empty()
                                 ? ever.size()
                                 : static_cast<size_t>(std::count_if(ever.begin(), ever.end(), [&](int c) {
                                     return !r.refused_centers.contains(snapshot.centers()[static_cast<size_t>(c)].id);
                                   }));
    breadth[i] = unrefused > 0 ? unrefused : ever.size();
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return breadth[a] < breadth[b]; });
  if (std::is_sorted(order.begin(), order.end())) return job;  // the same order: the same answer
  if (explain) explain->replicas.clear();
  JobDecision narrow_first = PlaceJobInOrder(replicas, order, snapshot, weights, gang, explain, model);
  if (narrow_first.placed) return narrow_first;
  if (explain) {  // neither order fits: the explanation says what the job's own order found
    explain->replicas.clear();
    return PlaceJobInOrder(replicas, as_submitted, snapshot, weights, gang, explain, model);
  }
  return job;
}

JobDecision Placer::PlaceJobInOrder(absl::Span<const PlacementRequest> replicas, const std::vector<size_t>& order,
                                    Snapshot& snapshot, absl::Span<const double> weights, bool gang,
                                    PlacementRecord* explain, const EvaluationModel* model) {
  JobDecision job;
  job.centers.assign(replicas.size(), -1);
  std::vector<std::pair<int, Resources>> reserved;
  std::vector<std::string> placed_ids;
  std::string first_failure;
  PlacementRequest with_siblings;
  for (size_t r : order) {
    // The job's replicas placed so far count as siblings for topology affinity.
    const PlacementRequest* req = &replicas[r];
    if (!placed_ids.empty()) {
      with_siblings = replicas[r];
      with_siblings.sibling_centers.insert(with_siblings.sibling_centers.end(), placed_ids.begin(), placed_ids.end());
      req = &with_siblings;
    }
    ReplicaRecord* rp = explain ? &explain->replicas.emplace_back() : nullptr;
    ReplicaDecision d = Decide(*req, snapshot, weights, rp, model);
    if (d.center >= 0 && !d.fits_now) {
      // A job's replicas are reserved and dispatched at once: none waits for a busy center.
      if (rp) rp->chosen = -1;
      d.center = -1;
      d.reason = "the center expected to finish it first cannot take it now";
    }
    if (d.center < 0) {
      if (first_failure.empty()) {
        first_failure = absl::StrCat("task ", req->task_index, " replica ", req->replica_index, ": ", d.reason);
      }
      if (gang) break;
      continue;
    }
    const CenterView& c = snapshot.centers()[d.center];
    Resources quantity = c.specs.find(req->spec_id)->second.quantity;
    snapshot.Reserve(d.center, quantity);
    reserved.emplace_back(d.center, quantity);
    placed_ids.push_back(c.id);
    job.centers[r] = d.center;
  }
  job.placed = first_failure.empty();
  if (!job.placed) {
    job.reason = first_failure;
    if (gang) {
      // All or none: give back what this job reserved.
      for (const auto& [index, quantity] : reserved) snapshot.Release(index, quantity);
      job.centers.assign(replicas.size(), -1);
      job.reason = absl::StrCat("gang: not every replica fits at once; ", first_failure);
      // None goes anywhere: the explanation must not show a chosen center for the replicas
      // that would have fitted (a plan showed "-> local-1" for an unplaced gang).
      if (explain) {
        for (ReplicaRecord& rp : explain->replicas) rp.chosen = -1;
      }
    }
  }
  if (explain) {
    explain->placed = job.placed;
    explain->reason = job.reason;
  }
  return job;
}

}  // namespace jc::scheduler
