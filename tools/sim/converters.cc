#include "tools/sim/converters.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace jc::sim {
namespace {

// A CSV with a header: cells by column name.
class CsvTable {
 public:
  // `columns`: the names, for files without a header (its first row is then data);
  // `required`: names that must be present.
  static absl::StatusOr<CsvTable> Parse(const std::string& text, const std::vector<std::string>& columns,
                                        const std::string& what) {
    CsvTable t;
    std::istringstream in(text);
    std::string line;
    int line_no = 0;
    bool first = true;
    while (std::getline(in, line)) {
      ++line_no;
      if (absl::StripAsciiWhitespace(line).empty()) continue;
      std::vector<std::string> cells = SplitCsvLine(line);
      for (auto& c : cells) c = std::string(absl::StripAsciiWhitespace(c));
      if (first) {
        first = false;
        if (std::find(cells.begin(), cells.end(), columns.front()) != cells.end()) {
          for (size_t i = 0; i < cells.size(); ++i) t.at_[cells[i]] = static_cast<int>(i);
          for (const auto& c : columns) {
            if (!t.at_.count(c)) {
              return absl::InvalidArgumentError(absl::StrCat(what, ": line ", line_no, ": the header has no \"", c,
                                                             "\" column (expected: ", absl::StrJoin(columns, ","), ")"));
            }
          }
          continue;
        }
        for (size_t i = 0; i < columns.size(); ++i) t.at_[columns[i]] = static_cast<int>(i);
      }
      t.rows_.push_back({line_no, std::move(cells)});
    }
    if (t.at_.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty"));
    return t;
  }
  struct Row {
    int line;
    std::vector<std::string> cells;
  };
  const std::vector<Row>& rows() const { return rows_; }
  std::string Get(const Row& r, const std::string& column) const {
    auto it = at_.find(column);
    if (it == at_.end() || it->second >= static_cast<int>(r.cells.size())) return "";
    return r.cells[it->second];
  }

 private:
  std::map<std::string, int> at_;
  std::vector<Row> rows_;
};

// A number in `column`, or a reason.
bool ReadNumber(const CsvTable& t, const CsvTable::Row& r, const std::string& column, double* out, std::string* why) {
  std::string text = t.Get(r, column);
  if (text.empty()) {
    *why = absl::StrCat(column, " is empty");
    return false;
  }
  if (!absl::SimpleAtod(text, out) || !std::isfinite(*out)) {
    *why = absl::StrCat(column, " is not a number: \"", text, "\"");
    return false;
  }
  return true;
}

void Finish(Conversion& c) {
  std::stable_sort(c.jobs.begin(), c.jobs.end(), [](const TraceJob& a, const TraceJob& b) { return a.submit < b.submit; });
  if (c.jobs.empty()) return;
  double origin = c.jobs.front().submit;
  for (auto& j : c.jobs) {
    j.submit -= origin;
    if (j.deadline >= 0) j.deadline -= origin;
  }
}

// A converted job, unless it asks for nothing.
void Keep(Conversion& out, int line, TraceJob j) {
  if (j.gpus == 0 && j.cpus == 0) {
    out.skipped.push_back({line, "asks for no GPUs and no CPUs"});
    return;
  }
  out.jobs.push_back(std::move(j));
}

// Prices per GPU-hour for models the node list may name, else 1.
double DefaultPrice(const std::string& model) {
  static const std::map<std::string, double> prices = {{"T4", 0.45}, {"P100", 0.9}, {"V100", 1.2}, {"V100M16", 1.1},
                                                       {"V100M32", 1.3}, {"A10", 0.8}, {"A100", 2.6}, {"H100", 4.5}};
  auto it = prices.find(model);
  return it == prices.end() ? 1.0 : it->second;
}

}  // namespace

absl::StatusOr<Conversion> ConvertAlibaba2023Pods(const std::string& csv) {
  const std::vector<std::string> columns = {"name",     "cpu_milli", "memory_mib",    "num_gpu",      "gpu_milli", "gpu_spec",
                                            "qos",      "pod_phase", "creation_time", "deletion_time", "scheduled_time"};
  absl::StatusOr<CsvTable> table = CsvTable::Parse(csv, columns, "alibaba-2023 pods");
  if (!table.ok()) return table.status();
  Conversion out;
  for (const auto& row : table->rows()) {
    std::string why;
    double cpu_milli, memory_mib, num_gpu, gpu_milli = 0, created, deleted, scheduled;
    if (!ReadNumber(*table, row, "cpu_milli", &cpu_milli, &why) ||
        !ReadNumber(*table, row, "memory_mib", &memory_mib, &why) ||
        !ReadNumber(*table, row, "num_gpu", &num_gpu, &why) ||
        !ReadNumber(*table, row, "creation_time", &created, &why)) {
      out.skipped.push_back({row.line, why});
      continue;
    }
    if (!ReadNumber(*table, row, "scheduled_time", &scheduled, &why) ||
        !ReadNumber(*table, row, "deletion_time", &deleted, &why)) {
      out.skipped.push_back({row.line, absl::StrCat("never scheduled or never ended (", why, ")")});
      continue;
    }
    if (num_gpu > 0 && !ReadNumber(*table, row, "gpu_milli", &gpu_milli, &why)) {
      out.skipped.push_back({row.line, why});
      continue;
    }
    if (cpu_milli < 0 || memory_mib < 0 || num_gpu < 0 || gpu_milli < 0 || gpu_milli > 1000) {
      out.skipped.push_back({row.line, "negative resources or gpu_milli outside 0..1000"});
      continue;
    }
    if (!(deleted > scheduled) || scheduled < created) {
      out.skipped.push_back({row.line, "deletion_time is not after scheduled_time, or it was scheduled before it was created"});
      continue;
    }
    TraceJob j;
    j.submit = created;
    j.duration = deleted - scheduled;
    j.cpus = cpu_milli / 1000;
    j.memory_mb = std::round(memory_mib * 1.048576);
    j.gpus = num_gpu > 0 ? num_gpu * gpu_milli / 1000 : 0;
    if (j.gpus > 0) j.gpu_model = table->Get(row, "gpu_spec");
    j.project = table->Get(row, "qos");
    Keep(out, row.line, std::move(j));
  }
  Finish(out);
  return out;
}

absl::StatusOr<Federation> ConvertAlibaba2023Nodes(const std::string& csv) {
  absl::StatusOr<CsvTable> table = CsvTable::Parse(csv, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, "alibaba-2023 nodes");
  if (!table.ok()) return table.status();
  Federation f;
  f.gpu_models = BuiltinGpuModels();
  std::map<std::string, SimCenter> by_model;
  for (const auto& row : table->rows()) {
    std::string why;
    double cpu_milli, memory_mib, gpus;
    if (!ReadNumber(*table, row, "cpu_milli", &cpu_milli, &why) || !ReadNumber(*table, row, "memory_mib", &memory_mib, &why) ||
        !ReadNumber(*table, row, "gpu", &gpus, &why)) {
      return absl::InvalidArgumentError(absl::StrCat("alibaba-2023 nodes: line ", row.line, ": ", why));
    }
    if (cpu_milli < 0 || memory_mib < 0 || gpus < 0) {
      return absl::InvalidArgumentError(absl::StrCat("alibaba-2023 nodes: line ", row.line, ": negative capacity"));
    }
    std::string model = gpus > 0 ? table->Get(row, "model") : "";
    if (gpus > 0 && model.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("alibaba-2023 nodes: line ", row.line, ": a GPU node without a model"));
    }
    SimCenter& c = by_model[model];
    if (c.id.empty()) {
      c.id = model.empty() ? "ali-cpu" : absl::StrCat("ali-", absl::AsciiStrToLower(model));
      c.topology = absl::StrCat("cn/ali/", c.id);
      c.gpu_model = model;
      c.price_per_gpu_hour = model.empty() ? 0 : DefaultPrice(model);
      c.price_per_cpu_hour = 0.03;
    }
    c.gpus += gpus;
    c.cpus += cpu_milli / 1000;
    c.memory_mb += std::round(memory_mib * 1.048576);
    c.static_power_watts += 150 * std::max(1.0, gpus);
    if (!model.empty() && !f.gpu_models.count(model)) f.gpu_models[model] = GpuModel{};
  }
  for (auto& [model, c] : by_model) f.centers.push_back(std::move(c));
  if (absl::Status s = ValidateFederation(f); !s.ok()) return s;
  return f;
}

