#pragma once

// jc-sim's outputs: CSV for tools, SVG charts drawn by gnuplot, and a small HTML page
// that puts the charts beside the numbers.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/sim/experiments.h"

namespace jc::sim {

// One row per run: policy, queue and every RunMetrics figure.
std::string RunsCsv(const std::vector<RunResult>& runs);
// One row per run and center: GPU utilisation and attempts started.
std::string CentersCsv(const std::vector<RunResult>& runs);
// One row per policy and load: every estimate's mean and 95% half-width.
std::string SweepCsv(const std::vector<SweepPoint>& points);
// A human-readable table of the runs, for the terminal.
std::string RunsTable(const std::vector<RunResult>& runs);

// Writes `dir`/compare-*.svg (bars per policy: mean and p95 JCT, mean wait, cost, energy,
// fairness) and returns the file names. FailedPrecondition when gnuplot is not installed
// (the CSV is still there), Internal when it fails.
absl::StatusOr<std::vector<std::string>> DrawCompareCharts(const std::string& dir, const std::vector<RunResult>& runs);
// Writes `dir`/sweep-*.svg (each figure against offered load, one line per policy with
// 95% intervals).
absl::StatusOr<std::vector<std::string>> DrawSweepCharts(const std::string& dir, const std::vector<SweepPoint>& points);

struct ReportSection {
  std::string title, text;
  std::vector<std::string> images;  // file names in the report's directory
  std::string table_html;
};
// `dir`/index.html.
absl::Status WriteHtmlReport(const std::string& dir, const std::string& title, const std::vector<ReportSection>& sections);
std::string RunsHtmlTable(const std::vector<RunResult>& runs);

absl::Status WriteFile(const std::string& path, const std::string& text);

}  // namespace jc::sim
