// Elastic jobs (SPEC B4): elastic.h.

#include <algorithm>
#include <cmath>

#include "executor/policy/elastic.h"

namespace jc::nexec {
namespace {

double GpusPerSlot(const Section& section) {
  auto gpu = section.rusage.find("gpu");
  return gpu == section.rusage.end() ? 0 : gpu->second;
}

}  // namespace

void Elastic::Placed(const JobRequest& job) {
  if (job.max_slots > job.slots) jobs_.insert(job.id);
}

void Elastic::Restored(const JobRequest& job, int grown) {
  if (job.max_slots > 0) jobs_.insert(job.id);
  grown_allocations_ += grown;
}

void Elastic::Released(const Job& job) {
  grown_allocations_ -= static_cast<int>(job.placement.sections.size() - job.base_sections);
  jobs_.erase(job.request.id);
}

void Elastic::ChangeAllocation(Job& job, Queue& queue, const HostAllocation& allocation, bool grow) {
  // Limits count a job once per bucket however many hosts it has there: count the whole
  // placement again rather than the one allocation.
  if (!limits_.empty()) limits_.Apply(job.request, job.placement, -1, model_.user_groups);
  Placement piece;
  piece.job_id = job.request.id;
  piece.sections.push_back({allocation});
  placer_.ApplyWithoutLimits(job, queue, piece, grow ? +1 : -1);
  if (grow) {
    job.placement.sections.push_back({allocation});
    ++grown_allocations_;
  } else {
    job.placement.sections.pop_back();
    --grown_allocations_;
  }
  if (!limits_.empty()) limits_.Apply(job.request, job.placement, +1, model_.user_groups);
}

int Elastic::GrowthRoom(const Job& job, const Queue& queue) const {
  const QueueConfig& qc = queue.config;
  int room = job.request.max_slots - job.Slots();
  if (qc.max_slots > 0) room = std::min(room, qc.max_slots - queue.used_slots);
  if (qc.max_slots_per_user > 0) {
    auto used = queue.used_by_user.find(job.request.user);
    room = std::min(room, qc.max_slots_per_user - (used == queue.used_by_user.end() ? 0 : used->second));
  }
  if (qc.capacity && job.cluster != kNoCluster && job.cluster < queue.capacity_held.size()) {
    // Per slot, what the queue's capacity resource counts: a slot, or its GPUs.
    const Section& section = job.request.requirement.sections.front();
    const double per_slot = qc.capacity->resource == CapacityResource::kGpus
                                ? GpusPerSlot(section) + job.request.gpus_per_slot
                                : 1.0;
    if (per_slot > 0) {
      const VirtualClusterConfig& vc = qc.capacity->clusters[job.cluster];
      if (vc.max > 0) {
        room = std::min(room, static_cast<int>(std::floor((vc.max - queue.capacity_held[job.cluster]) / per_slot + 1e-9)));
      }
      if (qc.capacity->user_limit_factor > 0 && vc.guarantee > 0) {
        auto held = queue.held_by_user.find(job.request.user);
        double user_held = 0;
        if (held != queue.held_by_user.end()) {
          user_held = qc.capacity->resource == CapacityResource::kGpus ? held->second.gpus : held->second.slots;
        }
        room = std::min(room, static_cast<int>(std::floor(
                                  (qc.capacity->user_limit_factor * vc.guarantee - user_held) / per_slot + 1e-9)));
      }
    }
  }
  return std::max(room, 0);
}

void Elastic::Grow(uint64_t cycle) {
  // A cycle that took slots back (from elastic jobs, or by preemption) for jobs still
  // to start grows nothing: those slots are theirs.
  if (jobs_.empty() || std::exchange(took_back_, false)) return;
  std::vector<Job*> order;
  for (int64_t id : jobs_) {
    Job& job = model_.jobs.at(id);
    if (job.Resizable() && job.placed_in_cycle != cycle) order.push_back(&job);
  }
  // The highest queue first; in a queue, the oldest job (jobs_ is in submission order).
  std::stable_sort(order.begin(), order.end(), [&](const Job* a, const Job* b) {
    return model_.queues.at(a->request.queue).config.priority > model_.queues.at(b->request.queue).config.priority;
  });
  for (Job* job : order) {
    if (model_.pack_index.empty() || std::get<0>(*model_.pack_index.rbegin()) <= 0) return;  // no free slot anywhere
    Queue& queue = model_.queues.at(job->request.queue);
    if (!queue.open) continue;
    const int room = GrowthRoom(*job, queue);
    if (room <= 0) continue;
    limits_.SelectForHosts(job->request, model_.user_groups);
    // The job's section for more slots anywhere; what it reserves once per job (not per
    // slot) it already holds.
    Section section = job->request.requirement.sections.front();
    std::set<std::string> job_level;
    for (const ClusterModel::Consume& c : model_.ConsumesOf(section)) {
      if (!c.traits.per_slot) job_level.insert(c.resource);
    }
    auto place = [&](int slots, std::vector<HostAllocation>* out) {
      std::set<std::string> done = job_level;
      return placer_.PlaceSection(*job, queue, section, slots, &done, out);
    };
    // The most slots that fit now: all it may have, else the largest count that places
    // (if k slots place, fewer do too).
    std::vector<HostAllocation> grown;
    if (!place(room, &grown)) {
      int fits = 0, fails = room;
      while (fails - fits > 1) {
        const int mid = fits + (fails - fits) / 2;
        std::vector<HostAllocation> tried;
        if (place(mid, &tried)) {
          fits = mid;
          grown = std::move(tried);
        } else {
          fails = mid;
        }
      }
      if (fits == 0) continue;
    }
    for (const HostAllocation& a : grown) ChangeAllocation(*job, queue, a, true);
    if (!limits_.empty() && !limits_.Exceeded(job->request, job->placement, model_.user_groups).empty()) {
      for (size_t k = 0; k < grown.size(); ++k) ChangeAllocation(*job, queue, grown[grown.size() - 1 - k], false);
      continue;
    }
    for (HostAllocation& a : grown) resizes_.push_back(Resize{job->request.id, true, std::move(a), 0});
  }
}

bool Elastic::TakeBack(const Job& job, Queue& queue, Placement* out, TakenBack* taken) {
  // Elastic jobs of queues no higher than the waiting job's, holding more than they
  // started with: the lowest queue first, in it the youngest job.
  std::vector<Job*> candidates;
  for (int64_t id : jobs_) {
    Job& e = model_.jobs.at(id);
    if (id == job.request.id || !e.Resizable() || !e.Grown()) continue;
    if (model_.queues.at(e.request.queue).config.priority > queue.config.priority) continue;
    candidates.push_back(&e);
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](const Job* a, const Job* b) {
    const int pa = model_.queues.at(a->request.queue).config.priority;
    const int pb = model_.queues.at(b->request.queue).config.priority;
    if (pa != pb) return pa < pb;
    return a->request.id > b->request.id;
  });
  // Each allocation taken back costs a placement attempt: a bounded number per job and cycle.
  constexpr int kMaxAttempts = 64;
  for (Job* e : candidates) {
    Queue& eq = model_.queues.at(e->request.queue);
    while (e->Grown() && static_cast<int>(taken->size()) < kMaxAttempts) {
      HostAllocation a = e->placement.sections.back().front();
      ChangeAllocation(*e, eq, a, false);
      taken->emplace_back(e->request.id, std::move(a));
      if (placer_.TryPlace(job, queue, out)) {
        ReturnUnneeded(*e, eq, &taken->back().second);
        if (taken->back().second.slots == 0) taken->pop_back();
        return true;
      }
    }
  }
  return false;
}

