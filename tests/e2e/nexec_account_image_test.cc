// Jobs in their images at an agent that runs as an account (`--agent_uid` at its master), not
// root: the agent runs runc rootless, as the Slurm adapter runs an account's batch job (runc's
// user namespace maps root to the account, nexec-userns-exec gives the command the account's
// own ids). A real master, a real agent started by setpriv as a test account from copies of
// the binaries that account may run, a real registry with TLS and a credential.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/testing/munge_daemon.h"
#include "tests/testing/oci_registry.h"
#include "tests/testing/process.h"
#include "tests/testing/test_account.h"

using jc::testing::Process;
using jc::testing::WaitUntil;
using nlohmann::json;

namespace {

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The states (R, S, T, ...) of the processes of `uid` whose command line is exactly `argv`
// (NUL-separated in /proc).
std::string StatesOf(uid_t uid, const std::string& argv) {
  std::string states;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat st {};
    if (stat(entry.path().c_str(), &st) != 0 || st.st_uid != uid) continue;
    std::string cmdline = Slurp(entry.path() / "cmdline");
    if (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
    if (cmdline != argv) continue;
    const std::string stat = Slurp(entry.path() / "stat");
    const size_t end = stat.rfind(')');
    if (end != std::string::npos && end + 2 < stat.size()) states += stat[end + 2];
  }
  return states;
}
int ProcessesOf(uid_t uid, const std::string& argv) { return static_cast<int>(StatesOf(uid, argv).size()); }

// Made by root for the account: the account's own, 0700 (a directory) or 0600.
void GiveTo(const std::filesystem::path& path, const jc::testing::TestAccount& account) {
  REQUIRE(chown(path.c_str(), account.uid, account.gid) == 0);
  REQUIRE(chmod(path.c_str(), std::filesystem::is_directory(path) ? 0700 : 0600) == 0);
}

struct RemovedAtEnd {
  std::filesystem::path at;
  ~RemovedAtEnd() {
    std::error_code ec;
    std::filesystem::remove_all(at, ec);
  }
};


// A master, a registry holding the test's images, and one agent: run as `account` (setpriv,
// from copies of the binaries the account may run), its master told so with --agent_uid;
// or, `as_account` false, as root without cgroups. Jobs run in `home`, the account's.
struct ImageAgent {
  ImageAgent(const jc::testing::TestAccount& account, bool as_account)
      : account(account), dir(std::filesystem::temp_directory_path() /
                              ("jc-nexec-rootless-" + std::to_string(getpid()) + (as_account ? "-a" : "-r"))) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::filesystem::permissions(dir, std::filesystem::perms(0755));
    removed_at_end.at = dir;
    registry = Unwrap(jc::testing::OciRegistry::Start((dir / "registry").string(), JC_SOURCE_DIR));
    digest = Unwrap(registry->Push("demo/app", "v1", "inside the image"));
    ref = registry->host() + "/demo/app@" + digest;
    // What the agent reads: its own copies of the pull credential and of the registry's CA
    // (the account's, where the agent runs as it).
    const auto own = dir / "account";
    std::filesystem::create_directories(own / "certs");
    std::filesystem::copy_file(registry->auth_file(), own / "auth.json");
    std::filesystem::copy_file(registry->ca_file(), own / "certs" / "ca.crt");
    if (as_account) {
      for (const auto& p : {own, own / "certs", own / "auth.json", own / "certs" / "ca.crt"}) GiveTo(p, account);
    }
    // The agent and what it runs beside it (the build tree may be closed to the account).
    const auto bin = dir / "bin";
    std::filesystem::create_directories(bin);
    const auto built = std::filesystem::path(JC_NEXEC_AGENT).parent_path();
    for (const char* name : {"nexec-agent", "nexec-image-run", "nexec-run", "nexec-userns-exec"}) {
      std::filesystem::copy_file(built / name, bin / name);
      std::filesystem::permissions(bin / name, std::filesystem::perms(0755));
    }
    std::filesystem::create_directories(home / "logs");
    GiveTo(home, account);
    GiveTo(home / "logs", account);
    std::filesystem::create_directories(state);
    if (as_account) GiveTo(state, account);

