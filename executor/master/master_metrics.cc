#include "executor/master/master_metrics.h"

#include "absl/strings/str_cat.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

MasterMetrics::MasterMetrics(prometheus::Registry& r)
    : hosts_(prometheus::BuildGauge().Name("nexec_hosts").Help("Hosts by state").Register(r)),
      jobs_(prometheus::BuildGauge().Name("nexec_jobs").Help("Jobs by state and queue").Register(r)),
      host_load_(prometheus::BuildGauge().Name("nexec_host_load1").Help("1-minute load per host").Register(r)),
      host_slots_used_(prometheus::BuildGauge().Name("nexec_host_slots_used").Help("Slots in use per host").Register(r)),
      host_gpus_used_(prometheus::BuildGauge().Name("nexec_host_gpus_used").Help("GPUs in use per host").Register(r)),
      task_cpu_(prometheus::BuildGauge().Name("nexec_task_cpu_seconds").Help("CPU time of a running task").Register(r)),
      task_rss_(prometheus::BuildGauge().Name("nexec_task_memory_bytes").Help("Resident memory of a running task").Register(r)),
      task_swap_(prometheus::BuildGauge().Name("nexec_task_swap_bytes").Help("Swap of a running task").Register(r)),
      task_threads_(prometheus::BuildGauge().Name("nexec_task_threads").Help("Threads of a running task").Register(r)),
      task_read_(prometheus::BuildGauge().Name("nexec_task_read_bytes").Help("Bytes a running task read from storage").Register(r)),
      task_write_(prometheus::BuildGauge().Name("nexec_task_write_bytes").Help("Bytes a running task wrote to storage").Register(r)),
      task_gpus_(prometheus::BuildGauge().Name("nexec_task_gpus").Help("GPUs given to a running task").Register(r)),
      task_gpu_memory_(prometheus::BuildGauge()
                           .Name("nexec_task_gpu_memory_bytes")
                           .Help("GPU memory a running task's processes hold (nvidia-smi)")
                           .Register(r)),
      task_gpu_util_(prometheus::BuildGauge()
                         .Name("nexec_task_gpu_utilization")
                         .Help("Mean utilisation of the GPUs given to a running task, percent")
                         .Register(r)),
      limit_used_(prometheus::BuildGauge()
                      .Name("nexec_limit_used")
                      .Help("What a limit's bucket holds: slots, jobs or a resource (B7)")
                      .Register(r)),
      limit_value_(prometheus::BuildGauge()
                       .Name("nexec_limit_value")
                       .Help("A limit's value in force now (absent outside its time windows)")
                       .Register(r)),
      share_fraction_(prometheus::BuildGauge()
                          .Name("nexec_fairshare_share")
                          .Help("A fair-share tree node's fraction of its queue's shares (B5)")
                          .Register(r)),
      share_usage_(prometheus::BuildGauge()
                       .Name("nexec_fairshare_usage_slot_hours")
                       .Help("A fair-share tree node's decayed usage, in slot-hours")
                       .Register(r)),
      share_running_(prometheus::BuildGauge()
                         .Name("nexec_fairshare_running_slots")
                         .Help("Slots a fair-share tree node's jobs run now")
                         .Register(r)),
      share_priority_(prometheus::BuildGauge()
                          .Name("nexec_fairshare_priority")
                          .Help("A fair-share tree node's dynamic priority: shares / (1 + usage + running)")
                          .Register(r)),
      capacity_guarantee_(prometheus::BuildGauge()
                              .Name("nexec_capacity_guarantee")
                              .Help("A virtual cluster's guaranteed capacity in its queue's resource (B5)")
                              .Register(r)),
      capacity_max_(prometheus::BuildGauge()
                        .Name("nexec_capacity_max")
                        .Help("The most a virtual cluster may hold, guarantee plus bonus (absent: no cap)")
                        .Register(r)),
      capacity_held_(prometheus::BuildGauge()
                         .Name("nexec_capacity_held")
                         .Help("What a virtual cluster's running jobs hold of its queue's resource")
                         .Register(r)),
      cycle_seconds_(prometheus::BuildHistogram()
                         .Name("nexec_scheduling_cycle_seconds")
                         .Help("Duration of a scheduling cycle")
                         .Register(r)
                         .Add({}, prometheus::Histogram::BucketBoundaries{
                                      0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1})),
      decisions_(prometheus::BuildCounter()
                     .Name("nexec_scheduling_decisions_total")
                     .Help("Jobs placed by the scheduler")
                     .Register(r)
                     .Add({})),
      preemptions_(prometheus::BuildCounter()
                       .Name("nexec_preemptions_total")
                       .Help("Running jobs preempted, by their queue and what was done (suspend or requeue)")
                       .Register(r)),
      backfilled_(prometheus::BuildCounter()
                      .Name("nexec_backfilled_jobs_total")
                      .Help("Jobs started on slots reserved for a bigger job, ending before it starts")
                      .Register(r)),
      resizes_(prometheus::BuildCounter()
                   .Name("nexec_elastic_resizes_total")
                   .Help("Allocations elastic jobs grew by (direction grow) or gave back to a waiting job (shrink)")
                   .Register(r)) {}