void Elastic::ReturnUnneeded(Job& e, Queue& eq, HostAllocation* taken) {
  // Only plain slots (and memory per slot) split; GPUs, units and per-job reservations
  // go back whole.
  if (!taken->gpus.empty() || !taken->reserved.empty() || !taken->units.empty()) return;
  const ClusterModel::Host& h = model_.hosts[model_.host_index.at(taken->host)];
  const double mem_per_slot = taken->slots > 0 ? taken->mem_mb / taken->slots : 0;
  int keep = std::min(taken->slots, h.free_slots());
  if (mem_per_slot > 0) {
    const double fit = (h.config.mem_mb - h.used_mem) / mem_per_slot + 1e-9;  // in double: see HostCapacity
    if (fit < keep) keep = static_cast<int>(std::max(0.0, fit));
  }
  if (keep <= 0) return;
  HostAllocation kept = *taken;
  kept.slots = keep;
  kept.mem_mb = keep * mem_per_slot;
  ChangeAllocation(e, eq, kept, true);
  if (!limits_.empty() && !limits_.Exceeded(e.request, e.placement, model_.user_groups).empty()) {
    ChangeAllocation(e, eq, kept, false);
    return;
  }
  taken->slots -= keep;
  taken->mem_mb = taken->slots * mem_per_slot;
}

void Elastic::Settle(TakenBack* taken, int64_t for_job, bool keep) {
  if (taken->empty()) return;
  if (keep) {
    for (auto& [id, allocation] : *taken) resizes_.push_back(Resize{id, false, std::move(allocation), for_job});
    took_back_ = true;
  } else {
    for (auto it = taken->rbegin(); it != taken->rend(); ++it) {
      Job& e = model_.jobs.at(it->first);
      ChangeAllocation(e, model_.queues.at(e.request.queue), it->second, true);
    }
  }
  taken->clear();
}

}  // namespace jc::nexec
