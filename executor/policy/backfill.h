#pragma once

// Reservations and backfill (SPEC B5), a unit of the scheduler's model (issue 48, "the
// house"): a job that cannot start holds what it needs — slots, GPUs, memory and
// consumables — on the hosts that free first, and only jobs that end before its promised
// start may use them (EASY backfill). It owns the cycle's reservations and what they hold,
// and the last cycle's views the API reads; it works over the ClusterModel and asks the
// Placer (the scheduler) where a job fits.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/time/time.h"
#include "executor/policy/cluster.h"
#include "executor/policy/cluster_model.h"
#include "executor/policy/placer.h"

namespace jc::nexec {

class Backfill {
 public:
  using Job = ClusterModel::Job;
  using Queue = ClusterModel::Queue;
  using Host = ClusterModel::Host;

  Backfill(ClusterModel& model, Placer& placer) : model_(model), placer_(placer) {}
  // What `other` holds, over another model and placer (its owner moved).
  Backfill(Backfill&& other, ClusterModel& model, Placer& placer)
      : model_(model),
        placer_(placer),
        reservations_(std::move(other.reservations_)),
        held_slots_(other.held_slots_),
        views_(std::move(other.views_)) {}
  Backfill(const Backfill&) = delete;
  Backfill& operator=(const Backfill&) = delete;

  // A cycle begins: the last one's reservations are gone.
  void StartCycle();
  // A cycle ends: what reservations held is free again (the next cycle computes them
  // again), and the views ReservationOf answers are this cycle's.
  void EndCycle();

  bool any() const { return !reservations_.empty(); }
  // Slots the reservations hold now.
  int held_slots() const { return held_slots_; }
  // May `job`, started at `now`, use held resources: it has a run limit and ends before
  // every reservation's start (an unknown start could be any moment: nothing may delay it).
  bool MayBackfill(const Job& job, absl::Time now) const;

  // Places `job` as the cycle may: beside what the reservations hold, or, when it may
  // backfill, on it too; then `out->backfilled_before` names the reservation it took from
  // (0 when it simply fit beside them).
  bool Place(const Job& job, Queue& queue, absl::Time now, Placement* out);

  // The earliest time the job fits as running jobs end by their run limits (what
  // reservations hold staying held), and where (`found`); InfiniteFuture when a job in the
  // way has no run limit; nullopt when it fits not even with every running job gone.
  std::optional<absl::Time> EarliestFit(const Job& job, Queue& queue, Placement* found);
  // Reserves for `job` what it needs at its earliest fit, held from now on; returns the
  // job's pending reason ("reserved h1 h2 to start by ..."), nullopt when it fits not even
  // on the whole cluster (nothing reserved).
  std::optional<std::string> Reserve(const Job& job, Queue& queue, absl::Time now);
  // Holds `slots` (host index -> slots) for job `job_id` from `start` (a preemptor's lent
  // slots: starting now, so nothing backfills them).
  void HoldSlots(int64_t job_id, absl::Time start, const std::map<size_t, int>& slots);

  // Takes (+1) or gives back (-1) the free slots, GPUs, memory and consumables the
  // reservations want.
  void Hold(int sign);

  // A pending job's reservation as the last cycle computed it; nullopt when it has none.
  std::optional<ReservationView> ReservationOf(int64_t job_id) const;

 private:
  // What a reservation holds on each host (host index -> slots, GPUs and memory wanted
  // there, and held now). Every resource the reserved job needs is held, not only slots:
  // on a host with more slots than GPUs, a job that may not backfill must not start on the
  // GPUs the reserved job waits for (nor on its memory or licenses).
  struct Reservation {
    int64_t job_id = 0;
    absl::Time start;
    std::map<size_t, int> wanted;
    std::map<size_t, int> held;
    std::map<size_t, int> wanted_gpus;
    std::map<size_t, std::vector<int>> held_gpus;  // indices held (free ones taken)
    std::map<size_t, double> wanted_mem;
    std::map<size_t, double> held_mem;
    // Consumables by amount (rusage[] of static or sensor numbers; `assign` units are not
    // held), host-local or a shared stock's.
    std::map<size_t, std::map<std::string, double>> wanted_consumables;
    std::map<size_t, std::map<std::string, double>> held_consumables;
    // Slots and GPUs held now (what a backfilling job took shows as fewer).
    int HeldUnits() const;
  };

  ClusterModel& model_;
  Placer& placer_;
  std::vector<Reservation> reservations_;  // this cycle's
  int held_slots_ = 0;                     // slots they hold now
  std::unordered_map<int64_t, ReservationView> views_;  // the last cycle's
};

}  // namespace jc::nexec
