#pragma once

// The scheduler service's domain (standard 6.6, Appendix A.5–A.6): keeps the snapshot fresh
// from the other services, answers the per-algorithm and evaluation-model score queries,
// lists strategies and weight profiles, and plans jobs as a dry run with the full
// explanation. No gRPC types here.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <unordered_map>
#include <memory>
#include <optional>

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/periodic_task.h"
#include "jointcloud/v1/scheduler.pb.h"
#include "services/estimator/shared_estimator.h"
#include "services/scheduler/placement_journal.h"
#include "services/scheduler/placer.h"
#include "services/scheduler/snapshot_builder.h"

namespace jc::scheduler {

// Where the scheduler's inputs come from: the registry, catalog and datamon (over gRPC in
// the server) and the monitor.
class InputsSource {
 public:
  virtual ~InputsSource() = default;
  virtual absl::StatusOr<SchedulerInputs> Fetch() = 0;
};

struct SchedulerOptions {
  absl::Duration refresh_interval = absl::Seconds(1);
  // Placement records (every center's filter or scores, per replica) kept for the most
  // recent jobs; 0 keeps none (and decisions skip the explanation).
  int placement_records = 10000;
  WeightProfiles profiles = WeightProfiles::Builtin();
  // A weight-profiles file (YAML, scoring/profile_file.h) read on top of `profiles` at
  // LoadWeightProfiles and again whenever it changes; empty: none.
  std::string weight_profiles_file;
  // Where every placement's explanation is also kept, bounded, past a restart and for the
  // other instances (PlacementJournal); null: memory only.
  store::Store* placement_store = nullptr;
  PlacementJournalOptions journal;
};

class Scheduler {
 public:
  Scheduler(InputsSource* source, const Clock* clock, SchedulerOptions options);
  ~Scheduler();

  // A deployment's own strategy or evaluation model, registered before Start (SPEC A9,
  // A10: they need no change to the scheduler's code). AlreadyExists for a taken name.
  absl::Status RegisterScorer(std::unique_ptr<Scorer> scorer);
  absl::Status RegisterModel(std::unique_ptr<EvaluationModel> model);

  // Reads options.weight_profiles_file (nothing to do without one). An error names the
  // file's problem; the profiles in use do not change.
  absl::Status LoadWeightProfiles();

  // Refreshes in a background thread every refresh_interval until Stop; each refresh also
  // reloads a changed weight-profiles file (a file that does not load is logged and the
  // profiles in use stay).
  void Start();
  void Stop();
  // Fetches the inputs and rebuilds the snapshot now.
  absl::Status Refresh();

  // A.5: the normalized score (0..100) one strategy gives a center among the available
  // centers offering `spec_id` (empty: each judged by its cheapest offer). NotFound for an
  // unknown algorithm or center; FailedPrecondition, with the reason, when the center is
  // not a candidate.
  absl::StatusOr<int> AlgorithmScore(const std::string& algorithm_id, const std::string& center_id,
                                     const std::string& spec_id);
  // A.6: formula 2 over the given scores with the profile's weights (empty: "default").
  absl::StatusOr<int> EvaluateScore(const std::string& center_id, const std::vector<std::string>& algorithm_ids,
                                    const std::vector<int>& scores, const std::string& profile);

  std::vector<v1::Algorithm> ListAlgorithms() const;
  std::vector<v1::WeightProfile> ListWeightProfiles() const;

  // Where the job would go now, and why; changes nothing.
  absl::StatusOr<v1::Placement> Plan(const v1::CreateTrainJobRequest& job);

  // Checks a job against the catalog (specs, images, datasets, replica numbers) as the
  // scheduler will place it. InvalidArgument names the field.
  absl::Status Validate(const v1::CreateTrainJobRequest& job);

  // Why no registered center could ever run the job, whatever frees up and whichever
  // centers come back (issue 33): every center is taken as available with its whole
  // capacity free, and one whose adapter has not described itself yet as running whatever
  // it offers (images, any account); the job is placed there as it would be (filters, the
  // gang all at once). Empty when it could run; the first replica that cannot says why.
  absl::StatusOr<std::string> NeverRuns(const v1::CreateTrainJobRequest& job);
  // Why center `center_id` is gone, as the registry said at the last refresh ("no longer
  // registered", "unavailable: no heartbeat"); nullopt while it is available or unknown, or
  // when the scheduler could not read the registry at its last refresh (nothing is known).
  std::optional<std::string> CenterGone(const std::string& center_id) const;

