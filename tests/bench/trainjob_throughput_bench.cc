// Benchmark (b) of the job issue: training jobs per second end to end on this machine with
// PostgreSQL, from REST submit to dispatched and acknowledged by a center's adapter, and
// the scheduling time T = t_s - t_r (formula 3) at an offered load. Everything is real
// except what a center does with a replica: the whole control plane in one process over
// PostgreSQL, REST over loopback HTTP, and an adapter served by the SDK over loopback
// gRPC whose backend accepts every replica and keeps it pending (so the figures are the
// control plane's, not a cluster's). Prints figures; asserts nothing.
//   PG=$(JC_PG_FSYNC=on scripts/pg.sh start /tmp/jc-bench-pg)
//   build/tests/bench/trainjob_throughput_bench "$PG" [jobs=20000] [clients=32] [offered_per_s=1000]
// JC_BENCH_MONITOR_MS: the monitor's usage poll (default 500 ms, ten times the control plane's).

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <map>
#include <mutex>
#include <thread>

#include <curl/curl.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include "absl/synchronization/mutex.h"
#include "adapters/sdk/run_adapter.h"
#include "common/store/doc.h"
#include "common/store/store.h"
#include "jointcloud/v1/job_record.pb.h"
#include "services/server/app.h"

namespace {

using Clock = std::chrono::steady_clock;

// A center that accepts every replica at once and keeps it pending; or, with `end`, ends
// each one at its first poll as having run a second (so its usage record is written).
class AcceptingBackend final : public jc::adapter::Backend {
 public:
  explicit AcceptingBackend(bool end) : end_(end) {}
  absl::StatusOr<jc::adapter::pb::CenterInfo> Describe() override {
    jc::adapter::pb::CenterInfo info;
    info.set_scheduler("bench");
    info.mutable_capacity()->set_cpu(1'000'000);
    info.mutable_capacity()->set_memory(1'000'000'000);
    return info;
  }
  absl::StatusOr<jc::adapter::pb::Usage> GetUsage() override {
    jc::adapter::pb::Usage u;
    u.mutable_free()->set_cpu(1'000'000);
    u.mutable_free()->set_memory(1'000'000'000);
    return u;
  }
  absl::StatusOr<std::string> Submit(const jc::adapter::ReplicaLaunch& launch) override { return launch.name; }
  absl::Status Stop(const std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<std::map<std::string, jc::adapter::ReplicaObservation>> Poll(
      const std::vector<std::string>& ids) override {
    std::map<std::string, jc::adapter::ReplicaObservation> out;
    absl::Time now = absl::Now();
    for (const auto& id : ids) {
      jc::adapter::ReplicaObservation o;
      if (end_) {
        o.state = jc::adapter::pb::REPLICA_SUCCEEDED;
        o.started_at = now - absl::Seconds(1);
        o.ended_at = now;
        jc::adapter::pb::ReplicaUsage usage;
        usage.set_wall_seconds(1);
        usage.set_cpu_seconds(0.5);
        o.usage = usage;
      }
      out[id] = o;
    }
    return out;
  }
  absl::StatusOr<std::string> ReadLog(const std::string&, bool, int64_t, int64_t) override { return std::string(); }

 private:
  bool end_;
};

// A submitting client, as platforms write them: one keep-alive connection, Nagle off, the
// token, the CA. libcurl by default (what the README's examples use; it reads TLS records
// whole); JC_BENCH_CLIENT=httplib uses cpp-httplib's client, which reads a response's
// headers through SSL_read one byte at a time, a cost of that client, not of the server.
class SubmitClient {
 public:
  struct Options {
    std::string base_url;
    std::string token;  // empty: none
    std::string ca;     // empty: plain HTTP
    bool use_curl = true;
  };
  explicit SubmitClient(const Options& o) : o_(o) {
    if (o_.use_curl) {
      curl_ = curl_easy_init();
      curl_easy_setopt(curl_, CURLOPT_TCP_NODELAY, 1L);
      curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
      if (!o_.ca.empty()) curl_easy_setopt(curl_, CURLOPT_CAINFO, o_.ca.c_str());
      curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &SubmitClient::Append);
      curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &body_);
      headers_ = curl_slist_append(headers_, "Content-Type: application/json");
      if (!o_.token.empty()) headers_ = curl_slist_append(headers_, ("Authorization: Bearer " + o_.token).c_str());
      curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
    } else {
      http_ = std::make_unique<httplib::Client>(o_.base_url);
      http_->set_tcp_nodelay(true);
      http_->set_keep_alive(true);
      if (!o_.token.empty()) http_->set_bearer_token_auth(o_.token);
      if (!o_.ca.empty()) {
        http_->set_ca_cert_path(o_.ca.c_str());
        http_->enable_server_certificate_verification(true);
      }
    }
  }
  ~SubmitClient() {
    if (curl_ != nullptr) curl_easy_cleanup(curl_);
    curl_slist_free_all(headers_);
  }
  SubmitClient(const SubmitClient&) = delete;
  SubmitClient& operator=(const SubmitClient&) = delete;

  // GETs `path` (its answer dropped): true when an answer came. Opens the kept connection.
  bool Get(const std::string& path) {
    if (http_ != nullptr) return static_cast<bool>(http_->Get(path.c_str()));
    body_.clear();
    std::string url = o_.base_url + path;
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
    return curl_easy_perform(curl_) == CURLE_OK;
  }

  // POSTs `body`; true on 200, else `error` says what came back.
  bool Post(const std::string& path, const std::string& body, std::string* error) {
    if (http_ != nullptr) {
      auto r = http_->Post(path.c_str(), body, "application/json");
      if (r && r->status == 200) return true;
      *error = r ? r->body : httplib::to_string(r.error());
      return false;
    }
    body_.clear();
    std::string url = o_.base_url + path;
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    CURLcode rc = curl_easy_perform(curl_);
    long status = 0;
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK && status == 200) return true;
    *error = rc != CURLE_OK ? curl_easy_strerror(rc) : body_;
    return false;
  }

