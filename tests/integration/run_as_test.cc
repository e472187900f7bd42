// Run-as accounts (SPEC C6): a center maps Jointcloud projects and users to its own
// accounts; replicas run as the mapped account, never as root; a center that maps no
// account for a job is filtered out with its reason; a replica whose mapping was removed
// after the scheduler placed it fails there, saying why.

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "adapters/sdk/adapter_core.h"
#include "tests/testing/local_adapter.h"
#include "tests/testing/process.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/test_account.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

void Must(const jc::testing::RestReply& r) {
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
}

std::string Center(const std::string& run_as) {
  return "security_grade: 3\nrun_as: " + run_as + "\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n";
}

json WaitForJob(jc::testing::RestClient& rest, const std::string& id, const std::string& status) {
  json job;
  bool reached = jc::testing::WaitUntil([&] {
    job = rest.Get("/openapi/v1/trainjob/" + id).body["data"];
    return job.value("status", "") == status;
  });
  INFO(job.dump());
  REQUIRE(reached);
  return job;
}

// A control plane that notices centers and runs jobs quickly.
void QuickCycles(jc::server::AppOptions& o) {
  o.monitor.interval = absl::Milliseconds(100);
  o.scheduler_refresh = absl::Milliseconds(50);
  o.jobs.cycle_interval = absl::Milliseconds(50);
  o.jobs.poll_interval = absl::Milliseconds(200);
}

void AddCenter(jc::testing::TestSystem& sys, const std::string& id, const std::string& address) {
  Must(sys.rest->Post("/openapi/v1/centers", {{"ai_center_id", id}, {"name", id}, {"region", "cn"},
                                              {"network_topology", "cn/" + id}, {"adapter_address", address},
                                              {"capacity", {{"cpu", 8}, {"memory", 8192}}}}));
}

// Spec cpu-1 at `centers` ("a,b"), and each of them scored for it (the scheduler sees it).
void AddSpecAndWait(jc::testing::TestSystem& sys, const std::vector<std::string>& centers) {
  std::string list;
  for (const auto& c : centers) list += (list.empty() ? "" : ",") + c;
  Must(sys.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                   {"resource_spec_name", "1 CPU"},
                                                   {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                   {"service_type", "batch"},
                                                   {"price", 5},
                                                   {"computing_center_list", list}}));
  REQUIRE(jc::testing::WaitUntil([&] {
    for (const auto& c : centers) {
      if (sys.rest->Get("/scheduler/algorithm/lowest_price/score/" + c + "?resourceSpecId=cpu-1").http_status != 200) {
        return false;
      }
    }
    return true;
  }));
}

}  // namespace