absl::StatusOr<Conversion> ConvertAlibaba2020(const std::string& job_table, const std::string& task_table) {
  absl::StatusOr<CsvTable> jobs =
      CsvTable::Parse(job_table, {"job_name", "inst_id", "user", "status", "start_time", "end_time"}, "pai_job_table");
  if (!jobs.ok()) return jobs.status();
  absl::StatusOr<CsvTable> tasks = CsvTable::Parse(
      task_table,
      {"job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu", "gpu_type"},
      "pai_task_table");
  if (!tasks.ok()) return tasks.status();
  struct JobInfo {
    std::string user;
    double submit = -1;
  };
  std::map<std::string, JobInfo> by_name;
  for (const auto& row : jobs->rows()) {
    JobInfo info;
    info.user = jobs->Get(row, "user");
    double t;
    std::string why;
    if (ReadNumber(*jobs, row, "start_time", &t, &why)) info.submit = t;
    by_name[jobs->Get(row, "job_name")] = info;
  }
  Conversion out;
  for (const auto& row : tasks->rows()) {
    std::string why;
    double inst, start, end, plan_cpu, plan_mem, plan_gpu = 0;
    if (!ReadNumber(*tasks, row, "inst_num", &inst, &why) || !ReadNumber(*tasks, row, "plan_cpu", &plan_cpu, &why) ||
        !ReadNumber(*tasks, row, "plan_mem", &plan_mem, &why)) {
      out.skipped.push_back({row.line, why});
      continue;
    }
    if (!ReadNumber(*tasks, row, "start_time", &start, &why) || !ReadNumber(*tasks, row, "end_time", &end, &why)) {
      out.skipped.push_back({row.line, absl::StrCat("never started or never ended (", why, ")")});
      continue;
    }
    std::string gpu_text = tasks->Get(row, "plan_gpu");
    if (!gpu_text.empty() && !ReadNumber(*tasks, row, "plan_gpu", &plan_gpu, &why)) {
      out.skipped.push_back({row.line, why});
      continue;
    }
    if (inst <= 0 || plan_cpu < 0 || plan_mem < 0 || plan_gpu < 0 || !(end > start)) {
      out.skipped.push_back({row.line, "inst_num not positive, a negative plan, or end_time not after start_time"});
      continue;
    }
    auto job = by_name.find(tasks->Get(row, "job_name"));
    if (job == by_name.end()) {
      out.skipped.push_back({row.line, absl::StrCat("job \"", tasks->Get(row, "job_name"), "\" is not in pai_job_table")});
      continue;
    }
    TraceJob j;
    j.submit = job->second.submit >= 0 && job->second.submit <= start ? job->second.submit : start;
    j.duration = end - start;
    j.cpus = inst * plan_cpu / 100;
    j.memory_mb = std::round(inst * plan_mem * 1024);
    j.gpus = inst * plan_gpu / 100;
    std::string type = tasks->Get(row, "gpu_type");
    if (j.gpus > 0 && type != "MISC") j.gpu_model = type;
    j.user = job->second.user;
    j.project = job->second.user;
    Keep(out, row.line, std::move(j));
  }
  Finish(out);
  return out;
}

