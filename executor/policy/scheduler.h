#pragma once

// The executor's scheduling core (SPEC B3, B5, B6): an in-memory model of hosts, queues
// and jobs, and a cycle that decides in one batch where every placeable job runs.
//
// A cycle walks queues from the highest priority down; within a queue jobs go in the
// queue's order (queue_order.h: FCFS, round robin, fair share, DRF, capacity). A job is
// placed whole or not at all
// (gang): every section gets its hosts, slots, memory and GPU indices in one decision,
// tentatively applied so later sections see earlier ones, and rolled back if any section
// does not fit. Jobs that do not fit wait; later jobs may still go (a reservation holds
// what the first of them needs, and backfill lets only jobs that end before it start).

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "executor/policy/backfill.h"
#include "executor/policy/cluster.h"
#include "executor/policy/cluster_model.h"
#include "executor/policy/elastic.h"
#include "executor/policy/limit_book.h"
#include "executor/policy/limits.h"
#include "executor/policy/placer.h"
#include "executor/policy/preemption.h"
#include "executor/policy/queue_order.h"

namespace jc::nexec {

struct CycleStats {
  int considered = 0;  // jobs looked at
  int placed = 0;
  int skipped_by_cache = 0;  // skipped because an identical job already failed this cycle
  int backfilled = 0;        // placed on slots held for a reservation, ending before it
};

// The scheduler's own fields, a base so that a Scheduler can be moved: its units hold
// references to the model and to the scheduler (their Placer), which a move binds anew.
struct SchedulerFields {
  ClusterModel model_;
  LimitBook limits_;
  absl::Time fairshare_time_ = absl::InfinitePast();
  std::unordered_map<int64_t, std::string> pending_reasons_;
  absl::Time now_ = absl::UnixEpoch();
  uint64_t cycles_ = 0;
};

class Scheduler final : private SchedulerFields, private Placer {
 public:
  Scheduler() = default;
  Scheduler(Scheduler&& other) noexcept
      : SchedulerFields(std::move(other)),
        backfill_(std::move(other.backfill_), model_, *this),
        elastic_(std::move(other.elastic_), model_, limits_, *this),
        preemptions_(std::move(other.preemptions_), model_, *this, backfill_, pending_reasons_) {}
  Scheduler& operator=(Scheduler&&) = delete;

  absl::Status AddHostType(const HostType& type);
  absl::Status AddHost(const HostConfig& host);
  absl::Status SetHostState(const std::string& host, HostState state);
  // Sets a dynamic resource (a sensor's value, the load); returns whether it changed.
  absl::StatusOr<bool> SetHostResource(const std::string& host, const std::string& name,
                                       const ResourceValue& value);
  // How a numeric resource is ordered and consumed (RESS direction, release, assign,
  // slotresource). rusage[] of a numeric resource other than mem and gpu reserves from the
  // value its host has — its total, as a static resource or a sensor reports it — for as
  // long as the job holds it; select[] and order[] see what is left.
  void SetResourceTraits(const std::string& name, const ResourceTraits& traits) { model_.traits[name] = traits; }
  // A resource shared by several hosts (a RESS record whose locale names them, or
  // ress.master's for the whole cluster): one total that jobs on any of them reserve
  // from. Replaces the hosts' own value of it for rusage[]. `scope` names the stock (the
  // record's locale as written; "" for the cluster's): calling again with the same scope
  // updates its total and hosts (a host joined) and keeps what jobs reserved.
  absl::Status SetSharedResource(const std::string& name, const std::string& scope,
                                 const std::vector<std::string>& hosts, double total);
  // One host joins the stock (its first heartbeat), the others staying.
  absl::Status AddToSharedResource(const std::string& name, const std::string& scope, const std::string& host,
                                   double total);
  // A suspended job gives back what it reserved of `release` resources; resumed, takes it
  // again (even beyond the total: a resume is not refused).
  absl::Status SetSuspended(int64_t job_id, bool suspended);
  absl::Status AddQueue(const QueueConfig& queue);
  void DefineUserGroup(const std::string& group, std::vector<std::string> members);
  // Changes a queue's parameters; its waiting and running jobs stay as they are.
  absl::Status UpdateQueue(const QueueConfig& queue);
  bool HasQueue(const std::string& name) const { return model_.queues.count(name) > 0; }
  // Fair share (B5): decays every fair-share queue's usage to `now` and adds what its
  // users ran since the last call. The master calls it before each cycle and before
  // giving a job's resources back, so each job counts exactly as long as it held them.
  // Costs one step per user of a fair-share queue.
  void AdvanceFairshare(absl::Time now);
  // CPU time a running job used since its last heartbeat (fair share's cpu_time_factor).
  void AddFairshareCpuTime(int64_t job_id, double cpu_seconds);
  // A job's usage from before this master started (its record), counted in its
  // fair-share queue's tree; nothing for other queues. Running jobs count up to `now`.
  void AddFairshareHistory(const JobRequest& job, int slots, int gpus, double cpu_seconds, absl::Time start,
                           absl::Time end, absl::Time now);
  // Dominant Resource Fairness: the cluster's slots, memory and GPUs, and a job's demand
  // and dominant share of them.
  DrfVector ClusterTotal() const { return model_.ClusterTotal(); }
  DominantShare JobDominantShare(int64_t job_id) const;
  // A capacity queue's virtual clusters and what each holds; empty for other queues.
  struct ClusterReport {
    VirtualClusterConfig config;
    double held = 0;  // of the queue's capacity resource
    int pending_jobs = 0;
    int running_jobs = 0;
  };
  std::vector<ClusterReport> CapacityReport(const std::string& queue) const;
  // A fair-share queue's tree with shares, usage and priorities; empty for other queues.
  std::vector<FairshareTree::NodeReport> FairshareReport(const std::string& queue) const;
  // Load thresholds (B5): the first of the queue's or the host's thresholds whose load is
  // past `schedule` (or `stop`), described ("r1m 5.2 on node1 is above queue q's stop
  // threshold 4"); "" when none is.
  std::string LoadThresholdExceeded(const std::string& host, const std::string& queue, bool stop) const;
  // A closed queue dispatches nothing (its run window is closed); its jobs stay queued.
  absl::Status SetQueueOpen(const std::string& name, bool open);
  bool QueueOpen(const std::string& name) const;
  // Jobs (waiting or running) in a queue.
  int QueueJobs(const std::string& name) const;
  // The users with an entry in a queue's per-user maps (what its orders see), sorted.
  std::vector<std::string> UsersHolding(const std::string& queue) const;
  absl::Status RemoveQueue(const std::string& name);
  // Changes what a host offers (its agent came back declaring other resources); what
  // running jobs hold stays held.
  absl::Status UpdateHostCapacity(const std::string& host, int slots, double mem_mb,
                                  double swap_mb, const std::vector<int>& gpus);
  // Replaces a host's own load thresholds (a reload).
  absl::Status SetHostThresholds(const std::string& host, const LoadThresholds& thresholds);
  // Changes a host's type (and so its CPU factor).
  absl::Status SetHostType(const std::string& host, const std::string& type);

