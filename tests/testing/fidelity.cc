#include "tests/testing/fidelity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "tests/testing/json_time.h"
#include "tests/testing/process.h"
#include "tests/testing/rest_client.h"
#include "tools/sim/simulator.h"

namespace jc::testing {
namespace {

using nlohmann::json;

struct Center {
  const char* id;
  int cpus;
  double price;  // of cpu-1 there, per hour
};
const Center kCenters[] = {{"small", 2, 1}, {"medium", 4, 2}, {"large", 8, 3}};
constexpr int kTotalCpus = 14;

absl::StatusOr<int> Port(Process& p, const std::string& pattern, const std::string& what) {
  auto port = p.WaitForLog(pattern, std::chrono::seconds(60));
  if (!port.has_value()) return absl::UnavailableError(absl::StrCat(what, " did not start: ", p.Log()));
  return std::stoi(*port);
}

}  // namespace

absl::StatusOr<FidelityResult> RunFidelity(const FidelityOptions& o) {
  // The trace: durations uniform in [min, max] (tenths of a second), Poisson arrivals at
  // the offered load.
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> duration(o.min_duration_s, o.max_duration_s);
  double mean = (o.min_duration_s + o.max_duration_s) / 2;
  std::exponential_distribution<double> gap(o.load * kTotalCpus / mean);
  std::vector<FidelityJob> jobs(o.jobs);
  double t = 0;
  for (auto& j : jobs) {
    j.submit_s = t;
    j.duration_s = std::round(duration(rng) * 10) / 10;
    t += gap(rng);
  }

  // The real federation.
  std::vector<std::unique_ptr<Process>> adapters;
  std::vector<int> adapter_ports;
  for (const Center& c : kCenters) {
    std::string dir = absl::StrCat(o.work_dir, "/", c.id);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/center.yaml") << "center_id: " << c.id << "\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n";
    adapters.push_back(std::make_unique<Process>(
        std::vector<std::string>{o.adapter_binary, "--listen=127.0.0.1:0", "--plaintext", "--metrics_address=", "--state_dir=" + dir + "/state",
                                 "--work_dir=" + dir + "/replicas", "--center_config=" + dir + "/center.yaml",
                                 absl::StrCat("--cpus=", c.cpus), "--memory_mb=8192", "--poll_interval=50ms",
                                 "--allow_root_replicas"},
        dir + "/adapter.log"));
    auto port = Port(*adapters.back(), R"(listening on port (\d+))", absl::StrCat("adapter ", c.id));
    if (!port.ok()) return port.status();
    adapter_ports.push_back(*port);
  }
  Process server({o.server_binary, "--rest_address=127.0.0.1:0", "--grpc_address=127.0.0.1:0", "--admin_address=127.0.0.1:0",
                  "--monitor_interval=100ms", "--scheduler_refresh=50ms", "--data_dir=" + o.work_dir + "/data",
                  "--admin_token_file=" + o.work_dir + "/admin.token"},
                 o.work_dir + "/server.log");
  auto rest_port = Port(server, R"(rest listening on http://127\.0\.0\.1:(\d+))", "the server");
  if (!rest_port.ok()) return rest_port.status();
  RestClient rest(*rest_port, AdminToken(o.work_dir + "/admin.token"));
  for (size_t i = 0; i < std::size(kCenters); ++i) {
    auto r = rest.Post("/openapi/v1/centers", {{"ai_center_id", kCenters[i].id},
                                               {"name", kCenters[i].id},
                                               {"region", "cn"},
                                               {"network_topology", std::string("cn/") + kCenters[i].id},
                                               {"adapter_address", absl::StrCat("127.0.0.1:", adapter_ports[i])},
                                               {"capacity", {{"cpu", kCenters[i].cpus}, {"memory", 8192}}}});
    if (r.http_status != 200) return absl::InternalError(absl::StrCat("registering a center: ", r.body.dump()));
  }
  auto spec = rest.Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                     {"resource_spec_name", "1 CPU"},
                                                     {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                     {"service_type", "batch"},
                                                     {"price", 1},
                                                     {"computing_center_list", "small,medium,large"}});
  if (spec.http_status != 200) return absl::InternalError(absl::StrCat("registering the spec: ", spec.body.dump()));
  for (const Center& c : kCenters) {
    auto r = rest.Send("PUT", absl::StrCat("/openapi/v1/resourcespecs/cpu-1/centers/", c.id, "/price"),
                       absl::StrCat(R"({"price": )", c.price, "}"));
    if (r.http_status != 200) return absl::InternalError(absl::StrCat("pricing: ", r.body.dump()));
  }
  bool ready = WaitUntil([&] {
    // Ready: a server that has just started answers creates 503 until its job manager leads.
    if (rest.Get("/readyz").http_status != 200) return false;
    for (const Center& c : kCenters) {
      if (rest.Get(absl::StrCat("/scheduler/algorithm/least_load/score/", c.id, "?resourceSpecId=cpu-1")).http_status != 200) {
        return false;
      }
    }
    return true;
  }, std::chrono::seconds(60));
  if (!ready) return absl::UnavailableError("the centers did not become schedulable");