TEST_CASE("replicas run as the account their center maps the job's project to, centers without one are "
          "filtered, and a mapping removed after placement fails the replica with its reason [C6][A8]",
          "[C6][A8]") {
  if (geteuid() != 0) {
    WARN("not run: switching replicas to another account needs root (CI runs as root)");
    return;
  }
  jc::testing::TestAccount account("jc-run-as-test");
  // `mapped` runs project vision's replicas as the test account; `cheap` (cheaper) only nlp's.
  jc::testing::LocalAdapter mapped("mapped", 8, Center("{projects: {vision: " + account.name + "}}"));
  jc::testing::LocalAdapter cheap("cheap", 8, Center("{projects: {nlp: " + account.name + "}}"));
  jc::testing::TestSystem sys(QuickCycles);
  AddCenter(sys, "mapped", mapped.address());
  AddCenter(sys, "cheap", cheap.address());
  AddSpecAndWait(sys, {"mapped", "cheap"});
  Must(sys.rest->Send("PUT", "/openapi/v1/resourcespecs/cpu-1/centers/cheap/price", R"({"price": 1})"));
  auto alice = sys.UserClient("alice", "vision", "MEMBER");
  auto job = [](const std::string& name) {
    return json{{"name", name},
                {"tasks", {{{"name", "t"}, {"command", "id"}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 1}}}}};
  };

  // alice's job runs at the center that maps vision, as the mapped account.
  auto created = alice->Post("/openapi/v1/trainjob", job("who"));
  INFO(created.body.dump());
  REQUIRE(created.http_status == 200);
  std::string id = created.body["data"]["jobId"];
  json done = WaitForJob(*alice, id, "completed");
  CHECK(done["taskInfos"][0]["centerIDs"] == json::array({"mapped"}));
  auto log = alice->http().Get(("/openapi/v1/trainjob/" + id + "/task/0/replica/0/log/content").c_str());
  std::string out = log ? log->body : "";
  INFO(out);
  CHECK(out.find("uid=" + std::to_string(account.uid) + "(" + account.name + ")") != std::string::npos);
  CHECK(out.find("uid=0(") == std::string::npos);
  // A follower asks for what it has not seen yet: from a byte offset on (jcctl job logs -f).
  const std::string content = "/openapi/v1/trainjob/" + id + "/task/0/replica/0/log/content";
  auto tail = alice->http().Get((content + "?offset=4").c_str());
  REQUIRE(tail);
  CHECK(tail->status == 200);
  CHECK(tail->body == out.substr(4));
  auto past = alice->http().Get((content + "?offset=" + std::to_string(out.size())).c_str());
  REQUIRE(past);
  CHECK(past->body.empty());
  for (const char* bad : {"-1", "x"}) {
    auto refused = alice->http().Get((content + "?offset=" + bad).c_str());
    REQUIRE(refused);
    CHECK(refused->status == 400);
    CHECK(refused->body.find("is not a byte offset") != std::string::npos);
  }
  // The cheaper center was filtered, and the placement record says why.
  auto placement = sys.rest->Get("/openapi/v1/trainjob/" + id + "/placement");
  INFO(placement.body.dump());
  bool explained = false;
  for (const auto& c : placement.body["data"]["replicas"][0]["centers"]) {
    if (c["centerId"] != "cheap") continue;
    CHECK(c["filteredBy"] == "run_as_account");
    CHECK(c.value("reason", "").find("maps no local account for project vision") != std::string::npos);
    explained = true;
  }
  CHECK(explained);

  // A project no center maps could never run anywhere: refused at submit, saying which
  // filter removed the centers and why.
  auto bob = sys.UserClient("bob", "robotics", "MEMBER");
  auto refused = bob->Post("/openapi/v1/trainjob", job("nowhere"));
  INFO(refused.body.dump());
  CHECK(refused.http_status == 400);
  CHECK_THAT(refused.body.dump(), Catch::Contains("run_as_account: 2"));
  CHECK_THAT(refused.body.dump(), Catch::Contains("maps no local account for project robotics"));

  // The center drops vision's mapping (as a SIGHUP reload does); the control plane still has
  // its old center info, so it sends the next replica there, and the center refuses it.
  jc::adapter::RunAs none;
  none.configured = true;  // a run_as section that maps nobody
  mapped.server->core().SetRunAs(none);
  auto again = alice->Post("/openapi/v1/trainjob", job("after"));
  INFO(again.body.dump());
  REQUIRE(again.http_status == 200);
  json failed = WaitForJob(*alice, again.body["data"]["jobId"], "failed");
  CHECK(failed.value("statusReason", "").find("center mapped maps no local account for project \"vision\"") !=
        std::string::npos);
}