absl::StatusOr<Conversion> ConvertPhilly(const std::string& text) {
  nlohmann::json log = nlohmann::json::parse(text, nullptr, false);
  if (log.is_discarded() || !log.is_array()) {
    return absl::InvalidArgumentError("philly: not a JSON array of jobs (cluster_job_log)");
  }
  auto time_of = [](const nlohmann::json& v, double* out) {
    if (!v.is_string()) return false;
    absl::Time t;
    std::string err;
    if (!absl::ParseTime("%Y-%m-%d %H:%M:%S", v.get<std::string>(), absl::UTCTimeZone(), &t, &err)) return false;
    *out = absl::ToDoubleSeconds(t - absl::UnixEpoch());
    return true;
  };
  Conversion out;
  for (size_t i = 0; i < log.size(); ++i) {
    const nlohmann::json& e = log[i];
    int entry = static_cast<int>(i) + 1;
    std::string id = e.is_object() && e.value("jobid", nlohmann::json()).is_string() ? e["jobid"].get<std::string>()
                                                                                       : absl::StrCat("#", entry);
    auto skip = [&](const std::string& why) { out.skipped.push_back({entry, absl::StrCat("job ", id, ": ", why)}); };
    if (!e.is_object()) {
      skip("not an object");
      continue;
    }
    double submitted;
    if (!time_of(e.value("submitted_time", nlohmann::json()), &submitted)) {
      skip("submitted_time is missing or not \"YYYY-MM-DD HH:MM:SS\"");
      continue;
    }
    const nlohmann::json attempts = e.value("attempts", nlohmann::json::array());
    double start = 0, end = 0, gpus = 0;
    bool complete = false;
    if (attempts.is_array()) {
      for (auto a = attempts.rbegin(); a != attempts.rend() && !complete; ++a) {
        if (!a->is_object() || !time_of(a->value("start_time", nlohmann::json()), &start) ||
            !time_of(a->value("end_time", nlohmann::json()), &end) || !(end > start)) {
          continue;
        }
        gpus = 0;
        for (const auto& host : a->value("detail", nlohmann::json::array())) {
          if (host.is_object() && host.value("gpus", nlohmann::json()).is_array()) gpus += host["gpus"].size();
        }
        complete = true;
      }
    }
    if (!complete) {
      skip("no attempt with a start and a later end");
      continue;
    }
    if (gpus == 0) {
      skip("its attempt used no GPUs");
      continue;
    }
    TraceJob j;
    j.submit = std::min(submitted, start);
    j.duration = end - start;
    j.gpus = gpus;
    j.user = e.value("user", nlohmann::json()).is_string() ? e["user"].get<std::string>() : "";
    j.project = e.value("vc", nlohmann::json()).is_string() ? e["vc"].get<std::string>() : "";
    out.jobs.push_back(std::move(j));
  }
  Finish(out);
  return out;
}

}  // namespace jc::sim
