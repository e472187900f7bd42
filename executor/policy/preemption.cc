// Preemption (SPEC B5): preemption.h.

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "executor/policy/preemption.h"

namespace jc::nexec {

void Preemptions::Lend(const Job& victim, int sign, bool everything) {
  Queue& queue = model_.queues.at(victim.request.queue);
  if (everything) {
    placer_.Apply(victim, queue, victim.placement, sign);
    return;
  }
  // Only the slots: a stopped process keeps its memory, GPUs and what it reserved; the
  // limits go on counting it.
  const std::string& user = victim.request.user;
  for (const auto& section : victim.placement.sections) {
    for (const HostAllocation& a : section) {
      const size_t i = model_.host_index.at(a.host);
      model_.IndexHost(i, false);
      model_.hosts[i].used_slots += sign * a.slots;
      model_.RefreshLoad(model_.hosts[i]);
      model_.IndexHost(i, true);
      queue.used_slots += sign * a.slots;
      queue.used_by_user[user] += sign * a.slots;
      queue.held_by_user[user].slots += sign * a.slots;
      if (victim.cluster != kNoCluster && victim.cluster < queue.capacity_held.size() &&
          queue.config.capacity->resource == CapacityResource::kSlots) {
        queue.capacity_held[victim.cluster] += sign * a.slots;
      }
    }
  }
}

namespace {

// Preemption candidates ranked by key (lowest first) and, for equal keys, the youngest job
// first; at most 256 (each candidate tried costs a placement attempt: a few hundred find
// room for any one job and keep a cycle on a large cluster short).
template <typename Key, typename J>
std::vector<J*> LowestFirst(std::vector<std::pair<Key, J*>> ranked) {
  constexpr size_t kMaxCandidates = 256;
  auto first = [](const std::pair<Key, J*>& a, const std::pair<Key, J*>& b) {
    if (a.first != b.first) return a.first < b.first;
    return a.second->request.id > b.second->request.id;
  };
  if (ranked.size() > kMaxCandidates) {
    std::nth_element(ranked.begin(), ranked.begin() + kMaxCandidates, ranked.end(), first);
    ranked.resize(kMaxCandidates);
  }
  std::sort(ranked.begin(), ranked.end(), first);
  std::vector<J*> out;
  out.reserve(ranked.size());
  for (const auto& entry : ranked) out.push_back(entry.second);
  return out;
}

bool HoldsGpus(const Placement& placement) {
  for (const auto& section : placement.sections) {
    for (const HostAllocation& a : section) {
      if (!a.gpus.empty()) return true;
    }
  }
  return false;
}

}  // namespace

bool Preemptions::WaitingForVictims(int64_t id) {
  auto w = victims_of_.find(id);
  if (w == victims_of_.end()) return false;
  // Its victims being requeued still hold their GPUs: wait for them, preempt no more.
  for (int64_t v : w->second) {
    auto it = model_.jobs.find(v);
    if (it != model_.jobs.end() && it->second.running && it->second.being_requeued) {
      reasons_[id] = absl::StrCat("waiting for preempted job ", v, " to end");
      return true;
    }
  }
  victims_of_.erase(w);
  return false;
}

bool Preemptions::ByQueue(const Job& job, Queue& queue, absl::Time now) {
  if (WaitingForVictims(job.request.id)) return true;
  // The queues it may preempt, with their priority and max_preemptions, looked up once.
  std::map<std::string, const QueueConfig*> preemptable;
  for (const std::string& name : queue.config.preempt) {
    auto q = model_.queues.find(name);
    if (q != model_.queues.end() && q->second.config.priority < queue.config.priority) preemptable[name] = &q->second.config;
  }
  std::vector<std::pair<int, Job*>> ranked;  // (queue priority, job)
  for (int64_t rid : model_.running) {
    Job& v = model_.jobs.at(rid);
    if (v.suspended || v.lent || v.being_requeued) continue;
    auto vq = preemptable.find(v.request.queue);
    if (vq == preemptable.end()) continue;
    if (vq->second->max_preemptions > 0 && v.request.preemptions >= vq->second->max_preemptions) continue;
    ranked.emplace_back(vq->second->priority, &v);
  }
  if (ranked.empty()) return false;
  // The lowest queue first, and in it the youngest job: the least work lost (LSF's order).
  return Among(job, queue, LowestFirst(std::move(ranked)), nullptr, absl::StrCat("queue ", queue.config.name), now);
}

bool Preemptions::Among(const Job& job, Queue& queue, const std::vector<Job*>& candidates,
                        const std::function<bool(const Job&)>& eligible, const std::string& why, absl::Time now) {
  const int64_t id = job.request.id;
  auto fits = [&] {
    Placement p;
    if (!placer_.TryPlace(job, queue, &p)) return false;
    placer_.Apply(job, queue, p, -1);  // only a test: the job starts in a later cycle
    return true;
  };
  std::vector<Job*> chosen;
  bool found = false;
  for (Job* v : candidates) {
    if (eligible && !eligible(*v)) continue;  // earlier victims changed what it may give
    Lend(*v, -1, HoldsGpus(v->placement));
    chosen.push_back(v);
    if (fits()) {
      found = true;
      break;
    }
  }
  if (!found) {
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) Lend(**it, +1, HoldsGpus((*it)->placement));
    return false;
  }
  // The fewest victims: each chosen before the last is given back if the job fits without it.
  std::vector<Job*> needed;
  for (size_t i = 0; i + 1 < chosen.size(); ++i) {
    const bool everything = HoldsGpus(chosen[i]->placement);
    Lend(*chosen[i], +1, everything);
    if (fits()) continue;
    Lend(*chosen[i], -1, everything);
    needed.push_back(chosen[i]);
  }
  needed.push_back(chosen.back());
  std::vector<int64_t> ids;
  for (Job* v : needed) {
    const bool requeue = HoldsGpus(v->placement);
    if (requeue) {
      Lend(*v, +1, true);  // held until it ends and the master releases it
      v->being_requeued = true;
    } else {
      v->lent = true;
      v->lent_to = id;
      model_.queues.at(v->request.queue).lent.push_back(v->request.id);
    }
    preemptions_.push_back({v->request.id, id, requeue,
                            absl::StrCat("preempted by job ", id, " (", why, ")")});
    victims_of_[id].push_back(v->request.id);
    ids.push_back(v->request.id);
  }
  reasons_[id] = absl::StrCat("preempting job", ids.size() > 1 ? "s " : " ", absl::StrJoin(ids, ", "));
  // The lent slots are the preemptor's: held from every other job for the rest of this
  // cycle (a reservation starting now, so nothing backfills it); the next cycle starts
  // the preemptor on them before any lower queue.
  std::map<size_t, int> lent;
  for (Job* v : needed) {
    if (!v->lent) continue;
    for (const auto& section : v->placement.sections) {
      for (const HostAllocation& a : section) lent[model_.host_index.at(a.host)] += a.slots;
    }
  }
  backfill_.HoldSlots(id, now, lent);
  return true;
}

