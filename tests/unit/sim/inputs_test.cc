// jc-sim's inputs: the trace format with its errors by line, the federation file, the
// converters for public traces (on hand-written rows in their documented formats), the
// generator, and weight profiles from YAML (SPEC A15, A10).

#include <catch2/catch.hpp>

#include <cmath>

#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/profile_file.h"
#include "tools/sim/converters.h"
#include "tools/sim/experiments.h"
#include "tools/sim/generator.h"
#include "tools/sim/trace.h"

namespace jc::sim {
namespace {

bool Contains(absl::string_view text, absl::string_view part) { return text.find(part) != absl::string_view::npos; }

TEST_CASE("trace rows are read by column name, and malformed ones are reported by line [A15]") {
  const std::string csv =
      "duration_s,submit_s,gpus,cpus,memory_mb,gpu_model,project,dataset,dataset_mb,deadline_s\n"
      "100,5,1,4,1024,A100,p1,imagenet:1,2048,300\n"
      "# a comment\n"
      "50,0,0,8,512,,p2,,,\n"
      "-3,1,1,1,1,,p1,,,\n"
      "abc,1,1,1,1,,p1,,,\n"
      "10,2,0,0,0,,p1,,,\n";
  auto strict = ParseTrace(csv, true);
  REQUIRE_FALSE(strict.ok());
  CHECK(Contains(strict.status().message(), "line 5"));
  CHECK(Contains(strict.status().message(), "duration_s must be positive"));
  auto lenient = ParseTrace(csv, false);
  REQUIRE(lenient.ok());
  REQUIRE(lenient->jobs.size() == 2);
  CHECK(lenient->jobs[0].submit == 0);  // sorted by submission
  CHECK(lenient->jobs[1].gpu_model == "A100");
  CHECK(lenient->jobs[1].dataset == "imagenet:1");
  CHECK(lenient->jobs[1].deadline == 300);
  CHECK(lenient->jobs[0].deadline < 0);
  REQUIRE(lenient->skipped.size() == 3);
  CHECK(lenient->skipped[0].line == 5);
  CHECK(lenient->skipped[1].line == 6);
  CHECK(Contains(lenient->skipped[1].message, "not a number"));
  CHECK(lenient->skipped[2].line == 7);
  // The writer's output reads back the same.
  auto again = ParseTrace(TraceCsv(lenient->jobs), true);
  REQUIRE(again.ok());
  CHECK(again->jobs[1].dataset_mb == 2048);
  CHECK(again->jobs[0].cpus == 8);
  // A header without a required column is an error either way.
  auto headless = ParseTrace("submit_s,gpus\n1,1\n", false);
  REQUIRE_FALSE(headless.ok());
  CHECK(Contains(headless.status().message(), "\"duration_s\""));
  CHECK_FALSE(ParseTrace("", false).ok());
}

TEST_CASE("the federation file: every mistake named, never a crash [A15]") {
  auto ok = ParseFederation(
      "gpu_models: {B200: {performance: 5, watts: 1000}}\n"
      "datasets: [{key: 'd:1', size_mb: 10}]\n"
      "centers:\n  - {id: a, gpu_model: B200, gpus: 8, cpus: 64, memory_gb: 512, datasets: ['d:1']}\n"
      "outages: [{center: a, start: 10, end: 20}]\n");
  REQUIRE(ok.ok());
  CHECK(ok->PerformanceOf(ok->centers[0]) == 5);
  CHECK(ok->gpu_models.count("H100") == 1);  // built-ins stay
  auto back = ParseFederation(FederationYaml(*ok));
  REQUIRE(back.ok());
  CHECK(back->centers[0].memory_mb == 512 * 1024);
  CHECK(back->outages.size() == 1);

  struct Bad {
    const char* yaml;
    const char* says;
  };
  const Bad bad[] = {
      {"centers: [{id: a, gpu_model: Q9, gpus: 8}]", "unknown GPU model \"Q9\""},
      {"centers: [{id: a, gpus: 0, cpus: 0}]", "has no capacity"},
      {"centers: [{id: a, gpu_model: V100, gpus: -8}]", "must not be negative"},
      {"centers: [{id: a, cpus: 8}, {id: a, cpus: 8}]", "used twice"},
      {"centers: [{id: a, cpus: 8, colour: red}]", "unknown key \"colour\""},
      {"centers: [{id: a, cpus: 8}]\noutages: [{center: b, start: 1, end: 2}]", "unknown center \"b\""},
      {"centers: [{id: a, cpus: 8}]\noutages: [{center: a, start: 5, end: 2}]", "start < end"},
      {"centers: [{id: a, cpus: eight}]", "wrong type"},
      {"centers: {id: a}", "list of centers"},
      {"centers: [{id: a, cpus: 8, datasets: [x]}]", "unknown dataset"},
      {"[1, 2", "federation"},
  };
  for (const auto& b : bad) {
    auto f = ParseFederation(b.yaml);
    INFO(b.yaml);
    REQUIRE_FALSE(f.ok());
    CHECK(f.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(f.status().message(), b.says));
  }
}

TEST_CASE("Alibaba cluster-trace-gpu-v2023 pods and nodes convert [A15]") {
  const std::string pods =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "openb-pod-0017,88000,327680,8,1000,,BE,Succeeded,9437497,10769854,9437497\n"
      "openb-pod-0022,4000,15258,1,220,V100M16|V100M32,LS,Running,9286140,12000000,9286141\n"
      "openb-pod-0035,12000,16384,0,0,,Burstable,Pending,9300000,,\n"
      "openb-pod-0040,x,16384,0,0,,LS,Succeeded,9300000,9300100,9300000\n";
  auto c = ConvertAlibaba2023Pods(pods);
  REQUIRE(c.ok());
  REQUIRE(c->jobs.size() == 2);
  const TraceJob& shared = c->jobs[0];  // created first
  CHECK(shared.submit == 0);
  CHECK(shared.duration == 12000000 - 9286141);
  CHECK(shared.gpus == Approx(0.22));
  CHECK(shared.gpu_model == "V100M16|V100M32");
  CHECK(shared.project == "LS");
  CHECK(shared.cpus == 4);
  const TraceJob& big = c->jobs[1];
  CHECK(big.submit == 9437497 - 9286140);
  CHECK(big.gpus == 8);
  CHECK(big.memory_mb == std::round(327680 * 1.048576));
  REQUIRE(c->skipped.size() == 2);
  CHECK(c->skipped[0].line == 4);
  CHECK(Contains(c->skipped[0].message, "never scheduled"));
  CHECK(c->skipped[1].line == 5);

  const std::string nodes =
      "sn,cpu_milli,memory_mib,gpu,model\n"
      "openb-node-0227,64000,262144,2,P100\n"
      "openb-node-0228,96000,786432,8,V100M32\n"
      "openb-node-0229,64000,262144,2,P100\n"
      "openb-node-0001,32000,131072,0,\n";
  auto f = ConvertAlibaba2023Nodes(nodes);
  REQUIRE(f.ok());
  REQUIRE(f->centers.size() == 3);
  const SimCenter* p100 = f->Find("ali-p100");
  REQUIRE(p100 != nullptr);
  CHECK(p100->gpus == 4);
  CHECK(p100->cpus == 128);
  CHECK(f->Find("ali-cpu")->gpus == 0);
  CHECK(f->gpu_models.count("V100M32") == 1);  // unknown to jc-sim: added at performance 1
  CHECK_FALSE(ConvertAlibaba2023Nodes("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,2,\n").ok());
  CHECK_FALSE(ConvertAlibaba2023Pods("name,cpu_milli\nx,1\n").ok());
}

TEST_CASE("Alibaba cluster-trace-gpu-v2020 job and task tables convert, with or without headers [A15]") {
  const std::string job_table =
      "6a8c2b4d6a6d1e4e5b3f2d1c,87f1b8c6f5b5e0a1,58540f191766,Terminated,2000,2600\n"
      "0f7b0e1c2d3e4f5a6b7c8d9e,1c2d3e4f5a6b7c8d,a1b2c3d4e5f6,Failed,,\n";
  const std::string task_table =
      "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
      "6a8c2b4d6a6d1e4e5b3f2d1c,tensorflow,2,Terminated,2010,2600,600,29.296875,50,V100\n"
      "6a8c2b4d6a6d1e4e5b3f2d1c,ps,1,Terminated,2005,2600,400,10,,MISC\n"
      "0f7b0e1c2d3e4f5a6b7c8d9e,worker,1,Failed,,,100,1,100,T4\n"
      "ffffffffffffffffffffffff,worker,1,Terminated,1,2,100,1,100,T4\n";
  auto c = ConvertAlibaba2020(job_table, task_table);
  REQUIRE(c.ok());
  REQUIRE(c->jobs.size() == 2);
  const TraceJob& worker = c->jobs[0].gpus > 0 ? c->jobs[0] : c->jobs[1];
  const TraceJob& ps = c->jobs[0].gpus > 0 ? c->jobs[1] : c->jobs[0];
  CHECK(worker.gpus == Approx(1.0));  // 2 instances x 50%
  CHECK(worker.cpus == Approx(12));
  CHECK(worker.memory_mb == std::round(2 * 29.296875 * 1024));
  CHECK(worker.gpu_model == "V100");
  CHECK(worker.duration == 590);
  CHECK(worker.user == "58540f191766");
  CHECK(ps.gpus == 0);
  CHECK(ps.gpu_model.empty());
  REQUIRE(c->skipped.size() == 2);
  CHECK(c->skipped[0].line == 4);
  CHECK(Contains(c->skipped[1].message, "not in pai_job_table"));
}

TEST_CASE("Philly's job log converts [A15]") {
  const std::string log = R"([
    {"status": "Pass", "vc": "6214e9", "jobid": "application_1506638472019_10238", "user": "a5d4f9",
     "submitted_time": "2017-10-07 03:05:49",
     "attempts": [{"start_time": "2017-10-07 03:05:51", "end_time": "2017-10-07 03:06:41",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}, {"ip": "m2", "gpus": ["gpu3"]}]}]},
    {"status": "Killed", "vc": "6214e9", "jobid": "application_1506638472019_10239", "user": "b",
     "submitted_time": "2017-10-07 03:00:00", "attempts": []},
    {"status": "Failed", "vc": "x", "jobid": "application_3", "user": "c", "submitted_time": "2017-10-07 03:10:00",
     "attempts": [{"start_time": "2017-10-07 03:10:05", "end_time": null, "detail": []}]}
  ])";
  auto c = ConvertPhilly(log);
  REQUIRE(c.ok());
  REQUIRE(c->jobs.size() == 1);
  CHECK(c->jobs[0].gpus == 3);
  CHECK(c->jobs[0].duration == 50);
  CHECK(c->jobs[0].project == "6214e9");
  CHECK(c->jobs[0].submit == 0);
  REQUIRE(c->skipped.size() == 2);
  CHECK(Contains(c->skipped[0].message, "application_1506638472019_10239"));
  CHECK_FALSE(ConvertPhilly("{\"not\": \"a list\"}").ok());
  CHECK_FALSE(ConvertPhilly("[{").ok());
}

