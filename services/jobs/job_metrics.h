#pragma once

// The job manager's Prometheus metrics (docs/operations.md lists them). Registered once;
// the event loop updates them, the gauges at most once a second.

#include <memory>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace jc::jobs {

struct JobMetrics {
  prometheus::Histogram* scheduling_time;
  prometheus::Counter* scheduled;
  prometheus::Counter* dispatch_transient;
  prometheus::Counter* dispatch_refused;
  prometheus::Histogram* dispatch_batch;
  // Where T goes between placement and hand-over, by stage: {stage="write"} a burst's
  // commit (the placements in it are dispatched only after it), "outbox" how long a replica
  // waited for one of its center's senders, "adapter_call" a SubmitReplicas round trip
  // (the adapter's own commit included), "loop" how long the adapter's answer waited for
  // the job manager's loop.
  prometheus::Family<prometheus::Histogram>* handover_stage;
  prometheus::Histogram* handover_write;
  prometheus::Histogram* handover_outbox;
  prometheus::Histogram* handover_adapter_call;
  prometheus::Histogram* handover_loop;
  prometheus::Gauge* queue_length;
  prometheus::Family<prometheus::Gauge>* jobs;
  prometheus::Family<prometheus::Counter>* ended;
  prometheus::Counter* step_downs;
  prometheus::Counter* watch_resyncs;
  prometheus::Family<prometheus::Counter>* events_ignored;
  // Moves (SPEC A16) by the center a replica left and how the withdrawal went: {center,
  // result="withdrawn"|"started"|"refused"|"error"}.
  prometheus::Family<prometheus::Counter>* withdrawals;
  // Moves done (a withdrawn replica placed again, its MOVED event committed), by the center
  // it left and the one it went to: {from, to}.
  prometheus::Family<prometheus::Counter>* moves;
  prometheus::Family<prometheus::Gauge>* project_quota;  // {project, limit}: the quotas in force
  // Metering (issue 31), from the usage records as they commit: {project, center}.
  prometheus::Family<prometheus::Counter>* usage_records;
  prometheus::Family<prometheus::Counter>* usage_gpu_seconds;
  prometheus::Family<prometheus::Counter>* usage_cost;
  // Budgets: {project}; alerts {project, threshold}.
  prometheus::Family<prometheus::Gauge>* budget;
  prometheus::Family<prometheus::Gauge>* budget_used_ratio;
  prometheus::Family<prometheus::Counter>* budget_alerts;
};

std::unique_ptr<JobMetrics> RegisterJobMetrics(prometheus::Registry& registry);

}  // namespace jc::jobs