bool Preemptions::ByFairshare(const Job& job, Queue& queue, absl::Time now) {
  if (WaitingForVictims(job.request.id)) return true;
  FairshareTree& tree = *queue.fairshare;
  FairshareTree::Standing standing = tree.Snapshot(queue.used_by_user, job.request.user);
  const std::string& user = job.request.user;
  const int slots = job.request.slots;
  std::vector<std::pair<double, Job*>> ranked;  // (its user's priority, job)
  for (int64_t rid : model_.running) {
    Job& v = model_.jobs.at(rid);
    if (v.request.queue != queue.config.name || v.request.user == user) continue;
    if (v.suspended || v.lent || v.being_requeued) continue;
    if (queue.config.max_preemptions > 0 && v.request.preemptions >= queue.config.max_preemptions) continue;
    if (!tree.MayPreempt(standing, user, slots, v.request.user)) continue;
    ranked.emplace_back(tree.UserPriority(standing, v.request.user), &v);
  }
  if (ranked.empty()) return false;
  std::vector<Job*> candidates = LowestFirst(std::move(ranked));
  // Each victim taken leaves its branch: the next must still be over enough.
  auto eligible = [&](const Job& v) {
    if (!tree.MayPreempt(standing, user, slots, v.request.user)) return false;
    tree.Take(standing, v.request.user, v.request.slots);
    return true;
  };
  return Among(job, queue, candidates, eligible, absl::StrCat("fair share of queue ", queue.config.name), now);
}

