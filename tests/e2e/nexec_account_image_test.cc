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

// The processes of `uid` whose command line is exactly `argv` (NUL-separated in /proc).
int ProcessesOf(uid_t uid, const std::string& argv) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat st {};
    if (stat(entry.path().c_str(), &st) != 0 || st.st_uid != uid) continue;
    std::string cmdline = Slurp(entry.path() / "cmdline");
    if (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
    n += cmdline == argv;
  }
  return n;
}

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

}  // namespace

TEST_CASE("a nexec agent run as an account runs jobs in their images rootless: as the account, pulled into its own "
          "store, entered by exec, ended whole by a kill, a hostile image's nodes and set-id bits gone [B6][C6]",
          "[B6][C6]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: an agent run as a second account needs root to start it (CI runs as root)");
    return;
  }
  const auto dir = std::filesystem::temp_directory_path() / ("jc-nexec-rootless-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms(0755));
  RemovedAtEnd removed_at_end{dir};
  jc::testing::TestAccount account("jc-nexec-rl");
  jc::testing::TestAccount other("jc-nexec-rl-o");  // whose jobs this agent refuses

  auto registry = jc::testing::OciRegistry::Start((dir / "registry").string(), JC_SOURCE_DIR);
  INFO(registry.status().ToString());
  REQUIRE(registry.ok());
  auto digest = (*registry)->Push("demo/app", "v1", "inside the image");
  INFO(digest.status().ToString());
  REQUIRE(digest.ok());
  const std::string ref = (*registry)->host() + "/demo/app@" + *digest;
  auto hostile = (*registry)->PushWith("demo/hostile", "v1", "a hostile image", {"JC_IMAGE_HOSTILE=1"});
  INFO(hostile.status().ToString());
  REQUIRE(hostile.ok());
  const std::string hostile_ref = (*registry)->host() + "/demo/hostile@" + *hostile;

  // What the account's agent reads as the account: its own copies of the pull credential
  // and of the registry's CA.
  const auto own = dir / "account";
  std::filesystem::create_directories(own / "certs");
  std::filesystem::copy_file((*registry)->auth_file(), own / "auth.json");
  std::filesystem::copy_file((*registry)->ca_file(), own / "certs" / "ca.crt");
  for (const auto& p : {own, own / "certs", own / "auth.json", own / "certs" / "ca.crt"}) GiveTo(p, account);
  // The agent and what it runs beside it (the build tree may be closed to the account).
  const auto bin = dir / "bin";
  std::filesystem::create_directories(bin);
  const auto built = std::filesystem::path(JC_NEXEC_AGENT).parent_path();
  for (const char* name : {"nexec-agent", "nexec-image-run", "nexec-run", "nexec-userns-exec"}) {
    std::filesystem::copy_file(built / name, bin / name);
    std::filesystem::permissions(bin / name, std::filesystem::perms(0755));
  }
  const auto home = dir / "home";  // the jobs' working directory, the account's
  std::filesystem::create_directories(home / "logs");
  GiveTo(home, account);
  GiveTo(home / "logs", account);
  const auto state = dir / "state";
  std::filesystem::create_directories(state);
  GiveTo(state, account);

  const std::string munge_socket = jc::testing::UsePrivateMunged();  // every nexec process signs with it (B9)
  Process master({JC_NEXEC_MASTER, "--listen=127.0.0.1:0", "--data_dir=" + (dir / "data").string(),
                  "--host_timeout=2s", "--metrics_address=", "--agent_uid=" + std::to_string(account.uid),
                  "--log_dir=" + (home / "logs").string()},
                 (dir / "master.log").string());
  const auto port = master.WaitForLog(R"(nexec master listening on port (\d+))");
  INFO(master.Log());
  REQUIRE(port.has_value());
  Process agent({"/usr/bin/setpriv", "--reuid=" + std::to_string(account.uid), "--regid=" + std::to_string(account.gid),
                 "--clear-groups", "--", (bin / "nexec-agent").string(), "--master=127.0.0.1:" + *port,
                 "--host=node1", "--resources=cpus=4,mem=4G", "--heartbeat=200ms", "--metrics_address=",
                 "--cgroups=off", "--master_uid=0", "--munge_socket=" + munge_socket,
                 "--state_dir=" + state.string(), "--registry_auth_file=" + (own / "auth.json").string(),
                 "--registry_cert_dir=" + (own / "certs").string()},
                (dir / "agent.log").string());
  REQUIRE(agent.WaitForLog("listening on").has_value());
  {
    INFO(agent.Log());
    CHECK(agent.Log().find("tasks with an image run in it (runc, rootless: this agent is not root)") !=
          std::string::npos);
  }

  int calls = 0;
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/env", "-C", home.string(), JC_NEXEC_CLI, "--master=127.0.0.1:" + *port});
    const std::string out = (dir / ("cli-" + std::to_string(calls++) + ".out")).string();
    Process p(args, out);
    const auto code = p.Wait(std::chrono::seconds(60));
    return std::make_pair(code.value_or(-1), Slurp(out));
  };
  auto submit = [&](const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), {"submit", "--json", "--user", user});
    auto [code, out] = cli(args);
    INFO(out);
    REQUIRE(code == 0);
    return json::parse(out)["job_id"].get<std::string>();
  };
  auto job = [&](const std::string& id) {
    auto [code, out] = cli({"job", id, "--json"});
    INFO(out);
    REQUIRE(code == 0);
    return json::parse(out);
  };
  auto wait_state = [&](const std::string& id, const std::string& state_name) {
    const bool reached = WaitUntil([&] { return job(id).value("state", "") == state_name; }, std::chrono::seconds(90));
    INFO(job(id).dump() << "\n" << agent.Log());
    REQUIRE(reached);
  };

  // In its image, as the account's own ids, in its directory; what it makes is the account's.
  const std::string first = submit(account.name, {"--image", ref, "-o", (home / "first.out").string(), "--",
                                                  "cat /etc/jc-image; id -u; id -g; pwd; echo made > made"});
  wait_state(first, "DONE");
  CHECK(Slurp(home / "first.out") == "inside the image\n" + std::to_string(account.uid) + "\n" +
                                         std::to_string(account.gid) + "\n" + home.string() + "\n");
  struct stat made {};
  REQUIRE(stat((home / "made").c_str(), &made) == 0);
  CHECK(made.st_uid == account.uid);
  // Pulled and unpacked by the account, into the agent's own store.
  struct stat rootfs {};
  REQUIRE(stat((state / "images" / digest->substr(7) / "rootfs").c_str(), &rootfs) == 0);
  CHECK(rootfs.st_uid == account.uid);
  CHECK_FALSE(std::filesystem::exists("/etc/jc-image"));  // only the image has it

  // Entered by exec, as the account, in the container's directory; then killed with
  // everything it started.
  const std::string sleeper = submit(account.name, {"--image", ref, "--", "sleep 1000 & sleep 1000"});
  wait_state(sleeper, "RUNNING");
  REQUIRE(WaitUntil([&] { return ProcessesOf(account.uid, std::string("sleep\0" "1000", 10)) == 2; }));
  std::pair<int, std::string> inside;
  REQUIRE(WaitUntil([&] {  // its container is up once runc started it
    inside = cli({"exec", sleeper, "--", "sh", "-c", "cat /etc/jc-image; id -u; pwd"});
    return inside.first == 0;
  }));
  CHECK(inside.second == "inside the image\n" + std::to_string(account.uid) + "\n" + home.string() + "\n");
  {
    auto [code, out] = cli({"kill", sleeper});
    INFO(out);
    REQUIRE(code == 0);
  }
  wait_state(sleeper, "EXIT");
  CHECK(WaitUntil([&] { return ProcessesOf(account.uid, std::string("sleep\0" "1000", 10)) == 0; }));

  // A hostile image: its device nodes are no nodes and its set-id files have no set-id bit.
  const std::string look = submit(account.name, {"--image", hostile_ref, "-o", (home / "look.out").string(), "--",
                                                 "cat /etc/jc-image; ls -ln /opt/kmsg /opt/disk /opt/suid /opt/sgid"});
  wait_state(look, "DONE");
  const std::string listing = Slurp(home / "look.out");
  INFO(listing);
  CHECK(listing.find("a hostile image\n") == 0);
  for (const char* kind : {"\nc", "\nb"}) CHECK(listing.find(kind) == std::string::npos);  // no node
  CHECK(listing.find("rws") == std::string::npos);
  CHECK(listing.find("r-s") == std::string::npos);
  CHECK(listing.find("/opt/suid") != std::string::npos);

  // Another account's job in an image: refused, as its bare jobs are.
  const std::string others = submit(other.name, {"--image", ref, "--", "true"});
  wait_state(others, "EXIT");
  CHECK(job(others).value("reason", "").find("cannot run tasks as " + other.name) != std::string::npos);

  agent.Signal(SIGTERM);
  INFO(agent.Log());
  CHECK(agent.Wait(std::chrono::seconds(20)).has_value());
}