  // What the available centers have in all (the denominator of fair shares), as last read.
  Resources FederationCapacity() const;

  // One replica's resources under `spec_id`, as the catalog was last read (in memory);
  // NotFound for a spec it does not have.
  absl::StatusOr<Resources> SpecQuantity(const std::string& spec_id) const;

  // The spec as `center_id` offers it (quantity, price per hour, execution power), as the
  // catalog and the center were last read (in memory); nullopt when the center does not
  // offer it (any more).
  std::optional<SpecAtCenter> OfferAt(const std::string& center_id, const std::string& spec_id) const;
  // What `center_id`'s scheduler last said of its queue (SPEC A16), as the snapshot holds
  // it: per spec, the wait before a replica submitted then would start, and when the
  // monitor polled it; nullopt for a center the snapshot does not have.
  struct QueueReport {
    std::map<std::string, absl::Duration> start_delay;
    absl::Time reported_at = absl::InfinitePast();
  };
  std::optional<QueueReport> ReportedQueue(const std::string& center_id) const;
  // The highest price per hour of one replica of `spec_id` at any center that offers it, as
  // last read (in memory): what a job not placed yet may cost at most (budgets); 0 when no
  // center offers it.
  double HighestPrice(const std::string& spec_id) const;
  // The center's static power (formula 1, drawn while data is transferred in); 0 unknown.
  double StaticPowerOf(const std::string& center_id) const;
  // The center's performance factor as last read (1: reference, or unknown).
  double PerformanceOf(const std::string& center_id) const;

  // Where placements and plans learn how long a job will run (SPEC A16): each replica's
  // expected run time for formula 1 and placement by expected completion, and the plan's
  // explanation. Null (the default): every job is taken to run an hour. Call before Start;
  // the estimator outlives the scheduler.
  void SetDurationEstimator(const estimator::SharedEstimator* estimator) { estimator_ = estimator; }

  // A replica of a job to place now.
  struct Slot {
    int task_index = 0;
    int replica_index = 0;
    int attempt = 0;
    std::vector<std::string> avoid_centers;  // where earlier attempts failed
    // Where one of the task's attempts could not start lately (PlacementRequest::
    // refused_centers; avoided as avoid_centers are, whether in them or not).
    std::vector<std::string> refused_centers;
  };
  struct Decision {
    bool placed = false;              // every slot has a center
    std::string reason;               // why not, when not
    std::vector<std::string> centers;  // per slot; empty = waits
    // Per slot: the center lacks the task's image and must be given it (its image mover)
    // before the replica is submitted.
    std::vector<bool> stage_image;
    // Per slot: what its image is (PlacementRequest.image_content); empty: bare.
    std::vector<std::string> image_content;
    // Not placed: why no registered center could ever run what is left, whatever frees up
    // (NeverRuns); empty when one could.
    std::string never;
  };
  // Places `slots` of `job` on the live view (gang: all or none), next to
  // `sibling_centers` (where the job's other replicas run). Each placed slot is reserved
  // in the view until the center's usage accounts for it (Reported) or it ends (Forget).
  // With `explain`, also records the explanation. `estimates`: each task's, where the
  // caller has just asked the same estimator (a create: its queue estimate asked them),
  // else asked here.
  absl::StatusOr<Decision> Place(const std::string& job_id, const v1::CreateTrainJobRequest& job,
                                 const std::vector<Slot>& slots, const std::vector<std::string>& sibling_centers,
                                 v1::Placement* explain = nullptr,
                                 const estimator::TaskEstimates* estimates = nullptr);
  // Nothing starves (SPEC A16): a job that has waited past the queue's longest wait and fits
  // nowhere now gets a center that drains for it: where it drained last pass while that
  // center could still hold it, else filters.h DrainingCenterFor (the one whose free
  // capacity comes closest to `slot`'s spec). Place and MoveTargets then start another job's
  // replica there only if it is bound to end (its time limit, else its history's 90th
  // percentile) before the drained-for job is expected to start (the center's queue report
  // for the spec; without one, nothing starts there). Returns the center, "" when none could
  // ever take it; FailedPrecondition, saying where, when the job's project already has a
  // drain this pass (one at a time: a project's many wide jobs cannot hold many centers
  // idle). The job manager decides
  // drains every pass, in queue order, between BeginPass and EndPass (below).
  absl::StatusOr<std::string> Drain(const std::string& job_id, const v1::CreateTrainJobRequest& job,
                                    const Slot& slot);
  //
  // Scarce capacity goes first to the jobs that can use nothing else (SPEC A16): a job Place
  // found no room for keeps the centers that could ever take it (filters.h
  // CentersThatCouldEverTake) against replicas that could run at more centers than it can:
  // those go elsewhere when another center can start them now (PlacementRequest::
  // kept_centers; a preference, never a reason to wait). So a job that names no GPU model
  // does not take the only H100s while jobs that need H100s wait for them. A job that names
  // its centers keeps nothing (its narrowness is its choice), and one job per project keeps
  // at a time (the first of its jobs in queue order each pass). And before such a job waits:
  // every spec Place places keeps, for a day, the centers that could ever run it when
  // at most a fifth of the available centers could (ScarceSpecs, worked out at BeginPass),
  // against replicas that could run at five times as many and may run past an hour there.
  //
  // Drains and keeps are decided again every pass, in queue order, between BeginPass and
  // EndPass; the last pass's hold until EndPass replaces them, so a job placed before the
  // overdue or narrow one in a pass (a higher priority, a smaller share) still sees them.
  // ClearPasses (stepping down) drops them all.
  void BeginPass();
  void EndPass();
  void ClearPasses();
  // The center acknowledged replica `key` at `at` (this clock), having accepted it at
  // `center_accepted_at` by its adapter's clock (Replica.submitted_at; InfiniteFuture when it
  // did not say): once its usage is asked for after `at`, or measured from an instant at or
  // after `center_accepted_at` (Usage.at, the same adapter's clock), the usage includes it
  // and the reservation is dropped.
  void Reported(const std::string& key, absl::Time at, absl::Time center_accepted_at = absl::InfiniteFuture());
  // The replica ended or will not run: its reservation goes.
  void Forget(const std::string& key);
  static std::string ReservationKey(const std::string& job_id, int task, int replica, int attempt);