TEST_CASE("generated traces: seeded, powers of two, heavy tails, the offered load asked for [A15]") {
  Federation f = GenerateFederation(10, 7);
  Federation g = f;
  GeneratorOptions o;
  o.jobs = 4000;
  o.load = 0.8;
  o.seed = 3;
  auto a = GenerateTrace(o, f);
  auto b = GenerateTrace(o, g);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(TraceCsv(*a) == TraceCsv(*b));
  o.seed = 4;
  Federation h = GenerateFederation(10, 7);
  CHECK(TraceCsv(*GenerateTrace(o, h)) != TraceCsv(*a));

  double capacity = 0;
  for (const auto& c : f.centers) capacity += c.gpus * f.PerformanceOf(c);
  double work = 0, longest = 0, median_guess = 0;
  int cpu_only = 0;
  std::vector<double> durations;
  for (const auto& j : *a) {
    if (j.gpus == 0) {
      ++cpu_only;
      continue;
    }
    CHECK(std::log2(j.gpus) == std::floor(std::log2(j.gpus)));
    work += j.gpus * j.duration;
    durations.push_back(j.duration);
    longest = std::max(longest, j.duration);
  }
  std::sort(durations.begin(), durations.end());
  median_guess = durations[durations.size() / 2];
  double span = a->back().submit - a->front().submit;
  CHECK(work / (span * capacity) == Approx(0.8).epsilon(0.05));
  CHECK(median_guess == Approx(900).epsilon(0.15));
  CHECK(longest > 20 * median_guess);  // the tail
  CHECK(cpu_only > 0);
  CHECK(f.datasets.size() == 12);  // the pool went into the federation

  GeneratorOptions bad;
  bad.load = 0;
  CHECK_FALSE(GenerateTrace(bad, f).ok());
}

