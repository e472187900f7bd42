// Benchmark of open watch streams (issue 29 item 6): does an admin's request wait while
// 1,000 watches are open, and how fast does one change reach all of them? It starts the
// control plane in this process (SQLite, authentication on), measures the admin's calls
// (gRPC ListCenters and REST GET /openapi/v1/centers) with no stream open, opens the
// streams (two thirds WatchTrainJobs, one third WatchCenters, as a viewer; each accepted
// before the next), measures the admin's calls again, then registers centers and times
// until every center watcher got each JOINED event. The ratio of the two latencies is the
// figure; CPU time per delivered event is the cost. Before the watches ran on the callback
// API, the 65th open stream and every other call got RESOURCE_EXHAUSTED (64 request threads).
//   build/tests/bench/watch_streams_bench [streams=1000] [changes=20]

#include <sys/resource.h>

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "jointcloud/v1/jobs.grpc.pb.h"
#include "jointcloud/v1/registry.grpc.pb.h"
#include "services/server/app.h"

namespace {

namespace v1 = ::jointcloud::v1;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::exit(1);
}

struct Latency {
  double p50 = 0, p99 = 0, max = 0;
};

Latency Of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[ms.size() * 99 / 100], ms.back()};
}

// The admin's calls, 200 of each, one after the other.
std::pair<Latency, Latency> AdminCalls(v1::RegistryService::Stub* registry, httplib::Client* rest,
                                       const std::string& token) {
  std::vector<double> grpc_ms, rest_ms;
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ListCentersResponse listed;
    auto start = Clock::now();
    grpc::Status st = registry->ListCenters(&ctx, v1::ListCentersRequest(), &listed);
    grpc_ms.push_back(Ms(Clock::now() - start));
    if (!st.ok()) Die("admin ListCenters: " + st.error_message());
    start = Clock::now();
    auto res = rest->Get("/openapi/v1/centers");
    rest_ms.push_back(Ms(Clock::now() - start));
    if (!res || res->status != 200) Die("admin GET /openapi/v1/centers failed");
  }
  return {Of(grpc_ms), Of(rest_ms)};
}

// One open watch, read on the shared completion queue.
struct Watch {
  grpc::ClientContext ctx;
  bool centers = false;
  v1::TrainJobEvent job_event;
  v1::CenterEvent center_event;
  std::unique_ptr<grpc::ClientAsyncReader<v1::TrainJobEvent>> jobs;
  std::unique_ptr<grpc::ClientAsyncReader<v1::CenterEvent>> center;
  int joined = 0;  // JOINED events of the benchmark's centers
};

}  // namespace

