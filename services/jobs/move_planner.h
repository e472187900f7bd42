#pragma once

// Moves (SPEC A16, issue 45): a replica placed where the control plane expected it to start
// at once that still waits at that center is taken back (only if it has not started:
// WithdrawReplica) and placed again, when another center can start it now and finish it
// sooner. The job manager decides and owns the jobs; this unit owns what moves remember
// between passes (when each replica was last weighed, the withdrawals in flight, the
// attempts whose center cannot withdraw, where the last pass stopped) and what a pass
// decides. It reaches the job manager only through `MoveHost`, and it runs on the job
// manager's loop only, so it takes no lock.
//
// The decisions (Weigh, WeighSlice, Ask, Answered) are pure: records in, records changed by
// the state machine (job_state.h) and what to send out; tests/unit/jobs/move_planner_test.cc
// drives them without a scheduler or a center. BeginPass, ConsiderSlice and OnWithdrawAnswer
// wire them to the host.

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jointcloud/adapter/v1/adapter.pb.h"
#include "jointcloud/v1/job_record.pb.h"
#include "services/jobs/job_metrics.h"
#include "services/jobs/job_state.h"
#include "services/scheduler/scheduler.h"

namespace jc::jobs {

/// What makes a waiting replica move (JobManagerOptions carries them as flags).
struct MoveOptions {
  /// At most this many moves per replica; 0: replicas never move.
  int max_moves = 2;
  /// A replica that waits at its center this long is weighed for a move.
  absl::Duration move_after = absl::Minutes(2);
  /// It moves only to a center that would finish it sooner by more than this fraction.
  double move_margin = 0.25;
};

/// A replica's attempt its center is asked to take back.
struct Withdrawal {
  std::string job_id;
  int index = 0;  // the replica's index in the job's record
  int attempt = 0;
  std::string center;
  apb::ReplicaKey key;
};

/// What the planner needs of the job manager; every call is on the job manager's loop.
class MoveHost {
 public:
  virtual ~MoveHost() = default;
  /// The job in memory; null when it left.
  virtual v1::JobRecord* Find(const std::string& job_id) = 0;
  /// The scheduler's dry run: where each question's replicas would finish sooner.
  virtual std::vector<scheduler::Scheduler::MoveAnswer> MoveTargets(
      const std::vector<scheduler::Scheduler::MoveQuestion>& questions, double margin) = 0;
  /// Carries out what the state machine decided for the job (reservations, the queue, ...)
  /// and writes its record with the burst when `fx.changed`.
  virtual void Apply(const std::string& job_id, const JobEffects& fx) = 0;
  /// Sends the withdrawal to its center once the burst that recorded the ask committed;
  /// its answer comes back through MovePlanner::OnWithdrawAnswer.
  virtual void Send(const Withdrawal& w) = 0;
};

/// What one pass weighs: asks to send again, and questions for the scheduler.
struct MovePass {
  /// Asks written earlier and not answered (lost, or made before a restart): sent again.
  std::vector<Withdrawal> resend;
  std::vector<scheduler::Scheduler::MoveQuestion> questions;
  /// For each question, the replicas (indices in its job's record) it would move.
  std::vector<std::vector<int>> indices;
};

/// A job whose replicas are asked back after the scheduler's answers.
struct MoveAsk {
  std::string job_id;
  std::string why;          // "<the scheduler's comparison>: moving it to <center>"
  bool changed = false;     // the asks were recorded: write the record
  std::vector<Withdrawal> send;  // at most one: a gang is withdrawn by one ask
};

class MovePlanner {
 public:
  /// Questions a pass asks at most (the dry run is bounded: one pass a second).
  static constexpr size_t kMaxQuestions = 32;
  /// Withdrawals under way at once, at most one per center: a center that never answers
  /// holds one thread of the pool, not the submits to every other center.
  static constexpr size_t kMaxInFlight = 4;
  /// A replica weighed and left is weighed again after this.
  static constexpr absl::Duration kRecheck = absl::Seconds(10);
  /// An ask not answered is sent again after this.
  static constexpr absl::Duration kAskAgain = absl::Seconds(30);

  /// `host` outlives the planner.
  MovePlanner(MoveHost* host, MoveOptions options) : host_(host), options_(options) {}

  /// Counts each withdrawal's result on `metrics->withdrawals` (set before the loop runs).
  void SetMetrics(JobMetrics* metrics) { metrics_ = metrics; }