void MasterMetrics::CountBackfill(const std::string& queue) { backfilled_.Add({{"queue", queue}}).Increment(); }

void MasterMetrics::CountResize(const std::string& queue, bool grow) {
  resizes_.Add({{"queue", queue}, {"direction", grow ? "grow" : "shrink"}}).Increment();
}

void MasterMetrics::CountPreemption(const std::string& queue, bool requeue) {
  preemptions_.Add({{"queue", queue}, {"action", requeue ? "requeue" : "suspend"}}).Increment();
}

void MasterMetrics::UpdateLimits(const std::vector<pb::Limit>& limits) {
  std::set<std::map<std::string, std::string>> used, values;
  auto set = [](prometheus::Family<prometheus::Gauge>& family, std::set<std::map<std::string, std::string>>& seen,
                std::map<std::string, std::string> labels, double v) {
    family.Add(labels).Set(v);
    seen.insert(std::move(labels));
  };
  for (const auto& l : limits) {
    if (l.has_slots_now()) set(limit_value_, values, {{"limit", l.name()}, {"resource", "slots"}}, l.slots_now());
    if (l.has_jobs_now()) set(limit_value_, values, {{"limit", l.name()}, {"resource", "jobs"}}, l.jobs_now());
    for (const auto& [name, v] : l.resources_now()) set(limit_value_, values, {{"limit", l.name()}, {"resource", name}}, v);
    for (const auto& b : l.buckets()) {
      std::string bucket;
      for (const auto& k : b.key()) absl::StrAppend(&bucket, bucket.empty() ? "" : "/", k);
      if (!l.slots().empty()) set(limit_used_, used, {{"limit", l.name()}, {"bucket", bucket}, {"resource", "slots"}}, b.slots());
      if (!l.jobs().empty()) set(limit_used_, used, {{"limit", l.name()}, {"bucket", bucket}, {"resource", "jobs"}}, b.jobs());
      for (const auto& [name, v] : b.resources()) {
        set(limit_used_, used, {{"limit", l.name()}, {"bucket", bucket}, {"resource", name}}, v);
      }
    }
  }
  // Series of buckets that emptied, limits removed, or values out of their windows go.
  for (const auto& labels : limit_used_labels_) {
    if (!used.count(labels)) limit_used_.Remove(&limit_used_.Add(labels));
  }
  for (const auto& labels : limit_value_labels_) {
    if (!values.count(labels)) limit_value_.Remove(&limit_value_.Add(labels));
  }
  limit_used_labels_ = std::move(used);
  limit_value_labels_ = std::move(values);
}

void MasterMetrics::UpdateShares(const std::vector<pb::ShareNode>& nodes) {
  std::set<std::map<std::string, std::string>> seen;
  for (const auto& n : nodes) {
    std::map<std::string, std::string> labels{{"queue", n.queue()}, {"node", n.path()}};
    share_fraction_.Add(labels).Set(n.share_fraction());
    share_usage_.Add(labels).Set(n.usage_slot_hours());
    share_running_.Add(labels).Set(n.running_slots());
    share_priority_.Add(labels).Set(n.priority());
    seen.insert(std::move(labels));
  }
  for (const auto& labels : share_labels_) {
    if (seen.count(labels)) continue;
    for (auto* family : {&share_fraction_, &share_usage_, &share_running_, &share_priority_}) {
      family->Remove(&family->Add(labels));
    }
  }
  share_labels_ = std::move(seen);
}

