// The fault-injection suite (SPEC C7, A7, C5): real `jointcloud` and adapter processes over
// loopback take keyed trainjobs from 8 clients while a seeded schedule injects faults —
// SIGKILL of the control plane, SIGKILL of the adapter, an immediate PostgreSQL restart
// (on the PostgreSQL run), the adapter unreachable (a TCP proxy holds every byte) and
// then slow; and throughout, adapter events duplicated and reordered (a gRPC proxy between
// the control plane and the adapter). Afterwards an invariant checker reads the API and
// the replicas' own record:
//   lost        acknowledged jobs the API does not know, or a key answered with another job
//   stranded    jobs not completed or failed within the bound once the faults stopped
//   duplicates  replica keys (job, task, replica, attempt) that ran more than once
//   phantoms    jobs reported completed whose replica never ran
//   unmetered   attempts that ran without a usage record, and "succeeded" records of
//               attempts that never ran (issue 31)
// All must be 0. The test command runs a short schedule; docs/reliability.md gives
// the command of the long one (JC_FAULT_JOBS, JC_FAULT_FAULTS, JC_FAULT_SEED,
// JC_FAULT_OUTAGE_S) and keeps its latest counts.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/testing/event_chaos_proxy.h"
#include "tests/testing/munge_daemon.h"
#include "tests/testing/oci_registry.h"
#include "tests/testing/own_postgres.h"
#include "tests/testing/process.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/tcp_proxy.h"
#include "tests/testing/test_store.h"

using nlohmann::json;
using jc::testing::Process;

namespace {

using jc::testing::OwnPostgres;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? std::atoi(v) : fallback;
}

enum class Fault {
  kKillServer,
  kKillAdapter,
  kRestartStore,
  kAdapterUnreachable,
  kAdapterSlow,
  kKillNexecMaster,
  kKillAgent
};

const char* Name(Fault f) {
  switch (f) {
    case Fault::kKillServer: return "SIGKILL jointcloud";
    case Fault::kKillAdapter: return "SIGKILL adapter";
    case Fault::kRestartStore: return "PostgreSQL immediate restart";
    case Fault::kAdapterUnreachable: return "adapter unreachable";
    case Fault::kAdapterSlow: return "adapter slow";
    case Fault::kKillNexecMaster: return "SIGKILL nexec-master";
    case Fault::kKillAgent: return "SIGKILL nexec-agent";
  }
  return "?";
}

// The center: the SDK's example adapter (replicas as local processes), or, with `native`,
// the bundled executor (a nexec master and one agent) behind the native adapter.
class Harness {
 public:
  // `seed` draws the event stream's faults (events duplicated and reordered between the
  // control plane and the adapter).
  // `agent_flags`: more flags for the nexec agent (e.g. its registry's credentials).
  Harness(std::string dir, bool native, uint64_t seed = 1, std::vector<std::string> agent_flags = {})
      : dir_(std::move(dir)), native_(native), seed_(seed), agent_flags_(std::move(agent_flags)) {
    if (!native_) return;
    jc::testing::UsePrivateMunged();  // nexec's processes and the native adapter sign with it
    // A task lost with its agent fails (the control plane retries it as a new attempt)
    // rather than being rerun by nexec under the same replica key.
    std::ofstream(dir_ + "/nexec.yaml") << "queues:\n  - name: normal\n    rerun_on_host_failure: false\n";
    StartNexecMaster();
    StartAgent();
  }

  void StartNexecMaster() {
    ++nexec_starts_;
    nexec_ = std::make_unique<Process>(
        std::vector<std::string>{JC_NEXEC_MASTER, "--listen=127.0.0.1:" + std::to_string(nexec_port_),
                                 "--data_dir=" + dir_ + "/nexec", "--metrics_address=", "--host_timeout=3s", "--lease_ttl=2s",
                                 "--config=" + dir_ + "/nexec.yaml"},
        dir_ + "/nexec" + std::to_string(nexec_starts_) + ".log");
    auto port = nexec_->WaitForLog(R"(nexec master listening on port (\d+))");
    INFO(nexec_->Log());
    REQUIRE(port.has_value());
    nexec_port_ = std::stoi(*port);  // a restart listens on the same port
  }
  void StartAgent() {
    ++agent_starts_;
    std::vector<std::string> args{JC_NEXEC_AGENT, "--master=127.0.0.1:" + std::to_string(nexec_port_),
                                  "--host=node1", "--resources=cpus=32,mem=64G", "--heartbeat=200ms",
                                  "--state_dir=" + dir_ + "/agent-state"};
    args.insert(args.end(), agent_flags_.begin(), agent_flags_.end());
    agent_ = std::make_unique<Process>(args, dir_ + "/agent" + std::to_string(agent_starts_) + ".log");
    REQUIRE(agent_->WaitForLog("listening on").has_value());
  }
  void KillNexecMaster() {
    nexec_->Signal(SIGKILL);
    nexec_->Wait();
  }
  void KillAgent() {
    agent_->Signal(SIGKILL);
    agent_->Wait();
  }