int main(int argc, char** argv) {
  const int streams = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int changes = argc > 2 ? std::atoi(argv[2]) : 20;
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);

  auto dir = std::filesystem::temp_directory_path() / ("jc-watch-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  jc::server::AppOptions o;
  o.services = *jc::server::ParseServices("all");
  o.grpc_address = "127.0.0.1:0";
  o.rest_port = 0;
  o.admin_port = 0;
  o.store_uri = "sqlite://" + (dir / "store.db").string();
  o.auth.enabled = true;
  o.watches.per_caller = 0;  // one viewer holds them all
  o.auth.rate_limit = {100000, 100000};  // and opens them faster than a user may call
  auto app = jc::server::App::Start(std::move(o));
  if (!app.ok()) Die("jointcloud: " + app.status().ToString());
  auto admin = (*app)->identities()->BootstrapAdmin("admin");
  if (!admin.ok() || !admin->has_value()) Die("admin token: " + admin.status().ToString());
  const std::string admin_token = **admin;

  httplib::Client rest("127.0.0.1", (*app)->rest_port());
  rest.set_keep_alive(true);
  rest.set_tcp_nodelay(true);
  rest.set_bearer_token_auth(admin_token);
  auto must = [&](const char* method, const std::string& path, const json& body) {
    auto res = std::string(method) == "PUT" ? rest.Put(path, body.dump(), "application/json")
                                            : rest.Post(path, body.dump(), "application/json");
    if (!res || res->status != 200) Die(absl::StrCat(method, " ", path, ": ", res ? res->body : "no answer"));
    return json::parse(res->body);
  };
  must("POST", "/openapi/v1/projects", {{"name", "vision"}});
  must("POST", "/openapi/v1/users", {{"name", "vera"}});
  must("PUT", "/openapi/v1/users/vera/projects/vision", {{"role", "VIEWER"}});
  const std::string viewer = must("POST", "/openapi/v1/tokens", {{"user_name", "vera"}})["data"]["secret"];

  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*app)->grpc_port()), grpc::InsecureChannelCredentials());
  auto registry = v1::RegistryService::NewStub(channel);
  auto jobs = v1::JobService::NewStub(channel);

  auto [grpc_before, rest_before] = AdminCalls(registry.get(), &rest, admin_token);

  // Open the watches; each is accepted (its headers came) before the next.
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Watch>> watches;
  auto open_start = Clock::now();
  for (int i = 0; i < streams; ++i) {
    auto w = std::make_unique<Watch>();
    w->ctx.AddMetadata("authorization", "Bearer " + viewer);
    w->centers = i % 3 == 0;
    void* tag = w.get();
    if (w->centers) {
      w->center = registry->AsyncWatchCenters(&w->ctx, v1::WatchCentersRequest(), &cq, tag);
    } else {
      v1::WatchTrainJobsRequest req;
      req.set_heartbeat_seconds(60);
      w->jobs = jobs->AsyncWatchTrainJobs(&w->ctx, req, &cq, tag);
    }
    void* got = nullptr;
    bool ok = false;
    if (!cq.Next(&got, &ok) || !ok || got != tag) Die(absl::StrCat("watch ", i, " did not start"));
    if (w->centers) {
      w->center->ReadInitialMetadata(tag);
    } else {
      w->jobs->ReadInitialMetadata(tag);
    }
    if (!cq.Next(&got, &ok) || !ok || w->ctx.GetServerInitialMetadata().count("jc-watch") == 0) {
      grpc::Status why;
      if (w->centers) {
        w->center->Finish(&why, tag);
      } else {
        w->jobs->Finish(&why, tag);
      }
      cq.Next(&got, &ok);
      Die(absl::StrCat("watch ", i, " was not accepted: ", why.error_message()));
    }
    watches.push_back(std::move(w));
  }
  double open_ms = Ms(Clock::now() - open_start);
  // From here on, one thread reads every stream.
  int center_watchers = 0;
  for (auto& w : watches) {
    if (w->centers) {
      ++center_watchers;
      w->center->Read(&w->center_event, w.get());
    } else {
      w->jobs->Read(&w->job_event, w.get());
    }
  }
  std::atomic<int> joined_total{0};
  std::atomic<bool> ending{false};
  std::thread reader([&] {
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
      auto* w = static_cast<Watch*>(tag);
      if (!ok || ending.load()) continue;  // the end: no more reads
      if (w->centers) {
        if (w->center_event.type() == v1::CenterEvent::JOINED) joined_total.fetch_add(1);
        w->center->Read(&w->center_event, w);
      } else {
        w->jobs->Read(&w->job_event, w);
      }
    }
  });

  auto [grpc_during, rest_during] = AdminCalls(registry.get(), &rest, admin_token);

  // Fan-out: each new center reaches every center watcher.
  std::vector<double> fanout_ms;
  double cpu_start = CpuSeconds();
  for (int c = 0; c < changes; ++c) {
    int before = joined_total.load();
    auto start = Clock::now();
    must("POST", "/openapi/v1/centers",
         {{"ai_center_id", absl::StrCat("c", c)},
          {"name", absl::StrCat("c", c)},
          {"region", "north"},
          {"capacity", {{"cpu", 16}, {"memory", 65536}}}});
    while (joined_total.load() < before + center_watchers) {
      if (Ms(Clock::now() - start) > 30000) Die("a center's JOINED event did not reach every watcher in 30 s");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    fanout_ms.push_back(Ms(Clock::now() - start));
  }
  double cpu = CpuSeconds() - cpu_start;
  Latency fanout = Of(fanout_ms);

  std::printf("watch streams: %d open (%d of jobs, %d of centers), opened in %.0f ms (%.2f ms each)\n", streams,
              streams - center_watchers, center_watchers, open_ms, open_ms / std::max(1, streams));
  std::printf("admin gRPC ListCenters      p50 %.2f ms  p99 %.2f ms  (no stream: p50 %.2f ms  p99 %.2f ms)  p50 ratio %.2f\n",
              grpc_during.p50, grpc_during.p99, grpc_before.p50, grpc_before.p99, grpc_during.p50 / grpc_before.p50);
  std::printf("admin REST GET /centers     p50 %.2f ms  p99 %.2f ms  (no stream: p50 %.2f ms  p99 %.2f ms)  p50 ratio %.2f\n",
              rest_during.p50, rest_during.p99, rest_before.p50, rest_before.p99, rest_during.p50 / rest_before.p50);
  std::printf("one change to %d watchers: p50 %.1f ms  p99 %.1f ms  max %.1f ms; CPU %.1f us per delivered event\n",
              center_watchers, fanout.p50, fanout.p99, fanout.max,
              cpu * 1e6 / std::max(1, changes * center_watchers));

  ending = true;
  for (auto& w : watches) w->ctx.TryCancel();
  // Each stream's end: Finish on the queue, then the queue drains.
  std::vector<grpc::Status> statuses(watches.size());
  for (size_t i = 0; i < watches.size(); ++i) {
    if (watches[i]->centers) {
      watches[i]->center->Finish(&statuses[i], watches[i].get());
    } else {
      watches[i]->jobs->Finish(&statuses[i], watches[i].get());
    }
  }
  cq.Shutdown();  // Next drains what is still in flight, then returns false
  reader.join();
  (*app)->Shutdown();
  std::filesystem::remove_all(dir);
  return 0;
}
