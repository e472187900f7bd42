#include "tools/sim/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace jc::sim {
namespace {

const char* const kColumns[] = {"submit_s", "duration_s", "gpus",    "cpus",       "memory_mb",  "gpu_model",
                                "user",     "project",    "dataset", "dataset_mb", "deadline_s", "name"};
constexpr int kRequired = 6;

// A number, or an error naming the column; `empty_ok` reads "" as `fallback`.
absl::Status Number(const std::string& text, const char* column, bool empty_ok, double fallback, double* out) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t.empty() && empty_ok) {
    *out = fallback;
    return absl::OkStatus();
  }
  if (!absl::SimpleAtod(t, out) || !std::isfinite(*out)) {
    return absl::InvalidArgumentError(absl::StrCat(column, " is not a number: \"", t, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<TraceJob> ParseRow(const std::vector<std::string>& cells, const std::vector<int>& at) {
  auto cell = [&](int column) -> std::string {
    int i = at[column];
    return i >= 0 && i < static_cast<int>(cells.size()) ? std::string(absl::StripAsciiWhitespace(cells[i])) : "";
  };
  TraceJob j;
  absl::Status s;
  if (!(s = Number(cell(0), "submit_s", false, 0, &j.submit)).ok()) return s;
  if (!(s = Number(cell(1), "duration_s", false, 0, &j.duration)).ok()) return s;
  if (!(s = Number(cell(2), "gpus", false, 0, &j.gpus)).ok()) return s;
  if (!(s = Number(cell(3), "cpus", false, 0, &j.cpus)).ok()) return s;
  if (!(s = Number(cell(4), "memory_mb", false, 0, &j.memory_mb)).ok()) return s;
  j.gpu_model = cell(5);
  j.user = cell(6);
  j.project = cell(7);
  j.dataset = cell(8);
  if (!(s = Number(cell(9), "dataset_mb", true, 0, &j.dataset_mb)).ok()) return s;
  if (!(s = Number(cell(10), "deadline_s", true, -1, &j.deadline)).ok()) return s;
  j.name = cell(11);
  if (j.submit < 0) return absl::InvalidArgumentError("submit_s is negative");
  if (!(j.duration > 0)) return absl::InvalidArgumentError("duration_s must be positive");
  if (j.gpus < 0 || j.cpus < 0 || j.memory_mb < 0) return absl::InvalidArgumentError("gpus, cpus and memory_mb must not be negative");
  if (j.gpus == 0 && j.cpus == 0) return absl::InvalidArgumentError("the job asks for no gpus and no cpus");
  if (j.dataset_mb < 0) return absl::InvalidArgumentError("dataset_mb is negative");
  if (!j.dataset.empty() && j.dataset.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("dataset \"", j.dataset, "\" is not \"name:version\""));
  }
  if (j.gpus == 0 && !j.gpu_model.empty()) return absl::InvalidArgumentError("gpu_model given for a job with no gpus");
  return j;
}

std::string Num(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrCat(v);
}

std::string Quoted(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else if (c != '\r') {
      cells.back() += c;
    }
  }
  return cells;
}

absl::StatusOr<Trace> ParseTrace(const std::string& csv, bool strict) {
  std::istringstream in(csv);
  std::string line;
  int line_no = 0;
  std::vector<int> at(std::size(kColumns), -1);
  bool header = false;
  Trace trace;
  while (std::getline(in, line)) {
    ++line_no;
    if (absl::StripAsciiWhitespace(line).empty() || line[0] == '#') continue;
    std::vector<std::string> cells = SplitCsvLine(line);
    if (!header) {
      header = true;
      for (size_t i = 0; i < cells.size(); ++i) {
        std::string name(absl::StripAsciiWhitespace(cells[i]));
        for (size_t k = 0; k < std::size(kColumns); ++k) {
          if (name == kColumns[k]) at[k] = static_cast<int>(i);
        }
      }
      for (int k = 0; k < kRequired; ++k) {
        if (at[k] < 0) {
          return absl::InvalidArgumentError(absl::StrCat("trace: line ", line_no, ": the header has no \"", kColumns[k],
                                                         "\" column (required: ",
                                                         absl::StrJoin(kColumns, kColumns + kRequired, ","), ")"));
        }
      }
      continue;
    }
    absl::StatusOr<TraceJob> job = ParseRow(cells, at);
    if (!job.ok()) {
      if (strict) {
        return absl::InvalidArgumentError(absl::StrCat("trace: line ", line_no, ": ", job.status().message()));
      }
      trace.skipped.push_back({line_no, std::string(job.status().message())});
      continue;
    }
    trace.jobs.push_back(std::move(*job));
  }
  if (!header) return absl::InvalidArgumentError("trace: empty (no header line)");
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit < b.submit; });
  return trace;
}

absl::StatusOr<Trace> LoadTrace(const std::string& path, bool strict) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("trace: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseTrace(text.str(), strict);
}

std::string TraceCsv(const std::vector<TraceJob>& jobs) {
  std::string out = absl::StrJoin(kColumns, ",") + "\n";
  for (const auto& j : jobs) {
    absl::StrAppend(&out, Num(j.submit), ",", Num(j.duration), ",", Num(j.gpus), ",", Num(j.cpus), ",",
                    Num(j.memory_mb), ",", Quoted(j.gpu_model), ",", Quoted(j.user), ",", Quoted(j.project), ",",
                    Quoted(j.dataset), ",", j.dataset.empty() ? "" : Num(j.dataset_mb), ",",
                    j.deadline < 0 ? "" : Num(j.deadline), ",", Quoted(j.name), "\n");
  }
  return out;
}

}  // namespace jc::sim
