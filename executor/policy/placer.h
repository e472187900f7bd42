#pragma once

// What the scheduler's units (Backfill, and the policies that search for room) need of
// placement: placing a job on the model as it is, and applying or taking back a placement.
// The scheduler is the one Placer; a unit holds it beside the ClusterModel it works over.

#include <set>
#include <string>
#include <vector>

#include "executor/policy/cluster.h"
#include "executor/policy/cluster_model.h"

namespace jc::nexec {

class Placer {
 public:
  // Where the whole job fits now (every section, gang), without applying it; false with
  // the reason, if a limit holds it, in the job's pending reason.
  virtual bool TryPlace(const ClusterModel::Job& job, ClusterModel::Queue& queue, Placement* out) = 0;
  // Takes (+1) or gives back (-1) what `placement` holds: hosts, queue, limits.
  virtual void Apply(const ClusterModel::Job& job, ClusterModel::Queue& queue, const Placement& placement,
                     int sign) = 0;
  // The same without the limits (a part of a placement, which the limits count whole).
  virtual void ApplyWithoutLimits(const ClusterModel::Job& job, ClusterModel::Queue& queue,
                                  const Placement& placement, int sign) = 0;
  // Where `slots` of one section of the job fit now, as allocations; `job_level_done`: the
  // per-job consumables already reserved (an earlier section, or what the job holds).
  virtual bool PlaceSection(const ClusterModel::Job& job, const ClusterModel::Queue& queue, const Section& section,
                            int slots, std::set<std::string>* job_level_done, std::vector<HostAllocation>* out) = 0;

 protected:
  ~Placer() = default;
};

}  // namespace jc::nexec
