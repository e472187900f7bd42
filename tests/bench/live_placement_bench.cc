// Placement on live centers (issue 45 Deliver 7, SPEC A16): three nexec centers of different
// size, speed and price, each a real nexec master and agent behind the native adapter
// (jc-adapter-native), under the jointcloud server, all processes on loopback. One trace of
// jobs whose run times depend on their names ("prep", "eval", "train") is replayed twice
// against fresh federations: once as shipped (the default profile, the default queue order
// — shortest expected first, aging 0.25 — and moves on), once as
// the baseline (FCFS + first fit, replicas never move). A task sleeps its reference
// duration divided by the speed of the center that runs it (JC_CENTER_ID tells it which), so
// a faster center finishes it sooner, as the centers' performance factors say.
//
// Midway the center's own users take b-medium's whole host for a while (submitted to its
// nexec directly, not through Jointcloud): replicas placed there before the monitor sees it
// wait behind that work, and the default moves them (withdrawn, placed again) where they
// finish sooner, using b-medium's queue report when it has one.
//
// Prints every job of both runs, then mean, p50 and p95 JCT, the makespan, cost (the time
// each attempt ran x the price of the center, as rating does), the moves with their
// reasons, and one moved job's events. Target (issue 45): the default's mean JCT at least
// 10% below the baseline's over at least 60 jobs, with at least one move.
//
// usage: live_placement_bench [jobs=64] [load=0.8] [seed=7] [local_s=20]
// Runs as root (as CI does) or as any account: the agents run tasks as this process's.

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "adapters/native/nexec_backend.h"
#include "executor/auth/munge_auth.h"
#include "tests/testing/json_time.h"
#include "tests/testing/process.h"
#include "tests/testing/rest_client.h"