  void StartAdapter() {
    ++adapter_starts_;
    std::vector<std::string> args{native_ ? JC_ADAPTER_NATIVE : JC_ADAPTER_LOCAL, "--listen=127.0.0.1:0", "--plaintext",
                                  "--metrics_address=", "--state_dir=" + dir_ + "/adapter",
                                  "--center_config=" + dir_ + "/center.yaml", "--poll_interval=50ms",
                                  // The faults, not run-as accounts, are under test (run_as_test is):
                                  // replicas write into this root-owned directory.
                                  "--allow_root_replicas"};
    if (native_) {
      args.push_back("--nexec_master=127.0.0.1:" + std::to_string(nexec_port_));
    } else {
      for (std::string a : {"--work_dir=" + dir_ + "/replicas", std::string("--cpus=32"),
                            std::string("--memory_mb=65536")}) {
        args.push_back(a);
      }
    }
    adapter_ = std::make_unique<Process>(args, dir_ + "/adapter" + std::to_string(adapter_starts_) + ".log");
    auto port = adapter_->WaitForLog(R"(listening on port (\d+))");
    INFO(adapter_->Log());
    REQUIRE(port.has_value());
    if (proxy_ == nullptr) {
      proxy_ = std::make_unique<jc::testing::TcpProxy>(std::stoi(*port));
      // control plane -> events mangled -> network faults -> adapter
      chaos_ = std::make_unique<jc::testing::EventChaosProxy>("127.0.0.1:" + std::to_string(proxy_->port()), seed_,
                                                              jc::testing::EventChaosProxy::Odds{});
    } else {
      proxy_->SetUpstream(std::stoi(*port));
    }
  }

  void StartServer(const std::vector<std::string>& flags) {
    ++server_starts_;
    std::vector<std::string> args{JC_SERVER_BINARY, "--rest_address=127.0.0.1:0", "--grpc_address=127.0.0.1:0",
                                  "--admin_address=127.0.0.1:0", "--monitor_interval=100ms",
                                  "--scheduler_refresh=50ms", "--instance_id=fault-suite",
                                  "--admin_token_file=" + dir_ + "/admin.token"};
    args.insert(args.end(), flags.begin(), flags.end());
    server_ = std::make_unique<Process>(args, dir_ + "/server" + std::to_string(server_starts_) + ".log");
    auto p = server_->WaitForLog(R"(rest listening on http://127\.0\.0\.1:(\d+))");
    INFO(server_->Log());
    REQUIRE(p.has_value());
    port_ = std::stoi(*p);
  }

  // Registers the adapter (through both proxies) as center "local" with spec cpu-1, and
  // waits until the scheduler can place on it.
  void AddCenter() {
    jc::testing::RestClient rest(port_, token());
    REQUIRE(jc::testing::AddCenterWithSpec(rest, "local", "127.0.0.1:" + std::to_string(chaos_->port()), 32, 65536,
                                           "64Mi"));
  }

  void KillServer() {
    server_->Signal(SIGKILL);
    server_->Wait();
  }
  void KillAdapter() {
    adapter_->Signal(SIGKILL);
    adapter_->Wait();
  }

  int port() const { return port_; }
  // The federation admin's token, written by the first server start.
  std::string token() const { return jc::testing::AdminToken(dir_ + "/admin.token"); }
  jc::testing::TcpProxy& proxy() { return *proxy_; }
  const jc::testing::EventChaosProxy& chaos() const { return *chaos_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  bool native_;
  std::unique_ptr<Process> nexec_, agent_;
  std::unique_ptr<Process> adapter_, server_;
  std::unique_ptr<jc::testing::TcpProxy> proxy_;
  std::unique_ptr<jc::testing::EventChaosProxy> chaos_;
  uint64_t seed_;
  std::vector<std::string> agent_flags_;
  std::atomic<int> port_{0};
  int nexec_port_ = 0;
  int adapter_starts_ = 0, server_starts_ = 0, nexec_starts_ = 0, agent_starts_ = 0;
};

}  // namespace