TEST_CASE("a replica cannot make its root adapter read, write or kill for it through the adapter's own files: its "
          "output, exit code and pid live where it cannot write [C6][A14]",
          "[C6][A14]") {
  if (geteuid() != 0) {
    WARN("not run: the attack needs an adapter running as root and a second account (CI runs as root)");
    return;
  }
  jc::testing::TestAccount account("jc-replica-atk");
  jc::testing::LocalAdapter center("local", 8, Center("{projects: {vision: " + account.name + "}}"));
  jc::testing::TestSystem sys(QuickCycles);
  AddCenter(sys, "local", center.address());
  AddSpecAndWait(sys, {"local"});
  auto alice = sys.UserClient("alice", "vision", "MEMBER");

  // Root's files, a process of someone else's, and a directory where the replica leaves a mark.
  const std::filesystem::path box = std::filesystem::temp_directory_path() / ("jc-replica-atk-" + std::to_string(getpid()));
  std::filesystem::create_directories(box);
  std::filesystem::permissions(box, std::filesystem::perms::all);
  const std::string secret = (box / "root-secret").string(), victim = (box / "root-owned").string();
  std::ofstream(secret) << "TOPSECRET\n";
  std::ofstream(victim) << "root's content\n";
  std::filesystem::permissions(secret, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const pid_t bystander = fork();
  REQUIRE(bystander >= 0);
  if (bystander == 0) {
    setpgid(0, 0);
    execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(bystander, bystander);

  // The replica plants where the adapter keeps a replica's files (its own directory, and the
  // one above it): its output becomes a link to the root-only file, its exit code a link to
  // a root file, its pid the bystander's.
  const std::string plant =
      "for d in \"$JC_REPLICA_DIR\" \"$JC_REPLICA_DIR/..\"; do (cd \"$d\" && rm -f stdout exit.tmp pid; "
      "ln -s " + secret + " stdout; ln -s " + victim + " exit.tmp; echo " + std::to_string(bystander) +
      " > pid) 2>/dev/null; done; echo done > " + (box / "planted-$JC_REPLICA_NAME").string() + "; ";
  auto submit = [&](const std::string& name, const std::string& tail) {
    json job = {{"name", name},
                {"tasks", {{{"name", "t"}, {"command", plant + tail}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 1}}}}};
    auto created = alice->Post("/openapi/v1/trainjob", job);
    INFO(created.body.dump());
    REQUIRE(created.http_status == 200);
    return created.body["data"]["jobId"].get<std::string>();
  };
  auto planted = [&] {
    for (const auto& entry : std::filesystem::directory_iterator(box)) {
      if (entry.path().filename().string().rfind("planted-", 0) == 0) return true;
    }
    return false;
  };

  // Running: its log is what it wrote, not root's file; stopped: the bystander lives on.
  const std::string running = submit("plant", "echo mine; sleep 300");
  WaitForJob(*alice, running, "running");
  REQUIRE(jc::testing::WaitUntil(planted));
  std::string log;
  REQUIRE(jc::testing::WaitUntil([&] {
    auto got = alice->http().Get(("/openapi/v1/trainjob/" + running + "/task/0/replica/0/log/content").c_str());
    log = got ? got->body : "";
    return !log.empty();
  }));
  INFO(log);
  CHECK(log.find("TOPSECRET") == std::string::npos);
  CHECK(log.find("mine") != std::string::npos);
  Must(alice->Post("/openapi/v1/trainjob/" + running + "/stop", json::object()));
  WaitForJob(*alice, running, "failed");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a kill, had one been sent, has landed
  CHECK(waitpid(bystander, nullptr, WNOHANG) == 0);  // still running
  CHECK(kill(bystander, 0) == 0);

  // Ending on its own: its exit code is written where the adapter keeps it, not into root's file.
  const std::string ended = submit("exit", "exit 3");
  json failed = WaitForJob(*alice, ended, "failed");
  CHECK(failed.value("statusReason", "").find("exited with 3") != std::string::npos);
  std::stringstream victim_now;
  victim_now << std::ifstream(victim).rdbuf();
  CHECK(victim_now.str() == "root's content\n");
  std::stringstream secret_now;
  secret_now << std::ifstream(secret).rdbuf();
  CHECK(secret_now.str() == "TOPSECRET\n");

  kill(-bystander, SIGKILL);
  waitpid(bystander, nullptr, 0);
  std::error_code ec;
  std::filesystem::remove_all(box, ec);
}

TEST_CASE("a project's dataset staged at a center is read by the account the center runs the project as, and by no "
          "other account there (issue 44 hole 11) [A6][C6]",
          "[A6][C6]") {
  if (geteuid() != 0) {
    WARN("not run: handing staged data to another account needs root (CI runs as root)");
    return;
  }
  namespace fs = std::filesystem;
  jc::testing::TestAccount vision("jc-stage-vis");
  jc::testing::TestAccount other("jc-stage-oth");
  // The dataset's source, world-readable as shared storage often is.
  const fs::path sources = fs::temp_directory_path() / ("jc-stage-src-" + std::to_string(getpid()));
  fs::remove_all(sources);
  fs::create_directories(sources / "corpus");
  std::ofstream(sources / "corpus" / "part-0") << "vision's data\n";
  fs::permissions(sources / "corpus" / "part-0", fs::perms(0644));
  const std::string config = "security_grade: 3\ndata_dir: {data_dir}\ndata_sources: [" + sources.string() +
                             "]\nrun_as: {projects: {vision: " + vision.name +
                             "}}\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n";
  jc::testing::LocalAdapter holder("holder", 8, config);
  jc::testing::LocalAdapter mapped("mapped", 8, config);
  jc::testing::TestSystem sys(QuickCycles);
  for (const auto& [id, address] : {std::pair<std::string, std::string>{"holder", holder.address()},
                                    std::pair<std::string, std::string>{"mapped", mapped.address()}}) {
    Must(sys.rest->Post("/openapi/v1/centers", {{"ai_center_id", id}, {"name", id}, {"region", "cn"},
                                                {"network_topology", "cn/" + id}, {"adapter_address", address},
                                                {"data_roots", {"/"}},
                                                {"capacity", {{"cpu", 8}, {"memory", 8192}}}}));
  }
  AddSpecAndWait(sys, {"holder", "mapped"});
  auto alice = sys.UserClient("alice", "vision", "MEMBER");
  Must(sys.rest->Post("/openapi/v1/datasets",
                      {{"data_name", "corpus"},
                       {"data_version", "v1"},
                       {"project", "vision"},
                       {"location", {{{"ai_center_id", "holder"},
                                      {"dataset_url", "file://" + (sources / "corpus").string()},
                                      {"access", "r"}}}}}));
  // A project's copy, kept apart from the federation's and other projects' of the name.
  const fs::path staged = mapped.dir / "data" / ".projects" / "vision" / "corpus" / "v1" / "part-0";
  json job = {{"name", "reads"},
              {"tasks", {{{"name", "t"},
                          {"command", "cat " + staged.string()},
                          {"resourceSpecId", "cpu-1"},
                          {"replicaNumber", 1},
                          {"centerIDs", {"mapped"}},
                          {"datasets", {"corpus:v1"}}}}}};
  auto created = alice->Post("/openapi/v1/trainjob", job);
  INFO(created.body.dump());
  REQUIRE(created.http_status == 200);
  const std::string id = created.body["data"]["jobId"];
  WaitForJob(*alice, id, "completed");
  // The job, as vision's account, read it.
  auto log = alice->http().Get(("/openapi/v1/trainjob/" + id + "/task/0/replica/0/log/content").c_str());
  REQUIRE(log);
  CHECK(log->body.find("vision's data") != std::string::npos);
  // The copy is vision's account's, and another account at the center cannot read it.
  struct stat st;
  REQUIRE(stat(staged.c_str(), &st) == 0);
  CHECK(st.st_uid == vision.uid);
  CHECK((st.st_mode & 07777) == 0640);
  REQUIRE(stat(staged.parent_path().c_str(), &st) == 0);
  CHECK(st.st_uid == vision.uid);
  CHECK((st.st_mode & 07777) == 0750);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(other.gid, other.gid, other.gid) != 0 ||
        setresuid(other.uid, other.uid, other.uid) != 0) {
      _exit(99);
    }
    const int fd = open(staged.c_str(), O_RDONLY);
    _exit(fd < 0 ? errno : 0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == EACCES);
  std::error_code ec;
  fs::remove_all(sources, ec);
}