namespace {

using jc::testing::Process;
using jc::testing::RestClient;
using jc::testing::UnixSeconds;
using jc::testing::WaitUntil;
using nlohmann::json;

struct CenterDef {
  const char* id;
  int cpus;
  double performance;  // the center's performance_factor; tasks sleep duration / this
  double price;        // of cpu-1 there, per hour
};
// Federation order is this order: first fit fills the big, slow, cheap center first.
constexpr CenterDef kCenters[] = {{"a-large", 8, 1.0, 1.0}, {"b-medium", 4, 2.0, 2.0}, {"c-small", 4, 2.5, 3.0}};
constexpr const char* kBusyCenter = "b-medium";  // where the local users take the host

struct JobKind {
  const char* name;
  double reference_s;  // run time on a center of performance 1
  double share;
};
constexpr JobKind kKinds[] = {{"prep", 3, 0.4}, {"eval", 6, 0.35}, {"train", 12, 0.25}};

struct TraceJob {
  double submit_s;
  const JobKind* kind;
};

struct Options {
  int jobs = 64;
  double load = 0.8;  // offered reference work over the federation's reference capacity
  uint64_t seed = 7;
  double local_s = 20;  // how long the local users hold b-medium's host
};

struct Policy {
  std::string label;
  std::string profile;  // the jobs' scheduling.weightProfile ("" = default)
  std::vector<std::string> server_flags;
};

struct JobResult {
  std::string id, name, center;
  double submit_s = 0, jct_s = -1, cost = 0;
  int attempts = 0, moves = 0;
  json history;
};

struct RunResult {
  std::vector<JobResult> jobs;
  double makespan_s = 0;
  std::string moved_events;  // one moved job's events, as the REST stream gives them
  std::string queue_report;  // b-medium's queue report while its host was held
};

std::vector<TraceJob> MakeTrace(const Options& o) {
  std::mt19937_64 rng(o.seed);
  double mean = 0, capacity = 0;
  for (const auto& k : kKinds) mean += k.share * k.reference_s;
  for (const auto& c : kCenters) capacity += c.cpus * c.performance;
  // Bursty arrivals: exponential gaps whose rate switches between high and low every few
  // jobs (the same mean), as submissions come in batches.
  std::exponential_distribution<double> gap(o.load * capacity / mean);
  std::uniform_real_distribution<double> pick(0, 1);
  std::vector<TraceJob> out;
  double t = 0;
  for (int i = 0; i < o.jobs; ++i) {
    double u = pick(rng), acc = 0;
    const JobKind* kind = &kKinds[std::size(kKinds) - 1];
    for (const auto& k : kKinds) {
      acc += k.share;
      if (u < acc) {
        kind = &k;
        break;
      }
    }
    out.push_back({t, kind});
    const bool burst = (i / 8) % 2 == 0;
    t += gap(rng) * (burst ? 0.4 : 1.6);
  }
  return out;
}

// The task: sleep the reference duration divided by the speed of the center running it.
std::string Command(const JobKind& kind) {
  std::string cases;
  for (const auto& c : kCenters) absl::StrAppend(&cases, c.id, ") s=", c.performance, ";; ");
  return absl::StrFormat("case \"$JC_CENTER_ID\" in %s*) s=1;; esac; sleep $(awk \"BEGIN{print %g/$s}\")", cases,
                         kind.reference_s);
}

absl::StatusOr<std::string> Port(Process& p, const std::string& pattern, const std::string& what) {
  auto port = p.WaitForLog(pattern, std::chrono::seconds(60));
  if (!port.has_value()) return absl::UnavailableError(absl::StrCat(what, " did not start: ", p.Log()));
  return *port;
}

// One center: its master, one agent, and the native adapter over them.
struct LiveCenter {
  const CenterDef* def;
  std::unique_ptr<Process> master, agent, adapter;
  std::string master_address, adapter_address;
};

absl::StatusOr<std::unique_ptr<LiveCenter>> StartCenter(const CenterDef& def, const std::string& dir) {
  auto c = std::make_unique<LiveCenter>();
  c->def = &def;
  std::filesystem::create_directories(dir);
  c->master = std::make_unique<Process>(
      std::vector<std::string>{JC_NEXEC_MASTER, "--listen=127.0.0.1:0", "--metrics_address=", "--auth=none",
                               "--data_dir=" + dir + "/master"},
      dir + "/master.log");
  auto port = Port(*c->master, R"(nexec master listening on port (\d+))", absl::StrCat(def.id, "'s nexec master"));
  if (!port.ok()) return port.status();
  c->master_address = "127.0.0.1:" + *port;
  c->agent = std::make_unique<Process>(
      std::vector<std::string>{JC_NEXEC_AGENT, "--master=" + c->master_address, "--auth=none",
                               absl::StrCat("--host=", def.id, "-node1"),
                               absl::StrCat("--resources=cpus=", def.cpus, ",mem=16G"), "--state_dir=" + dir + "/agent"},
      dir + "/agent.log");
  std::ofstream(dir + "/center.yaml") << "center_id: " << def.id << "\nperformance_factor: " << def.performance
                                      << "\nsecurity_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi, price: "
                                      << def.price << "}\n";
  c->adapter = std::make_unique<Process>(
      std::vector<std::string>{JC_ADAPTER_NATIVE, "--listen=127.0.0.1:0", "--plaintext", "--metrics_address=",
                               "--nexec_master=" + c->master_address, "--nexec_auth=none",
                               "--state_dir=" + dir + "/adapter", "--center_config=" + dir + "/center.yaml",
                               "--poll_interval=100ms", "--allow_root_replicas"},
      dir + "/adapter.log");
  auto adapter_port = Port(*c->adapter, R"(listening on port (\d+))", absl::StrCat(def.id, "'s adapter"));
  if (!adapter_port.ok()) return adapter_port.status();
  c->adapter_address = "127.0.0.1:" + *adapter_port;
  return c;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * v.size())) - 1;
  return v[std::min(i, v.size() - 1)];
}

