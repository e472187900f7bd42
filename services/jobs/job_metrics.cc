#include "services/jobs/job_metrics.h"

namespace jc::jobs {

std::unique_ptr<JobMetrics> RegisterJobMetrics(prometheus::Registry& registry) {
  auto m = std::make_unique<JobMetrics>();
  m->scheduling_time = &prometheus::BuildHistogram()
                            .Name("jc_scheduling_time_seconds")
                            .Help("Scheduling time T = t_s - t_r per job (formula 3): request received to every "
                                  "sub-task handed to a center")
                            .Register(registry)
                            // Finer between 5 and 150 ms, where T's p99 lies and its 10 ms target
                            // sits: a p99 read from 50-100 ms buckets was a guess within a factor of 2.
                            .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015,
                                                                             0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
                                                                             0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  m->dispatch_batch = &prometheus::BuildHistogram()
                           .Name("jc_dispatch_batch_replicas")
                           .Help("Replicas per submit call to an adapter (dispatches that queued while the "
                                 "center's senders were busy go together)")
                           .Register(registry)
                           .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256});
  m->handover_stage = &prometheus::BuildHistogram()
                           .Name("jc_handover_stage_seconds")
                           .Help("Where the scheduling time goes between placement and hand-over, by stage: a "
                                 "burst's commit (write), a replica's wait for a sender (outbox), a submit call to "
                                 "an adapter (adapter_call), the answer's wait for the job manager's loop (loop)")
                           .Register(registry);
  const prometheus::Histogram::BucketBoundaries stage_buckets{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025,
                                                              0.05,   0.1,   0.25,  0.5,   1,    5};
  m->handover_write = &m->handover_stage->Add({{"stage", "write"}}, stage_buckets);
  m->handover_outbox = &m->handover_stage->Add({{"stage", "outbox"}}, stage_buckets);
  m->handover_adapter_call = &m->handover_stage->Add({{"stage", "adapter_call"}}, stage_buckets);
  m->handover_loop = &m->handover_stage->Add({{"stage", "loop"}}, stage_buckets);
  auto& scheduled = prometheus::BuildCounter()
                        .Name("jc_jobs_scheduled_total")
                        .Help("Jobs whose every sub-task was handed to a center (throughput N of formula 4)")
                        .Register(registry);
  m->scheduled = &scheduled.Add({});
  auto& failures = prometheus::BuildCounter()
                       .Name("jc_dispatch_failures_total")
                       .Help("Replica submits to adapters that failed: transient (retried) or refused")
                       .Register(registry);
  m->dispatch_transient = &failures.Add({{"kind", "transient"}});
  m->dispatch_refused = &failures.Add({{"kind", "refused"}});
  m->queue_length = &prometheus::BuildGauge()
                         .Name("jc_job_queue_length")
                         .Help("Jobs with replicas waiting to be placed")
                         .Register(registry)
                         .Add({});
  m->jobs = &prometheus::BuildGauge().Name("jc_jobs").Help("Jobs not ended, by status").Register(registry);
  m->project_quota = &prometheus::BuildGauge()
                          .Name("jc_project_quota")
                          .Help("Project quotas the job manager enforces, by project and limit")
                          .Register(registry);
  m->ended = &prometheus::BuildCounter().Name("jc_jobs_ended_total").Help("Jobs ended, by status").Register(registry);
  m->step_downs = &prometheus::BuildCounter()
                       .Name("jc_jobs_step_downs_total")
                       .Help("Times this job manager stopped leading: a write failed, or the lease was lost; it "
                             "leads again from the store")
                       .Register(registry)
                       .Add({});
  m->watch_resyncs = &prometheus::BuildCounter()
                          .Name("jc_job_watch_resyncs_total")
                          .Help("Adapter event streams that could not resume from the job manager's cursor: every "
                                "replica there was read again")
                          .Register(registry)
                          .Add({});
  m->events_ignored = &prometheus::BuildCounter()
                           .Name("jc_job_events_ignored_total")
                           .Help("Adapter events that changed no job, by reason (job_not_active, other_origin)")
                           .Register(registry);
  m->withdrawals = &prometheus::BuildCounter()
                        .Name("jc_replica_withdrawals_total")
                        .Help("Replicas the job manager asked a center to take back to move them, by center and "
                              "result (withdrawn: moved; started: it ran on there; refused: the center cannot; error)")
                        .Register(registry);
  m->moves = &prometheus::BuildCounter()
                  .Name("jc_replica_moves_total")
                  .Help("Replicas moved: withdrawn from the center where they waited and placed again at another, "
                        "by the center they left and the one they went to")
                  .Register(registry);
  m->usage_records = &prometheus::BuildCounter()
                          .Name("jc_usage_records_total")
                          .Help("Usage records written (replica attempts that ran and ended), by project and center")
                          .Register(registry);
  m->usage_gpu_seconds = &prometheus::BuildCounter()
                              .Name("jc_usage_gpu_seconds_total")
                              .Help("GPU seconds of the usage records written, by project and center")
                              .Register(registry);
  m->usage_cost = &prometheus::BuildCounter()
                       .Name("jc_usage_cost_total")
                       .Help("Cost of the usage records written (the catalog's price unit), by project and center")
                       .Register(registry);
  m->budget = &prometheus::BuildGauge()
                   .Name("jc_project_budget")
                   .Help("Monthly budgets the job manager enforces, by project")
                   .Register(registry);
  m->budget_used_ratio = &prometheus::BuildGauge()
                              .Name("jc_project_budget_used_ratio")
                              .Help("What a project spent this month (ended attempts and running ones so far) over "
                                    "its monthly budget")
                              .Register(registry);
  m->budget_alerts = &prometheus::BuildCounter()
                          .Name("jc_project_budget_alerts_total")
                          .Help("Times a project crossed 80% or 100% of its monthly budget, by project and threshold")
                          .Register(registry);
  return m;
}

}  // namespace jc::jobs
