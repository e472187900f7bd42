#pragma once

// jc-sim's trace format (docs/placement-quality.md, "Trace format"): CSV with a header,
// one job per row:
//
//   submit_s,duration_s,gpus,cpus,memory_mb,gpu_model,user,project,dataset,dataset_mb,deadline_s,name
//
// submit_s: seconds from the trace's start; duration_s: run time on the reference GPU
// (gpu_models' performance 1); gpus may be fractional (a shared GPU); gpu_model: empty
// for any, else a model or alternatives "V100|A100"; dataset "name:version" (empty: none)
// and its size in MB; deadline_s: seconds from the trace's start by which the job should
// end (empty: none); name: the job's name (a recurring job keeps it: what the duration
// estimator learns by; empty: none). Columns are found by name, so they may come in any order; the first
// six are required.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::sim {

struct TraceJob {
  double submit = 0, duration = 0;
  double gpus = 0, cpus = 0, memory_mb = 0;
  std::string gpu_model;  // "" or "A100" or "V100|A100"
  std::string user, project;
  std::string dataset;  // "name:version"
  double dataset_mb = 0;
  double deadline = -1;  // < 0: none
  std::string name;      // "" : none
};

struct TraceRowError {
  int line = 0;  // 1-based, counting the header
  std::string message;
};

struct Trace {
  std::vector<TraceJob> jobs;         // sorted by submit time
  std::vector<TraceRowError> skipped;  // malformed rows left out (lenient reading only)
};

// Reads the CSV text. Strict: the first malformed row is an InvalidArgument naming its
// line. Lenient: malformed rows are skipped and listed in Trace::skipped. A missing
// required column is an error either way.
absl::StatusOr<Trace> ParseTrace(const std::string& csv, bool strict);
absl::StatusOr<Trace> LoadTrace(const std::string& path, bool strict);

// The header line and one row per job, in the format ParseTrace reads.
std::string TraceCsv(const std::vector<TraceJob>& jobs);

// Splits one CSV line (RFC 4180 quoting: "a,b" and "" inside quotes).
std::vector<std::string> SplitCsvLine(const std::string& line);

}  // namespace jc::sim
