// What `nexec queues`, `nexec shares` and `nexec limits` show of the master (read under
// its lock, nothing changed): each queue with its jobs, slots and virtual clusters, the
// share trees of fair-share queues, and every limit with what each bucket holds.

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/timestamp.h"
#include "executor/master/master.h"

namespace jc::nexec {

void Master::AddClusters(const QueueConfig& q, pb::Queue* out) {
  for (const auto& r : scheduler_.CapacityReport(q.name)) {
    pb::VirtualCluster* vc = out->add_clusters();
    vc->set_name(r.config.name);
    vc->set_resource(CapacityResourceName(q.capacity->resource));
    vc->set_guarantee(r.config.guarantee);
    vc->set_max(r.config.max);
    vc->set_held(r.held);
    vc->set_pending_jobs(r.pending_jobs);
    vc->set_running_jobs(r.running_jobs);
    if (q.capacity->user_limit_factor > 0) vc->set_user_limit(q.capacity->user_limit_factor * r.config.guarantee);
  }
}

std::vector<pb::Queue> Master::ListQueues() {
  return OnLoop([&] {
  std::vector<pb::Queue> out;
  for (const auto& q : config_.queues) {
    pb::Queue o;
    o.set_name(q.name);
    o.set_priority(q.priority);
    o.set_max_slots(q.max_slots);
    o.set_max_slots_per_user(q.max_slots_per_user);
    o.set_balance(q.balance == Balance::kPack ? "pack" : "spread");
    o.set_run_window(q.run_window.text());
    o.set_open(scheduler_.QueueOpen(q.name));
    absl::Time change = q.run_window.NextChange(clock_->Now(), options_.time_zone);
    if (change != absl::InfiniteFuture()) *o.mutable_window_changes_at() = ToTimestamp(change);
    AddClusters(q, &o);
    for (const auto& [id, rec] : jobs_) {
      if (rec.request.queue != q.name) continue;
      if (rec.job.state() == pb::PENDING) o.set_pending_jobs(o.pending_jobs() + 1);
      if (rec.job.state() == pb::RUNNING || rec.job.state() == pb::SUSPENDED) {
        o.set_running_jobs(o.running_jobs() + 1);
        for (const auto& t : rec.job.tasks()) o.set_used_slots(o.used_slots() + t.slots());
      }
    }
    out.push_back(o);
  }
  return out;
  });
}

pb::EstimateStartResponse Master::EstimateStart(const pb::EstimateStartRequest& req) {
  return OnLoop([&] {
    pb::EstimateStartResponse out;
    const absl::Time now = clock_->Now();
    if (!config_.limits.empty()) scheduler_.SetLimitTime(now, options_.time_zone);
    scheduler_.SetNow(now);
    *out.mutable_now() = ToTimestamp(now);
    for (const pb::JobSpec& spec : req.probes()) {
      pb::StartEstimate* e = out.add_estimates();
      absl::StatusOr<JobRequest> probe = BuildRequest(spec, 0);
      if (!probe.ok()) {
        e->set_reason(std::string(probe.status().message()));
        continue;
      }
      StartEstimate est = scheduler_.EstimateStart(*std::move(probe));
      e->set_known(est.known());
      if (est.known()) *e->mutable_start() = ToTimestamp(est.start);
      e->set_reason(est.reason);
    }
    return out;
  });
}

std::vector<pb::ShareNode> Master::ListShares(const std::string& queue) {
  return OnLoop([&] {
  scheduler_.AdvanceFairshare(clock_->Now());
  std::vector<pb::ShareNode> out;
  for (const QueueConfig& q : config_.queues) {
    if (!q.fairshare || (!queue.empty() && q.name != queue)) continue;
    for (const auto& r : scheduler_.FairshareReport(q.name)) {
      pb::ShareNode n;
      n.set_queue(q.name);
      n.set_path(r.path);
      n.set_depth(r.depth);
      n.set_shares(r.shares);
      n.set_share_fraction(r.share_fraction);
      n.set_usage_slot_hours(r.usage);
      n.set_running_slots(r.running);
      n.set_priority(r.priority);
      out.push_back(std::move(n));
    }
  }
  return out;
  });
}

std::vector<pb::Limit> Master::ListLimits() {
  return OnLoop([&] {
  scheduler_.SetLimitTime(clock_->Now(), options_.time_zone);
  std::vector<pb::Limit> out;
  for (const auto& report : scheduler_.Limits()) {
    const LimitConfig& c = *report.config;
    pb::Limit l;
    l.set_name(c.name);
    std::vector<std::string> consumers;
    struct Dimension {
      const char* name;
      const ConsumerSet& set;
    };
    for (const auto& [name, set] : {Dimension{"queue", c.queues}, Dimension{"user", c.users}, Dimension{"host", c.hosts},
                                    Dimension{"project", c.projects}, Dimension{"app", c.apps}}) {
      if (!set.given) continue;
      consumers.push_back(absl::StrCat(set.per ? "per_" : "", name, set.per ? "" : "s", ": ", set.text));
      if (set.per) l.add_per(name);
    }
    l.set_consumers(absl::StrJoin(consumers, "; "));
    if (c.slots) l.set_slots(c.slots->text);
    if (c.jobs) l.set_jobs(c.jobs->text);
    std::vector<std::string> resources;
    for (const auto& [name, v] : c.resources) resources.push_back(v.text);
    l.set_resources(absl::StrJoin(resources, " "));
    if (report.values.slots) l.set_slots_now(*report.values.slots);
    if (report.values.jobs) l.set_jobs_now(*report.values.jobs);
    for (const auto& [name, v] : report.values.resources) (*l.mutable_resources_now())[name] = v;
    for (const auto& [key, usage] : report.buckets) {
      if (usage.slots == 0 && usage.jobs == 0) continue;  // emptied buckets
      pb::LimitBucket* b = l.add_buckets();
      for (const auto& k : key) b->add_key(k);
      b->set_slots(usage.slots);
      b->set_jobs(usage.jobs);
      for (const auto& [name, amount] : usage.resources) (*b->mutable_resources())[name] = amount;
    }
    out.push_back(std::move(l));
  }
  return out;
  });
}

}  // namespace jc::nexec