absl::StatusOr<RunResult> RunOnce(const Options& o, const Policy& policy, const std::vector<TraceJob>& trace,
                                  const std::string& dir) {
  std::vector<std::unique_ptr<LiveCenter>> centers;
  for (const auto& def : kCenters) {
    auto c = StartCenter(def, absl::StrCat(dir, "/", def.id));
    if (!c.ok()) return c.status();
    centers.push_back(std::move(*c));
  }
  std::vector<std::string> argv = {JC_SERVER_BINARY,
                                   "--rest_address=127.0.0.1:0",
                                   "--grpc_address=127.0.0.1:0",
                                   "--admin_address=127.0.0.1:0",
                                   "--monitor_interval=1s",
                                   "--scheduler_refresh=100ms",
                                   "--data_dir=" + dir + "/data",
                                   "--admin_token_file=" + dir + "/admin.token"};
  argv.insert(argv.end(), policy.server_flags.begin(), policy.server_flags.end());
  Process server(argv, dir + "/server.log");
  auto rest_port = Port(server, R"(rest listening on http://127\.0\.0\.1:(\d+))", "the server");
  if (!rest_port.ok()) return rest_port.status();
  RestClient rest(std::stoi(*rest_port), jc::testing::AdminToken(dir + "/admin.token"));
  std::string list;
  for (const auto& c : centers) {
    auto r = rest.Post("/openapi/v1/centers", {{"ai_center_id", c->def->id},
                                               {"name", c->def->id},
                                               {"region", "cn"},
                                               {"network_topology", std::string("cn/") + c->def->id},
                                               {"adapter_address", c->adapter_address},
                                               {"capacity", {{"cpu", c->def->cpus}, {"memory", 16384}}}});
    if (r.http_status != 200) return absl::InternalError(absl::StrCat("registering a center: ", r.body.dump()));
    absl::StrAppend(&list, list.empty() ? "" : ",", c->def->id);
  }
  auto spec = rest.Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                     {"resource_spec_name", "1 CPU"},
                                                     {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                     {"service_type", "batch"},
                                                     {"price", 1},
                                                     {"computing_center_list", list}});
  if (spec.http_status != 200) return absl::InternalError(absl::StrCat("registering the spec: ", spec.body.dump()));
  for (const auto& c : centers) {
    auto r = rest.Send("PUT", absl::StrCat("/openapi/v1/resourcespecs/cpu-1/centers/", c->def->id, "/price"),
                       absl::StrCat(R"({"price": )", c->def->price, "}"));
    if (r.http_status != 200) return absl::InternalError(absl::StrCat("pricing: ", r.body.dump()));
  }
  bool ready = WaitUntil(
      [&] {
        if (rest.Get("/readyz").http_status != 200) return false;
        for (const auto& c : centers) {
          auto r = rest.Get(absl::StrCat("/scheduler/algorithm/least_load/score/", c->def->id, "?resourceSpecId=cpu-1"));
          if (r.http_status != 200) return false;
        }
        // And a job would be placed now: every center's monitor has reported its free
        // capacity (a center known but not yet heard from counts as full; a fresh clone's CI
        // once submitted in that moment, and every center refused the job).
        auto plan = rest.Post("/openapi/v1/scheduler/plan",
                              json{{"name", "probe"},
                                   {"tasks", {{{"name", "t"}, {"command", "true"}, {"resourceSpecId", "cpu-1"},
                                               {"replicaNumber", 1}}}}});
        return plan.http_status == 200 && plan.body["data"].value("placed", false);
      },
      std::chrono::seconds(60));
  if (!ready) return absl::UnavailableError("the centers did not become schedulable");

  // The local users' work at b-medium: every CPU of its host, from a quarter into the
  // arrivals, for local_s seconds (its time limit says so: nexec's backfill plans by it).
  LiveCenter* busy = nullptr;
  for (auto& c : centers) {
    if (std::string(c->def->id) == kBusyCenter) busy = c.get();
  }
  auto auth = jc::nexec::MungeAuthFromFlags("none", "");
  if (!auth.ok()) return auth.status();
  jc::adapter::NexecBackend local(busy->master_address, "", *auth);
  const double local_at = trace[trace.size() / 4].submit_s;
  std::string local_id;

  auto start = std::chrono::steady_clock::now();
  auto at = [&](double s) {
    return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
  };
  std::vector<std::string> ids;
  for (size_t i = 0; i < trace.size(); ++i) {
    if (local_id.empty() && trace[i].submit_s >= local_at) {
      std::this_thread::sleep_until(at(local_at));
      jc::adapter::ReplicaLaunch hold;
      hold.name = "local-users";
      hold.command = absl::StrFormat("sleep %g", o.local_s);
      hold.spec.mutable_quantity()->set_cpu(busy->def->cpus);
      hold.time_limit = absl::Seconds(o.local_s);
      auto id = local.Submit(hold);
      if (!id.ok()) return id.status();
      local_id = *id;
      std::string state;
      bool running = WaitUntil(
          [&] {
            auto seen = local.Poll({local_id});
            state = !seen.ok() ? seen.status().ToString() : seen->count(local_id) ? seen->at(local_id).message : "unknown";
            return seen.ok() && seen->count(local_id) && seen->at(local_id).state == jc::adapter::pb::REPLICA_RUNNING;
          },
          std::chrono::seconds(10));
      if (!running) return absl::UnavailableError(absl::StrCat("the local users' work did not start: ", state));
    }
    std::this_thread::sleep_until(at(trace[i].submit_s));
    json job = {{"name", trace[i].kind->name},
                {"tasks", {{{"name", "t"}, {"command", Command(*trace[i].kind)}, {"resourceSpecId", "cpu-1"},
                            {"replicaNumber", 1}}}}};
    if (!policy.profile.empty()) job["scheduling"] = {{"weightProfile", policy.profile}};
    auto r = rest.Post("/openapi/v1/trainjob", job);
    if (r.http_status != 200) return absl::InternalError(absl::StrCat("submitting: ", r.body.dump()));
    ids.push_back(r.body["data"]["jobId"]);
  }
  RunResult result;
  // b-medium's queue report while its host is held, as the scheduler sees it.
  {
    auto r = rest.Get(absl::StrCat("/openapi/v1/centers/", kBusyCenter, "/usage"));
    if (r.http_status == 200) result.queue_report = r.body["data"].dump();
  }
  std::map<std::string, json> final;
  double budget = 120 + 4 * trace.back().submit_s + o.local_s;
  WaitUntil(
      [&] {
        for (const auto& id : ids) {
          if (final.count(id)) continue;
          json job = rest.Get("/openapi/v1/trainjob/" + id + "?history=true").body["data"];
          std::string status = job.value("status", "");
          if (status == "completed" || status == "failed") final[id] = job;
        }
        return final.size() == ids.size();
      },
      std::chrono::milliseconds(static_cast<int64_t>(budget * 1000)));
  double origin = -1, last_end = 0;
  std::map<std::string, double> price;
  for (const auto& c : kCenters) price[c.id] = c.price;
  for (size_t i = 0; i < ids.size(); ++i) {
    JobResult j;
    j.id = ids[i];
    j.name = trace[i].kind->name;
    auto it = final.find(ids[i]);
    if (it == final.end()) {
      result.jobs.push_back(j);
      continue;
    }
    const json& job = it->second;
    auto created = UnixSeconds(job["createdAt"]);
    auto updated = UnixSeconds(job["updatedAt"]);
    if (!created.ok() || !updated.ok()) return absl::InternalError(absl::StrCat("job without times: ", job.dump()));
    if (origin < 0) origin = *created;
    j.submit_s = *created - origin;
    if (job["status"] == "completed") j.jct_s = *updated - *created;
    last_end = std::max(last_end, *updated - origin);
    j.history = job.value("history", json::array());
    for (const auto& a : j.history) {
      ++j.attempts;
      if (a.value("outcome", "") == "withdrawn") ++j.moves;
      j.center = a.value("centerID", "");
      j.cost += a.value("elapsedSeconds", 0.0) * price[j.center] / 3600;
    }
    if (j.moves > 0 && result.moved_events.empty()) {
      result.moved_events = rest.Raw("/openapi/v1/trainjob/" + j.id + "/events?history=true");
    }
    result.jobs.push_back(std::move(j));
  }
  result.makespan_s = last_end;
  if (!local_id.empty()) (void)local.Stop(local_id);
  server.Signal(SIGTERM);
  server.Wait();
  for (auto& c : centers) {
    for (Process* p : {c->adapter.get(), c->agent.get(), c->master.get()}) {
      p->Signal(SIGTERM);
      p->Wait(std::chrono::seconds(10));
    }
  }
  return result;
}