  // ---- With the host (the job manager's loop). ----
  /// Once a second the job manager walks its jobs a slice at a time, so that its loop
  /// answers creates between slices (at 25,000 jobs one walk held it 13-17 ms): BeginPass,
  /// then ConsiderSlice for consecutive runs of jobs in job id order, from the first after
  /// cursor() round to it. Each slice: weighs the replicas that waited at their centers
  /// past move_after, asks the scheduler where they would finish sooner, records the asks
  /// on the records and hands the withdrawals to the host to send after the write (again,
  /// for asks not answered). The pass asks at most kMaxQuestions in all.
  void BeginPass();
  /// `slice`: jobs in memory, in job id order (ended ones too: they are skipped); the
  /// records stay valid, and are changed only by the planner, until it returns.
  void ConsiderSlice(const std::vector<v1::JobRecord*>& slice, absl::Time now);
  /// Where the last pass stopped weighing (a job id; empty: at the start).
  const std::string& cursor() const { return move_cursor_; }
  /// A center's answer to `w`, of the current term: the replica withdrawn (it is placed
  /// again) or as it is (it started: it runs on there).
  void OnWithdrawAnswer(const Withdrawal& w, const absl::StatusOr<apb::Replica>& answer, absl::Time now);
  /// A term ended: the answers of its withdrawals are dropped, and the next term asks again.
  void Reset() {
    withdrawing_.clear();
    withdrawing_at_.clear();
  }

  // ---- The decisions: no host, no I/O. ----
  /// The first half of a pass over `jobs` (every job in memory, by job id): forgets what
  /// it kept of jobs that left, takes the asks to send again (reserved as in flight), and
  /// the questions for the scheduler, from where the last pass stopped.
  MovePass Weigh(const std::vector<v1::JobRecord*>& jobs, absl::Time now);
  /// The same pass a slice at a time: StartPass (`present`: whether a job is still in
  /// memory), then WeighSlice for consecutive slices in job id order from the first after
  /// cursor() round to it (each slice is weighed in the order given); together they weigh
  /// what one Weigh of every job would.
  void StartPass(const std::function<bool(const std::string&)>& present);
  MovePass WeighSlice(const std::vector<v1::JobRecord*>& slice, absl::Time now);
  /// The second half: for each answer that names a target, the replicas asked back on
  /// their records (AskWithdraw) and the withdrawal to send (reserved as in flight), when
  /// their center has no other withdrawal in flight.
  std::vector<MoveAsk> Ask(const MovePass& pass, const std::vector<scheduler::Scheduler::MoveAnswer>& answers,
                           const std::vector<v1::JobRecord*>& jobs, absl::Time now);
  /// Applies a center's answer to `w` to its job's record `r` (null: the job left) and
  /// to what the planner remembers; returns the result for the metrics ("withdrawn",
  /// "started", "refused" or "error"). `fx` says what follows (fx->changed: write it).
  const char* Answered(const Withdrawal& w, v1::JobRecord* r, const absl::StatusOr<apb::Replica>& answer,
                       absl::Time now, JobEffects* fx);

  /// Whether a withdrawal to `center` may go now (fewer than kMaxInFlight under way, none
  /// at `center`).
  bool MaySend(const std::string& center) const {
    return withdrawing_at_.size() < kMaxInFlight && !withdrawing_at_.count(center);
  }
  /// The attempt's center cannot withdraw it (it said so, or it started): never asked again.
  bool Unwithdrawable(const std::string& job_id, int index, int attempt) const {
    return unwithdrawable_.count({job_id, index, attempt}) > 0;
  }
  bool Withdrawing(const std::string& job_id, int index) const { return withdrawing_.count({job_id, index}) > 0; }

 private:
  // Marks `w` in flight (its center's one slot taken) from now: the host sends it after
  // the write.
  void Reserve(const Withdrawal& w) {
    withdrawing_.insert({w.job_id, w.index});
    withdrawing_at_.insert(w.center);
  }

  MoveHost* host_;
  MoveOptions options_;
  JobMetrics* metrics_ = nullptr;
  // (job, replica index): withdrawals in flight; when each replica was last weighed for a
  // move; attempts whose center cannot withdraw (never asked again).
  std::set<std::pair<std::string, int>> withdrawing_;
  std::map<std::pair<std::string, int>, absl::Time> move_checked_;
  std::set<std::tuple<std::string, int, int>> unwithdrawable_;
  // Centers with a withdrawal in flight (one each, a few in all).
  std::set<std::string> withdrawing_at_;
  // Where the last pass stopped weighing candidates: the next starts after it, so every
  // waiting replica is weighed in turn, not only the first ones by job id.
  std::string move_cursor_;
  // Questions the pass under way may still ask (kMaxQuestions at its start).
  size_t questions_left_ = kMaxQuestions;
};

}  // namespace jc::jobs
