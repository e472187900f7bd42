// A task's start that never returns (issue 48's agent, attacker helpers 82 and 83): its working
// directory on a file system that takes a request and never answers (tests/e2e/hangfs.py, a
// FUSE daemon), so the task's child waits in the kernel, uninterruptibly, and SIGKILL alone
// does not end it. A real nexec master and agent: the start fails after --task_start_timeout
// and the stuck child is given up; the agent's later launches start; a command that hangs
// so after its pre-exec holds neither the agent's heartbeats (the host stays available, a
// bystander job runs on) nor anything else.

#include <pwd.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "executor/auth/munge_auth.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "tests/testing/munge_daemon.h"
#include "tests/testing/process.h"

using jc::testing::Process;
using jc::testing::WaitUntil;
namespace npb = ::nexec::v1;

namespace {

std::string UserName() {
  passwd* pw = getpwuid(getuid());
  return pw != nullptr ? pw->pw_name : std::to_string(getuid());
}

bool Exists(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::exists(p, ec);
}

}  // namespace

TEST_CASE("a task start that never returns from its file system holds neither the agent's heartbeats nor its later "
          "launches: it fails after --task_start_timeout and its stuck child is given up [B11][C7]",
          "[B11][C7]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: mounting the test's FUSE file system needs root");
    return;
  }
  auto dir = std::filesystem::temp_directory_path() / ("jc-nexec-start-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "fuse");
  const std::string hung = (dir / "fuse" / "hang").string();  // a lookup never answered
  auto fuse = std::make_unique<Process>(std::vector<std::string>{JC_HANGFS, (dir / "fuse").string()},
                                        (dir / "hangfs.log").string());
  auto mounted = fuse->WaitForLog("(ready|cannot mount.*)");
  if (!mounted || *mounted != "ready") {
    const std::string said = fuse->Log();
    INFO(said);
    REQUIRE(said.find("cannot mount") != std::string::npos);
    WARN("SKIPPED: " << said << " (no FUSE here)");
    return;
  }
  // The daemon killed and the mount detached at the end, however the test ends: every
  // process waiting on it then gets ENOTCONN and goes.
  struct Unmount {
    std::unique_ptr<Process>& fuse;
    std::string at;
    ~Unmount() {
      fuse->Signal(SIGKILL);
      fuse->Wait(std::chrono::seconds(10));
      umount2(at.c_str(), MNT_DETACH);
    }
  } unmount{fuse, (dir / "fuse").string()};

  const auto auth = jc::nexec::MungeAuth::Munge(jc::testing::UsePrivateMunged());
  Process master({JC_NEXEC_MASTER, "--listen=127.0.0.1:0", "--data_dir=" + (dir / "data").string(),
                  "--host_timeout=2s", "--metrics_address="},
                 (dir / "master.log").string());
  auto port = master.WaitForLog(R"(nexec master listening on port (\d+))");
  REQUIRE(port.has_value());
  Process agent({JC_NEXEC_AGENT, "--master=127.0.0.1:" + *port, "--host=node1", "--resources=cpus=8,mem=8G",
                 "--heartbeat=200ms", "--task_start_timeout=4s", "--metrics_address=",
                 "--state_dir=" + (dir / "agent").string()},
                (dir / "agent.log").string());
  REQUIRE(agent.WaitForLog("listening on").has_value());
  // Declared after the agent, so destroyed before it: the daemon dies first, and whatever of
  // the agent waits on the mount (a regression) gets ENOTCONN instead of holding the agent's
  // end, and the test's, for ever.
  struct KillDaemonFirst {
    std::unique_ptr<Process>& fuse;
    ~KillDaemonFirst() { fuse->Signal(SIGKILL); }
  } kill_daemon_first{fuse};
  if (agent.Log().find("tasks are contained in cgroups") == std::string::npos) {
    // Without cgroups a root agent starts its own account's tasks through posix_spawn, whose
    // wait is not bounded (security.md).
    WARN("SKIPPED: the agent runs without cgroups here");
    return;
  }
  auto stub = npb::Master::NewStub(grpc::CreateChannel("127.0.0.1:" + *port, grpc::InsecureChannelCredentials()));
  auto submit = [&](const std::string& command, const std::string& cwd, const std::string& pre_exec = "") {
    npb::SubmitRequest req;
    req.mutable_spec()->set_command(command);
    req.mutable_spec()->set_user(UserName());
    req.mutable_spec()->set_slots(1);
    req.mutable_spec()->set_cwd(cwd);
    req.mutable_spec()->set_pre_exec(pre_exec);
    npb::SubmitResponse resp;
    bool ok = WaitUntil([&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      return auth.Sign(&ctx, "Submit", req).ok() && stub->Submit(&ctx, req, &resp).ok();
    });
    REQUIRE(ok);
    return resp.job_id();
  };
  auto job = [&](int64_t id) {
    npb::JobRef ref;
    ref.set_job_id(id);
    npb::Job j;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!auth.Sign(&ctx, "GetJob", ref).ok() || !stub->GetJob(&ctx, ref, &j).ok()) return npb::Job();
    return j;
  };

  // A bystander, running throughout.
  const int64_t bystander = submit("echo $$ > " + (dir / "by.pid").string() + "; exec sleep 300", dir.string());
  REQUIRE(WaitUntil([&] { return Exists(dir / "by.pid") && job(bystander).state() == npb::RUNNING; }));
  // Its command's directory turned, by its pre-exec, into the one that never answers: the
  // command's start hangs (on the agent's phase starter).
  // (A link made beforehand and renamed over it: `ln` would look the new target up, and hang.)
  const auto link = dir / "cwd", hung_link = dir / "hung-link";
  std::filesystem::create_directory_symlink(dir, link);
  std::filesystem::create_directory_symlink(hung, hung_link);
  const int64_t phased = submit("echo ran > " + (dir / "phased.ran").string(), link.string(),
                                "mv -T " + hung_link.string() + " " + link.string());
  // Launched straight into it: the launch hangs (on the thread that starts every task).
  const int64_t direct = submit("echo ran > " + (dir / "direct.ran").string(), hung);
  // And a job after both, which must start.
  const int64_t later = submit("echo ran > " + (dir / "later.ran").string(), dir.string());

  auto ended = [&](int64_t id) {
    const auto s = job(id).state();
    return s == npb::DONE || s == npb::EXIT;
  };
  REQUIRE(WaitUntil([&] { return ended(later) && ended(direct) && ended(phased); }, std::chrono::seconds(90)));
  const npb::Job d = job(direct), p = job(phased), l = job(later);
  INFO(d.DebugString() << p.DebugString() << l.DebugString() << agent.Log());
  CHECK(l.state() == npb::DONE);
  CHECK(Exists(dir / "later.ran"));
  CHECK(d.state() == npb::EXIT);
  CHECK(d.reason().find("did not start its command within 4000 ms") != std::string::npos);
  CHECK(p.state() == npb::EXIT);
  CHECK(p.exit_code() == 127);
  CHECK_FALSE(Exists(dir / "direct.ran"));
  CHECK_FALSE(Exists(dir / "phased.ran"));
  CHECK(agent.Log().find("cannot start its command") != std::string::npos);
  // Heartbeats went on through both hangs: the host never lapsed, the bystander runs on.
  CHECK(master.Log().find("is unavailable") == std::string::npos);
  CHECK(job(bystander).state() == npb::RUNNING);
}