    const std::string munge_socket = jc::testing::UsePrivateMunged();  // every nexec process signs with it (B9)
    std::vector<std::string> master_args{JC_NEXEC_MASTER, "--listen=127.0.0.1:0", "--data_dir=" + (dir / "data").string(),
                                         "--host_timeout=2s", "--metrics_address="};
    if (as_account) {
      // The default output directory, the account's: an agent run as it writes there.
      master_args.push_back("--agent_uid=" + std::to_string(account.uid));
      master_args.push_back("--log_dir=" + (home / "logs").string());
    }
    master = std::make_unique<Process>(master_args, (dir / "master.log").string());
    const auto listening = master->WaitForLog(R"(nexec master listening on port (\d+))");
    INFO(master->Log());
    REQUIRE(listening.has_value());
    port = *listening;
    if (as_account) {
      agent_args = {"/usr/bin/setpriv", "--reuid=" + std::to_string(account.uid),
                    "--regid=" + std::to_string(account.gid), "--clear-groups", "--"};
    }
    agent_args.insert(agent_args.end(), {(bin / "nexec-agent").string(), "--master=127.0.0.1:" + port, "--host=node1",
                                         "--resources=cpus=4,mem=4G", "--heartbeat=200ms", "--metrics_address=",
                                         "--cgroups=off", "--munge_socket=" + munge_socket,
                                         "--state_dir=" + state.string(),
                                         "--registry_auth_file=" + (own / "auth.json").string(),
                                         "--registry_cert_dir=" + (own / "certs").string()});
    if (as_account) agent_args.push_back("--master_uid=0");
    StartAgent();
  }
  void StartAgent() {
    agent = std::make_unique<Process>(agent_args, (dir / ("agent-" + std::to_string(agents++) + ".log")).string());
    REQUIRE(agent->WaitForLog("listening on").has_value());
  }
  ~ImageAgent() {
    agent.reset();
    master.reset();
  }
  template <typename T>
  static T Unwrap(absl::StatusOr<T> got) {
    INFO(got.status().ToString());
    REQUIRE(got.ok());
    return std::move(*got);
  }

