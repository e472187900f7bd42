#include "tools/sim/report.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace jc::sim {
namespace {

struct Figure {
  const char* file;  // without extension
  const char* label;
  double (*get)(const RunMetrics&);
};

const Figure kFigures[] = {
    {"mean_jct", "mean job completion time (s)", [](const RunMetrics& m) { return m.mean_jct; }},
    {"p95_jct", "p95 job completion time (s)", [](const RunMetrics& m) { return m.p95_jct; }},
    {"mean_wait", "mean wait (s)", [](const RunMetrics& m) { return m.mean_wait; }},
    {"cost", "cost (price x hours)", [](const RunMetrics& m) { return m.cost; }},
    {"energy", "energy (kWh, formula 1)", [](const RunMetrics& m) { return m.energy_kwh; }},
    {"fairness", "Jain's fairness across projects", [](const RunMetrics& m) { return m.jain_fairness; }},
};

std::string Html(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

bool HaveGnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

absl::Status Gnuplot(const std::string& dir, const std::string& script_name, const std::string& script) {
  std::string path = absl::StrCat(dir, "/", script_name);
  if (absl::Status s = WriteFile(path, script); !s.ok()) return s;
  std::string command = absl::StrCat("cd '", dir, "' && gnuplot '", script_name, "' 2>gnuplot.log");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed on ", path, " (see ", dir, "/gnuplot.log)"));
  }
  return absl::OkStatus();
}

const char* kSvg = "set terminal svg size 960,540 dynamic enhanced font 'sans,12' background rgb 'white'\n";

}  // namespace

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string RunsCsv(const std::vector<RunResult>& runs) {
  std::string out =
      "policy,queue,jobs,completed,never_ran,failed,mean_jct_s,median_jct_s,p95_jct_s,mean_wait_s,median_wait_s,"
      "p95_wait_s,makespan_s,cost,energy_kwh,deadline_jobs,deadline_misses,jain_fairness,mean_gpu_utilisation,"
      "data_moved_gb,decisions,wall_s,cpu_s,jain_users\n";
  for (const auto& r : runs) {
    const RunMetrics& m = r.metrics;
    absl::StrAppend(&out, m.policy, ",", m.queue, ",", m.jobs, ",", m.completed, ",", m.never_ran, ",", m.failed, ",",
                    absl::StrFormat("%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.2f,%.2f", m.mean_jct, m.median_jct, m.p95_jct,
                                    m.mean_wait, m.median_wait, m.p95_wait, m.makespan, m.cost, m.energy_kwh),
                    ",", m.deadline_jobs, ",", m.deadline_misses, ",",
                    absl::StrFormat("%.4f,%.4f,%.1f", m.jain_fairness, m.mean_gpu_utilisation, m.data_moved_gb), ",",
                    m.decisions, ",", absl::StrFormat("%.3f,%.3f,%.4f", m.wall_seconds, m.cpu_seconds, m.jain_users),
                    "\n");
  }
  return out;
}

std::string CentersCsv(const std::vector<RunResult>& runs) {
  std::string out = "policy,queue,center,gpu_utilisation,attempts\n";
  for (const auto& r : runs) {
    for (const auto& c : r.centers) {
      absl::StrAppend(&out, r.metrics.policy, ",", r.metrics.queue, ",", c.id, ",",
                      absl::StrFormat("%.4f", c.gpu_utilisation), ",", c.jobs, "\n");
    }
  }
  return out;
}

std::string SweepCsv(const std::vector<SweepPoint>& points) {
  std::string out = "policy,load,seeds";
  for (const char* f : {"mean_jct", "p95_jct", "mean_wait", "cost", "energy_kwh", "gpu_utilisation", "jain"}) {
    absl::StrAppend(&out, ",", f, ",", f, "_ci95");
  }
  out += ",never_ran\n";
  for (const auto& p : points) {
    absl::StrAppend(&out, p.policy, ",", p.load, ",", p.mean_jct.n);
    for (const Estimate* e : {&p.mean_jct, &p.p95_jct, &p.mean_wait, &p.cost, &p.energy_kwh, &p.utilisation, &p.jain}) {
      absl::StrAppend(&out, ",", absl::StrFormat("%.4g,%.4g", e->mean, e->ci95));
    }
    absl::StrAppend(&out, ",", p.never_ran, "\n");
  }
  return out;
}

