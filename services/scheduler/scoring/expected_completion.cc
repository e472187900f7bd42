// SPEC A16 (issue 45 item 3): placement by expected completion. Per center, when the
// replica would start there and when it would finish: start is now where the spec fits
// the center's free capacity; else what the center's own scheduler said of its queue for
// the spec (CenterView::reported_start_delay, less the time since it said it); else an
// estimate from the queue's length (below). Finish = start + data transfer + the run at the
// center's performance, so "wait for the faster center" competes with "start now on the
// slower one". A score, never a filter: every candidate gets a finite value, whatever the
// snapshot lacks.
#include "services/scheduler/scoring/expected_completion.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

// "45 s", "12 min", "3.5 h": explanations are read by people.
std::string Human(double seconds) {
  if (seconds < 90) return absl::StrFormat("%.0f s", seconds);
  if (seconds < 90 * 60) return absl::StrFormat("%.0f min", seconds / 60);
  return absl::StrFormat("%.1f h", seconds / 3600);
}

class ExpectedCompletion final : public ScorerBase {
 public:
  ExpectedCompletion()
      : ScorerBase({"expected_completion",
                    "Centers where the replica is expected to finish sooner score higher: its expected start "
                    "there (now where the spec fits the free capacity, else the center's own report of its "
                    "queue, else an estimate from its queue's length) plus the data transfer and the run at "
                    "the center's performance (SPEC A16).",
                    "free resources; reported start delay per spec (adapters' queue reports); running and "
                    "waiting tasks and capacity; expected run time / performance factor; missing data / "
                    "bandwidth",
                    false}) {}

  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) raw[i] = EstimateCompletion(ctx, i).finish_s;
  }

  std::string Explain(const ScoringContext& ctx, size_t i) const override {
    CompletionEstimate e = EstimateCompletion(ctx, i);
    return absl::StrCat("expected start ", e.start_s <= 0 ? "now" : absl::StrCat("in ", Human(e.start_s)), " (",
                        e.Basis(), "), finish in ", Human(e.finish_s));
  }
};

}  // namespace

std::string CompletionEstimate::Basis() const {
  switch (from) {
    case From::kFreeCapacity:
      return "fits the free capacity";
    case From::kQueueReport:
      return "the center's queue report";
    case From::kQueueLength:
      break;
  }
  return absl::StrCat("estimated: ", running, " running, ", waiting, " waiting, ", slots, " slots");
}

CompletionEstimate EstimateCompletion(const ScoringContext& ctx, size_t i) {
  const PlacementRequest& r = *ctx.request;
  const CenterView& c = *ctx.centers[i];
  const SpecAtCenter& spec = *ctx.specs[i];
  const CandidateFacts& facts = ctx.facts[i];
  CompletionEstimate e;
  if (c.free.Covers(spec.quantity)) {
    e.from = CompletionEstimate::From::kFreeCapacity;
  } else if (auto it = c.reported_start_delay.find(r.spec_id); it != c.reported_start_delay.end()) {
    // The report ages: what the center said some time ago is that much nearer now. A
    // report from the future (clocks apart) counts as of now.
    absl::Duration age = std::max(absl::ZeroDuration(), r.now - c.queue_reported_at);
    if (c.queue_reported_at == absl::InfinitePast()) age = absl::ZeroDuration();
    e.start_s = std::max(0.0, absl::ToDoubleSeconds(it->second - age));
    e.from = CompletionEstimate::From::kQueueReport;
  } else {
    // The center said nothing of its queue: what runs there ends, on average, half a run
    // from now, and each round of `slots` replicas ahead takes a run more. A run of the
    // others is what the scheduler assumes of a job it knows nothing of (an hour at
    // performance 1, PlacementRequest's default), at the center's performance: their own
    // estimates are not in the view, and the request's own run would make a short job
    // think a long queue short.
    double perf = c.performance_factor > 0 ? c.performance_factor : 1;
    double typical_run = absl::ToDoubleSeconds(PlacementRequest().expected_runtime) / perf;
    double slots = std::max(1.0, std::floor(std::min(1e6, c.capacity.CopiesOf(spec.quantity))));
    double ahead = std::max(0, c.waiting_tasks) + std::max(0, c.assumed_replicas);
    e.start_s = typical_run * (0.5 + std::floor(ahead / slots));
    e.from = CompletionEstimate::From::kQueueLength;
    e.running = c.running_tasks;
    e.waiting = c.waiting_tasks + c.assumed_replicas;
    e.slots = slots;
  }
  // Never NaN or infinite, so normalization stays defined: a start that never comes (an
  // infinite report) is a very late one, a negative one is now.
  constexpr double kNever = 1e12;
  if (std::isnan(e.start_s) || e.start_s < 0) e.start_s = 0;
  e.start_s = std::min(e.start_s, kNever);
  e.finish_s = e.start_s + facts.transfer_seconds + facts.run_seconds;
  if (std::isnan(e.finish_s)) e.finish_s = kNever;
  e.finish_s = std::min(e.finish_s, 2 * kNever);
  return e;
}

std::unique_ptr<Scorer> MakeExpectedCompletionScorer() { return std::make_unique<ExpectedCompletion>(); }

}  // namespace jc::scheduler