  // A replica (or a gang's replicas) waiting at center `from` past what the job manager
  // expected (SPEC A16, moves).
  struct MoveQuestion {
    std::string job_id;
    const v1::CreateTrainJobRequest* job = nullptr;
    std::vector<Slot> slots;
    std::string from;
    absl::Duration waited;  // since `from` acknowledged it
  };
  struct MoveAnswer {
    std::string to;   // empty: it stays
    std::string why;  // the comparison, either way ("waited 3m at a; b starts it now ...")
  };
  // For each question, on one copy of the live view (nothing is reserved): the center that
  // can start the replicas now (never `from`) as the job's profile places them, and whether
  // it would finish them sooner than `from` by more than `margin` (a fraction). `from`'s
  // finish is its queue report's wait for the spec (else as long again as the replica
  // waited so far) plus the run at its speed; the other's, its expected completion (data
  // and image transfer included). Earlier answers' targets are taken in the copy.
  std::vector<MoveAnswer> MoveTargets(const std::vector<MoveQuestion>& questions, double margin);

  // The explanation of the job's latest placement; NotFound for a job never placed or
  // placed too long ago to be kept.
  absl::StatusOr<v1::Placement> JobPlacement(const std::string& job_id) const;

  // jc_scorer_seconds_total{algorithm}: time spent in each strategy;
  // jc_weight_profile_reloads_total{result="ok"|"error"}: rereads of the profiles file.
  void EnableMetrics(prometheus::Registry& registry);

  const ScorerRegistry& scorers() const { return scorers_; }

 private:
  InputsSource* source_;
  const Clock* clock_;
  SchedulerOptions options_;
  ScorerRegistry scorers_;
  ModelRegistry models_;

  struct Resolved {
    std::vector<double> weights;
    const EvaluationModel* model;
  };
  // A profile's weights with `overrides` on top, and its model. Caller holds mu_.
  absl::StatusOr<Resolved> Resolve(const std::string& profile, const std::map<std::string, double>& overrides) const;
  // Rereads the profiles file when its modification time or size changed.
  void ReloadProfilesIfChanged();