TEST_CASE("weight profiles load from YAML on top of the built-in ones [A10]") {
  scheduler::ScorerRegistry registry;
  scheduler::RegisterBuiltinScorers(registry);
  auto p = scheduler::ParseWeightProfiles("profiles:\n  tuned: {least_load: 2, lowest_price: 0.5}\n  cost: {lowest_price: 1}\n", registry);
  REQUIRE(p.ok());
  auto tuned = p->Resolve("tuned", {}, registry);
  REQUIRE(tuned.ok());
  CHECK((*tuned)[registry.IndexOf("least_load")] == 2);
  CHECK((*tuned)[registry.IndexOf("lowest_price")] == 0.5);
  CHECK((*tuned)[registry.IndexOf("network")] == 0);
  CHECK(p->profiles().count("green") == 1);
  CHECK(p->profiles().at("cost").size() == 1);  // replaced
  auto unknown = scheduler::ParseWeightProfiles("profiles:\n  x: {fastest: 1}\n", registry);
  REQUIRE_FALSE(unknown.ok());
  CHECK(Contains(unknown.status().message(), "profiles.x.fastest"));
  CHECK_FALSE(scheduler::ParseWeightProfiles("profiles:\n  x: {least_load: -1}\n", registry).ok());
  CHECK_FALSE(scheduler::ParseWeightProfiles("profiles:\n  x: {least_load: lots}\n", registry).ok());
  CHECK_FALSE(scheduler::ParseWeightProfiles("weights: {}\n", registry).ok());
  CHECK_FALSE(scheduler::ParseWeightProfiles("profiles: [1, 2]\n", registry).ok());
  // A profile may name its evaluation model.
  scheduler::ModelRegistry models;
  auto lex = scheduler::ParseWeightProfiles(
      "profiles:\n  strict: {model: lexicographic, weights: {highest_security: 2, lowest_price: 1}}\n", registry, &models);
  REQUIRE(lex.ok());
  CHECK(lex->ModelOf("strict") == "lexicographic");
  CHECK(lex->ModelOf("tuned") == "weighted_sum");
  auto bad_model = scheduler::ParseWeightProfiles("profiles:\n  x: {model: fuzzy, weights: {least_load: 1}}\n", registry, &models);
  REQUIRE_FALSE(bad_model.ok());
  CHECK(Contains(bad_model.status().message(), "unknown evaluation model \"fuzzy\""));
  CHECK_FALSE(scheduler::ParseWeightProfiles("profiles:\n  x: {model: lexicographic}\n", registry, &models).ok());
  CHECK_FALSE(scheduler::ParseWeightProfiles("profiles:\n  x: {model: lexicographic, weights: {least_load: 1}, y: 2}\n", registry, &models).ok());
}

