#pragma once

// The executor's Prometheus metrics (SPEC B8): hosts by state, jobs by state and queue,
// per-host load, slots and GPUs in use, per-task usage, and scheduling cycles.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

class MasterMetrics {
 public:
  explicit MasterMetrics(prometheus::Registry& registry);

  void ObserveCycle(double seconds, int decisions);
  // A job of `queue` preempted (B5): suspended, or requeued (it held GPUs).
  void CountPreemption(const std::string& queue, bool requeue);
  // A job of `queue` started on slots held for another's reservation (B5).
  void CountBackfill(const std::string& queue);
  // An elastic job of `queue` grew by an allocation or gave one back (B4).
  void CountResize(const std::string& queue, bool grow);
  // Replaces the gauges with the current hosts and jobs (unfinished and recent).
  void Update(const std::vector<::nexec::v1::Host>& hosts,
              const std::vector<::nexec::v1::Job>& active_jobs,
              const std::map<std::pair<std::string, std::string>, int>& jobs_by_state_queue);
  // Limits (B7): nexec_limit_used{limit,bucket,resource} per bucket and
  // nexec_limit_value{limit,resource} while a value is in force (slots, jobs, resources).
  void UpdateLimits(const std::vector<::nexec::v1::Limit>& limits);
  // Fair share (B5): per queue and tree node, nexec_fairshare_{share,usage_slot_hours,
  // running_slots,priority}.
  void UpdateShares(const std::vector<::nexec::v1::ShareNode>& nodes);
  // Capacity queues (B5): per queue and virtual cluster, nexec_capacity_{guarantee,max,held}
  // in the queue's resource (label resource).
  void UpdateCapacity(const std::vector<::nexec::v1::Queue>& queues);

 private:
  prometheus::Family<prometheus::Gauge>& hosts_;
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& host_load_;
  prometheus::Family<prometheus::Gauge>& host_slots_used_;
  prometheus::Family<prometheus::Gauge>& host_gpus_used_;
  prometheus::Family<prometheus::Gauge>& task_cpu_;
  prometheus::Family<prometheus::Gauge>& task_rss_;
  prometheus::Family<prometheus::Gauge>& task_swap_;
  prometheus::Family<prometheus::Gauge>& task_threads_;
  prometheus::Family<prometheus::Gauge>& task_read_;
  prometheus::Family<prometheus::Gauge>& task_write_;
  prometheus::Family<prometheus::Gauge>& task_gpus_;
  prometheus::Family<prometheus::Gauge>& task_gpu_memory_;
  prometheus::Family<prometheus::Gauge>& task_gpu_util_;
  prometheus::Family<prometheus::Gauge>& limit_used_;
  prometheus::Family<prometheus::Gauge>& limit_value_;
  std::set<std::map<std::string, std::string>> limit_used_labels_, limit_value_labels_;
  prometheus::Family<prometheus::Gauge>& share_fraction_;
  prometheus::Family<prometheus::Gauge>& share_usage_;
  prometheus::Family<prometheus::Gauge>& share_running_;
  prometheus::Family<prometheus::Gauge>& share_priority_;
  std::set<std::map<std::string, std::string>> share_labels_;
  prometheus::Family<prometheus::Gauge>& capacity_guarantee_;
  prometheus::Family<prometheus::Gauge>& capacity_max_;
  prometheus::Family<prometheus::Gauge>& capacity_held_;
  std::set<std::map<std::string, std::string>> capacity_labels_;
  prometheus::Histogram& cycle_seconds_;
  prometheus::Counter& decisions_;
  prometheus::Family<prometheus::Counter>& preemptions_;
  prometheus::Family<prometheus::Counter>& backfilled_;
  prometheus::Family<prometheus::Counter>& resizes_;
  std::set<std::map<std::string, std::string>> task_labels_;  // to remove finished tasks
  std::set<std::map<std::string, std::string>> job_labels_;
};

}  // namespace jc::nexec
