// jc-sim: replays GPU job traces over a federation with the scheduler's own code and
// compares placement policies (SPEC A15; docs/placement-quality.md).

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/scheduler/scoring/profile_file.h"
#include "tools/sim/converters.h"
#include "tools/sim/experiments.h"
#include "tools/sim/federation.h"
#include "tools/sim/generator.h"
#include "tools/sim/policy.h"
#include "tools/sim/report.h"
#include "tools/sim/simulator.h"
#include "tools/sim/trace.h"
#include "tools/sim/trace_shapes.h"
#include "common/version.h"

namespace jc::sim {
namespace {

constexpr char kUsage[] = R"(usage: jc-sim COMMAND [options]

Replays a trace of GPU jobs over a federation of centers on a virtual clock, placing
them with the Jointcloud scheduler's own filters, scorers and evaluation model.

commands:
  run       --federation F --trace T [--policy P] [--queue Q]
            [--jobs-out FILE] [--skip-bad-rows]
            one simulation; prints its figures (told no queue: the control plane's default)
  compare   --federation F --trace T --out DIR [--policies P,P,...] [--queue Q,Q,...|both|all]
            [--skip-bad-rows]
            every policy on the same trace: runs.csv, centers.csv, charts, index.html
  sweep     --federation F --out DIR [--loads 0.5,0.6,...] [--seeds N] [--jobs N]
            [--policies P,...] [--queue Q] [--seed S] [--shape SHAPE]
            generated traces at each offered load and seed; means with 95% intervals
  tune      --federation F --trace TRAIN --holdout TEST [--objective O]
            [--evaluations N] [--profile-name NAME] [--out profile.yaml]
            searches scorer weights on TRAIN, reports them on TEST
  generate  --federation F --out trace.csv [--jobs N] [--load L] [--seed S]
            [--projects N] [--recurring SHARE] [--shape SHAPE] [--federation-out F2]
            a synthetic trace (its datasets are added to F2's centers); with a shape,
            prints its measured figures against the shape's
  federation --centers N --out F.yaml [--seed S]
            a heterogeneous federation to start from
  convert   alibaba-2023-pods IN OUT | alibaba-2023-nodes IN OUT |
            alibaba-2020 JOB_TABLE TASK_TABLE OUT | philly IN OUT [--skip-bad-rows]
            public traces to jc-sim's formats
  policies  the policy names compare and run accept

shapes:   (none) log-normal durations (median 15 min), Poisson arrivals, 1/k project weights
          philly  durations of Microsoft Philly (Jeon et al., ATC'19) as published in
                  alibaba/clusterdata cluster-trace-gpu-v2020/analysis/philly_runtime.csv:
                  p50 1,184 s, p90 12,768 s (3.5 h), p99 287,333 s (80 h)
          pai     Alibaba PAI 2020 (Weng et al., NSDI'22): p50 23 min, p90 4.5 h as a
                  summary of the paper quotes them; p99 ~120,600 s from a log-normal
                  through them (not cited)
          both: jobs in bursts (mean 6, 10 s apart: inter-arrival CV ~3), 50 users of whom
          5 hold 60% of the GPU time (our stated choice); docs/placement-quality.md
policies: first_fit | random | round_robin | profile:NAME | scorer:ID | weights:ID=W,...
queues:   fcfs | fair_share | sef | fair_share+sef | hrrn | fair_share+hrrn | las | fair_share+las
          (sef: shortest expected first by durations learned from the jobs ended so far; hrrn:
          highest response ratio next, (wait + expected) / expected; las: least attained
          service); run's default is the control plane's (hrrn), compare's and sweep's fcfs
common:   --threads N (0: one per core), --profiles FILE (weight profiles, YAML),
          --queue_aging A (run, compare, sweep: sef's aging, seconds of expected length
          forgiven per second waited, in (0, 100]; default 0.25, the control plane's),
          --durations learned|oracle (what placement is told of run times: learned, the
          estimator's figure (its median; a one-off's, between median and p90) from the jobs ended so far, else an hour, as the control plane
          knows; oracle, the trace's own durations — a bound, not a result),
          --center_reports start|counts (run, compare, sweep: what a center tells a policy
          that may wait for it — a profile weighing expected_completion — of its queue:
          start, its estimate of when the job's spec would start; counts, only running and
          waiting counts)
)";

int Fail(const std::string& message, int code = 1) {
  std::cerr << "jc-sim: " << message << "\n";
  return code;
}
int Fail(const absl::Status& s) { return Fail(std::string(s.message()), s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1); }

// --name value, --name=value and --switch; the rest are positional.
struct Args {
  std::map<std::string, std::string> flags;
  std::vector<std::string> positional;
  std::set<std::string> used;

  std::string Get(const std::string& name, const std::string& fallback = "") {
    used.insert(name);
    auto it = flags.find(name);
    return it == flags.end() ? fallback : it->second;
  }
  bool Has(const std::string& name) {
    used.insert(name);
    return flags.count(name) > 0;
  }
  absl::Status Number(const std::string& name, double* out) {
    used.insert(name);
    auto it = flags.find(name);
    if (it == flags.end()) return absl::OkStatus();
    if (!absl::SimpleAtod(it->second, out)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a number, not \"", it->second, "\""));
    }
    return absl::OkStatus();
  }
  absl::Status Int(const std::string& name, int* out) {
    double v = *out;
    if (absl::Status s = Number(name, &v); !s.ok()) return s;
    if (v != static_cast<int>(v)) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a whole number"));
    *out = static_cast<int>(v);
    return absl::OkStatus();
  }
  absl::Status Required(const std::string& name, std::string* out) {
    *out = Get(name);
    if (out->empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, " is required (jc-sim --help)"));
    return absl::OkStatus();
  }
  // Flags given that the command does not read.
  absl::Status NoneUnused() const {
    for (const auto& [name, value] : flags) {
      if (!used.count(name)) return absl::InvalidArgumentError(absl::StrCat("unknown option --", name, " (jc-sim --help)"));
    }
    return absl::OkStatus();
  }
};

const std::set<std::string> kSwitches = {"skip-bad-rows", "help"};

Args Parse(int argc, char** argv, int from) {
  Args a;
  for (int i = from; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) == 0 && s.size() > 2) {
      std::string name = s.substr(2);
      auto eq = name.find('=');
      if (eq != std::string::npos) {
        a.flags[name.substr(0, eq)] = name.substr(eq + 1);
      } else if (kSwitches.count(name) || i + 1 >= argc) {
        a.flags[name] = "";
      } else {
        a.flags[name] = argv[++i];
      }
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

#define TRY(expr)                          \
  do {                                     \
    absl::Status _s = (expr);              \
    if (!_s.ok()) return Fail(_s);         \
  } while (0)

absl::Status LoadProfiles(Args& args, PolicyCatalog& catalog) {
  std::string path = args.Get("profiles");
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<scheduler::WeightProfiles> profiles = scheduler::LoadWeightProfiles(path, catalog.scorers, &catalog.models);
  if (!profiles.ok()) return profiles.status();
  catalog.profiles = std::move(*profiles);
  return absl::OkStatus();
}

absl::StatusOr<Trace> ReadTrace(Args& args, const std::string& flag) {
  std::string path;
  if (absl::Status s = args.Required(flag, &path); !s.ok()) return s;
  bool lenient = args.Has("skip-bad-rows");
  absl::StatusOr<Trace> t = LoadTrace(path, !lenient);
  if (!t.ok()) return t.status();
  for (size_t i = 0; i < t->skipped.size() && i < 20; ++i) {
    std::cerr << "jc-sim: " << path << ": line " << t->skipped[i].line << " skipped: " << t->skipped[i].message << "\n";
  }
  if (t->skipped.size() > 20) std::cerr << "jc-sim: " << path << ": " << t->skipped.size() - 20 << " more rows skipped\n";
  if (t->jobs.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no jobs"));
  return t;
}

// The federation file named by --federation.
absl::StatusOr<Federation> ReadFederation(Args& args) {
  std::string path;
  if (absl::Status s = args.Required("federation", &path); !s.ok()) return s;
  return LoadFederation(path);
}

absl::Status MakeDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return absl::InternalError(absl::StrCat("cannot create ", dir));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<scheduler::QueueSettings>> Queues(const std::string& text) {
  // "both": the two the control plane runs; "all": every order; or names, comma-separated.
  std::vector<std::string> names;
  if (text == "both") {
    names = {"fcfs", "fair_share"};
  } else if (text == "all") {
    names = {"fcfs", "fair_share", "sef", "fair_share+sef", "hrrn", "fair_share+hrrn", "las", "fair_share+las"};
  } else {
    names = absl::StrSplit(text, ',', absl::SkipWhitespace());
  }
  std::vector<scheduler::QueueSettings> out;
  for (const auto& name : names) {
    absl::StatusOr<scheduler::QueueSettings> q = scheduler::ParseQueueSettings(name);
    if (!q.ok()) return q.status();
    out.push_back(*q);
  }
  return out;
}

std::string JobsCsv(const std::vector<JobRecord>& jobs) {
  std::string out = "job,submit_s,start_s,end_s,center,attempts,transfer_s,run_s,cost,energy_kwh\n";
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobRecord& j = jobs[i];
    absl::StrAppend(&out, i + 1, ",", j.submit, ",", j.start, ",", j.end, ",", j.center, ",", j.attempts, ",",
                    absl::StrFormat("%.3f,%.3f,%.4f,%.4f", j.transfer_s, j.run_s, j.cost, j.energy_j / 3.6e6), "\n");
  }
  return out;
}

// --durations: learned (default) or oracle.
absl::StatusOr<bool> OracleDurations(Args& args) {
  const std::string d = args.Get("durations", "learned");
  if (d == "learned") return false;
  if (d == "oracle") return true;
  return absl::InvalidArgumentError(absl::StrCat("--durations: \"", d, "\" is neither learned nor oracle"));
}

// --center_reports: start (default) or counts (SimOptions::center_reports).
absl::StatusOr<std::string> CenterReports(Args& args) {
  std::string r = args.Get("center_reports", "start");
  if (r == "start" || r == "counts") return r;
  return absl::InvalidArgumentError(absl::StrCat("--center_reports: \"", r, "\" is neither start nor counts"));
}

// --queue_aging A (run, compare, sweep): sef's aging, as the control plane's --queue_aging:
// seconds of a waiting job's expected length forgiven per second it waits, in (0, 100].
absl::Status QueueAging(Args& args, scheduler::QueueSettings* q) {
  double aging = q->aging;
  JC_RETURN_IF_ERROR(args.Number("queue_aging", &aging));
  if (!(aging > 0 && aging <= 100)) {
    return absl::InvalidArgumentError(absl::StrCat("--queue_aging: ", aging, " is not in (0, 100]"));
  }
  q->aging = aging;
  return absl::OkStatus();
}

int CmdRun(Args& args, PolicyCatalog& catalog) {
  absl::StatusOr<Federation> f = ReadFederation(args);
  if (!f.ok()) return Fail(f.status());
  absl::StatusOr<Trace> t = ReadTrace(args, "trace");
  if (!t.ok()) return Fail(t.status());
  SimOptions o;
  o.policy = args.Get("policy", "profile:default");
  // Told nothing, run replays the control plane as shipped (its --queue_order and
  // --queue_aging); compare and sweep weigh policies under first come, first served.
  absl::StatusOr<scheduler::QueueSettings> q =
      scheduler::ParseQueueSettings(args.Get("queue", scheduler::kDefaultQueueOrder));
  if (!q.ok()) return Fail(q.status());
  TRY(QueueAging(args, &*q));
  o.queue = *q;
  absl::StatusOr<bool> oracle = OracleDurations(args);
  if (!oracle.ok()) return Fail(oracle.status());
  o.oracle_durations = *oracle;
  absl::StatusOr<std::string> reports = CenterReports(args);
  if (!reports.ok()) return Fail(reports.status());
  o.center_reports = *reports;
  std::string jobs_out = args.Get("jobs-out");
  o.keep_jobs = !jobs_out.empty();
  TRY(args.NoneUnused());
  absl::StatusOr<RunResult> r = Simulate(*f, t->jobs, o, catalog);
  if (!r.ok()) return Fail(r.status());
  std::cout << RunsTable({*r});
  const RunMetrics& m = r->metrics;
  std::cout << absl::StrFormat(
      "%d jobs: %d completed, %d never ran, %d failed after retries; makespan %.0f s; %.1f GB of data moved\n"
      "%lld decisions in %.2f s (%.1f us of CPU per job)\n",
      m.jobs, m.completed, m.never_ran, m.failed, m.makespan, m.data_moved_gb, static_cast<long long>(m.decisions),
      m.wall_seconds, m.jobs ? m.cpu_seconds / m.jobs * 1e6 : 0);
  if (!jobs_out.empty()) TRY(WriteFile(jobs_out, JobsCsv(r->jobs)));
  return 0;
}

int CmdCompare(Args& args, PolicyCatalog& catalog) {
  std::string out;
  TRY(args.Required("out", &out));
  absl::StatusOr<Federation> f = ReadFederation(args);
  if (!f.ok()) return Fail(f.status());
  absl::StatusOr<Trace> t = ReadTrace(args, "trace");
  if (!t.ok()) return Fail(t.status());
  std::vector<std::string> policies = DefaultPolicies(catalog);
  if (args.Has("policies")) policies = absl::StrSplit(args.Get("policies"), ',', absl::SkipEmpty());
  absl::StatusOr<std::vector<scheduler::QueueSettings>> queues = Queues(args.Get("queue", "fcfs"));
  if (!queues.ok()) return Fail(queues.status());
  for (auto& q : *queues) TRY(QueueAging(args, &q));
  int threads = 0;
  TRY(args.Int("threads", &threads));
  absl::StatusOr<bool> oracle = OracleDurations(args);
  if (!oracle.ok()) return Fail(oracle.status());
  absl::StatusOr<std::string> reports = CenterReports(args);
  if (!reports.ok()) return Fail(reports.status());
  TRY(args.NoneUnused());
  std::vector<SimOptions> runs;
  for (const auto& q : *queues) {
    for (const auto& p : policies) {
      SimOptions o;
      o.policy = p;
      o.queue = q;
      o.oracle_durations = *oracle;
      o.center_reports = *reports;
      runs.push_back(o);
    }
  }
  absl::StatusOr<std::vector<RunResult>> results = RunAll(*f, t->jobs, runs, catalog, threads);
  if (!results.ok()) return Fail(results.status());
  TRY(MakeDir(out));
  TRY(WriteFile(out + "/runs.csv", RunsCsv(*results)));
  TRY(WriteFile(out + "/centers.csv", CentersCsv(*results)));
  std::cout << RunsTable(*results);
  ReportSection section{"Policies on one trace",
                        absl::StrCat(t->jobs.size(), " jobs over ", f->centers.size(), " centers (", f->TotalGpus(),
                                     " GPUs); the default profile in red, baselines in grey."),
                        {}, RunsHtmlTable(*results)};
  absl::StatusOr<std::vector<std::string>> charts = DrawCompareCharts(out, *results);
  if (charts.ok()) {
    section.images = *charts;
  } else {
    std::cerr << "jc-sim: " << charts.status().message() << "\n";
  }
  TRY(WriteHtmlReport(out, "jc-sim: placement policies compared", {section}));
  std::cout << "wrote " << out << "/runs.csv, centers.csv" << (charts.ok() ? ", charts" : "") << " and index.html\n";
  return charts.ok() ? 0 : 1;
}

int CmdSweep(Args& args, PolicyCatalog& catalog) {
  std::string out;
  TRY(args.Required("out", &out));
  absl::StatusOr<Federation> f = ReadFederation(args);
  if (!f.ok()) return Fail(f.status());
  SweepOptions o;
  o.policies = {"first_fit", "random", "round_robin", "profile:default"};
  if (args.Has("policies")) o.policies = absl::StrSplit(args.Get("policies"), ',', absl::SkipEmpty());
  if (args.Has("loads")) {
    o.loads.clear();
    for (absl::string_view l : absl::StrSplit(args.Get("loads"), ',', absl::SkipEmpty())) {
      double v;
      if (!absl::SimpleAtod(l, &v) || !(v > 0)) return Fail(absl::StrCat("--loads: \"", l, "\" is not a positive number"), 2);
      o.loads.push_back(v);
    }
  }
  TRY(args.Int("seeds", &o.seeds));
  TRY(args.Int("jobs", &o.generator.jobs));
  o.generator.shape = args.Get("shape");
  if (!o.generator.shape.empty() && FindTraceShape(o.generator.shape) == nullptr) {
    return Fail(absl::StrCat("--shape: unknown shape \"", o.generator.shape, "\" (valid: ", TraceShapeNames(), ")"), 2);
  }
  double seed = 1;
  TRY(args.Number("seed", &seed));
  o.generator.seed = static_cast<uint64_t>(seed);
  absl::StatusOr<scheduler::QueueSettings> q = scheduler::ParseQueueSettings(args.Get("queue", "fcfs"));
  if (!q.ok()) return Fail(q.status());
  TRY(QueueAging(args, &*q));
  o.queue = *q;
  absl::StatusOr<bool> oracle = OracleDurations(args);
  if (!oracle.ok()) return Fail(oracle.status());
  o.oracle_durations = *oracle;
  absl::StatusOr<std::string> reports = CenterReports(args);
  if (!reports.ok()) return Fail(reports.status());
  o.center_reports = *reports;
  int threads = 0;
  TRY(args.Int("threads", &threads));
  TRY(args.NoneUnused());
  for (const auto& p : o.policies) {
    if (auto made = MakePolicy(p, catalog, 1); !made.ok()) return Fail(made.status());
  }
  absl::StatusOr<std::vector<SweepPoint>> points = Sweep(*f, o, catalog, threads);
  if (!points.ok()) return Fail(points.status());
  TRY(MakeDir(out));
  TRY(WriteFile(out + "/sweep.csv", SweepCsv(*points)));
  std::cout << absl::StrFormat("%-24s %6s %16s %16s %14s\n", "POLICY", "LOAD", "MEAN_JCT(+-95%)", "P95_JCT(+-95%)",
                               "COST(+-95%)");
  for (const auto& p : *points) {
    std::cout << absl::StrFormat("%-24s %5.0f%% %9.0f +-%-5.0f %9.0f +-%-5.0f %8.0f +-%-5.0f\n", p.policy, p.load * 100,
                                 p.mean_jct.mean, p.mean_jct.ci95, p.p95_jct.mean, p.p95_jct.ci95, p.cost.mean,
                                 p.cost.ci95);
  }
  absl::StatusOr<std::vector<std::string>> charts = DrawSweepCharts(out, *points);
  ReportSection section{"Offered load sweep",
                        absl::StrCat(o.generator.jobs, " generated jobs per point",
                                     o.generator.shape.empty() ? "" : absl::StrCat(" (shape ", o.generator.shape, ")"),
                                     ", ", o.seeds,
                                     " seeds per load, over ", f->centers.size(), " centers."),
                        charts.ok() ? *charts : std::vector<std::string>{}, ""};
  if (!charts.ok()) std::cerr << "jc-sim: " << charts.status().message() << "\n";
  TRY(WriteHtmlReport(out, "jc-sim: offered load sweep", {section}));
  std::cout << "wrote " << out << "/sweep.csv" << (charts.ok() ? ", charts" : "") << " and index.html\n";
  return charts.ok() ? 0 : 1;
}

int CmdTune(Args& args, PolicyCatalog& catalog) {
  absl::StatusOr<Federation> f = ReadFederation(args);
  if (!f.ok()) return Fail(f.status());
  absl::StatusOr<Trace> train = ReadTrace(args, "trace");
  if (!train.ok()) return Fail(train.status());
  absl::StatusOr<Trace> holdout = ReadTrace(args, "holdout");
  if (!holdout.ok()) return Fail(holdout.status());
  TuneOptions o;
  o.objective = args.Get("objective", o.objective);
  TRY(args.Int("evaluations", &o.evaluations));
  std::string name = args.Get("profile-name", "tuned");
  std::string out = args.Get("out");
  absl::StatusOr<bool> oracle = OracleDurations(args);
  if (!oracle.ok()) return Fail(oracle.status());
  o.oracle_durations = *oracle;
  int threads = 0;
  TRY(args.Int("threads", &threads));
  TRY(args.NoneUnused());
  absl::StatusOr<TuneResult> r = Tune(*f, train->jobs, holdout->jobs, o, catalog, threads);
  if (!r.ok()) return Fail(r.status());
  auto gain = [](double base, double tuned) { return base > 0 ? 100 * (base - tuned) / base : 0; };
  std::cout << absl::StrFormat(
      "%d simulations; objective %s (lower is better)\n"
      "  training trace: default %.1f, tuned %.1f (%.1f%% better)\n"
      "  held-out trace: default %.1f, tuned %.1f (%.1f%% better)\n",
      r->evaluated, o.objective, r->default_train, r->train, gain(r->default_train, r->train), r->default_holdout,
      r->holdout, gain(r->default_holdout, r->holdout));
  std::string yaml = absl::StrCat("# jc-sim tune: objective ", o.objective, "; held-out ",
                                  absl::StrFormat("%.1f", r->holdout), " against the default's ",
                                  absl::StrFormat("%.1f", r->default_holdout), "\nprofiles:\n  ", name, ":\n");
  for (const auto& [id, w] : r->weights) {
    if (w > 0) absl::StrAppend(&yaml, "    ", id, ": ", w, "\n");
  }
  std::cout << yaml;
  if (!out.empty()) TRY(WriteFile(out, yaml));
  return 0;
}

int CmdGenerate(Args& args) {
  std::string out;
  TRY(args.Required("out", &out));
  absl::StatusOr<Federation> f = ReadFederation(args);
  if (!f.ok()) return Fail(f.status());
  GeneratorOptions o;
  TRY(args.Int("jobs", &o.jobs));
  TRY(args.Number("load", &o.load));
  TRY(args.Int("projects", &o.projects));
  TRY(args.Number("recurring", &o.recurring_share));
  if (o.recurring_share < 0 || o.recurring_share > 1) return Fail("--recurring must be within 0 and 1", 2);
  o.shape = args.Get("shape");
  const TraceShape* shape = o.shape.empty() ? nullptr : FindTraceShape(o.shape);
  if (!o.shape.empty() && shape == nullptr) {
    return Fail(absl::StrCat("--shape: unknown shape \"", o.shape, "\" (valid: ", TraceShapeNames(), ")"), 2);
  }
  double seed = 1;
  TRY(args.Number("seed", &seed));
  o.seed = static_cast<uint64_t>(seed);
  std::string fed_out = args.Get("federation-out");
  TRY(args.NoneUnused());
  absl::StatusOr<std::vector<TraceJob>> jobs = GenerateTrace(o, *f);
  if (!jobs.ok()) return Fail(jobs.status());
  TRY(WriteFile(out, TraceCsv(*jobs)));
  if (!fed_out.empty()) TRY(WriteFile(fed_out, FederationYaml(*f)));
  std::cout << "wrote " << jobs->size() << " jobs to " << out << (fed_out.empty() ? "" : " and the federation to ")
            << fed_out << "\n";
  if (shape != nullptr) {
    TraceShapeStats m = MeasureTrace(*jobs, shape->heavy_users, CapacityOf(*f).capacity);
    auto cited = [](bool c) { return c ? "" : " (model, not cited)"; };
    std::cout << absl::StrFormat("shape %s: %s\n", shape->name, shape->source)
              << absl::StrFormat("  durations p50 %.0f s (shape %.0f s), p90 %.0f s (shape %.0f s), p99 %.0f s (shape %.0f s%s)\n",
                                 m.p50_s, shape->p50_s, m.p90_s, shape->p90_s, m.p99_s, shape->p99_s,
                                 cited(shape->p99_cited))
              << absl::StrFormat("  inter-arrival CV %.2f, top %d of %d users hold %.0f%% of the GPU time (stated %.0f%%), "
                                 "offered load %.2f\n",
                                 m.interarrival_cv, shape->heavy_users, m.users, 100 * m.top_users_share,
                                 100 * shape->heavy_share, m.offered_load);
  }
  return 0;
}

int CmdFederation(Args& args) {
  std::string out;
  TRY(args.Required("out", &out));
  int centers = 10;
  TRY(args.Int("centers", &centers));
  double seed = 1;
  TRY(args.Number("seed", &seed));
  TRY(args.NoneUnused());
  if (centers <= 0) return Fail("--centers must be positive", 2);
  TRY(WriteFile(out, FederationYaml(GenerateFederation(centers, static_cast<uint64_t>(seed)))));
  std::cout << "wrote " << centers << " centers to " << out << "\n";
  return 0;
}

std::string ReadAll(const std::string& path, bool* ok) {
  std::ifstream in(path);
  *ok = static_cast<bool>(in);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int CmdConvert(Args& args) {
  bool lenient = args.Has("skip-bad-rows");
  TRY(args.NoneUnused());
  const auto& p = args.positional;
  if (p.empty()) return Fail("convert: which format? (alibaba-2023-pods, alibaba-2023-nodes, alibaba-2020, philly)", 2);
  const std::string& format = p[0];
  if (format != "alibaba-2023-pods" && format != "alibaba-2023-nodes" && format != "alibaba-2020" && format != "philly") {
    return Fail(absl::StrCat("convert: unknown format \"", format,
                             "\" (alibaba-2023-pods, alibaba-2023-nodes, alibaba-2020, philly)"), 2);
  }
  size_t inputs = format == "alibaba-2020" ? 2 : 1;
  if (p.size() != inputs + 2) return Fail(absl::StrCat("convert ", format, ": expected ", inputs, " input file(s) and an output file"), 2);
  std::vector<std::string> texts;
  for (size_t i = 1; i <= inputs; ++i) {
    bool ok;
    texts.push_back(ReadAll(p[i], &ok));
    if (!ok) return Fail(absl::StrCat("cannot read ", p[i]));
  }
  const std::string& out = p.back();
  if (format == "alibaba-2023-nodes") {
    absl::StatusOr<Federation> f = ConvertAlibaba2023Nodes(texts[0]);
    if (!f.ok()) return Fail(f.status());
    TRY(WriteFile(out, FederationYaml(*f)));
    std::cout << "wrote " << f->centers.size() << " centers (" << f->TotalGpus() << " GPUs) to " << out << "\n";
    return 0;
  }
  absl::StatusOr<Conversion> c = format == "alibaba-2023-pods" ? ConvertAlibaba2023Pods(texts[0])
                                 : format == "alibaba-2020"    ? ConvertAlibaba2020(texts[0], texts[1])
                                                               : ConvertPhilly(texts[0]);
  if (!c.ok()) return Fail(c.status());
  for (size_t i = 0; i < c->skipped.size() && i < 20; ++i) {
    std::cerr << "jc-sim: " << (format == "philly" ? "entry " : "line ") << c->skipped[i].line
              << " skipped: " << c->skipped[i].message << "\n";
  }
  if (c->skipped.size() > 20) std::cerr << "jc-sim: " << c->skipped.size() - 20 << " more skipped\n";
  TRY(WriteFile(out, TraceCsv(c->jobs)));
  std::cout << "wrote " << c->jobs.size() << " jobs to " << out << "; " << c->skipped.size() << " skipped\n";
  // Rows that cannot be replayed are normal in these traces; without --skip-bad-rows they
  // still make the exit status 3, so a script notices.
  return c->skipped.empty() || lenient ? 0 : 3;
}

}  // namespace
}  // namespace jc::sim

int main(int argc, char** argv) {
  using namespace jc::sim;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  if (std::string(argv[1]) == "--version") {
    std::cout << jc::VersionLine("jc-sim") << "\n";
    return 0;
  }
  std::string command = argv[1];
  Args args = Parse(argc, argv, 2);
  if (args.Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  PolicyCatalog catalog;
  if (absl::Status s = LoadProfiles(args, catalog); !s.ok()) return Fail(s);
  if (command == "run") return CmdRun(args, catalog);
  if (command == "compare") return CmdCompare(args, catalog);
  if (command == "sweep") return CmdSweep(args, catalog);
  if (command == "tune") return CmdTune(args, catalog);
  if (command == "generate") return CmdGenerate(args);
  if (command == "federation") return CmdFederation(args);
  if (command == "convert") return CmdConvert(args);
  if (command == "policies") {
    for (const auto& p : DefaultPolicies(catalog)) std::cout << p << "\n";
    return 0;
  }
  return Fail(absl::StrCat("unknown command \"", command, "\" (jc-sim --help)"), 2);
}
