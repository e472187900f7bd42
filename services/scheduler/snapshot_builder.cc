#include "services/scheduler/snapshot_builder.h"

#include "common/price.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/oci/image_reference.h"
#include "common/validate.h"
#include "services/catalog/catalog.h"
#include "services/jobs/job_kind.h"

namespace jc::scheduler {
namespace {

Resources FromTable2(const v1::ComputingResources& r) {
  return Resources{static_cast<double>(r.cpu()),    static_cast<double>(r.gpu()),
                   static_cast<double>(r.npu()),    static_cast<double>(r.mlu()),
                   static_cast<double>(r.memory()), static_cast<double>(r.storage())};
}

// A center's datasets by "name:version" for the federation's, "<project>/name:version"
// for a project's: names and versions are unique only within a project (issue 44).
std::string DatasetKey(const v1::Dataset& d) {
  std::string key = d.data_name() + ":" + d.data_version();
  return d.project().empty() ? key : d.project() + "/" + key;
}

// A reported wait past a year says "not in any horizon we plan for", and is kept as a year.
constexpr double kMaxReportedStartDelaySeconds = 365.0 * 24 * 3600;

// Each kind of `free` within 0 and what `capacity` holds where it says (not a number: none).
Resources AtMost(Resources free, const Resources& capacity) {
  auto bound = [](double& x, double most) {
    x = !std::isfinite(x) || x < 0 ? 0 : most > 0 ? std::min(x, most) : x;
  };
  bound(free.cpu, capacity.cpu);
  bound(free.gpu, capacity.gpu);
  bound(free.npu, capacity.npu);
  bound(free.mlu, capacity.mlu);
  bound(free.memory_mb, capacity.memory_mb);
  bound(free.storage_gb, capacity.storage_gb);
  return free;
}

}  // namespace

Snapshot BuildSnapshot(const SchedulerInputs& in) {
  std::map<std::string, const monitor::CenterObservation*> observed;
  for (const auto& o : in.observations) observed[o.center.ai_center_id()] = &o;
  std::map<std::string, Resources> quantity;
  for (const auto& spec : in.specs) {
    auto demand = catalog::SpecDemand(spec);
    if (demand.ok()) quantity[spec.resource_spec_id()] = FromTable2(demand->table2);
  }

  Snapshot snap;
  snap.spec_quantity.insert(quantity.begin(), quantity.end());
  for (const auto& center : in.centers) {
    CenterView v;
    v.id = center.ai_center_id();
    v.available = center.has_status() && center.status() == 1;
    v.status = center.has_status() ? center.status() : 2;
    v.security_grade = center.security_grade();
    v.topology = center.network_topology();
    v.capacity = FromTable2(center.capacity());
    // A center the monitor polls has nothing free until its adapter says what is (its
    // usage, below): right after a restart a center full of running replicas looked empty
    // until the monitor's first poll (up to --monitor_interval), and a pass sent it
    // replicas it had no room for — as Slurm takes a node as down until it registers. Its
    // capacity still says what could ever run there. One that reports by heartbeat alone
    // (no adapter), or a federation without a monitor, is taken at its capacity, as before.
    v.free = in.monitored && !center.adapter_address().empty() ? Resources{} : v.capacity;
    auto it = observed.find(v.id);
    const monitor::CenterObservation* o = it == observed.end() ? nullptr : it->second;
    if (o != nullptr && o->has_info) {
      const auto& info = o->info;
      v.described = true;
      // A center that says it holds nothing at all (its adapter asked before its nodes came
      // up: a nexec center whose agents had not joined) keeps its registered capacity for what
      // could ever run there, so a job is queued, not refused as one no center could ever
      // run; nothing is free there meanwhile (its usage says so). The live placement bench
      // failed so under a fresh clone's CI.
      if (info.has_capacity() && !monitor::HoldsNothing(info)) v.capacity = FromTable2(info.capacity());
      if (info.security_grade() != 0) v.security_grade = info.security_grade();
      v.static_power_watts = info.static_power_watts();
      // A center's word on its own speed, within what any center could be (x1000 the
      // reference): run times are learned as wall x performance (SPEC A16), so a rogue
      // adapter's 1e13 would make a job's history, and the records that hold it, absurd.
      if (std::isfinite(info.performance_factor()) && info.performance_factor() > 0) {
        v.performance_factor = std::min(info.performance_factor(), kMaxPerformanceFactor);
      }
      v.network = {info.network().bandwidth_mbps(), info.network().latency_ms(), info.network().jitter_ms(),
                   info.network().loss_rate()};
      // Images the center's adapter reports are there too, whichever center registered them:
      // by the center's own names, so the federation's ids (a project's image of the same id
      // is another image; it is known at a center from the catalog: registered or staged).
      v.images.insert(info.image_ids().begin(), info.image_ids().end());
      v.receives_images = info.receives_images();
      v.runs_images = info.runs_images();
      v.port_range_size = std::max(0, info.port_range_size());
      // An adapter of the SDK from before it said (version 1): its range is unknown, not
      // none; its center refuses a replica it cannot give ports.
      if (info.adapter_version() == "jointcloud-adapter-sdk/1") v.port_range_size = std::numeric_limits<int>::max();
      if (info.has_run_as()) {
        v.runs_any_project = info.run_as().any();
        v.run_as_projects.insert(info.run_as().projects().begin(), info.run_as().projects().end());
        v.run_as_users.insert(info.run_as().users().begin(), info.run_as().users().end());
      }
    }
    if (o != nullptr && o->has_usage) {
      // At most what the center holds: a rogue adapter's "a billion CPUs free" would draw
      // every replica to wait there.
      v.free = AtMost(FromTable2(o->usage.free()), v.capacity);
      v.running_tasks = o->usage.running_task_num();
      v.waiting_tasks = o->usage.waiting_task_num();
      if (o->usage.security_grade() != 0) v.security_grade = o->usage.security_grade();
      // The center's word on its queue (SPEC A16), as of when the monitor asked: only for
      // specs of the catalog, and only a wait that is a number of seconds (an adapter is
      // another party: a bad figure is no estimate, never "no wait").
      v.queue_reported_at = o->observed_at;
      for (const auto& e : o->usage.start_estimates()) {
        const double wait = e.wait_seconds();
        if (!quantity.count(e.resource_spec_id()) || !std::isfinite(wait) || wait < 0) continue;
        v.reported_start_delay.try_emplace(e.resource_spec_id(),
                                           absl::Seconds(std::min(wait, kMaxReportedStartDelaySeconds)));
      }
    }
    snap.Upsert(std::move(v));
  }

  for (const auto& offer : in.offers) {
    CenterView* c = snap.FindMutable(offer.ai_center_id());
    auto q = quantity.find(offer.resource_spec_id());
    // An offer its center cannot run only because the center is not available now (its
    // capacity holds the spec) is dormant: it counts again when the center comes back.
    const bool dormant = !offer.can_run() && offer.capacity_instances() > 0;
    if (c == nullptr || q == quantity.end() || (!offer.can_run() && !dormant)) continue;
    // A price that cannot be read (a store edited by hand) is no offer: billed and admitted
    // at 0, its jobs would run free (helper-52 F4).
    auto price = ParsePrice(offer.price());
    bool priced = price.ok();
    for (const auto& step : offer.prices()) priced = priced && ParsePrice(step.price()).ok();
    if (!priced) continue;
    SpecAtCenter s;
    s.quantity = q->second;
    s.price = PriceAsDouble(*price);
    for (const auto& step : offer.prices()) {
      s.prices.emplace_back(absl::FromUnixSeconds(step.effective_from().seconds()) +
                                absl::Nanoseconds(step.effective_from().nanos()),
                            PriceAsDouble(StoredPrice(step.price())));
    }
    auto it = observed.find(c->id);
    if (it != observed.end()) {
      for (const auto& declared : it->second->info.specs()) {
        if (declared.resource_spec_id() == offer.resource_spec_id()) {
          s.execution_power_watts = declared.execution_power_watts();
        }
      }
    }
    (dormant ? c->dormant_specs : c->specs)[offer.resource_spec_id()] = s;
  }
  std::map<std::string, std::vector<std::string>> images_by_digest;
  for (const auto& image : in.images) {
    const std::string key = ImageKey(image.project(), image.image_id());
    if (CenterView* c = snap.FindMutable(image.ai_center_id())) c->images.insert(key);
    for (const auto& other : image.present_at()) {
      if (CenterView* c = snap.FindMutable(other)) c->images.insert(key);
    }
    if (!image.digest().empty()) images_by_digest[image.digest()].push_back(key);
  }
  // An image with content is at a center whose hosts hold its digest, whichever center
  // registered it: a replica there starts without a pull.
  for (const auto& [id, o] : observed) {
    CenterView* c = snap.FindMutable(id);
    if (c == nullptr || !o->has_info) continue;
    for (const auto& digest : o->info.image_digests()) {
      auto ids = images_by_digest.find(digest);
      if (ids == images_by_digest.end()) continue;
      for (const auto& key : ids->second) c->images.insert(key);
    }
  }
  for (const auto& d : in.datasets) {
    for (const auto& loc : d.location()) {
      if (CenterView* c = snap.FindMutable(loc.ai_center_id())) {
        c->datasets.insert(DatasetKey(d));
      }
    }
  }
  snap.Reindex();  // decisions visit the centers offering their spec
  return snap;
}

absl::StatusOr<std::vector<PlacementRequest>> RequestsForJob(const std::string& job_id,
                                                             const v1::CreateTrainJobRequest& job,
                                                             const SchedulerInputs& in, absl::Time now) {
  if (job.tasks().empty()) return absl::InvalidArgumentError("tasks: a job needs at least one task");
  std::map<std::string, const v1::Dataset*> datasets;
  for (const auto& d : in.datasets) datasets[DatasetKey(d)] = &d;
  std::map<std::string, std::string> topology_of;
  for (const auto& c : in.centers) topology_of[c.ai_center_id()] = c.network_topology();

  std::vector<PlacementRequest> out;
  for (int t = 0; t < job.tasks_size(); ++t) {
    const v1::TaskSpec& task = job.tasks(t);
    std::string where = absl::StrCat("tasks[", t, "]");
    const v1::ResourceSpec* spec = nullptr;
    for (const auto& s : in.specs) {
      if (s.resource_spec_id() == task.resource_spec_id()) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".resourceSpecId: unknown resource spec \"", task.resource_spec_id(), "\""));
    }
    // An interactive job or a service runs only on a spec offering its service type (SPEC
    // A17, Table 3). A batch job runs on any, as every job did before kinds: a spec offering
    // only "interactive" that ran batch jobs must not fail them after an upgrade.
    const jobs::JobKind kind = jobs::KindOf(task);
    const std::string service_type = jobs::ServiceTypeFor(kind);
    if (const auto offered = SplitList(spec->service_type());
        kind != jobs::JobKind::kBatch && std::find(offered.begin(), offered.end(), service_type) == offered.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".resourceSpecId: ", jobs::WithArticle(jobs::KindOf(task)), " task needs a resource spec offering service_type ",
          service_type, "; spec \"", task.resource_spec_id(), "\" offers ", spec->service_type()));
    }
    // A job uses its own project's images and datasets and the federation's; another
    // project's are unknown to it, exactly as ones that do not exist. Image ids are unique
    // within a project: the project's own image of the id, else the federation's.
    double image_size_mb = 0;
    std::string image_content;
    std::string image_key;
    if (!task.image_id().empty()) {
      const v1::Image* chosen = nullptr;
      for (const auto& i : in.images) {
        if (i.image_id() != task.image_id()) continue;
        if (!job.project().empty() && i.project() == job.project()) {
          chosen = &i;
          break;
        }
        if (i.project().empty()) chosen = &i;
      }
      if (chosen == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".imageId: unknown image \"", task.image_id(), "\""));
      }
      image_key = ImageKey(chosen->project(), chosen->image_id());
      image_size_mb = chosen->size_mb() > 0 ? chosen->size_mb() : kDefaultImageMb;
      if (!chosen->reference().empty() && !chosen->digest().empty()) {
        // By digest: what the catalog resolved at registration is what runs.
        auto ref = oci::ImageReference::Parse(chosen->reference());
        if (ref.ok()) {
          ref->tag.clear();
          ref->digest = chosen->digest();
          image_content = ref->ToString();
        }
      }
    }
    // Left out, one replica (as a create takes it: NormalizeCreate).
    const int replicas = task.has_replica_number() ? task.replica_number() : 1;
    if (replicas < 1 || replicas > kMaxReplicasPerTask) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".replicaNumber: must be 1 to ", kMaxReplicasPerTask,
                                                     ", got ", replicas));
    }
    PlacementRequest base;
    base.job_id = job_id;
    base.task_index = t;
    base.spec_id = task.resource_spec_id();
    base.image_id = task.image_id();
    base.image_key = image_key;
    base.image_size_mb = image_size_mb;
    base.image_content = image_content;
    base.ports = task.ports_size();
    base.pinned_centers.assign(task.center_ids().begin(), task.center_ids().end());
    base.min_security_grade = job.scheduling().min_security_grade();
    base.project = job.project();
    base.user = job.user_name();
    base.now = now;
    if (job.scheduling().has_deadline()) {
      base.deadline = absl::FromUnixSeconds(job.scheduling().deadline().seconds()) +
                      absl::Nanoseconds(job.scheduling().deadline().nanos());
    }
    for (const auto& key : task.datasets()) {
      // The job's project's dataset of that name and version, else the federation's.
      auto it = job.project().empty() ? datasets.end() : datasets.find(job.project() + "/" + key);
      if (it == datasets.end()) it = datasets.find(key);
      if (it == datasets.end() || (it->second->project() != job.project() && !it->second->project().empty())) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".datasets: unknown dataset \"", key, "\" (name:version)"));
      }
      DatasetNeed need;
      need.key = it->first;
      need.size_mb = static_cast<double>(it->second->size_mb());
      need.is_private = it->second->is_private();
      for (const auto& loc : it->second->location()) {
        std::string topo = !loc.network_topology().empty() ? loc.network_topology() : topology_of[loc.ai_center_id()];
        need.locations.push_back(TopologyPath::Parse(topo));
      }
      base.datasets.push_back(std::move(need));
    }
    for (int r = 0; r < replicas; ++r) {
      PlacementRequest req = base;
      req.replica_index = r;
      out.push_back(std::move(req));
    }
  }
  return out;
}

}  // namespace jc::scheduler
