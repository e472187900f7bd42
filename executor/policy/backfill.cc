// Reservations and backfill (SPEC B5): backfill.h.

#include "executor/policy/backfill.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jc::nexec {

int Backfill::Reservation::HeldUnits() const {
  int n = 0;
  for (const auto& [i, slots] : held) n += slots;
  for (const auto& [i, gpus] : held_gpus) n += static_cast<int>(gpus.size());
  return n;
}

void Backfill::StartCycle() {
  reservations_.clear();
  views_.clear();
}

void Backfill::EndCycle() {
  Hold(-1);
  for (const Reservation& r : reservations_) {
    ReservationView& view = views_[r.job_id];
    view.start = r.start;
    for (const auto& [i, n] : r.wanted) view.hosts.push_back(model_.hosts[i].config.name);
  }
}

void Backfill::Hold(int sign) {
  for (Reservation& r : reservations_) {
    for (const auto& [i, want] : r.wanted) {
      Host& h = model_.hosts[i];
      int& held = r.held[i];
      const int change = sign > 0 ? std::max(0, std::min(want - held, h.free_slots())) : -held;
      if (change == 0) continue;
      model_.IndexHost(i, false);
      h.used_slots += change;
      held += change;
      held_slots_ += change;
      model_.RefreshLoad(h);
      model_.IndexHost(i, true);
    }
    for (const auto& [i, want] : r.wanted_gpus) {
      Host& h = model_.hosts[i];
      std::vector<int>& held = r.held_gpus[i];
      const size_t before = held.size();
      if (sign > 0) {
        for (auto& [index, users] : h.gpu_users) {
          if (static_cast<int>(held.size()) >= want) break;
          if (users != 0) continue;
          ++users;
          held.push_back(index);
        }
      } else {
        for (int index : held) --h.gpu_users[index];
        held.clear();
      }
      if (held.size() != before) model_.RefreshLoad(h);
    }
    for (const auto& [i, want] : r.wanted_mem) {
      Host& h = model_.hosts[i];
      double& held = r.held_mem[i];
      const double change = sign > 0 ? std::max(0.0, std::min(want - held, h.config.mem_mb - h.used_mem)) : -held;
      if (change == 0) continue;
      h.used_mem += change;
      held += change;
      model_.RefreshLoad(h);
    }
    for (const auto& [i, wants] : r.wanted_consumables) {
      Host& h = model_.hosts[i];
      HostAllocation held_now;  // what changes, applied as an allocation of consumables
      held_now.host = h.config.name;
      for (const auto& [name, want] : wants) {
        double& held = r.held_consumables[i][name];
        double left = 0;
        if (auto pool = h.shared.find(name); pool != h.shared.end()) {
          left = model_.pools[pool->second].total - model_.pools[pool->second].reserved;
        } else if (auto it = h.config.resources.find(name); it != h.config.resources.end()) {
          if (const double* total = std::get_if<double>(&it->second)) left = *total - h.reserved[name];
        }
        const double change = sign > 0 ? std::max(0.0, std::min(want - held, left)) : -held;
        if (change == 0) continue;
        held += change;
        held_now.reserved[name] = change;
      }
      if (!held_now.reserved.empty()) model_.ApplyConsumables(held_now, +1, false);
    }
  }
}

bool Backfill::MayBackfill(const Job& job, absl::Time now) const {
  if (job.request.run_limit <= absl::ZeroDuration()) return false;  // never without a run limit
  const absl::Time ends = now + job.request.run_limit;
  for (const Reservation& r : reservations_) {
    // An unknown start (a job in the way has no run limit) could be any moment: nothing
    // may delay it.
    if (r.start == absl::InfiniteFuture() || ends > r.start) return false;
  }
  return true;
}

bool Backfill::Place(const Job& job, Queue& queue, absl::Time now, Placement* out) {
  // Reserved resources are held from every job but those that end before the reservations
  // start; such a job tries with them free (backfill).
  std::vector<int> held_before;  // per reservation, the slots and GPUs it held
  if (!reservations_.empty() && MayBackfill(job, now)) {
    for (const Reservation& r : reservations_) held_before.push_back(r.HeldUnits());
    Hold(-1);
  }
  const bool placed = placer_.TryPlace(job, queue, out);
  if (!held_before.empty()) {
    Hold(+1);
    // Backfilled if it took what a reservation held (else it simply fit beside them).
    for (size_t k = 0; placed && k < reservations_.size(); ++k) {
      if (reservations_[k].HeldUnits() < held_before[k]) out->backfilled_before = reservations_[k].job_id;
    }
  }
  return placed;
}

