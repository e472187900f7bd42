#pragma once

// Waiting jobs' expected lengths asked again as runs end (SPEC A16). A job's estimate is
// taken when it is created (its record keeps it); while it waits, what ends may teach the
// estimator more of it — its own name's first runs, its user's other jobs — and sef and
// hrrn rank it by the newer figure, as jc-sim does after jobs end (docs/placement-quality.md,
// "Session 68"). Placement asks the estimator itself at each decision; this is the queue's
// side.
//
// Memory only, on the job manager's loop thread (no lock, no store access). What may have
// changed is kept as the classes runs were learned under: every estimator key holds the
// project and either the job's name or its user and spec (duration_estimator.h), so only a
// waiting job sharing a project and a name, or a project, user and spec, with a learned run
// can estimate otherwise. A waiting job is asked at most once a second, jobs with the same
// figures (one class, one command, one limit) once between them — a backlog of 100,000 jobs
// of one command costs one estimate, not 100,000 — and at most kMaxEstimates estimates and
// kMaxVisited jobs a time. Keys the estimator evicts past its bound
// are not followed: a job ranked on an evicted key's figure keeps it until its class learns
// again (it was the newest that key knew).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "jointcloud/v1/job_record.pb.h"
#include "services/estimator/shared_estimator.h"
#include "services/jobs/waiting_queue.h"

namespace jc::jobs {

class QueueReestimation {
 public:
  // The job manager's active job of an id (null when gone).
  using RecordOf = std::function<const v1::JobRecord*(const std::string& job_id)>;

  // How often the queue asks again, at most.
  static constexpr absl::Duration kEvery = absl::Seconds(1);
  // At most this many estimates (distinct sets of figures), and this many waiting jobs
  // looked at, a time; the rest of the queue is asked the next time, where this one
  // stopped: a project that fills the queue with 100,000 jobs of distinct commands, and ends
  // a short job of their name every second, cannot hold the loop for the whole queue's
  // estimates each second.
  static constexpr int64_t kMaxEstimates = 4096;
  static constexpr int64_t kMaxVisited = 65536;

  explicit QueueReestimation(int64_t max_estimates = kMaxEstimates, int64_t max_visited = kMaxVisited)
      : max_estimates_(std::max<int64_t>(1, max_estimates)), max_visited_(std::max<int64_t>(1, max_visited)) {}

  // A run of `job` ended and was learned.
  void Learned(const v1::CreateTrainJobRequest& job);
  // A job waits again (a retry, a move, a replica restarting), or its place in line moved
  // (past where a sweep under way stopped), or it was estimated before something was learned
  // and put in the queue after (a create in the burst of a run's end): its figure may be
  // older than what the estimator knows now.
  void WaitsAgain(int64_t seq) { learned_.again.insert(seq); }
  // Every waiting job asks again: a new leadership term's history, loaded from the store.
  void All() {
    learned_.all = true;
    ++generation_;
  }
  // A new leadership term: what a sweep under way had left is dropped, and every waiting
  // job asks again (its record's figure is from its creation, the history from the store).
  void Restart() {
    const uint64_t generation = generation_;
    *this = QueueReestimation(max_estimates_, max_visited_);
    generation_ = generation;
    All();
  }
  // Whether something was learned and not yet asked again, or a sweep is part done.
  bool pending() const { return !learned_.empty() || sweeping_; }
  // Counts what was learned (Learned, All): a create that took its estimate at one
  // generation and is put in the queue at another asks again (WaitsAgain).
  uint64_t generation() const { return generation_; }

  // Asks the estimator again for the waiting jobs what was learned may concern (once a
  // second at most: nothing before `kEvery` after the last time), and hands the answers to
  // `waiting` (WaitingQueue::Reestimate). `unknown`: what a task nothing is known of counts
  // (QueueSettings::unknown_expected_s). Returns how many jobs were asked, for tests and the
  // log; -1 when not due.
  int64_t Apply(WaitingQueue& waiting, const RecordOf& record_of, const estimator::SharedEstimator& estimator,
                absl::Duration unknown, absl::Time now);

 private:
  // What was learned since a sweep began.
  struct LearnedSince {
    absl::flat_hash_set<std::string> names;       // project \0 name
    absl::flat_hash_set<std::string> user_specs;  // project \0 user \0 spec
    absl::flat_hash_set<int64_t> again;           // waits again
    bool all = false;
    bool empty() const { return !all && names.empty() && user_specs.empty() && again.empty(); }
    bool Concerns(int64_t seq, const v1::CreateTrainJobRequest& job) const;
  };

  int64_t max_estimates_;
  int64_t max_visited_;
  uint64_t generation_ = 0;
  LearnedSince learned_;   // gathered for the next sweep
  LearnedSince sweep_;     // what the sweep under way asks for
  bool sweeping_ = false;
  // Where the sweep under way stopped (the last entry it asked). A job whose place in line
  // moved behind it meanwhile is asked by the next sweep that concerns it.
  WaitingQueue::Entry resume_;
  bool resumes_ = false;
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace jc::jobs