std::string RunsTable(const std::vector<RunResult>& runs) {
  std::string out = absl::StrFormat("%-34s %-10s %10s %10s %10s %12s %10s %6s %6s %5s %6s %6s\n", "POLICY", "QUEUE",
                                    "MEAN_JCT", "P95_JCT", "MEAN_WAIT", "COST", "ENERGY", "JAIN", "UTIL", "MISS",
                                    "NEVER", "JAIN_U");
  for (const auto& r : runs) {
    const RunMetrics& m = r.metrics;
    absl::StrAppend(&out, absl::StrFormat("%-34s %-10s %10.0f %10.0f %10.0f %12.1f %10.1f %6.3f %6.3f %5d %6d %6.3f\n",
                                          m.policy, m.queue, m.mean_jct, m.p95_jct, m.mean_wait, m.cost, m.energy_kwh,
                                          m.jain_fairness, m.mean_gpu_utilisation, m.deadline_misses, m.never_ran,
                                          m.jain_users));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> DrawCompareCharts(const std::string& dir, const std::vector<RunResult>& runs) {
  if (!HaveGnuplot()) {
    return absl::FailedPreconditionError("gnuplot is not installed (apt-get install gnuplot-nox): no charts drawn");
  }
  std::vector<std::string> files;
  for (const Figure& f : kFigures) {
    std::string data;
    for (const auto& r : runs) {
      const std::string& p = r.metrics.policy;
      // The default profile stands out; the baselines are grey; the rest blue.
      int color = p == "profile:default" ? 0xcc3311
                  : (p == "first_fit" || p == "random" || p == "round_robin") ? 0x999999
                                                                               : 0x4477aa;
      std::string label = r.metrics.queue == "fcfs" ? p : absl::StrCat(p, "/", r.metrics.queue);
      absl::StrAppend(&data, "\"", label, "\" ", absl::StrFormat("%.6g", f.get(r.metrics)), " ", color, "\n");
    }
    std::string dat = absl::StrCat("compare-", f.file, ".dat");
    if (absl::Status s = WriteFile(absl::StrCat(dir, "/", dat), data); !s.ok()) return s;
    std::string svg = absl::StrCat("compare-", f.file, ".svg");
    std::string script = absl::StrCat(kSvg, "set output '", svg, "'\nset title \"", f.label,
                                      "\"\nset style fill solid 0.85 border -1\nset boxwidth 0.7\nset grid ytics\n"
                                      "set xtics rotate by -40 scale 0 font ',10' noenhanced\nset yrange [0:*]\n"
                                      "set key off\nset bmargin 10\nset rmargin 10\n"
                                      "plot '", dat, "' using 0:2:3:xtic(1) with boxes lc rgb variable\n");
    if (absl::Status s = Gnuplot(dir, absl::StrCat("compare-", f.file, ".gp"), script); !s.ok()) return s;
    files.push_back(svg);
  }
  return files;
}

absl::StatusOr<std::vector<std::string>> DrawSweepCharts(const std::string& dir, const std::vector<SweepPoint>& points) {
  if (!HaveGnuplot()) {
    return absl::FailedPreconditionError("gnuplot is not installed (apt-get install gnuplot-nox): no charts drawn");
  }
  std::vector<std::string> policies;
  for (const auto& p : points) {
    if (std::find(policies.begin(), policies.end(), p.policy) == policies.end()) policies.push_back(p.policy);
  }
  struct SweepFigure {
    const char* file;
    const char* label;
    const Estimate SweepPoint::*field;
  };
  const SweepFigure figures[] = {{"mean_jct", "mean job completion time (s)", &SweepPoint::mean_jct},
                                 {"p95_jct", "p95 job completion time (s)", &SweepPoint::p95_jct},
                                 {"mean_wait", "mean wait (s)", &SweepPoint::mean_wait},
                                 {"cost", "cost (price x hours)", &SweepPoint::cost},
                                 {"energy", "energy (kWh)", &SweepPoint::energy_kwh},
                                 {"utilisation", "mean GPU utilisation", &SweepPoint::utilisation}};
  std::vector<std::string> files;
  for (const auto& f : figures) {
    std::string data;
    for (const auto& name : policies) {
      for (const auto& p : points) {
        if (p.policy != name) continue;
        const Estimate& e = p.*(f.field);
        absl::StrAppend(&data, p.load * 100, " ", absl::StrFormat("%.6g %.6g", e.mean, e.ci95), "\n");
      }
      data += "\n\n";
    }
    std::string dat = absl::StrCat("sweep-", f.file, ".dat");
    if (absl::Status s = WriteFile(absl::StrCat(dir, "/", dat), data); !s.ok()) return s;
    std::string svg = absl::StrCat("sweep-", f.file, ".svg");
    std::string script = absl::StrCat(
        kSvg, "set output '", svg, "'\nset title \"", f.label, " against offered load (95% intervals over seeds)\"\n",
        "set xlabel 'offered load (% of GPU capacity)'\nset grid\nset key outside right noenhanced\n",
        "names = \"", absl::StrJoin(policies, " "), "\"\n",
        "plot for [i=0:", policies.size() - 1, "] '", dat,
        "' index i using 1:2:3 with yerrorlines lw 2 title word(names, i+1)\n");
    if (absl::Status s = Gnuplot(dir, absl::StrCat("sweep-", f.file, ".gp"), script); !s.ok()) return s;
    files.push_back(svg);
  }
  return files;
}

std::string RunsHtmlTable(const std::vector<RunResult>& runs) {
  std::string out =
      "<table><tr><th>policy</th><th>queue</th><th>mean JCT (s)</th><th>p95 JCT (s)</th><th>mean wait (s)</th>"
      "<th>cost</th><th>energy (kWh)</th><th>Jain</th><th>GPU util.</th><th>deadline misses</th><th>never ran</th></tr>\n";
  for (const auto& r : runs) {
    const RunMetrics& m = r.metrics;
    absl::StrAppend(&out, "<tr><td>", Html(m.policy), "</td><td>", m.queue, "</td>",
                    absl::StrFormat("<td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.1f</td><td>%.1f</td><td>%.3f</td>"
                                    "<td>%.3f</td><td>%d / %d</td><td>%d</td></tr>\n",
                                    m.mean_jct, m.p95_jct, m.mean_wait, m.cost, m.energy_kwh, m.jain_fairness,
                                    m.mean_gpu_utilisation, m.deadline_misses, m.deadline_jobs, m.never_ran));
  }
  return out + "</table>\n";
}

absl::Status WriteHtmlReport(const std::string& dir, const std::string& title,
                             const std::vector<ReportSection>& sections) {
  std::string html = absl::StrCat(
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>", Html(title),
      "</title>\n<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
      "img{max-width:100%;border:1px solid #ddd;margin:.5em 0}table{border-collapse:collapse;font-size:90%}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
      "</style></head><body>\n<h1>",
      Html(title), "</h1>\n");
  for (const auto& s : sections) {
    absl::StrAppend(&html, "<h2>", Html(s.title), "</h2>\n");
    if (!s.text.empty()) absl::StrAppend(&html, "<p>", Html(s.text), "</p>\n");
    absl::StrAppend(&html, s.table_html);
    for (const auto& img : s.images) absl::StrAppend(&html, "<div><img src=\"", Html(img), "\" alt=\"", Html(img), "\"></div>\n");
  }
  html += "</body></html>\n";
  return WriteFile(absl::StrCat(dir, "/index.html"), html);
}

}  // namespace jc::sim
