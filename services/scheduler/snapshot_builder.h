#pragma once

// Builds the scheduler's snapshot from what the other services know (registry, catalog,
// datamon, monitor), and turns a submitted job into placement requests. Both are pure
// functions of their inputs, so the scheduler rebuilds its view whenever the inputs
// change and a decision never waits on a service.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jointcloud/v1/catalog.pb.h"
#include "jointcloud/v1/datamon.pb.h"
#include "jointcloud/v1/jobs.pb.h"
#include "jointcloud/v1/registry.pb.h"
#include "services/monitor/monitor.h"
#include "services/scheduler/placement_request.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

namespace v1 = ::jointcloud::v1;

struct SchedulerInputs {
  std::vector<v1::Center> centers;
  std::vector<v1::ResourceSpec> specs;
  std::vector<v1::SpecCenterOffer> offers;  // the spec x center map, with per-center prices
  std::vector<v1::Image> images;
  std::vector<v1::Dataset> datasets;
  std::vector<monitor::CenterObservation> observations;
  // A monitor polls the centers' adapters (observations come from it): a center it polls
  // has nothing free until its first usage report. Without one (--services without
  // monitor) every center counts at its capacity, as it always did.
  bool monitored = false;
};

// One view per registered center:
// - status, position and declared security grade from the registry; capacity from the
//   registry unless the adapter reported its own;
// - free resources and tasks from the monitor's last usage, at most the center's
//   capacity (a center with an adapter the monitor polls and no usage yet has nothing
//   free; one without an adapter, or with no monitor, counts as idle with its whole
//   capacity free);
// - specs offered (those the catalog says the center can run) with the center's price,
//   and the execution power the adapter declares for each;
// - static power, network and performance from the adapter's center info;
// - images the catalog lists at the center, those its adapter reports (CenterInfo
//   image_ids), and those whose digest its hosts hold (CenterInfo image_digests);
//   datasets datamon locates there.
Snapshot BuildSnapshot(const SchedulerInputs& inputs);

// An image whose size the catalog does not say is taken to be this big when a center must
// be given it (a typical deep-learning framework image).
inline constexpr double kDefaultImageMb = 10240;

// The most replicas one task may ask for.
inline constexpr int kMaxReplicasPerTask = 1000;

// The placement requests of a job, one per replica in task order. InvalidArgument, naming
// the field, for an unknown spec, image or dataset, a replica number outside
// 1..kMaxReplicasPerTask, or no tasks.
absl::StatusOr<std::vector<PlacementRequest>> RequestsForJob(const std::string& job_id,
                                                             const v1::CreateTrainJobRequest& job,
                                                             const SchedulerInputs& inputs, absl::Time now);

}  // namespace jc::scheduler