void Preemptions::ResumeLent(Queue& queue) {
  // Slots lent to preemptors that have not started yet are promised to them: a victim
  // whose own preemptor started does not take those (a preemption in the same queue,
  // by capacity or fair share, must not be undone by resuming an earlier victim).
  std::map<size_t, int> promised;
  for (const auto& [name, q] : model_.queues) {
    for (int64_t id : q.lent) {
      const Job& v = model_.jobs.at(id);
      auto preemptor = model_.jobs.find(v.lent_to);
      if (preemptor == model_.jobs.end() || preemptor->second.running) continue;
      for (const auto& section : v.placement.sections) {
        for (const HostAllocation& a : section) promised[model_.host_index.at(a.host)] += a.slots;
      }
    }
  }
  for (auto it = queue.lent.begin(); it != queue.lent.end();) {
    Job& v = model_.jobs.at(*it);
    auto preemptor = model_.jobs.find(v.lent_to);
    if (preemptor != model_.jobs.end() && !preemptor->second.running) {
      ++it;  // its preemptor has not started yet: the slots are promised to it
      continue;
    }
    std::map<size_t, int> slots_on;
    for (const auto& section : v.placement.sections) {
      for (const HostAllocation& a : section) slots_on[model_.host_index.at(a.host)] += a.slots;
    }
    bool free = true;
    for (const auto& [i, n] : slots_on) {
      auto held = promised.find(i);
      free = free && model_.hosts[i].free_slots() - (held == promised.end() ? 0 : held->second) >= n;
    }
    if (!free) {
      ++it;
      continue;
    }
    Lend(v, +1, false);
    v.lent = false;
    v.lent_to = 0;
    resumes_.push_back(v.request.id);
    it = queue.lent.erase(it);
  }
}

absl::Status Preemptions::Cancel(int64_t victim) {
  auto it = model_.jobs.find(victim);
  if (it == model_.jobs.end() || !it->second.running) return absl::NotFoundError(absl::StrCat("job ", victim, " is not running"));
  Job& v = it->second;
  v.being_requeued = false;
  if (v.lent) {
    Lend(v, +1, false);
    v.lent = false;
    v.lent_to = 0;
    auto& lent = model_.queues.at(v.request.queue).lent;
    lent.erase(std::remove(lent.begin(), lent.end(), victim), lent.end());
  }
  return absl::OkStatus();
}

absl::Status Preemptions::RestorePreempted(int64_t victim, int64_t preemptor) {
  auto it = model_.jobs.find(victim);
  if (it == model_.jobs.end() || !it->second.running) return absl::NotFoundError(absl::StrCat("job ", victim, " is not running"));
  Job& v = it->second;
  if (v.lent) return absl::OkStatus();
  Lend(v, -1, false);
  v.lent = true;
  v.lent_to = preemptor;
  model_.queues.at(v.request.queue).lent.push_back(victim);
  if (preemptor != 0) victims_of_[preemptor].push_back(victim);
  return absl::OkStatus();
}

absl::Status Preemptions::RestoreRequeueing(int64_t victim, int64_t preemptor) {
  auto it = model_.jobs.find(victim);
  if (it == model_.jobs.end() || !it->second.running) return absl::NotFoundError(absl::StrCat("job ", victim, " is not running"));
  it->second.being_requeued = true;  // holds everything until it ends and is released
  if (preemptor != 0) victims_of_[preemptor].push_back(victim);
  return absl::OkStatus();
}

}  // namespace jc::nexec