  // The nexec CLI as root, in `home`: its exit code and output.
  std::pair<int, std::string> Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/env", "-C", home.string(), JC_NEXEC_CLI, "--master=127.0.0.1:" + port});
    const std::string out = (dir / ("cli-" + std::to_string(calls++) + ".out")).string();
    Process p(args, out);
    const auto code = p.Wait(std::chrono::seconds(60));
    return {code.value_or(-1), Slurp(out)};
  }
  std::string Submit(const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), {"submit", "--json", "--user", user});
    auto [code, out] = Cli(args);
    INFO(out);
    REQUIRE(code == 0);
    return json::parse(out)["job_id"].get<std::string>();
  }
  json Job(const std::string& id) {
    auto [code, out] = Cli({"job", id, "--json"});
    INFO(out);
    REQUIRE(code == 0);
    return json::parse(out);
  }
  void WaitState(const std::string& id, const std::string& state_name) {
    const bool reached = WaitUntil([&] { return Job(id).value("state", "") == state_name; }, std::chrono::seconds(90));
    INFO(Job(id).dump() << "\n" << agent->Log());
    REQUIRE(reached);
  }
  // A job of `account` in the image, two sleeps: running, suspended (every process of its
  // container stopped: runc cannot pass SIGSTOP on, the agent signals the container's group
  // itself), resumed, then killed with everything it started. Its id.
  std::string SuspendResumeKill() {
    const std::string sleeper = Submit(account.name, {"--image", ref, "--", "sleep 1000 & sleep 1000"});
    WaitState(sleeper, "RUNNING");
    REQUIRE(WaitUntil([&] { return ProcessesOf(account.uid, kSleepArgv) == 2; }));
    REQUIRE(Cli({"suspend", sleeper}).first == 0);
    CHECK(WaitUntil([&] { return StatesOf(account.uid, kSleepArgv) == "TT"; }));
    REQUIRE(Cli({"resume", sleeper}).first == 0);
    CHECK(WaitUntil([&] { return StatesOf(account.uid, kSleepArgv) == "SS"; }));
    auto [code, out] = Cli({"kill", sleeper});
    INFO(out);
    REQUIRE(code == 0);
    WaitState(sleeper, "EXIT");
    CHECK(WaitUntil([&] { return ProcessesOf(account.uid, kSleepArgv) == 0; }));
    return sleeper;
  }
  // An agent that stops ends the containers of its tasks; one killed leaves them, and the
  // next agent of its state directory ends them (runc started them out of the task's group).
  void AgentStopsAndRestarts() {
    const std::string ends_with_agent = Submit(account.name, {"--image", ref, "--", "sleep 1000 & sleep 1000"});
    WaitState(ends_with_agent, "RUNNING");
    REQUIRE(WaitUntil([&] { return ProcessesOf(account.uid, kSleepArgv) == 2; }));
    agent->Signal(SIGTERM);
    {
      INFO(agent->Log());
      REQUIRE(agent->Wait(std::chrono::seconds(20)).has_value());
    }
    CHECK(WaitUntil([&] { return ProcessesOf(account.uid, kSleepArgv) == 0; }));
    StartAgent();
    const std::string left = Submit(account.name, {"--image", ref, "--", "sleep 1000 & sleep 1000"});
    WaitState(left, "RUNNING");
    REQUIRE(WaitUntil([&] { return ProcessesOf(account.uid, kSleepArgv) == 2; }));
    agent->Signal(SIGKILL);
    REQUIRE(agent->Wait(std::chrono::seconds(20)).has_value());
    CHECK(ProcessesOf(account.uid, kSleepArgv) > 0);  // nobody ended them yet
    StartAgent();
    {
      INFO(agent->Log());
      CHECK(WaitUntil([&] { return ProcessesOf(account.uid, kSleepArgv) == 0; }));
    }
    WaitState(left, "EXIT");
  }

  inline static const std::string kSleepArgv = std::string("sleep\0" "1000", 10);
  const jc::testing::TestAccount& account;
  const std::filesystem::path dir;
  RemovedAtEnd removed_at_end;  // after the daemons below
  const std::filesystem::path home = dir / "home";
  const std::filesystem::path state = dir / "state";
  std::unique_ptr<jc::testing::OciRegistry> registry;
  std::string digest, ref, port;
  std::unique_ptr<Process> master, agent;
  std::vector<std::string> agent_args;
  int calls = 0, agents = 0;
};

}  // namespace