  // Checks the request against its queue and the cluster and queues it. InvalidArgument
  // for requests that can never run (unknown queue, user not allowed, more slots than
  // the cluster has, interactive to a batch-only queue, ...).
  absl::Status Submit(JobRequest job);
  // The checks of Submit without queuing; normalizes `job` as Submit would.
  absl::Status Check(JobRequest* job) const;

  // Resource limits (B7): replaces them; what running jobs hold is counted again.
  void SetLimits(const std::vector<LimitConfig>& limits);
  // Takes the limits' values in force at `now` (their time windows); before each cycle.
  void SetLimitTime(absl::Time now, absl::TimeZone tz);
  using LimitReport = LimitBook::Report;
  std::vector<LimitReport> Limits() const { return limits_.Reports(); }
  // Why a pending job did not start when a cycle last considered it: the limit or queue
  // limit that holds it; "" when it simply did not fit (or was not considered).
  std::string PendingReason(int64_t job_id) const;

  // Removes a pending job (killed before it ran). NotFound if it is not pending.
  absl::Status Cancel(int64_t job_id);

  // Decides, in one batch, where every placeable pending job runs; applies the
  // placements to the model and returns them in dispatch order.
  std::vector<Placement> Cycle(CycleStats* stats = nullptr);

  // Preemption (B5): what the last cycles decided to preempt (each once), and the
  // preempted jobs whose slots are free again, to resume (their slots are taken again).
  // Victims to suspend have already lent their slots; victims to requeue hold everything
  // until Release.
  std::vector<Preemption> TakePreemptions() { return preemptions_.TakePreemptions(); }
  std::vector<int64_t> TakeResumes() { return preemptions_.TakeResumes(); }
  // Elastic jobs (B4): the allocations running elastic jobs gained or gave back since the
  // last call, in order. A cycle first places waiting jobs; one that does not fit takes
  // slots elastic jobs grew by (their queue's priority at most, the lowest queue and the
  // youngest growth first) before it preempts anything; then elastic jobs grow, the
  // highest queue first, into what is left (never into slots held for a reservation).
  std::vector<Resize> TakeResizes() { return elastic_.TakeResizes(); }
  // A suspension for preemption that could not be carried out (the job ended, its agent
  // is gone): the job takes its slots back.
  absl::Status CancelPreemption(int64_t victim) { return preemptions_.Cancel(victim); }
  // After a restart: a job found suspended for a preemption lends its slots again and
  // waits to be resumed as before; `preemptor` 0 when that job is gone.
  absl::Status RestorePreempted(int64_t victim, int64_t preemptor) {
    return preemptions_.RestorePreempted(victim, preemptor);
  }
  // After a restart: a job found being requeued for a preemption (its grace running)
  // is not preempted again, and its preemptor (0: gone) waits for it to end.
  absl::Status RestoreRequeueing(int64_t victim, int64_t preemptor) {
    return preemptions_.RestoreRequeueing(victim, preemptor);
  }