 private:
  static size_t Append(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
  }

  Options o_;
  CURL* curl_ = nullptr;
  curl_slist* headers_ = nullptr;
  std::string body_;
  std::unique_ptr<httplib::Client> http_;
};

// PostgreSQL's CPU, which the figure of this process leaves out: its processes' user and
// system ticks by pid (/proc/<pid>/stat), the postmaster's and every process
// pg_stat_activity lists (backends, WAL writer, checkpointer...). A process that started and
// ended between two readings is missed; the control plane keeps its connections.
std::map<int, double> PostgresCpuByPid(const std::string& pg, const std::string& schema) {
  std::map<int, double> out;
  auto store = jc::store::OpenStore(pg, schema);
  if (!store.ok()) return out;
  auto rows = (*store)->Query("SELECT pid FROM pg_stat_activity");
  if (!rows.ok()) return out;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  auto read = [&](int pid, int* parent) {
    std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    if (f == nullptr) return;
    char line[1024] = {};
    size_t n = std::fread(line, 1, sizeof(line) - 1, f);
    std::fclose(f);
    line[n] = 0;
    // After the command's closing parenthesis: state, ppid, ... utime is field 14, stime 15.
    const char* rest = std::strrchr(line, ')');
    if (rest == nullptr) return;
    char state = 0;
    int ppid = 0;
    unsigned long utime = 0, stime = 0;
    if (std::sscanf(rest + 1, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &state, &ppid, &utime, &stime) != 4) {
      return;
    }
    out[pid] = (utime + stime) / tick;
    if (parent != nullptr) *parent = ppid;
  };
  int postmaster = 0;
  for (const auto& row : *rows) {
    if (!row[0]) continue;
    int pid = std::atoi(row[0]->c_str());
    if (pid > 0) read(pid, &postmaster);
  }
  if (postmaster > 1) read(postmaster, nullptr);
  return out;
}

// The CPU PostgreSQL spent between two readings, in seconds.
double PostgresCpuBetween(const std::map<int, double>& before, const std::map<int, double>& after) {
  double sum = 0;
  for (const auto& [pid, seconds] : after) {
    auto it = before.find(pid);
    sum += seconds - (it == before.end() ? 0.0 : it->second);
  }
  return sum;
}

// Where T went, by the job records of jobs [first_seq, ...) once their hand-over is
// stored: received → placed (the wait for the job manager's loop, or for a pass), placed →
// acknowledged (the burst's commit, a sender, the adapter's call with its own commit),
// acknowledged → scheduled (the answer's way back through the job manager's loop; nil when
// the center's event told first). p50 and p99 of each, in ms.
void PrintStages(const std::string& pg, const std::string& schema, int64_t first_seq, int jobs) {
  auto store = jc::store::OpenStore(pg, schema);
  if (!store.ok()) {
    std::printf("    stages: %s\n", store.status().ToString().c_str());
    return;
  }
  auto at = [](const google::protobuf::Timestamp& t) { return t.seconds() * 1e3 + t.nanos() / 1e6; };
  std::vector<double> queue, handed, back;
  for (int tries = 0; tries < 20 && static_cast<int>(queue.size()) < jobs; ++tries) {
    if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    queue.clear();
    handed.clear();
    back.clear();
    auto rows = (*store)->Query("SELECT doc FROM jobs WHERE seq >= $1", {first_seq});
    if (!rows.ok()) {
      std::printf("    stages: %s\n", rows.status().ToString().c_str());
      return;
    }
    for (const auto& row : *rows) {
      auto r = jc::store::DecodeAnyDoc<jointcloud::v1::JobRecord>(row[0]);
      if (!r.ok() || !r->has_scheduled_at() || r->replicas_size() == 0) continue;
      const auto& rep = r->replicas(0);
      if (rep.attempts_size() == 0) continue;
      const auto& a = rep.attempts(rep.attempts_size() - 1);
      queue.push_back(at(a.placed_at()) - at(r->received_at()));
      // The center's event may tell of the replica before the submit's answer does: then
      // the hand-over is the event's (no dispatched_at yet), and the loop's part is nil.
      const double acknowledged = rep.has_dispatched_at() ? at(rep.dispatched_at()) : at(r->scheduled_at());
      handed.push_back(std::min(acknowledged, at(r->scheduled_at())) - at(a.placed_at()));
      back.push_back(std::max(0.0, at(r->scheduled_at()) - acknowledged));
    }
  }
  auto q = [](std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
  };
  // A sample: a plain acknowledgement of a submit is not written (JobManager::CompleteSubmit:
  // the stored replica stays DISPATCHING until the adapter's next event is), so only jobs
  // whose hand-over an event told, or whose later change was written, carry the stamps.
  std::printf("    T by stage over %zu of %d jobs (p50 / p99 ms): received→placed %.1f / %.1f; placed→acknowledged by the "
              "adapter (the commit, a sender, the adapter's call) %.1f / %.1f; acknowledged→scheduled (the loop) "
              "%.1f / %.1f\n",
              queue.size(), jobs, q(queue, 0.5), q(queue, 0.99), q(handed, 0.5), q(handed, 0.99), q(back, 0.5),
              q(back, 0.99));
}

double Counter(httplib::Client& c, const std::string& pattern) {
  auto r = c.Get("/metrics");
  if (!r) return -1;
  std::smatch m;
  if (std::regex_search(r->body, m, std::regex(pattern))) return std::stod(m[1]);
  return 0;
}

double Scheduled(httplib::Client& c, std::vector<std::pair<double, double>>* buckets = nullptr) {
  auto r = c.Get("/metrics");
  if (!r) return -1;
  std::smatch m;
  double n = 0;
  if (std::regex_search(r->body, m, std::regex(R"(\njc_jobs_scheduled_total ([0-9.e+]+))"))) n = std::stod(m[1]);
  if (buckets) {
    buckets->clear();
    std::regex b(R"re(jc_scheduling_time_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+))re");
    for (std::sregex_iterator it(r->body.begin(), r->body.end(), b), end; it != end; ++it) {
      double le = (*it)[1] == "+Inf" ? 1e9 : std::stod((*it)[1]);
      buckets->push_back({le, std::stod((*it)[2])});
    }
  }
  return n;
}

// A histogram's buckets and sum on /metrics: `series` is its name and labels' start, e.g.
// `jc_handover_stage_seconds_bucket{stage="write",`.
struct Buckets {
  std::vector<std::pair<double, double>> le_count;
  double sum = 0, count = 0;
};
Buckets ReadHistogram(httplib::Client& c, const std::string& name, const std::string& labels) {
  Buckets out;
  auto r = c.Get("/metrics");
  if (!r) return out;
  std::regex b(name + "_bucket\\{" + labels + ",le=\"([^\"]+)\"\\} ([0-9.e+]+)");
  for (std::sregex_iterator it(r->body.begin(), r->body.end(), b), end; it != end; ++it) {
    double le = (*it)[1] == "+Inf" ? 1e9 : std::stod((*it)[1]);
    out.le_count.push_back({le, std::stod((*it)[2])});
  }
  std::smatch m;
  if (std::regex_search(r->body, m, std::regex(name + "_sum\\{" + labels + "\\} ([0-9.e+-]+)"))) out.sum = std::stod(m[1]);
  if (std::regex_search(r->body, m, std::regex(name + "_count\\{" + labels + "\\} ([0-9.e+]+)"))) out.count = std::stod(m[1]);
  return out;
}

// Prometheus's histogram_quantile: linear within the bucket.
double Quantile(double q, const std::vector<std::pair<double, double>>& now,
                const std::vector<std::pair<double, double>>& before) {
  std::vector<std::pair<double, double>> b;
  for (size_t i = 0; i < now.size(); ++i) b.push_back({now[i].first, now[i].second - (i < before.size() ? before[i].second : 0)});
  if (b.empty() || b.back().second <= 0) return 0;
  double rank = q * b.back().second, prev_le = 0, prev_count = 0;
  for (const auto& [le, count] : b) {
    if (count >= rank) return prev_le + (le - prev_le) * (rank - prev_count) / std::max(1e-9, count - prev_count);
    prev_le = le;
    prev_count = count;
  }
  return b.back().first;
}

}  // namespace