TEST_CASE("a nexec agent run as an account runs jobs in their images rootless, as the account, pulled into its own "
          "store, entered by exec and interactively, suspended and ended whole, a hostile image's nodes gone [B6][B9][C6]",
          "[B6][B9][C6]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: an agent run as a second account needs root to start it (CI runs as root)");
    return;
  }
  jc::testing::TestAccount account("jc-nexec-rl");
  jc::testing::TestAccount other("jc-nexec-rl-o");  // whose jobs this agent refuses
  ImageAgent c(account, /*as_account=*/true);
  {
    INFO(c.agent->Log());
    CHECK(c.agent->Log().find("tasks with an image run in it (runc, rootless: this agent is not root)") !=
          std::string::npos);
  }
  const std::string hostile_ref =
      c.registry->host() + "/demo/hostile@" +
      ImageAgent::Unwrap(c.registry->PushWith("demo/hostile", "v1", "a hostile image", {"JC_IMAGE_HOSTILE=1"}));

  // In its image, as the account's own ids, in its directory; what it makes is the account's.
  const std::string first = c.Submit(account.name, {"--image", c.ref, "-o", (c.home / "first.out").string(), "--",
                                                    "cat /etc/jc-image; id -u; id -g; pwd; echo made > made"});
  c.WaitState(first, "DONE");
  CHECK(Slurp(c.home / "first.out") == "inside the image\n" + std::to_string(account.uid) + "\n" +
                                           std::to_string(account.gid) + "\n" + c.home.string() + "\n");
  struct stat made {};
  REQUIRE(stat((c.home / "made").c_str(), &made) == 0);
  CHECK(made.st_uid == account.uid);
  // Pulled and unpacked by the account, into the agent's own store.
  struct stat rootfs {};
  REQUIRE(stat((c.state / "images" / c.digest.substr(7) / "rootfs").c_str(), &rootfs) == 0);
  CHECK(rootfs.st_uid == account.uid);
  CHECK_FALSE(std::filesystem::exists("/etc/jc-image"));  // only the image has it

  // Entered by exec, as the account, in the container's directory.
  const std::string sleeper = c.Submit(account.name, {"--image", c.ref, "--", "exec sleep 1000"});
  c.WaitState(sleeper, "RUNNING");
  std::pair<int, std::string> inside;
  REQUIRE(WaitUntil([&] {  // its container is up once runc started it
    inside = c.Cli({"exec", sleeper, "--", "sh", "-c", "cat /etc/jc-image; id -u; pwd"});
    return inside.first == 0;
  }));
  CHECK(inside.second == "inside the image\n" + std::to_string(account.uid) + "\n" + c.home.string() + "\n");
  REQUIRE(c.Cli({"kill", sleeper}).first == 0);
  c.WaitState(sleeper, "EXIT");
  CHECK(WaitUntil([&] { return ProcessesOf(account.uid, ImageAgent::kSleepArgv) == 0; }));
  // Suspended and resumed, then killed, with everything it started.
  c.SuspendResumeKill();

  // Interactive, in the image: what is typed reaches the command there, on a pipe (-I) or a
  // terminal of the container's own (-Ip), and its exit code is the session's.
  for (const std::string mode : {"-I", "-Ip"}) {
    const std::string line = "printf 'typed\\n' | " + std::string(JC_NEXEC_CLI) + " --master=127.0.0.1:" + c.port +
                             " submit --user " + account.name + " --image " + c.ref + " " + mode +
                             " -- 'read x; cat /etc/jc-image; echo x=$x; [ -t 0 ] && echo on-a-terminal; exit 6'";
    Process p({"/bin/sh", "-c", "cd " + c.home.string() + " && " + line},
              (c.dir / ("interactive" + mode + ".log")).string());
    const auto code = p.Wait(std::chrono::seconds(60));
    INFO(mode << ": " << p.Log() << c.agent->Log());
    CHECK(code == 6);
    CHECK(p.Log().find("inside the image") != std::string::npos);
    CHECK(p.Log().find("x=typed") != std::string::npos);
    CHECK((p.Log().find("on-a-terminal") != std::string::npos) == (mode == "-Ip"));
  }

  // A hostile image: its device nodes are no nodes and its set-id files have no set-id bit.
  const std::string look = c.Submit(account.name, {"--image", hostile_ref, "-o", (c.home / "look.out").string(), "--",
                                                   "cat /etc/jc-image; ls -ln /opt/kmsg /opt/disk /opt/suid /opt/sgid"});
  c.WaitState(look, "DONE");
  const std::string listing = Slurp(c.home / "look.out");
  INFO(listing);
  CHECK(listing.find("a hostile image\n") == 0);
  for (const char* kind : {"\nc", "\nb"}) CHECK(listing.find(kind) == std::string::npos);  // no node
  CHECK(listing.find("rws") == std::string::npos);
  CHECK(listing.find("r-s") == std::string::npos);
  CHECK(listing.find("/opt/suid") != std::string::npos);

  // Another account's job in an image: refused, as its bare jobs are.
  const std::string others = c.Submit(other.name, {"--image", c.ref, "--", "true"});
  c.WaitState(others, "EXIT");
  CHECK(c.Job(others).value("reason", "").find("cannot run tasks as " + other.name) != std::string::npos);

  c.AgentStopsAndRestarts();
}

TEST_CASE("a root nexec agent without cgroups suspends, resumes and kills the whole of a job in its image, whose "
          "container runc starts in a session of its own, and so do its exit and its successor [B6][B9][C6]",
          "[B6][B9][C6]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: running images needs root (CI runs as root)");
    return;
  }
  jc::testing::TestAccount account("jc-nexec-rr");
  ImageAgent c(account, /*as_account=*/false);
  c.SuspendResumeKill();
  c.AgentStopsAndRestarts();
}