struct Summary {
  int completed = 0, moves = 0;
  double mean = 0, p50 = 0, p95 = 0, cost = 0;
  std::map<std::string, int> per_center;
};

Summary Summarize(const RunResult& r) {
  Summary s;
  std::vector<double> jct;
  for (const auto& j : r.jobs) {
    s.moves += j.moves;
    s.cost += j.cost;
    if (j.jct_s < 0) continue;
    ++s.completed;
    jct.push_back(j.jct_s);
    ++s.per_center[j.center];
  }
  for (double x : jct) s.mean += x / jct.size();
  s.p50 = Percentile(jct, 0.5);
  s.p95 = Percentile(jct, 0.95);
  return s;
}

std::string PerCenter(const Summary& s) {
  std::vector<std::string> parts;
  for (const auto& c : kCenters) parts.push_back(absl::StrCat(c.id, " ", s.per_center.count(c.id) ? s.per_center.at(c.id) : 0));
  return absl::StrJoin(parts, ", ");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc > 1) o.jobs = std::atoi(argv[1]);
  if (argc > 2) o.load = std::atof(argv[2]);
  if (argc > 3) o.seed = std::strtoull(argv[3], nullptr, 10);
  if (argc > 4) o.local_s = std::atof(argv[4]);
  if (o.jobs < 8 || o.load <= 0 || o.local_s <= 0) {
    std::cerr << "usage: live_placement_bench [jobs>=8] [load>0] [seed] [local_s>0]\n";
    return 2;
  }
  const std::vector<TraceJob> trace = MakeTrace(o);
  const std::vector<Policy> policies = {
      {"default", "", {"--move_after=4s"}},
      {"fcfs+first_fit", "first_fit", {"--queue_order=fcfs", "--max_moves=0"}},
  };
  std::string root = (std::filesystem::temp_directory_path() / "jc-live-placement-XXXXXX").string();
  if (mkdtemp(root.data()) == nullptr) return 1;
  std::printf("live placement: %d jobs (%s), load %.2f, seed %llu; centers", o.jobs, "prep 3 s, eval 6 s, train 12 s",
              o.load, static_cast<unsigned long long>(o.seed));
  for (const auto& c : kCenters) std::printf(" %s (%d CPUs, speed %.1f, price %.1f)", c.id, c.cpus, c.performance, c.price);
  std::printf("; %s's host held by its own users for %.0f s from a quarter in\n", kBusyCenter, o.local_s);
  std::vector<Summary> summaries;
  std::vector<RunResult> runs;
  for (const auto& p : policies) {
    const std::string dir = absl::StrCat(root, "/", p.label);
    auto started = std::chrono::steady_clock::now();
    auto r = RunOnce(o, p, trace, dir);
    if (!r.ok()) {
      std::cerr << "live_placement_bench: " << p.label << ": " << r.status() << " (logs in " << dir << ")\n";
      return 1;
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("\n== %s (%.0f s wall)\n%4s %-6s %8s %-9s %8s %5s %8s\n", p.label.c_str(), wall, "JOB", "NAME", "SUBMIT",
                "CENTER", "JCT", "MOVES", "COST");
    for (size_t i = 0; i < r->jobs.size(); ++i) {
      const JobResult& j = r->jobs[i];
      std::printf("%4zu %-6s %8.2f %-9s %8.2f %5d %8.5f\n", i + 1, j.name.c_str(), j.submit_s, j.center.c_str(), j.jct_s,
                  j.moves, j.cost);
    }
    for (const auto& j : r->jobs) {
      for (const auto& a : j.history) {
        if (a.value("outcome", "") == "withdrawn") std::printf("move: %s: %s\n", j.id.c_str(), a.value("message", "").c_str());
      }
    }
    summaries.push_back(Summarize(*r));
    runs.push_back(std::move(*r));
  }
  std::printf("\n%-16s %9s %8s %8s %8s %9s %6s %9s  %s\n", "POLICY", "COMPLETED", "MEAN_JCT", "P50_JCT", "P95_JCT",
              "MAKESPAN", "MOVES", "COST", "JOBS PER CENTER");
  for (size_t i = 0; i < policies.size(); ++i) {
    const Summary& s = summaries[i];
    std::printf("%-16s %6d/%-2zu %8.2f %8.2f %8.2f %9.2f %6d %9.5f  %s\n", policies[i].label.c_str(), s.completed,
                runs[i].jobs.size(), s.mean, s.p50, s.p95, runs[i].makespan_s, s.moves, s.cost,
                PerCenter(s).c_str());
  }
  const Summary& d = summaries[0];
  const Summary& b = summaries[1];
  const double jct_change = b.mean > 0 ? 100 * (d.mean - b.mean) / b.mean : 0;
  const double cost_change = b.cost > 0 ? 100 * (d.cost - b.cost) / b.cost : 0;
  std::printf("default vs fcfs+first_fit: mean JCT %+.1f%%, p95 %+.1f%%, cost %+.1f%%, %d move(s) (target: mean JCT "
              "<= -10%% with at least one move over >= 60 jobs: %s)\n",
              jct_change, b.p95 > 0 ? 100 * (d.p95 - b.p95) / b.p95 : 0, cost_change, d.moves,
              jct_change <= -10 && d.moves >= 1 && o.jobs >= 60 && d.completed == o.jobs ? "met" : "NOT met");
  if (!runs[0].queue_report.empty()) std::printf("%s as the control plane saw it mid-run: %s\n", kBusyCenter, runs[0].queue_report.c_str());
  if (!runs[0].moved_events.empty()) std::printf("a moved job's events:\n%s\n", runs[0].moved_events.c_str());
  std::filesystem::remove_all(root);
  return 0;
}