  // Replay: each job submitted at its time (the workload's clock, not a wait on a condition).
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> ids;
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(jobs[i].submit_s)));
    auto r = rest.Post("/openapi/v1/trainjob",
                       {{"name", absl::StrCat("fidelity-", i)},
                        {"tasks", {{{"name", "t"},
                                    {"command", absl::StrFormat("sleep %.1f", jobs[i].duration_s)},
                                    {"resourceSpecId", "cpu-1"},
                                    {"replicaNumber", 1}}}}});
    if (r.http_status != 200) return absl::InternalError(absl::StrCat("submitting: ", r.body.dump()));
    ids.push_back(r.body["data"]["jobId"]);
  }
  std::map<std::string, json> final;
  double budget = 60 + 3 * (jobs.back().submit_s + jobs.size() * o.max_duration_s);
  WaitUntil([&] {
    for (const auto& id : ids) {
      if (final.count(id)) continue;
      json job = rest.Get("/openapi/v1/trainjob/" + id).body["data"];
      std::string status = job.value("status", "");
      if (status == "completed" || status == "failed") final[id] = job;
    }
    return final.size() == ids.size();
  }, std::chrono::milliseconds(static_cast<int64_t>(budget * 1000)));
  // The real arrival times are the server's: they go into the simulation as they were.
  double origin = 0;
  FidelityResult result;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = final.find(ids[i]);
    if (it == final.end()) continue;
    auto created = UnixSeconds(it->second["createdAt"]);
    auto updated = UnixSeconds(it->second["updatedAt"]);
    if (!created.ok() || !updated.ok()) return absl::InternalError(absl::StrCat("job without times: ", it->second.dump()));
    if (i == 0) origin = *created;
    jobs[i].submit_s = *created - origin;
    if (it->second["status"] == "completed") {
      jobs[i].real_jct_s = *updated - *created;
      ++result.real_completed;
    }
    const json& centers = it->second["taskInfos"][0]["centerIDs"];
    if (centers.is_array() && !centers.empty()) jobs[i].real_center = centers[0];
  }
  server.Signal(SIGTERM);
  server.Wait();

  // The same in jc-sim: the three centers, each job at its real arrival.
  sim::Federation f;
  f.gpu_models = sim::BuiltinGpuModels();
  for (const Center& c : kCenters) {
    sim::SimCenter sc;
    sc.id = c.id;
    sc.topology = std::string("cn/") + c.id;
    sc.cpus = c.cpus;
    sc.memory_mb = 8192;
    sc.price_per_cpu_hour = c.price;
    sc.watts_per_cpu = 0;  // as registered: no power figures
    sc.bandwidth_mbps = 0.001;  // as registered: no network figures (every center alike)
    f.centers.push_back(sc);
  }
  std::vector<sim::TraceJob> trace;
  for (const auto& j : jobs) {
    sim::TraceJob t;
    t.submit = j.submit_s;
    t.duration = j.duration_s;
    t.cpus = 1;
    t.memory_mb = 256;
    trace.push_back(t);
  }
  sim::PolicyCatalog catalog;
  sim::SimOptions so;
  so.policy = o.policy;
  so.keep_jobs = true;
  auto simulated = sim::Simulate(f, trace, so, catalog);
  if (!simulated.ok()) return simulated.status();
  double diff_sum = 0, real_sum = 0, sim_sum = 0;
  int both = 0, same = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const sim::JobRecord& r = simulated->jobs[i];
    jobs[i].sim_center = r.center;
    if (r.end >= 0) {
      jobs[i].sim_jct_s = r.end - r.submit;
      ++result.sim_completed;
    }
    if (jobs[i].real_jct_s > 0 && jobs[i].sim_jct_s > 0) {
      diff_sum += std::fabs(jobs[i].sim_jct_s - jobs[i].real_jct_s) / jobs[i].real_jct_s;
      real_sum += jobs[i].real_jct_s;
      sim_sum += jobs[i].sim_jct_s;
      same += jobs[i].sim_center == jobs[i].real_center;
      ++both;
    }
  }
  if (both > 0) {
    result.mean_abs_relative_diff = diff_sum / both;
    result.mean_real_jct_s = real_sum / both;
    result.mean_sim_jct_s = sim_sum / both;
    result.same_center_share = static_cast<double>(same) / both;
  }
  result.jobs = std::move(jobs);
  return result;
}

std::string FidelityReport(const FidelityResult& r) {
  std::string out = absl::StrFormat("%4s %8s %8s %-8s %-8s %8s %8s %7s\n", "JOB", "SUBMIT", "DURATION", "REAL_AT",
                                    "SIM_AT", "REAL_JCT", "SIM_JCT", "DIFF");
  for (size_t i = 0; i < r.jobs.size(); ++i) {
    const FidelityJob& j = r.jobs[i];
    double diff = j.real_jct_s > 0 && j.sim_jct_s > 0 ? 100 * (j.sim_jct_s - j.real_jct_s) / j.real_jct_s : 0;
    absl::StrAppend(&out, absl::StrFormat("%4d %8.2f %8.1f %-8s %-8s %8.2f %8.2f %+6.1f%%\n", i + 1, j.submit_s,
                                          j.duration_s, j.real_center, j.sim_center, j.real_jct_s, j.sim_jct_s, diff));
  }
  absl::StrAppend(&out, absl::StrFormat(
                            "completed: %d real, %d simulated of %zu; mean JCT %.2f s real, %.2f s simulated; per-job "
                            "completion times differ by %.1f%% on average (target <= 10%%); same center for %.0f%% "
                            "of jobs\n",
                            r.real_completed, r.sim_completed, r.jobs.size(), r.mean_real_jct_s, r.mean_sim_jct_s,
                            100 * r.mean_abs_relative_diff, 100 * r.same_center_share));
  return out;
}

}  // namespace jc::testing