  struct Assumed {
    std::string center_id;
    Resources quantity;
    absl::Time reported_at = absl::InfiniteFuture();  // not acknowledged yet
    absl::Time center_accepted_at = absl::InfiniteFuture();  // by the adapter's clock
    absl::Time placed_at = absl::InfinitePast();              // this clock: before any submit
  };
  // PlaceJob, and for a gang that does not fit with keeps, again without them (a keep never
  // holds a gang back).
  static JobDecision PlaceJobWithKeeps(Placer& placer, std::vector<PlacementRequest>& requests, Snapshot& snapshot,
                                       const Resolved& weights, bool gang, PlacementRecord* record);
  // Re-applies assumed reservations to a freshly built view. Caller holds mu_.
  void ApplyAssumed();
  // The view NeverRuns places on: every center available, idle and whole (above).
  static Snapshot Ideal(const Snapshot& live);
  // Why `requests` (the gang all at once) could never be placed on ideal_; "" when they
  // could. Caller holds mu_.
  std::string NeverLocked(std::vector<PlacementRequest> requests, bool gang, const Resolved& weights);

  mutable std::mutex mu_;
  std::unique_ptr<Placer> placer_;  // live decisions, under mu_
  std::vector<int64_t> exported_nanos_;
  std::vector<prometheus::Counter*> scorer_seconds_;
  prometheus::Counter* reloads_ok_ = nullptr;
  prometheus::Counter* reloads_failed_ = nullptr;
  std::map<std::string, std::shared_ptr<const PlacementRecord>> placements_;
  std::unique_ptr<PlacementJournal> journal_;  // with options_.placement_store
  std::deque<std::string> placement_order_;  // oldest first, to bound placements_
  std::map<std::string, Assumed> assumed_;
  struct Drained {
    std::string job_id;   // the overdue job it drains for
    std::string project;  // its project: one drain per project at a time
    absl::Time start;     // when that job is expected to start there; InfiniteFuture: unknown
  };
  std::map<std::string, Drained> drains_;       // by center, under mu_: in force
  std::map<std::string, Drained> next_drains_;  // decided in the pass under way
  // Centers kept for narrow waiting jobs: center -> how many centers the narrowest of them
  // could ever run at. In force, and decided in the pass under way (under mu_).
  absl::flat_hash_map<std::string, int> kept_, next_kept_;
  absl::flat_hash_map<std::string, std::string> kept_by_;  // project -> its job keeping this pass
  // The specs placed lately, and the centers kept for the scarce ones as of the last
  // BeginPass (ScarceSpecs; null: none), under mu_.
  ScarceSpecs scarce_specs_;
  std::shared_ptr<const ScarceCenters> scarce_;
  SchedulerInputs inputs_;
  Snapshot snapshot_;
  Snapshot ideal_;  // Ideal(snapshot_) as last refreshed
  uint64_t ideal_generation_ = 0;  // counts refreshes: a memo below is good for one
  // Reads of the inputs begun (any thread), and the latest begun of those applied (under
  // mu_): Refresh applies none older than what is in force.
  std::atomic<uint64_t> fetches_begun_{0};
  uint64_t fetch_applied_ = 0;
  // A waiting job's NeverLocked answer for its unplaced slots, until the next refresh: the
  // job manager asks every cycle, and the answer changes only with the inputs.
  struct NeverMemo {
    uint64_t generation = 0;
    size_t slots = 0;
    std::string refusals;  // the centers its replicas were refused at when it was made
    std::string reason;
    // What it keeps while it waits: (center, how many centers could ever take it).
    std::vector<std::pair<std::string, int>> keeps;
  };
  std::unordered_map<std::string, NeverMemo> never_memo_;
  // NeverRuns' answers by job shape (ShapeOf) for one refresh: a stream of alike submits
  // places on the ideal view once, not once each.
  std::unordered_map<std::string, std::pair<uint64_t, std::string>> never_by_shape_;
  WeightProfiles profiles_;          // under mu_
  std::string profiles_file_stamp_;  // mtime and size of the file last loaded
  absl::Status last_refresh_ = absl::UnavailableError("the scheduler has not read its inputs yet");
  const estimator::SharedEstimator* estimator_ = nullptr;
  // Per task of `job`, what the estimator expects (outside mu_: the estimator has its own
  // lock); empty without an estimator.
  estimator::TaskEstimates TaskEstimates(const v1::CreateTrainJobRequest& job) const;
  // Sets each request's expected run time from `estimates` and says so in `explain` (and
  // that there is no history here when the estimator is not loaded: the estimator's lock is
  // a leaf, taken under mu_ only for that).
  void ApplyEstimates(const v1::CreateTrainJobRequest& job,
                      const std::vector<std::optional<estimator::DurationEstimate>>& estimates,
                      std::vector<PlacementRequest>& requests, std::vector<std::string>* explain) const;

  PeriodicTask loop_;
};

}  // namespace jc::scheduler