int main(int argc, char** argv) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s POSTGRES_URI [jobs] [clients] [offered_per_s]\n", argv[0]);
    return 2;
  }
  std::string pg = argv[1];
  int jobs = argc > 2 ? std::atoi(argv[2]) : 20000;
  int clients = argc > 3 ? std::atoi(argv[3]) : 32;
  int offered = argc > 4 ? std::atoi(argv[4]) : 1000;
  spdlog::set_level(spdlog::level::warn);
  // As the jointcloud and adapter binaries do (their main functions).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto dir = std::filesystem::temp_directory_path() / ("jc-trainjob-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);

  // Every request carries an API token (authenticated at the gRPC edge) over HTTPS, and
  // the control plane calls the adapter over mutual TLS, as in production;
  // JC_BENCH_NO_AUTH=1 runs the same without either, to print what they cost.
  bool auth = std::getenv("JC_BENCH_NO_AUTH") == nullptr;
  // JC_BENCH_NO_TLS=1: tokens, but plaintext (to tell the two costs apart).
  bool tls = auth && std::getenv("JC_BENCH_NO_TLS") == nullptr;
  std::string certs = (dir / "tls").string();
  if (tls) {
    std::string make = std::string(JC_SOURCE_DIR) + "/scripts/dev-ca.sh " + certs + " jointcloud bench >/dev/null";
    if (std::system(make.c_str()) != 0) {
      std::fprintf(stderr, "scripts/dev-ca.sh failed\n");
      return 1;
    }
  }

  // JC_BENCH_END=1: replicas end at once, so every job completes and is metered (a usage
  // record each); (1) then also times submit to completed. JC_BENCH_NO_METERING=1: the
  // same with the job manager writing no usage records, to print what metering costs.
  const bool end = std::getenv("JC_BENCH_END") != nullptr;
  const bool metering = std::getenv("JC_BENCH_NO_METERING") == nullptr;
  AcceptingBackend backend(end);
  jc::adapter::AdapterOptions ao;
  ao.listen = "127.0.0.1:0";
  ao.metrics_address = "";
  ao.state_dir = (dir / "adapter").string();
  ao.poll_interval = end ? absl::Milliseconds(50) : absl::Seconds(5);
  ao.center = *jc::adapter::ParseCenterConfig("center_id: bench\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 1Gi}\n");
  if (tls) ao.tls = {certs + "/bench.crt", certs + "/bench.key", certs + "/ca.crt"};
  auto adapter = jc::adapter::AdapterServer::Start(&backend, ao);
  if (!adapter.ok()) {
    std::fprintf(stderr, "adapter: %s\n", adapter.status().ToString().c_str());
    return 1;
  }

  jc::server::AppOptions o;
  o.services = *jc::server::ParseServices("all");
  o.grpc_address = "127.0.0.1:0";
  o.rest_port = 0;
  o.store_uri = pg;
  const std::string schema = "bench_" + std::to_string(getpid());
  o.store_schema = schema;
  // JC_BENCH_PLACEMENT_HISTORY=0: no placement explanation kept in the store (the cost of
  // keeping them, paired: docs/benchmarks.md).
  if (const char* kept = std::getenv("JC_BENCH_PLACEMENT_HISTORY")) o.placement_history = std::atoi(kept);
  std::printf("placement explanations kept in the store: %s\n",
              o.placement_history > 0 ? absl::StrCat("the newest ", o.placement_history).c_str() : "none");
  o.gateway.worker_threads = clients;
  // The monitor's usage poll every 500 ms, ten times as often as the control plane's default
  // (monitor.h), each poll walking the adapter's whole queue; JC_BENCH_MONITOR_MS sets another
  // (session 66: at 5000, T and CPU per job the same within this VM's noise).
  o.monitor.interval = absl::Milliseconds(500);
  if (const char* ms = std::getenv("JC_BENCH_MONITOR_MS")) o.monitor.interval = absl::Milliseconds(std::atoi(ms));
  std::printf("monitor's usage poll every %s\n", absl::FormatDuration(o.monitor.interval).c_str());
  o.jobs.cycle_interval = absl::Milliseconds(20);
  o.auth.enabled = auth;
  o.jobs.metering = metering;
  // JC_BENCH_GATEWAY_OVER_GRPC=1: the gateway reaches the job service over the in-process
  // gRPC channel, as before ADR 0014 (--gateway_direct_calls=false), to print what the hop costs.
  const bool direct = std::getenv("JC_BENCH_GATEWAY_OVER_GRPC") == nullptr;
  o.gateway_direct_calls = direct;
  if (tls) o.auth.tls = {certs + "/jointcloud.crt", certs + "/jointcloud.key", certs + "/ca.crt"};
  auto app = jc::server::App::Start(std::move(o));
  if (!app.ok()) {
    std::fprintf(stderr, "jointcloud: %s\n", app.status().ToString().c_str());
    return 1;
  }
  int port = (*app)->rest_port();
  std::string token;
  if (auth) {
    auto made = (*app)->identities()->BootstrapAdmin("admin");
    if (!made.ok() || !made->has_value()) {
      std::fprintf(stderr, "admin token: %s\n", made.status().ToString().c_str());
      return 1;
    }
    token = **made;
  }
  std::printf("authentication %s, TLS %s; replicas %s; metering %s; gateway to jobs %s\n",
              auth ? "on (every request carries an API token)" : "OFF", tls ? "on (HTTPS)" : "OFF",
              end ? "end at once (JC_BENCH_END)" : "stay pending", metering ? "on" : "OFF",
              direct ? "direct (ADR 0014)" : "over in-process gRPC (JC_BENCH_GATEWAY_OVER_GRPC)");
  const std::string base_url = std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port);
  // A REST client as platforms make them: keep-alive, Nagle off, the token, the CA.
  auto configure = [&](httplib::Client& c) {
    c.set_tcp_nodelay(true);
    c.set_keep_alive(true);
    if (auth) c.set_bearer_token_auth(token);
    if (tls) {
      c.set_ca_cert_path((certs + "/ca.crt").c_str());
      c.enable_server_certificate_verification(true);
    }
  };
  httplib::Client admin(base_url);
  configure(admin);
  std::mutex first_error_mu;
  std::string first_error;
  std::atomic<int64_t> slowest_us{0};
  const bool use_curl = std::getenv("JC_BENCH_CLIENT") == nullptr || std::string(std::getenv("JC_BENCH_CLIENT")) != "httplib";
  std::printf("submitting clients: %s\n", use_curl ? "libcurl" : "cpp-httplib");
  const SubmitClient::Options client_options{base_url, token, tls ? certs + "/ca.crt" : "", use_curl};
  auto post = [&](SubmitClient& c, const std::string& path, const std::string& body) {
    auto sent_at = Clock::now();
    std::string error;
    bool ok = c.Post(path, body, &error);
    int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent_at).count();
    for (int64_t seen = slowest_us.load(); us > seen && !slowest_us.compare_exchange_weak(seen, us);) {
    }
    if (!ok) {
      std::lock_guard<std::mutex> lock(first_error_mu);
      if (first_error.empty()) first_error = error;
    }
    return ok;
  };
  SubmitClient setup(client_options);
  post(setup, "/openapi/v1/centers",
       R"({"ai_center_id": "bench", "name": "bench", "region": "local", "adapter_address": "127.0.0.1:)" +
           std::to_string((*adapter)->port()) + R"(", "capacity": {"cpu": 1000000, "memory": 1000000000}})");
  post(setup, "/openapi/v1/resourcespecs",
       R"({"resource_spec_id": "cpu-1", "resource_spec_name": "1 CPU", "resource_quantity": {"cpu": "1", "memory": "1Gi"},
           "service_type": "batch", "price": 1, "computing_center_list": "bench"})");
  for (int i = 0; i < 200; ++i) {
    auto r = admin.Get("/scheduler/algorithm/least_load/score/bench?resourceSpecId=cpu-1");
    if (r && r->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string job =
      R"({"name": "bench", "tasks": [{"name": "t", "command": "true", "resourceSpecId": "cpu-1", "replicaNumber": 1}]})";

  // (1) As fast as the clients can submit.
  std::atomic<int> next{0}, refused{0};
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  // The clients' own CPU, each thread's (RUSAGE_THREAD), to print apart: in a deployment they
  // run elsewhere.
  std::atomic<int64_t> clients_cpu_us{0};
  auto thread_cpu_us = [] {
    rusage u{};
    getrusage(RUSAGE_THREAD, &u);
    return int64_t{u.ru_utime.tv_sec + u.ru_stime.tv_sec} * 1'000'000 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
  };
  const std::map<int, double> pg_start = PostgresCpuByPid(pg, schema);
  double cpu_start = cpu_seconds();
  auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int c = 0; c < clients; ++c) {
    pool.emplace_back([&] {
      pthread_setname_np(pthread_self(), "bench-client");
      const int64_t began = thread_cpu_us();
      {
        SubmitClient client(client_options);
        while (next.fetch_add(1) < jobs) {
          if (!post(client, "/openapi/v1/trainjob", job)) ++refused;
        }
      }
      clients_cpu_us += thread_cpu_us() - began;
    });
  }
  for (auto& t : pool) t.join();
  double submitted_s = std::chrono::duration<double>(Clock::now() - start).count();
  while (Scheduled(admin) < jobs - refused) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("(1) %d jobs, %d REST clients, PostgreSQL: all acknowledged by the API in %.2f s (%.0f/s); all "
              "dispatched and acknowledged by the adapter in %.2f s: %.0f jobs/s end to end (target >= 3000)%s\n",
              jobs, clients, submitted_s, jobs / submitted_s, total_s, jobs / total_s,
              refused ? " (some refused!)" : "");
  if (refused) std::printf("    %d refused; the first: %s\n", refused.load(), first_error.c_str());
  // This process is the whole control plane, the adapter and the clients (PostgreSQL is
  // apart): CPU per job is the figure that compares across machines of other speeds.
  const double cpu_total_us = 1e6 * (cpu_seconds() - cpu_start) / jobs;
  const double cpu_clients_us = static_cast<double>(clients_cpu_us.load()) / jobs;
  std::printf("    CPU time of this process (control plane + adapter + clients): %.0f us per job (the clients %.0f, "
              "the rest %.0f); PostgreSQL's processes beside it: %.0f us per job\n",
              cpu_total_us, cpu_clients_us, cpu_total_us - cpu_clients_us,
              1e6 * PostgresCpuBetween(pg_start, PostgresCpuByPid(pg, schema)) / jobs);
  if (end) {
    // Every job completed, each with its usage record written in the transaction of its end.
    const std::string completed = R"(jc_jobs_ended_total\{status="completed"\} ([0-9.e+]+))";
    while (Counter(admin, completed) < jobs - refused) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    double done_s = std::chrono::duration<double>(Clock::now() - start).count();
    double records = 0;
    if (auto r = admin.Get("/metrics")) {
      std::regex series(R"(jc_usage_records_total\{[^}]*\} ([0-9.e+]+))");
      for (std::sregex_iterator it(r->body.begin(), r->body.end(), series), stop; it != stop; ++it) {
        records += std::stod((*it)[1]);
      }
    }
    std::printf("    all completed in %.2f s: %.0f jobs/s submit to completed; %.0f usage records written; CPU %.0f us "
                "per job to completion\n",
                done_s, jobs / done_s, records, 1e6 * (cpu_seconds() - cpu_start) / jobs);
  }
  double batches = 0, batched = 0;
  if (auto r = admin.Get("/metrics")) {
    std::smatch m;
    if (std::regex_search(r->body, m, std::regex(R"(\njc_dispatch_batch_replicas_count ([0-9.e+]+))"))) batches = std::stod(m[1]);
    if (std::regex_search(r->body, m, std::regex(R"(\njc_dispatch_batch_replicas_sum ([0-9.e+]+))"))) batched = std::stod(m[1]);
  }
  std::printf("    slowest REST create: %.1f ms; %.1f replicas per submit call to the adapter on average\n",
              slowest_us.load() / 1000.0, batches > 0 ? batched / batches : 0.0);
  slowest_us = 0;

  // (2) T at an offered load.
  // Jobs are numbered in order from 1: those of (2) come after every job of (1) and the warm-up.
  int64_t first_paced_seq = 0;
  if (auto counted = jc::store::OpenStore(pg, schema); counted.ok()) {
    if (auto max = (*counted)->Query("SELECT MAX(seq) FROM jobs"); max.ok() && !max->empty() && (*max)[0][0]) {
      first_paced_seq = std::stoll(*(*max)[0][0]) + 1;
    }
  }
  // T in a steady state: each client's connection (its TLS handshake) is made before the
  // first job, as part (1)'s clients' were by then. Opened in the first millisecond of the
  // pacing, 32 handshakes held both cores for ~50 ms and were most of T's p99.
  std::vector<std::unique_ptr<SubmitClient>> connected;
  for (int c = 0; c < clients; ++c) {
    connected.push_back(std::make_unique<SubmitClient>(client_options));
    connected.back()->Get("/openapi/v1/resourcespecs");
  }
  std::vector<std::pair<double, double>> before, after;
  double base = Scheduled(admin, &before);
  const char* stages[] = {"write", "outbox", "adapter_call", "loop"};
  std::map<std::string, Buckets> stages_before;
  for (const char* stage : stages) {
    stages_before[stage] = ReadHistogram(admin, "jc_handover_stage_seconds", std::string("stage=\"") + stage + "\"");
  }
  int paced = offered * 5;
  std::atomic<int> sent{0};
  auto t0 = Clock::now();
  pool.clear();
  for (int c = 0; c < clients; ++c) {
    pool.emplace_back([&, c] {
      SubmitClient& client = *connected[c];
      for (int i = c; i < paced; i += clients) {
        auto due = t0 + std::chrono::microseconds(static_cast<int64_t>(1e6 * i / offered));
        std::this_thread::sleep_until(due);
        post(client, "/openapi/v1/trainjob", job);
        ++sent;
      }
    });
  }
  for (auto& t : pool) t.join();
  while (Scheduled(admin, &after) < base + paced) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("(2) %d jobs offered at %d/s (%.0f/s achieved): T p50 %.1f ms, p99 %.1f ms (from the "
              "jc_scheduling_time_seconds histogram); slowest REST create %.1f ms\n",
              paced, offered, paced / load_s, 1000 * Quantile(0.5, after, before), 1000 * Quantile(0.99, after, before),
              slowest_us.load() / 1000.0);
  PrintStages(pg, schema, first_paced_seq, paced);
  // The same stages from the job manager's own histograms, every job (a burst's commit and an
  // adapter call are counted once each, whatever they carried).
  std::printf("    hand-over stages (jc_handover_stage_seconds, mean / p50 / p99 ms):");
  for (const char* stage : stages) {
    Buckets now = ReadHistogram(admin, "jc_handover_stage_seconds", std::string("stage=\"") + stage + "\"");
    const Buckets& was = stages_before[stage];
    const double n = now.count - was.count;
    std::printf(" %s %.2f / %.2f / %.2f (%.0f)%s", stage, n > 0 ? 1000 * (now.sum - was.sum) / n : 0.0,
                1000 * Quantile(0.5, now.le_count, was.le_count), 1000 * Quantile(0.99, now.le_count, was.le_count), n,
                std::string(stage) == "loop" ? "\n" : ";");
  }
  (*app)->Shutdown();
  (*adapter)->Shutdown();
  std::filesystem::remove_all(dir);
  // The run's schema goes with it. Left behind, its tables of 25,000 jobs (and their events,
  // audit rows and placements) were vacuumed and analysed by PostgreSQL's autovacuum during
  // later runs' timed windows, on one of the machine's two cores. With 24 such schemas left,
  // T's p99 at 1,000 jobs/s was 13-41 ms in 6 of 15 runs; with none, 7-8 ms in each of 4
  // (session 78: the likely cause, not a proven one; docs/benchmarks.md).
  if (auto store = jc::store::OpenStore(pg, schema); store.ok()) {
    (void)(*store)->Exec("SET client_min_messages TO warning");  // not a notice per table dropped
    if (auto dropped = (*store)->Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE"); !dropped.ok()) {
      std::fprintf(stderr, "could not drop the bench's schema %s: %s\n", schema.c_str(), dropped.status().ToString().c_str());
    }
  }
  return 0;
}