  // The time cycles take as now: jobs' starts, run limits and reservations (backfill).
  void SetNow(absl::Time now) { now_ = now; }
  // A pending job's reservation as the last cycle computed it; nullopt when it has none.
  std::optional<ReservationView> ReservationOf(int64_t job_id) const;
  // When a job like `probe`, submitted now, would start by the backfill planner's own
  // reckoning (SPEC A16: what the native adapter reports of the center's queue): now when
  // it fits beside what runs and what the last cycle's reservations hold; else when
  // enough running jobs have ended by their run limits. Submits nothing and leaves the
  // model as it was. Unknown (InfiniteFuture, with the reason) when a job in the way has no
  // run limit, or the probe could not run here at all.
  StartEstimate EstimateStart(JobRequest probe);

  // Gives a running job's resources back (finished, killed, or requeued).
  absl::Status Release(int64_t job_id);

  // Marks a running job as restored on restart: its resources are taken as recorded;
  // `started` (its run limit counts from there) for backfill.
  // `grown`: how many of the placement's last sections are allocations an elastic job
  // grew by (each one allocation), given back first when it shrinks.
  absl::Status Restore(const JobRequest& job, const Placement& placement,
                       absl::Time started = absl::InfinitePast(), int grown = 0);

  size_t pending() const;
  size_t running() const { return model_.running.size(); }
  int free_slots(const std::string& host) const;

 private:
  using Host = ClusterModel::Host;
  using Queue = ClusterModel::Queue;
  using Job = ClusterModel::Job;
  using Pool = ClusterModel::Pool;
  using HostKey = ClusterModel::HostKey;
  using Consume = ClusterModel::Consume;
  std::string OverThreshold(const Host& h, const QueueConfig& queue, bool stop) const;
  bool UserAllowed(const QueueConfig& queue, const std::string& user) const;
  void CycleQueue(Queue& queue, std::unordered_map<std::string, std::string>& failed_shapes,
                  std::vector<Placement>* placed, CycleStats& st);
  // What the queue's order reads as a cycle starts (queue_order.h).
  OrderInputs InputsOf(const Queue& queue) const;
  // Capacity queues: a job its virtual cluster is owed (under its guarantee) that did not
  // fit preempts jobs of clusters holding more than their guarantee, none below it.
  bool TryReclaim(const Job& job, Queue& queue);
  // Capacity: why a job may not start now ("" when it may).
  std::string CapacityExceeded(const Job& job, const Queue& queue) const;
  // `job_level_done`: per-job consumables already reserved by an earlier section.
  bool PlaceSection(const Job& job, const Queue& queue, const Section& section, int slots,
                    std::set<std::string>* job_level_done, std::vector<HostAllocation>* out) override;
  // Hosts that pass the queue's host list, their state and the section's select, best
  // first. The common case (no order[], same[] or host preference) walks a sorted index
  // and stops once `enough` slots are found.
  std::vector<Host*> CandidateHosts(const Job& job, const Queue& queue, const Section& section,
                                    double mem_per_slot, int gpus_per_slot,
                                    const std::vector<Consume>& consumes, int enough);
  // Placer: where the whole job fits now; a placement applied (+1) or given back (-1),
  // limits counted.
  bool TryPlace(const Job& job, Queue& queue, Placement* out) override;
  void Apply(const Job& job, Queue& queue, const Placement& placement, int sign) override {
    ApplyPlacement(job, queue, placement, sign, /*with_limits=*/true);
  }
  // `with_limits`: the limits count the placement too (a whole job's; a part of one is
  // counted by ChangeAllocation).
  void ApplyWithoutLimits(const Job& job, Queue& queue, const Placement& placement, int sign) override {
    ApplyPlacement(job, queue, placement, sign, /*with_limits=*/false);
  }
  void ApplyPlacement(const Job& job, Queue& queue, const Placement& placement, int sign, bool with_limits);
  int HostCapacity(const Host& host, const Queue& queue, const Job& job, double mem_per_slot,
                   int gpus_per_slot, const std::vector<Consume>& consumes = {}) const;

  // The units, declared after the fields they work over (SchedulerFields, a base).
  Backfill backfill_{model_, *this};
  Elastic elastic_{model_, limits_, *this};
  Preemptions preemptions_{model_, *this, backfill_, pending_reasons_};
};

}  // namespace jc::nexec