std::optional<absl::Time> Backfill::EarliestFit(const Job& job, Queue& queue, Placement* found) {
  // Running jobs by when they end at the latest; suspended and lent ones are not counted
  // on (a suspended job's end is unknown).
  // A heap, not a sort: the job usually fits after the first few ends, so only those are
  // ordered (O(running) to build, O(log running) per job taken).
  using Ending = std::tuple<absl::Time, int64_t, Job*>;
  std::vector<Ending> by_end;
  by_end.reserve(model_.running.size());
  for (int64_t rid : model_.running) {
    Job& r = model_.jobs.at(rid);
    if (!r.suspended && !r.lent) by_end.emplace_back(r.Ends(), rid, &r);
  }
  const auto later = [](const Ending& a, const Ending& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) > std::tie(std::get<0>(b), std::get<1>(b));
  };
  std::make_heap(by_end.begin(), by_end.end(), later);
  // Held slots of earlier reservations stay held: this job's reservation comes after.
  std::vector<Job*> released;
  std::optional<absl::Time> start;
  int free_now = 0;
  for (const Host& h : model_.hosts) free_now += std::max(0, h.free_slots());
  int freed = 0;
  while (!by_end.empty()) {
    std::pop_heap(by_end.begin(), by_end.end(), later);
    Job* r = std::get<2>(by_end.back());
    by_end.pop_back();
    placer_.Apply(*r, model_.queues.at(r->request.queue), r->placement, -1);
    released.push_back(r);
    for (const auto& section : r->placement.sections) {
      for (const HostAllocation& a : section) freed += a.slots;
    }
    // Placement attempts only once enough slots are free somewhere.
    if (free_now + freed < job.request.slots) continue;
    if (placer_.TryPlace(job, queue, found)) {
      placer_.Apply(job, queue, *found, -1);
      start = r->Ends();
      break;
    }
  }
  for (auto it = released.rbegin(); it != released.rend(); ++it) {
    placer_.Apply(**it, model_.queues.at((*it)->request.queue), (*it)->placement, +1);
  }
  return start;
}

std::optional<std::string> Backfill::Reserve(const Job& job, Queue& queue, absl::Time now) {
  Placement found;
  std::optional<absl::Time> start = EarliestFit(job, queue, &found);
  if (!start) return std::nullopt;  // not even on an empty cluster (a limit holds it): nothing to reserve
  Reservation r;
  r.job_id = job.request.id;
  r.start = std::max(*start, now);
  for (const auto& section : found.sections) {
    for (const HostAllocation& a : section) {
      const size_t i = model_.host_index.at(a.host);
      r.wanted[i] += a.slots;
      if (!a.gpus.empty()) r.wanted_gpus[i] += static_cast<int>(a.gpus.size());
      if (a.mem_mb > 0) r.wanted_mem[i] += a.mem_mb;
      for (const auto& [name, amount] : a.reserved) {
        if (!a.units.count(name)) r.wanted_consumables[i][name] += amount;
      }
    }
  }
  std::vector<std::string> names;
  for (const auto& [i, n] : r.wanted) names.push_back(model_.hosts[i].config.name);
  std::string reason =
      r.start == absl::InfiniteFuture()
          ? absl::StrCat("reserved ", absl::StrJoin(names, " "), " (start unknown: a job there has no run limit)")
          : absl::StrCat("reserved ", absl::StrJoin(names, " "), " to start by ",
                         absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", r.start, absl::UTCTimeZone()));
  reservations_.push_back(std::move(r));
  Hold(+1);
  return reason;
}

void Backfill::HoldSlots(int64_t job_id, absl::Time start, const std::map<size_t, int>& slots) {
  if (slots.empty()) return;
  Reservation held;
  held.job_id = job_id;
  held.start = start;
  held.wanted = slots;
  reservations_.push_back(std::move(held));
  Hold(+1);
}

std::optional<ReservationView> Backfill::ReservationOf(int64_t job_id) const {
  auto it = views_.find(job_id);
  if (it == views_.end()) return std::nullopt;
  return it->second;
}

}  // namespace jc::nexec