TEST_CASE("tuning searches on one trace and reports on another [A15]") {
  Federation f = GenerateFederation(6, 11);
  GeneratorOptions o;
  o.jobs = 600;
  o.seed = 1;
  auto train = GenerateTrace(o, f);
  o.seed = 2;
  auto holdout = GenerateTrace(o, f);
  REQUIRE(train.ok());
  REQUIRE(holdout.ok());
  PolicyCatalog catalog;
  TuneOptions t;
  t.evaluations = 30;
  auto r = Tune(f, *train, *holdout, t, catalog, 2);
  REQUIRE(r.ok());
  CHECK(r->evaluated >= 30);
  CHECK(r->train <= r->default_train);
  CHECK(r->holdout > 0);
  CHECK(r->default_holdout > 0);
  CHECK_FALSE(r->weights.empty());
  t.objective = "happiness";
  CHECK_FALSE(Tune(f, *train, *holdout, t, catalog, 2).ok());
}

TEST_CASE("confidence intervals over seeds [A15]") {
  Estimate e = EstimateOf({10, 12, 14});
  CHECK(e.mean == Approx(12));
  CHECK(e.ci95 == Approx(4.303 * 2 / std::sqrt(3.0)).epsilon(0.001));
  CHECK(EstimateOf({5}).ci95 == 0);
}

}  // namespace
}  // namespace jc::sim
