#pragma once

// Converters from published GPU-cluster traces to jc-sim's trace format (and, for
// Alibaba's 2023 node list, to a federation). The project ships no third-party trace;
// each converter is tested on hand-written rows in the documented format. Rows that
// cannot be replayed (never scheduled, never ended, malformed) are skipped and listed
// with their line (or, for Philly's JSON, their job id).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/sim/federation.h"
#include "tools/sim/trace.h"

namespace jc::sim {

struct Conversion {
  std::vector<TraceJob> jobs;  // sorted by submit, times from the first submission
  std::vector<TraceRowError> skipped;
};

// Alibaba cluster-trace-gpu-v2023, the pod list (openb_pod_list_*.csv), with its header:
//   name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
//   deletion_time,scheduled_time
// Times in seconds. Submit = creation_time, duration = deletion_time - scheduled_time,
// GPUs = num_gpu x gpu_milli / 1000 (a shared GPU is a fraction), gpu_spec's alternatives
// ("V100M16|V100M32") become the model constraint, qos the project.
absl::StatusOr<Conversion> ConvertAlibaba2023Pods(const std::string& csv);

// The node list (openb_node_list_*.csv): sn,cpu_milli,memory_mib,gpu,model. One center
// per GPU model (nodes without GPUs form "ali-cpu"); models jc-sim does not know get
// performance 1 and 300 W, to be edited in the written file.
absl::StatusOr<Federation> ConvertAlibaba2023Nodes(const std::string& csv);

// Alibaba cluster-trace-gpu-v2020: pai_job_table (job_name,inst_id,user,status,start_time,
// end_time) and pai_task_table (job_name,task_name,inst_num,status,start_time,end_time,
// plan_cpu,plan_mem,plan_gpu,gpu_type), with or without a header. One job per task:
// instances x plan (plan_cpu and plan_gpu in percent, plan_mem in GB); gpu_type MISC means
// any model; the job's user is user and project.
absl::StatusOr<Conversion> ConvertAlibaba2020(const std::string& job_table, const std::string& task_table);

// Microsoft Philly's cluster_job_log (JSON): one job per entry with a complete attempt;
// GPUs counted over the last attempt's hosts, duration that attempt's, vc the project.
absl::StatusOr<Conversion> ConvertPhilly(const std::string& json);

}  // namespace jc::sim