void MasterMetrics::UpdateCapacity(const std::vector<pb::Queue>& queues) {
  std::set<std::map<std::string, std::string>> seen;
  for (const auto& q : queues) {
    for (const auto& vc : q.clusters()) {
      std::map<std::string, std::string> labels{{"queue", q.name()}, {"cluster", vc.name()}, {"resource", vc.resource()}};
      capacity_guarantee_.Add(labels).Set(vc.guarantee());
      if (vc.max() > 0) {
        capacity_max_.Add(labels).Set(vc.max());
      } else {
        capacity_max_.Remove(&capacity_max_.Add(labels));
      }
      capacity_held_.Add(labels).Set(vc.held());
      seen.insert(std::move(labels));
    }
  }
  for (const auto& labels : capacity_labels_) {
    if (seen.count(labels)) continue;
    for (auto* family : {&capacity_guarantee_, &capacity_max_, &capacity_held_}) family->Remove(&family->Add(labels));
  }
  capacity_labels_ = std::move(seen);
}

void MasterMetrics::ObserveCycle(double seconds, int decisions) {
  cycle_seconds_.Observe(seconds);
  decisions_.Increment(decisions);
}

void MasterMetrics::Update(const std::vector<pb::Host>& hosts, const std::vector<pb::Job>& active,
                           const std::map<std::pair<std::string, std::string>, int>& by_state) {
  int ok = 0, unavailable = 0;
  for (const auto& h : hosts) {
    (h.state() == "ok" ? ok : unavailable)++;
    host_load_.Add({{"host", h.name()}}).Set(h.load_1m());
    host_slots_used_.Add({{"host", h.name()}}).Set(h.used_slots());
    host_gpus_used_.Add({{"host", h.name()}}).Set(h.used_gpus_size());
  }
  hosts_.Add({{"state", "ok"}}).Set(ok);
  hosts_.Add({{"state", "unavailable"}}).Set(unavailable);

  std::set<std::map<std::string, std::string>> seen_jobs;
  for (const auto& [key, n] : by_state) {
    std::map<std::string, std::string> labels{{"state", key.first}, {"queue", key.second}};
    jobs_.Add(labels).Set(n);
    seen_jobs.insert(labels);
  }
  for (const auto& labels : job_labels_) {
    if (!seen_jobs.count(labels)) jobs_.Add(labels).Set(0);
  }
  job_labels_.insert(seen_jobs.begin(), seen_jobs.end());

  // Per-task gauges exist while the task runs; finished tasks' series are removed.
  std::set<std::map<std::string, std::string>> seen;
  for (const auto& j : active) {
    for (const auto& t : j.tasks()) {
      // Task 0 (the job's command) and the tasks nexec-run started that still run.
      if (t.index() != 0 && (!t.remote() || t.state() == ::nexec::v1::TASK_EXITED)) continue;
      std::map<std::string, std::string> labels{{"job", absl::StrCat(j.id())},
                                                {"host", t.host()},
                                                {"queue", j.spec().queue()},
                                                {"task", absl::StrCat(t.index())}};
      seen.insert(labels);
      task_cpu_.Add(labels).Set(t.usage().cpu_seconds());
      task_rss_.Add(labels).Set(static_cast<double>(t.usage().rss_kb()) * 1024);
      task_swap_.Add(labels).Set(static_cast<double>(t.usage().swap_kb()) * 1024);
      task_threads_.Add(labels).Set(t.usage().threads());
      task_read_.Add(labels).Set(static_cast<double>(t.usage().read_bytes()));
      task_write_.Add(labels).Set(static_cast<double>(t.usage().write_bytes()));
      task_gpus_.Add(labels).Set(t.gpus_size());
      task_gpu_memory_.Add(labels).Set(t.usage().gpu_memory_mb() * 1024 * 1024);
      task_gpu_util_.Add(labels).Set(t.usage().gpu_utilization());
    }
  }
  for (const auto& labels : task_labels_) {
    if (seen.count(labels)) continue;
    for (auto* family : {&task_cpu_, &task_rss_, &task_swap_, &task_threads_, &task_read_,
                         &task_write_, &task_gpus_, &task_gpu_memory_, &task_gpu_util_}) {
      family->Remove(&family->Add(labels));
    }
  }
  task_labels_ = std::move(seen);
}

}  // namespace jc::nexec
