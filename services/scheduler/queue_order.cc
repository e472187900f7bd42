#include "services/scheduler/queue_order.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace jc::scheduler {
namespace {

// "10s", "4m30s", "2h": whole seconds (a year at most: what a queue could ever say).
std::string Human(double s) {
  const double whole = std::round(std::clamp(s, 0.0, 366.0 * 86400));
  return whole == 0 ? std::string("0s") : absl::FormatDuration(absl::Seconds(whole));
}

class Fcfs final : public QueueOrderPolicy {
 public:
  double Rank(const QueuedJob&, double) const override { return 0; }
  std::string Explain(const QueuedJob& job, double now) const override {
    return absl::StrCat("first come, first served; waited ", Human(std::max(0.0, now - job.submitted)));
  }
};

class ShortestExpectedFirst final : public QueueOrderPolicy {
 public:
  explicit ShortestExpectedFirst(const QueueSettings& s) : s_(s) {}
  double Rank(const QueuedJob& job, double now) const override {
    return Expected(job) - s_.aging * std::max(0.0, now - job.submitted);
  }
  std::string Explain(const QueuedJob& job, double now) const override {
    return absl::StrCat("shortest expected first: expected ", Human(Expected(job)),
                        job.expected_s < 0 ? " (no estimate: the default)"
                        : job.one_off  ? " (a one-off: between its median and p90)"
                                       : "",
                        ", waited ",
                        Human(std::max(0.0, now - job.submitted)));
  }

 private:
  double Expected(const QueuedJob& job) const { return job.expected_s >= 0 ? job.expected_s : s_.unknown_expected_s; }
  QueueSettings s_;
};

// Highest response ratio next (Brinch Hansen, 1971): the job whose (wait + expected) ÷
// expected is highest first. A short job passes a long one once it has waited a fraction of
// its own length, as under shortest expected first; but every job's ratio grows while it
// waits, faster the shorter it is, so where the federation keeps up the slowdowns are what
// the order evens out, not the mean alone (measured against sef in
// docs/placement-quality.md, "Session 67"). Jobs that arrive together start level (ratio 1,
// submission order); after any wait the shorter leads. Under a stream of short jobs more
// than the federation can run, their backlog's ratios outgrow a long job's, and only the
// queue's longest wait (max_wait_s) bounds it (sef's aging bounds it sooner).
class HighestResponseRatio final : public QueueOrderPolicy {
 public:
  explicit HighestResponseRatio(const QueueSettings& s) : s_(s) {}
  double Rank(const QueuedJob& job, double now) const override { return -Ratio(job, now); }
  std::string Explain(const QueuedJob& job, double now) const override {
    return absl::StrCat("highest response ratio next: expected ", Human(Expected(job)),
                        job.expected_s < 0 ? " (no estimate: the default)"
                        : job.one_off  ? " (a one-off: between its median and p90)"
                                       : "",
                        ", waited ", Human(std::max(0.0, now - job.submitted)), ", ratio ",
                        absl::StrFormat("%.2f", Ratio(job, now)));
  }

 private:
  // A second at least: a job expected to take no time still waits its turn by its wait.
  double Expected(const QueuedJob& job) const {
    return std::max(1.0, job.expected_s >= 0 ? job.expected_s : s_.unknown_expected_s);
  }
  double Ratio(const QueuedJob& job, double now) const {
    return (std::max(0.0, now - job.submitted) + Expected(job)) / Expected(job);
  }
  QueueSettings s_;
};

class LeastAttainedService final : public QueueOrderPolicy {
 public:
  explicit LeastAttainedService(const QueueSettings& s) : levels_(s.las_levels) { std::sort(levels_.begin(), levels_.end()); }
  double Rank(const QueuedJob& job, double) const override { return Level(job); }
  std::string Explain(const QueuedJob& job, double now) const override {
    return absl::StrCat("least attained service: level ", Level(job), " (", absl::StrFormat("%.0f", job.attained_s),
                        " GPU-seconds run before), waited ", Human(std::max(0.0, now - job.submitted)));
  }

 private:
  int Level(const QueuedJob& job) const {
    return static_cast<int>(std::upper_bound(levels_.begin(), levels_.end(), job.attained_s) - levels_.begin());
  }
  std::vector<double> levels_;
};

}  // namespace

std::string QueueSettings::Name() const { return fair_share ? (order == "fcfs" ? "fair_share" : "fair_share+" + order) : order; }

absl::StatusOr<QueueSettings> ParseQueueSettings(absl::string_view name) {
  QueueSettings s;
  if (name == "fcfs" || name == "sef" || name == "hrrn" || name == "las") {
    s.order = std::string(name);
  } else if (name == "fair_share") {
    s.fair_share = true;
  } else if (name == "fair_share+sef" || name == "fair_share+hrrn" || name == "fair_share+las") {
    s.fair_share = true;
    s.order = std::string(name.substr(11));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown queue order \"", name,
                                                   "\" (fcfs, fair_share, sef, fair_share+sef, hrrn, fair_share+hrrn, las, "
                                                   "fair_share+las)"));
  }
  return s;
}

std::unique_ptr<QueueOrderPolicy> MakeQueueOrderPolicy(const QueueSettings& settings) {
  if (settings.order == "sef") return std::make_unique<ShortestExpectedFirst>(settings);
  if (settings.order == "hrrn") return std::make_unique<HighestResponseRatio>(settings);
  if (settings.order == "las") return std::make_unique<LeastAttainedService>(settings);
  return std::make_unique<Fcfs>();
}

}  // namespace jc::scheduler
