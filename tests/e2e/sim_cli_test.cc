// jc-sim as a user runs it: a federation and a trace generated, every policy compared with
// charts and a report, a load sweep, tuning with a held-out trace, conversions, and bad
// input refused with the line and a non-zero exit (SPEC A15).

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/testing/process.h"

namespace jc {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string output;
};

Result Sim(const fs::path& dir, std::vector<std::string> args) {
  args.insert(args.begin(), JC_SIM_BINARY);
  static int n = 0;
  fs::path log = dir / ("jc-sim-" + std::to_string(n++) + ".log");
  testing::Process p(args, log.string());
  auto code = p.Wait(std::chrono::seconds(100));
  REQUIRE(code.has_value());
  return {*code, p.Log()};
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

fs::path TempDir() {
  std::string t = (fs::temp_directory_path() / "jc-sim-XXXXXX").string();
  REQUIRE(mkdtemp(t.data()) != nullptr);
  return t;
}

TEST_CASE("jc-sim: generate, compare with charts, sweep, tune [A15]") {
  fs::path d = TempDir();
  std::string fed = (d / "fed.yaml").string(), fed2 = (d / "fed2.yaml").string();
  std::string trace = (d / "trace.csv").string(), holdout = (d / "holdout.csv").string();
  REQUIRE(Sim(d, {"federation", "--centers", "6", "--seed", "2", "--out", fed}).code == 0);
  REQUIRE(Sim(d, {"generate", "--federation", fed, "--jobs", "800", "--load", "0.9", "--seed", "1", "--out", trace,
                  "--federation-out", fed2}).code == 0);
  REQUIRE(Sim(d, {"generate", "--federation", fed2, "--jobs", "800", "--load", "0.9", "--seed", "2", "--out", holdout})
              .code == 0);

  Result run = Sim(d, {"run", "--federation", fed2, "--trace", trace, "--jobs-out", (d / "jobs.csv").string()});
  INFO(run.output);
  REQUIRE(run.code == 0);
  CHECK(Has(run.output, "profile:default"));
  CHECK(Has(run.output, "800 jobs: 800 completed"));
  CHECK(Has(Read(d / "jobs.csv"), "job,submit_s,start_s,end_s,center"));

  fs::path cmp = d / "cmp";
  Result compare = Sim(d, {"compare", "--federation", fed2, "--trace", trace, "--out", cmp.string(), "--queue", "both"});
  INFO(compare.output);
  REQUIRE(compare.code == 0);
  std::string runs = Read(cmp / "runs.csv");
  for (const char* p : {"first_fit,fcfs", "random,fcfs", "round_robin,fcfs", "scorer:lowest_price,fcfs",
                        "scorer:qos_deadline,fair_share", "profile:default,fcfs", "profile:green,fair_share"}) {
    CHECK(Has(runs, p));
  }
  CHECK(Has(Read(cmp / "compare-mean_jct.svg"), "<svg"));
  CHECK(Has(Read(cmp / "compare-fairness.svg"), "<svg"));
  std::string html = Read(cmp / "index.html");
  CHECK(Has(html, "compare-cost.svg"));
  CHECK(Has(html, "<td>profile:default</td>"));
  CHECK(Has(Read(cmp / "centers.csv"), "gpu_utilisation"));

  fs::path sweep = d / "sweep";
  Result s = Sim(d, {"sweep", "--federation", fed, "--out", sweep.string(), "--loads", "0.5,1.0", "--seeds", "2",
                     "--jobs", "300", "--policies", "first_fit,profile:default"});
  INFO(s.output);
  REQUIRE(s.code == 0);
  std::string csv = Read(sweep / "sweep.csv");
  CHECK(Has(csv, "first_fit,0.5,2,"));
  CHECK(Has(csv, "profile:default,1,2,"));
  CHECK(Has(Read(sweep / "sweep-mean_jct.svg"), "<svg"));

  std::string profile = (d / "tuned.yaml").string();
  Result tune = Sim(d, {"tune", "--federation", fed2, "--trace", trace, "--holdout", holdout, "--evaluations", "16",
                        "--out", profile, "--profile-name", "mine"});
  INFO(tune.output);
  REQUIRE(tune.code == 0);
  CHECK(Has(tune.output, "held-out trace: default"));
  // The tuned profile is a profiles file every tool reads back.
  Result use = Sim(d, {"run", "--federation", fed2, "--trace", holdout, "--profiles", profile, "--policy", "profile:mine"});
  INFO(use.output);
  CHECK(use.code == 0);
  CHECK(Has(use.output, "profile:mine"));
}

TEST_CASE("jc-sim: bad input gets the reason and a non-zero exit, never a crash [A15]") {
  fs::path d = TempDir();
  std::string fed = (d / "fed.yaml").string(), trace = (d / "bad.csv").string();
  REQUIRE(Sim(d, {"federation", "--centers", "2", "--out", fed}).code == 0);
  std::ofstream(trace) << "submit_s,duration_s,gpus,cpus,memory_mb,gpu_model\n0,100,1,4,1024,\n5,-100,1,4,1024,\n9,50,1,4,1024,\n";
  Result strict = Sim(d, {"run", "--federation", fed, "--trace", trace});
  CHECK(strict.code == 2);
  CHECK(Has(strict.output, "line 3: duration_s must be positive"));
  Result lenient = Sim(d, {"run", "--federation", fed, "--trace", trace, "--skip-bad-rows"});
  CHECK(lenient.code == 0);
  CHECK(Has(lenient.output, "line 3 skipped"));
  CHECK(Has(lenient.output, "2 jobs: 2 completed"));

  std::ofstream(d / "model.csv") << "submit_s,duration_s,gpus,cpus,memory_mb,gpu_model\n0,100,1,4,1024,Q900\n";
  Result model = Sim(d, {"run", "--federation", fed, "--trace", (d / "model.csv").string()});
  CHECK(model.code == 2);
  CHECK(Has(model.output, "unknown GPU model \"Q900\""));

  std::ofstream(d / "empty.yaml") << "centers:\n  - {id: a, gpus: 0, cpus: 0}\n";
  Result empty = Sim(d, {"run", "--federation", (d / "empty.yaml").string(), "--trace", trace});
  CHECK(empty.code == 2);
  CHECK(Has(empty.output, "has no capacity"));

  Result policy = Sim(d, {"run", "--federation", fed, "--trace", trace, "--skip-bad-rows", "--policy", "best"});
  CHECK(policy.code == 2);
  CHECK(Has(policy.output, "unknown policy \"best\""));
  CHECK(Sim(d, {"run", "--federation", fed, "--trace", trace, "--colour", "red"}).code == 2);
  Result durations = Sim(d, {"run", "--federation", fed, "--trace", trace, "--skip-bad-rows", "--durations", "exact"});
  CHECK(durations.code == 2);
  CHECK(Has(durations.output, "neither learned nor oracle"));
  // sef's aging: as the control plane's --queue_aging, in (0, 100].
  for (const char* bad : {"0", "-1", "101", "soon"}) {
    Result aging = Sim(d, {"run", "--federation", fed, "--trace", trace, "--skip-bad-rows", "--queue", "sef",
                           "--queue_aging", bad});
    CHECK(aging.code == 2);
    CHECK(Has(aging.output, "--queue_aging"));
  }
  CHECK(Sim(d, {"run", "--federation", fed, "--trace", trace, "--skip-bad-rows", "--queue", "sef", "--queue_aging",
                "0.25"})
            .code == 0);
  CHECK(Sim(d, {"frobnicate"}).code == 2);
  CHECK(Sim(d, {"run", "--trace", trace}).code == 2);
  CHECK(Sim(d, {"run", "--federation", (d / "missing.yaml").string(), "--trace", trace}).code == 1);
  Result help = Sim(d, {"--help"});
  CHECK(help.code == 0);
  CHECK(Has(help.output, "usage: jc-sim"));

  // Conversions: unreplayable rows are listed; exit 3 unless --skip-bad-rows.
  std::ofstream(d / "pods.csv")
      << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
         "p1,8000,30000,1,1000,,LS,Succeeded,100,500,110\n"
         "p2,8000,30000,1,1000,,LS,Pending,120,,\n";
  Result conv = Sim(d, {"convert", "alibaba-2023-pods", (d / "pods.csv").string(), (d / "pods-trace.csv").string()});
  CHECK(conv.code == 3);
  CHECK(Has(conv.output, "line 3 skipped"));
  CHECK(Has(Read(d / "pods-trace.csv"), "0,390,1,8,"));
  CHECK(Sim(d, {"convert", "alibaba-2023-pods", (d / "pods.csv").string(), (d / "t.csv").string(), "--skip-bad-rows"})
            .code == 0);
  CHECK(Sim(d, {"convert", "nonsense", "a", "b"}).code == 2);
}

}  // namespace
}  // namespace jc