// The suite on one center; `native`: the bundled executor's, with its master and agent
// among the processes killed.
static void RunFaultSuite(bool native) {
  // A client writing to a server just killed must see an error, not die of SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  const int seed = EnvInt("JC_FAULT_SEED", 11);
  const int jobs = EnvInt("JC_FAULT_JOBS", native ? 200 : 300);
  const bool postgres = jc::testing::TestStoreBackend() == "postgres";
  std::vector<Fault> kinds{Fault::kKillServer, Fault::kKillAdapter, Fault::kAdapterUnreachable, Fault::kAdapterSlow};
  if (postgres) kinds.push_back(Fault::kRestartStore);
  if (native) {
    kinds.push_back(Fault::kKillNexecMaster);
    kinds.push_back(Fault::kKillAgent);
  }
  // By default every kind of fault comes twice on the example center (some faults only
  // show after a second restart: a reloaded job must still be writable after it is
  // reloaded again), and once each on the executor's (which has more kinds).
  const int fault_count = EnvInt("JC_FAULT_FAULTS", static_cast<int>(kinds.size()) * (native ? 1 : 2));
  const int outage_s = EnvInt("JC_FAULT_OUTAGE_S", 2);
  const int clients = 8;
  auto dir = std::filesystem::temp_directory_path() /
             ((native ? "jc-fault-native-" : "jc-fault-") + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream config(dir / "center.yaml");
    config << "center_id: local\nsecurity_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 64Mi}\n";
  }

  std::unique_ptr<OwnPostgres> pg;
  std::vector<std::string> store_flags{"--data_dir=" + (dir / "data").string()};
  if (postgres) {
    pg = std::make_unique<OwnPostgres>((dir / "pg").string());
    REQUIRE_FALSE(pg->uri().empty());
    store_flags = {"--store=" + pg->uri()};
  }

  // The schedule: which faults, in what order, drawn from the seed; fault k comes once
  // (k + 1) / (n + 1) of the jobs are acknowledged.
  std::mt19937 random(seed);
  std::vector<Fault> schedule;
  while (static_cast<int>(schedule.size()) < fault_count) {
    std::vector<Fault> round = kinds;
    std::shuffle(round.begin(), round.end(), random);
    for (Fault f : round) {
      if (static_cast<int>(schedule.size()) < fault_count) schedule.push_back(f);
    }
  }

  Harness h(dir.string(), native, seed);
  h.StartAdapter();
  h.StartServer(store_flags);
  h.AddCenter();

  // Clients: keyed creates, retried (same key) until acknowledged, as a platform would.
  const std::string ran = (dir / "ran").string();
  // Creates run ahead of the next fault by a few, so each fault lands among creates in
  // flight and replicas running, and none finds the work already done.
  auto threshold = [&](size_t k) { return static_cast<int>((k + 1) * jobs / (schedule.size() + 1)); };
  constexpr int kAhead = 24;
  std::atomic<int> next{0}, acknowledged{0};
  std::atomic<int> gate{schedule.empty() ? jobs : std::min(jobs, threshold(0) + kAhead)};
  std::atomic<bool> client_error{false};
  std::mutex mu;
  std::map<std::string, std::string> job_of_key;  // key -> jobId
  std::map<std::string, int> index_of_key;        // key -> i of body_of(i)
  auto body_of = [&](int i) {
    return json{{"name", "f" + std::to_string(i)},
                {"retryPolicy", {{"maxRetries", 3}}},
                {"tasks", {{{"name", "t"},
                            {"command", "echo $JC_JOB_ID-$JC_TASK_INDEX-$JC_REPLICA_INDEX-$JC_ATTEMPT >> " + ran +
                                            "; sleep 0.2"},
                            {"resourceSpecId", "cpu-1"},
                            {"replicaNumber", 1}}}}};
  };
  std::string first_error;
  auto client = [&] {
    std::unique_ptr<jc::testing::RestClient> rest;
    int port = 0;
    for (int i = next++; i < jobs; i = next++) {
      while (i >= gate && !client_error) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::string key = "fault-" + std::to_string(seed) + "-" + std::to_string(i);
      json job = body_of(i);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (std::chrono::steady_clock::now() < deadline) {
        if (rest == nullptr || port != h.port()) {
          port = h.port();
          rest = std::make_unique<jc::testing::RestClient>(port, h.token());
          rest->http().set_read_timeout(5, 0);
        }
        httplib::Headers headers{{"Idempotency-Key", key}};
        auto res = rest->http().Post("/openapi/v1/trainjob", headers, job.dump(), "application/json");
        if (res && res->status == 200) {
          json body = json::parse(res->body, nullptr, false);
          std::lock_guard<std::mutex> lock(mu);
          job_of_key[key] = body["data"]["jobId"];
          index_of_key[key] = i;
          ++acknowledged;
          break;
        }
        if (res && res->status != 503 && res->status != 500 && res->status != 504) {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.empty()) first_error = std::to_string(res->status) + " " + res->body;
          client_error = true;
          return;
        }
        rest.reset();  // the server went away, or is not ready: reconnect, maybe elsewhere
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) threads.emplace_back(client);

  // The faults, as the schedule says.
  auto last_fault_end = std::chrono::steady_clock::now();
  for (size_t k = 0; k < schedule.size(); ++k) {
    int at = threshold(k);
    jc::testing::WaitUntil([&] { return acknowledged >= at || client_error; }, std::chrono::seconds(120));
    if (client_error) break;
    Fault f = schedule[k];
    UNSCOPED_INFO("fault " << k + 1 << " at " << acknowledged.load() << " acknowledged: " << Name(f));
    switch (f) {
      case Fault::kKillServer:
        h.KillServer();
        h.StartServer(store_flags);
        break;
      case Fault::kKillAdapter:
        h.KillAdapter();
        h.StartAdapter();
        break;
      case Fault::kRestartStore:
        REQUIRE(pg->Restart());
        break;
      case Fault::kAdapterUnreachable:
        h.proxy().SetMode(jc::testing::TcpProxy::Mode::kBlackhole);
        std::this_thread::sleep_for(std::chrono::seconds(outage_s));
        // Then slow for as long, then well again.
        h.proxy().SetMode(jc::testing::TcpProxy::Mode::kDelay, std::chrono::milliseconds(150));
        std::this_thread::sleep_for(std::chrono::seconds(outage_s));
        h.proxy().SetMode(jc::testing::TcpProxy::Mode::kPass);
        break;
      case Fault::kAdapterSlow:
        h.proxy().SetMode(jc::testing::TcpProxy::Mode::kDelay, std::chrono::milliseconds(300));
        std::this_thread::sleep_for(std::chrono::seconds(outage_s));
        h.proxy().SetMode(jc::testing::TcpProxy::Mode::kPass);
        break;
      case Fault::kKillNexecMaster:
        h.KillNexecMaster();
        h.StartNexecMaster();
        break;
      case Fault::kKillAgent:
        // Its tasks live on in their own process groups until the restarted agent kills
        // them; their jobs fail there and the control plane retries them as new attempts.
        h.KillAgent();
        h.StartAgent();
        break;
    }
    last_fault_end = std::chrono::steady_clock::now();
    gate = k + 1 < schedule.size() ? std::min(jobs, threshold(k + 1) + kAhead) : jobs;
  }
  gate = jobs;
  for (auto& t : threads) t.join();
  INFO(first_error);
  REQUIRE_FALSE(client_error);
  REQUIRE(acknowledged == jobs);

  // The checker. Every acknowledged job reaches completed or failed within the bound.
  jc::testing::RestClient rest(h.port(), h.token());
  std::map<std::string, std::string> status;  // jobId -> status
  auto all_final = [&] {
    for (const auto& [key, id] : job_of_key) {
      if (status[id] == "completed" || status[id] == "failed") continue;
      auto r = rest.Get("/openapi/v1/trainjob/" + id);
      status[id] = r.http_status == 200 ? r.body["data"].value("status", "?") : "lost:" + std::to_string(r.http_status);
    }
    return std::all_of(status.begin(), status.end(),
                       [](auto& s) { return s.second == "completed" || s.second == "failed"; });
  };
  bool converged = jc::testing::WaitUntil(all_final, std::chrono::seconds(EnvInt("JC_FAULT_SETTLE_S", 45)));
  double settle_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_fault_end).count();

  int lost = 0, stranded = 0, duplicates = 0, phantoms = 0, failed = 0;
  for (const auto& [id, s] : status) {
    if (s.rfind("lost:", 0) == 0) {
      ++lost;
      UNSCOPED_INFO("lost: " << id << " " << s);
    } else if (s != "completed" && s != "failed") {
      ++stranded;
      UNSCOPED_INFO("stranded: " << id << " " << s);
    }
    failed += s == "failed";
  }
  // One job per key: the same create sent again answers with the job the key made, after
  // every restart; another body with that key is refused (409) and makes nothing.
  int key_checks = 0;
  for (const auto& [key, id] : job_of_key) {
    if (++key_checks > 50) break;  // a sample; every key was answered once above
    httplib::Headers headers{{"Idempotency-Key", key}};
    auto res = rest.http().Post("/openapi/v1/trainjob", headers, body_of(index_of_key.at(key)).dump(), "application/json");
    if (!res || res->status != 200 || json::parse(res->body)["data"]["jobId"] != id) {
      ++lost;
      UNSCOPED_INFO("key " << key << " no longer answers with " << id << ": "
                           << (res ? std::to_string(res->status) + " " + res->body : std::string("no answer")));
    }
    if (key_checks == 1) {
      json other = body_of(index_of_key.at(key));
      other["name"] = "again";
      auto refused = rest.http().Post("/openapi/v1/trainjob", headers, other.dump(), "application/json");
      REQUIRE(refused);
      CHECK(refused->status == 409);
    }
  }
  std::map<std::string, int> runs;  // "job-task-replica-attempt" -> times it ran
  std::set<std::string> jobs_that_ran;
  {
    std::ifstream in(ran);
    for (std::string line; std::getline(in, line);) {
      ++runs[line];
      jobs_that_ran.insert(line.substr(0, line.find('-', line.find('-') + 1)));
    }
  }
  for (const auto& [line, n] : runs) {
    if (n > 1) {
      ++duplicates;
      UNSCOPED_INFO("ran " << n << " times: " << line);
    }
  }
  for (const auto& [id, s] : status) {
    if (s == "completed" && !jobs_that_ran.count(id)) {
      ++phantoms;
      UNSCOPED_INFO("completed without running: " << id);
    }
  }
  // Metering (issue 31): every attempt that ran has exactly one usage record, and no
  // record says an attempt succeeded that never ran. (An attempt its center started but
  // killed before the command's first line, around an agent's SIGKILL, is billed: the
  // center spent what starting it took. It is counted, not failed.) Records of stopped
  // attempts may follow their job's end (their centers report the stop), so this waits.
  int unmetered = 0, unrun_records = 0, unrun_succeeded = 0;
  auto metering_agrees = [&] {
    std::map<std::string, std::string> records;  // "job-task-replica-attempt" -> outcome
    std::string token;
    do {
      auto r = rest.Get("/openapi/v1/accounting/records?pageSize=1000" +
                        (token.empty() ? std::string() : "&pageToken=" + token));
      if (r.http_status != 200) return false;
      for (const json& rec : r.body["data"].value("records", json::array())) {
        if (!rec.value("corrects", "").empty()) continue;  // a correction of a record counted already
        std::string id = rec.value("recordId", "");
        std::replace(id.begin(), id.end(), '/', '-');
        records[id] = rec.value("outcome", "");
      }
      token = r.body["data"].value("nextPageToken", "");
    } while (!token.empty());
    unmetered = unrun_records = unrun_succeeded = 0;
    for (const auto& [line, n] : runs) unmetered += records.count(line) == 0;
    for (const auto& [id, outcome] : records) {
      if (runs.count(id)) continue;
      ++unrun_records;
      unrun_succeeded += outcome == "succeeded";
      UNSCOPED_INFO("a record (" << outcome << ") of an attempt whose command never began: " << id);
    }
    return unmetered == 0 && unrun_succeeded == 0;
  };
  bool metered = jc::testing::WaitUntil(metering_agrees, std::chrono::seconds(30));
  std::string faults;
  for (Fault f : schedule) faults += std::string(faults.empty() ? "" : ", ") + Name(f);
  WARN("fault suite (" << (native ? "nexec center, " : "") << jc::testing::TestStoreBackend() << ", seed " << seed << "): " << jobs << " jobs, "
                       << schedule.size() << " faults [" << faults << "]: lost " << lost << ", stranded " << stranded
                       << ", duplicates " << duplicates << ", phantoms " << phantoms << ", unmetered " << unmetered
                       << ", records of attempts whose command never began " << unrun_records << " (succeeded: " << unrun_succeeded
                       << ") (" << failed
                       << " failed by their retry policy); the last job was final " << settle_s
                       << " s after the last fault; adapter events duplicated " << h.chaos().duplicated()
                       << ", reordered " << h.chaos().reordered());
  // The event faults really happened (the proxy is in the path).
  CHECK(h.chaos().duplicated() > 0);
  CHECK(h.chaos().reordered() > 0);
  CHECK(converged);
  CHECK(lost == 0);
  CHECK(stranded == 0);
  CHECK(duplicates == 0);
  CHECK(phantoms == 0);
  CHECK(metered);
  CHECK(unmetered == 0);
  CHECK(unrun_succeeded == 0);
  if (converged && metered && lost + stranded + duplicates + phantoms == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("seeded faults: no acknowledged job is lost or stranded, no replica runs twice [C7][A7][C5]",
          "[C7][A7][C5]") {
  RunFaultSuite(/*native=*/false);
}

// The same invariants on a center of the bundled executor, whose master and agent are
// killed too.
TEST_CASE("seeded faults on a nexec center: none lost, stranded or run twice [C7][A7][B11]", "[C7][A7][B11]") {
  RunFaultSuite(/*native=*/true);
}

TEST_CASE("with the store down, creates answer 503 with Retry-After, reads of known jobs work, /readyz says why, "
          "and all resumes when it returns [C7][C5][A7]",
          "[C7][C5][A7]") {
  signal(SIGPIPE, SIG_IGN);
  // A PostgreSQL of its own on either run of the suite: it is the store that goes down.
  auto dir = std::filesystem::temp_directory_path() / ("jc-storedown-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream config(dir / "center.yaml");
    config << "center_id: local\nsecurity_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 64Mi}\n";
  }
  OwnPostgres pg((dir / "pg").string());
  REQUIRE_FALSE(pg.uri().empty());
  Harness h(dir.string(), /*native=*/false);
  h.StartAdapter();
  // Token verdicts are reused for 1 s only, so that the outage below outlasts them.
  h.StartServer({"--store=" + pg.uri(), "--jobs_lease_ttl=2s", "--auth_cache_ttl=1s"});
  h.AddCenter();
  jc::testing::RestClient rest(h.port(), h.token());
  auto task = [](const std::string& command) {
    return json{{"name", "t"}, {"command", command}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 1}};
  };
  auto running = rest.Post("/openapi/v1/trainjob", {{"name", "long"}, {"tasks", {task("sleep 4")}}});
  REQUIRE(running.http_status == 200);
  std::string id = running.body["data"]["jobId"];
  REQUIRE(jc::testing::WaitUntil(
      [&] { return rest.Get("/openapi/v1/trainjob/" + id).body["data"].value("status", "") == "running"; }));

  REQUIRE(pg.Run("kill"));
  // A create is refused as a passing condition (never a 500, never a hang), and says when
  // to come back; nothing is acknowledged that the store does not have.
  json job = {{"name", "during"}, {"tasks", {task("true")}}};
  auto refused = rest.http().Post("/openapi/v1/trainjob", job.dump(), "application/json");
  REQUIRE(refused);
  INFO(refused->body);
  CHECK(refused->status == 503);
  CHECK(json::parse(refused->body).value("code", "") == "UNAVAILABLE");
  CHECK(refused->get_header_value("Retry-After") == "1");
  // The job this instance knows is still answered, from memory.
  auto known = rest.Get("/openapi/v1/trainjob/" + id);
  CHECK(known.http_status == 200);
  CHECK(known.body["data"].value("status", "") == "running");
  // Readiness says why the instance cannot take work.
  jc::testing::RestReply ready;
  CHECK(jc::testing::WaitUntil([&] {
    ready = rest.Get("/readyz");
    return ready.http_status == 503 && ready.body.value("errorMsg", "").find("PostgreSQL") != std::string::npos;
  }));
  INFO(ready.body.dump());
  // Long enough for the lease (2 s) to lapse: the job manager steps down and keeps trying.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  // The caller's token was last checked against the store more than --auth_cache_ttl ago:
  // its verdict still stands while the store is out of reach, so known jobs still answer.
  auto later = rest.Get("/openapi/v1/trainjob/" + id);
  INFO(later.body.dump());
  CHECK(later.http_status == 200);

  REQUIRE(pg.Run("resume"));
  // Everything resumes on its own: ready again, the running job finishes, new ones run.
  CHECK(jc::testing::WaitUntil([&] { return rest.Get("/readyz").http_status == 200; }, std::chrono::seconds(30)));
  CHECK(jc::testing::WaitUntil(
      [&] { return rest.Get("/openapi/v1/trainjob/" + id).body["data"].value("status", "") == "completed"; }));
  std::string after;
  CHECK(jc::testing::WaitUntil([&] {
    auto r = rest.Post("/openapi/v1/trainjob", job);
    if (r.http_status == 200) after = r.body["data"]["jobId"];
    return !after.empty();
  }));
  CHECK(jc::testing::WaitUntil(
      [&] { return rest.Get("/openapi/v1/trainjob/" + after).body["data"].value("status", "") == "completed"; }));
  std::filesystem::remove_all(dir);
}

// The job once it completed or failed (an empty object when it did not within `limit`).
json WhenEnded(jc::testing::RestClient& rest, const std::string& id, std::chrono::seconds limit) {
  json job;
  const bool ended = jc::testing::WaitUntil(
      [&] {
        job = rest.Get("/openapi/v1/trainjob/" + id).body["data"];
        return job.value("status", "") == "completed" || job.value("status", "") == "failed";
      },
      limit);
  return ended ? job : json::object();
}

TEST_CASE("a federation job whose image has content runs in it at a nexec center, pulled there by digest, and "
          "again in it after its agent is SIGKILLed mid-run [A4][A7][B6]",
          "[A4][A7][B6]") {
  if (geteuid() != 0) {
    WARN("not run: running images needs root (CI runs as root)");
    return;
  }
  signal(SIGPIPE, SIG_IGN);
  auto dir = std::filesystem::temp_directory_path() / ("jc-image-federation-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // A dataset on the center's file system, which the job's image lacks: bound read-only.
  std::filesystem::create_directories(dir / "mnist");
  std::ofstream(dir / "mnist" / "train.csv") << "label,pixels\n";
  std::ofstream(dir / "center.yaml") << "center_id: local\nsecurity_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 64Mi}\n"
                                     << "datasets:\n  - {name: mnist, version: v1, url: file://" << (dir / "mnist").string()
                                     << "}\n";
  auto registry = jc::testing::OciRegistry::Start((dir / "registry").string(), JC_SOURCE_DIR);
  INFO(registry.status().ToString());
  REQUIRE(registry.ok());
  auto digest = (*registry)->Push("demo/app", "v1", "inside the federation's image");
  REQUIRE(digest.ok());
  const std::string certs = std::filesystem::path((*registry)->ca_file()).parent_path().string();
  Harness h(dir.string(), /*native=*/true, 1,
            {"--registry_auth_file=" + (*registry)->auth_file(), "--registry_cert_dir=" + certs});
  h.StartAdapter();
  h.StartServer({"--data_dir=" + (dir / "data").string(), "--registry_ca_file=" + (*registry)->ca_file(),
                 "--registry_auth_file=" + (*registry)->auth_file()});
  h.AddCenter();
  jc::testing::RestClient rest(h.port(), h.token());
  // Registered by tag: the catalog resolves it to the digest, which is what runs.
  auto image = rest.Post("/openapi/v1/images", {{"image_id", "app-oci"},
                                                {"name", "app-oci"},
                                                {"ai_center_id", "local"},
                                                {"framework", "PyTorch"},
                                                {"reference", (*registry)->host() + "/demo/app:v1"}});
  INFO(image.body.dump());
  REQUIRE(image.http_status == 200);
  REQUIRE(rest.Send("PATCH", "/openapi/v1/centers/local", json{{"data_roots", {dir.string()}}}.dump()).http_status == 200);
  auto dataset = rest.Post("/openapi/v1/datasets",
                           {{"data_name", "mnist"},
                            {"data_version", "v1"},
                            {"created_user", "alice"},
                            {"size_mb", 1},
                            {"location", {{{"ai_center_id", "local"}, {"dataset_url", "file://" + (dir / "mnist").string()},
                                           {"access", "r"}, {"network_topology", "cn/local"}}}}});
  INFO(dataset.body.dump());
  REQUIRE(dataset.http_status == 200);
  // The first attempt waits in its image until the agent is killed under it; the control
  // plane retries the replica, and the new attempt runs in the image too.
  json job = {{"name", "in-image"},
              {"retryPolicy", {{"maxRetries", 2}}},
              {"tasks", {{{"name", "t"},
                          {"command", "cat /etc/jc-image; echo \"$JC_DATASETS\"; cat " + (dir / "mnist/train.csv").string() +
                                          "; echo x > " + (dir / "mnist/new").string() + " || echo read-only; "
                                          "case $JC_ATTEMPT in 0) sleep 600;; esac"},
                          {"resourceSpecId", "cpu-1"},
                          {"imageId", "app-oci"},
                          {"datasets", {"mnist:v1"}},
                          {"replicaNumber", 1}}}}};
  auto created = rest.Post("/openapi/v1/trainjob", job);
  INFO(created.body.dump());
  REQUIRE(created.http_status == 200);
  const std::string id = created.body["data"]["jobId"];
  const std::string hex = digest->substr(7);
  const auto pulled = dir / "agent-state" / "images" / hex / "ready";
  REQUIRE(jc::testing::WaitUntil([&] { return std::filesystem::exists(pulled); }, std::chrono::seconds(60)));
  REQUIRE(jc::testing::WaitUntil([&] {
    return rest.Get("/openapi/v1/trainjob/" + id).body["data"].value("status", "") == "running";
  }));
  h.KillAgent();
  h.StartAgent();
  json done = WhenEnded(rest, id, std::chrono::seconds(90));
  REQUIRE_FALSE(done.empty());
  INFO(done.dump());
  CHECK(done["status"] == "completed");
  auto log = rest.http().Get(("/openapi/v1/trainjob/" + id + "/task/0/replica/0/log/content").c_str());
  REQUIRE(log);
  INFO(log->body);
  CHECK(log->body.find("inside the federation's image") != std::string::npos);
  // Its dataset: where it is said to be, readable there, and not writable.
  CHECK(log->body.find("mnist:v1=" + (dir / "mnist").string() + "\nlabel,pixels\n") != std::string::npos);
  CHECK(log->body.find("read-only") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "mnist" / "new"));
  // One pull: the retry found the image in the agent's store.
  CHECK(std::filesystem::exists(pulled));

  // The registry gone and the image no longer on the host: a job that needs it fails,
  // the replica saying why (what `jcctl job get` shows as MESSAGE), and never runs bare.
  registry->reset();
  std::filesystem::remove_all(dir / "agent-state" / "images" / hex);
  json lost = job;
  lost["name"] = "registry-gone";
  lost["retryPolicy"]["maxRetries"] = 0;
  lost["tasks"][0]["command"] = "echo ran bare";
  lost["tasks"][0].erase("datasets");
  auto second = rest.Post("/openapi/v1/trainjob", lost);
  REQUIRE(second.http_status == 200);
  const std::string lost_id = second.body["data"]["jobId"];
  json failed = WhenEnded(rest, lost_id, std::chrono::seconds(60));
  REQUIRE_FALSE(failed.empty());
  INFO(failed.dump());
  CHECK(failed["status"] == "failed");
  const std::string why = failed["taskInfos"][0]["replicaMessages"][0];
  CHECK_THAT(why, Catch::Contains("cannot pull image "));
  CHECK_THAT(why, Catch::Contains("/demo/app@" + *digest));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a federation job whose image a nexec center lacks is staged by a copy into the center's own registry, "
          "and runs from there [A4][A6][B6]",
          "[A4][A6][B6]") {
  if (geteuid() != 0) {
    WARN("not run: running images needs root (CI runs as root)");
    return;
  }
  signal(SIGPIPE, SIG_IGN);
  auto dir = std::filesystem::temp_directory_path() / ("jc-image-mirror-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "ca");
  auto source = jc::testing::OciRegistry::Start((dir / "source").string(), JC_SOURCE_DIR);
  auto mirror = jc::testing::OciRegistry::Start((dir / "mirror").string(), JC_SOURCE_DIR);
  REQUIRE(source.ok());
  REQUIRE(mirror.ok());
  auto digest = (*source)->Push("ai/app", "v1", "staged into the center's registry");
  REQUIRE(digest.ok());
  auto ca_dir = [](const jc::testing::OciRegistry& r) {
    return std::filesystem::path(r.ca_file()).parent_path().string();
  };
  // The agent trusts and may pull from the mirror only: what it runs comes from there.
  std::filesystem::copy_file((*mirror)->ca_file(), dir / "ca" / "mirror.crt");
  std::ofstream(dir / "center.yaml") << "center_id: local\nsecurity_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 64Mi}\n"
                                     << "image_mirror:\n  registry: " << (*mirror)->host() << "/center\n"
                                     << "  auth_file: " << (*mirror)->auth_file() << "\n  cert_dir: " << ca_dir(**mirror)
                                     << "\n  source_auth_file: " << (*source)->auth_file()
                                     << "\n  source_cert_dir: " << ca_dir(**source) << "\n";
  Harness h(dir.string(), /*native=*/true, 1,
            {"--registry_auth_file=" + (*mirror)->auth_file(), "--registry_cert_dir=" + (dir / "ca").string()});
  h.StartAdapter();
  h.StartServer({"--data_dir=" + (dir / "data").string(), "--registry_ca_file=" + (*source)->ca_file(),
                 "--registry_auth_file=" + (*source)->auth_file()});
  h.AddCenter();
  jc::testing::RestClient rest(h.port(), h.token());
  // Registered at another center (unreachable here): not present at local, which can be
  // given it by a copy into its registry.
  REQUIRE(rest.Post("/openapi/v1/centers", {{"ai_center_id", "far"},
                                            {"name", "far"},
                                            {"region", "cn"},
                                            {"adapter_address", "127.0.0.1:1"},
                                            {"capacity", {{"cpu", 1}, {"memory", 1024}}}})
              .http_status == 200);
  auto image = rest.Post("/openapi/v1/images", {{"image_id", "app-far"},
                                                {"name", "app-far"},
                                                {"ai_center_id", "far"},
                                                {"framework", "PyTorch"},
                                                {"reference", (*source)->host() + "/ai/app:v1"}});
  INFO(image.body.dump());
  REQUIRE(image.http_status == 200);
  json job = {{"name", "mirrored"},
              {"tasks", {{{"name", "t"},
                          {"command", "cat /etc/jc-image"},
                          {"resourceSpecId", "cpu-1"},
                          {"imageId", "app-far"},
                          {"replicaNumber", 1}}}}};
  auto created = rest.Post("/openapi/v1/trainjob", job);
  INFO(created.body.dump());
  REQUIRE(created.http_status == 200);
  const std::string id = created.body["data"]["jobId"];
  json done = WhenEnded(rest, id, std::chrono::seconds(90));
  REQUIRE_FALSE(done.empty());
  INFO(done.dump());
  CHECK(done["status"] == "completed");
  CHECK(done["taskInfos"][0]["centerIDs"] == json::array({"local"}));
  auto log = rest.http().Get(("/openapi/v1/trainjob/" + id + "/task/0/replica/0/log/content").c_str());
  REQUIRE(log);
  CHECK(log->body.find("staged into the center's registry") != std::string::npos);
  // The catalog now lists the image at local too.
  auto after = rest.Get("/openapi/v1/images/app-far").body["data"];
  INFO(after.dump());
  CHECK(after["present_at"] == json::array({"local"}));
  std::filesystem::remove_all(dir);
}
