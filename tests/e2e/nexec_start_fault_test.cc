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
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <set>
#include <string>

#include "executor/auth/munge_auth.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "tests/testing/munge_daemon.h"
#include "tests/testing/process.h"
#include "tests/testing/test_account.h"

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

// The test's FUSE daemon (hangfs.py) mounted at `at` with `options`; killed, and the mount
// detached, at the end however the test ends: every process waiting on it then gets ENOTCONN
// and goes. `ready` is false where this host has no FUSE (`why` says so).
struct HangFs {
  HangFs(const std::filesystem::path& at, std::vector<std::string> options) : at(at.string()) {
    if (!Exists(at)) std::filesystem::create_directories(at);  // a file stays one (--file-root)
    options.insert(options.begin(), {JC_HANGFS, at.string()});
    daemon = std::make_unique<Process>(options, at.string() + ".log");
    auto mounted = daemon->WaitForLog("(ready|cannot mount.*)");
    ready = mounted && *mounted == "ready";
    why = daemon->Log();
  }
  ~HangFs() {
    Kill();
    daemon->Wait(std::chrono::seconds(10));
    umount2(at.c_str(), MNT_DETACH);
  }
  void Kill() { daemon->Signal(SIGKILL); }
  std::string at;
  std::unique_ptr<Process> daemon;
  bool ready = false;
  std::string why;
};

// A directory of the test's, removed when it ends: declared before the daemons whose mounts
// lie in it, so it goes after them.
struct RemovedAtEnd {
  std::filesystem::path at;
  ~RemovedAtEnd() {
    std::error_code ec;
    std::filesystem::remove_all(at, ec);
  }
};

// A master with a 2 s host timeout, its port in `port`.
std::unique_ptr<Process> StartMaster(const std::filesystem::path& dir, std::string* port) {
  auto master = std::make_unique<Process>(
      std::vector<std::string>{JC_NEXEC_MASTER, "--listen=127.0.0.1:0", "--data_dir=" + (dir / "data").string(),
                               "--host_timeout=2s", "--metrics_address="},
      (dir / "master.log").string());
  auto listening = master->WaitForLog(R"(nexec master listening on port (\d+))");
  REQUIRE(listening.has_value());
  *port = *listening;
  return master;
}

// An agent `host` of that master, heartbeats every 200 ms, starts bounded at 4 s.
std::unique_ptr<Process> StartAgent(const std::filesystem::path& dir, const std::string& port,
                                    const std::string& host, const std::string& cgroups = "auto") {
  auto agent = std::make_unique<Process>(
      std::vector<std::string>{JC_NEXEC_AGENT, "--master=127.0.0.1:" + port, "--host=" + host,
                               "--resources=cpus=8,mem=8G", "--heartbeat=200ms", "--task_start_timeout=4s",
                               "--metrics_address=", "--cgroups=" + cgroups, "--state_dir=" + (dir / host).string()},
      (dir / (host + ".log")).string());
  REQUIRE(agent->WaitForLog("listening on").has_value());
  return agent;
}

// The master's client calls the tests make, signed as this process's account.
struct MasterClient {
  MasterClient(const std::string& port, const jc::nexec::MungeAuth& auth)
      : auth(auth),
        stub(npb::Master::NewStub(grpc::CreateChannel("127.0.0.1:" + port, grpc::InsecureChannelCredentials()))) {}
  int64_t Submit(const npb::SubmitRequest& req) {
    npb::SubmitResponse resp;
    bool ok = WaitUntil([&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      return auth.Sign(&ctx, "Submit", req).ok() && stub->Submit(&ctx, req, &resp).ok();
    });
    REQUIRE(ok);
    return resp.job_id();
  }
  npb::Job Job(int64_t id) {
    npb::JobRef ref;
    ref.set_job_id(id);
    npb::Job j;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!auth.Sign(&ctx, "GetJob", ref).ok() || !stub->GetJob(&ctx, ref, &j).ok()) return npb::Job();
    return j;
  }
  bool Ended(int64_t id) {
    const auto s = Job(id).state();
    return s == npb::DONE || s == npb::EXIT;
  }
  const jc::nexec::MungeAuth& auth;
  std::unique_ptr<npb::Master::Stub> stub;
};

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
  RemovedAtEnd removed_at_end{dir};
  const std::string hung = (dir / "fuse" / "hang").string();  // a lookup never answered
  HangFs fuse(dir / "fuse", {});
  if (!fuse.ready) {
    INFO(fuse.why);
    REQUIRE(fuse.why.find("cannot mount") != std::string::npos);
    WARN("SKIPPED: " << fuse.why << " (no FUSE here)");
    return;
  }

  // With cgroups where the host has them, and without (until session 84 a root agent without
  // cgroups started its own account's tasks through posix_spawn, whose wait had no bound).
  const std::string cgroups = GENERATE("auto", "off");
  CAPTURE(cgroups);
  const auto auth = jc::nexec::MungeAuth::Munge(jc::testing::UsePrivateMunged());
  std::string port;
  auto master_process = StartMaster(dir, &port);
  Process& master = *master_process;
  auto agent_process = StartAgent(dir, port, "node1", cgroups);
  Process& agent = *agent_process;
  // Declared after the agent, so destroyed before it: the daemon dies first, and whatever of
  // the agent waits on the mount (a regression) gets ENOTCONN instead of holding the agent's
  // end, and the test's, for ever.
  struct KillDaemonFirst {
    HangFs& fuse;
    ~KillDaemonFirst() { fuse.Kill(); }
  } kill_daemon_first{fuse};
  if (cgroups == "off") CHECK(agent.Log().find("tasks are contained in cgroups") == std::string::npos);
  MasterClient client(port, auth);
  auto submit = [&](const std::string& command, const std::string& cwd, const std::string& pre_exec = "",
                    const std::string& stdout_path = "") {
    npb::SubmitRequest req;
    req.mutable_spec()->set_command(command);
    req.mutable_spec()->set_user(UserName());
    req.mutable_spec()->set_slots(1);
    req.mutable_spec()->set_cwd(cwd);
    req.mutable_spec()->set_pre_exec(pre_exec);
    req.mutable_spec()->set_stdout_path(stdout_path);
    return client.Submit(req);
  };
  auto job = [&](int64_t id) { return client.Job(id); };

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
  // Its output there: the open of it hangs (the helper that opens it as the account, before
  // it has anything of its own but its answer's socket).
  const int64_t output = submit("echo ran > " + (dir / "output.ran").string(), dir.string(), "", hung + "/out");
  // And a job after them, which must start.
  const int64_t later = submit("echo ran > " + (dir / "later.ran").string(), dir.string());

  auto ended = [&](int64_t id) { return client.Ended(id); };
  REQUIRE(WaitUntil([&] { return ended(later) && ended(direct) && ended(phased) && ended(output); },
                    std::chrono::seconds(90)));
  const npb::Job d = job(direct), p = job(phased), l = job(later), o = job(output);
  INFO(d.DebugString() << p.DebugString() << l.DebugString() << o.DebugString() << agent.Log());
  CHECK(l.state() == npb::DONE);
  CHECK(Exists(dir / "later.ran"));
  CHECK(d.state() == npb::EXIT);
  CHECK(d.reason().find("did not start its command within 4000 ms") != std::string::npos);
  CHECK(o.state() == npb::EXIT);
  CHECK(o.reason().find("did not open within 4s") != std::string::npos);
  CHECK_FALSE(Exists(dir / "output.ran"));
  CHECK(p.state() == npb::EXIT);
  CHECK(p.exit_code() == 127);
  CHECK_FALSE(Exists(dir / "direct.ran"));
  CHECK_FALSE(Exists(dir / "phased.ran"));
  CHECK(agent.Log().find("cannot start its command") != std::string::npos);
  // Heartbeats went on through both hangs: the host never lapsed, the bystander runs on.
  CHECK(master.Log().find("is unavailable") == std::string::npos);
  CHECK(job(bystander).state() == npb::RUNNING);

  // Attacker helper-91: `nexec exec` into a running task whose directory no longer answers
  // (a link to it repointed, as the account could mount over its own). The command's child
  // held the agent's call for ever (the agent could not stop), and with it every descriptor
  // of the agent's, its listening socket too: an agent restarted on that address could not
  // listen. Now the start is bounded as a task's, and the child closes them before it enters.
  const auto held_link = dir / "held-cwd", held_hung_link = dir / "held-hung-link";
  std::filesystem::create_directory_symlink(dir, held_link);
  std::filesystem::create_directory_symlink(hung, held_hung_link);
  const int64_t held = submit("echo $$ > " + (dir / "held.pid").string() + "; exec sleep 300", held_link.string());
  REQUIRE(WaitUntil([&] { return Exists(dir / "held.pid") && job(held).state() == npb::RUNNING; }));
  std::filesystem::rename(held_hung_link, held_link);
  npb::ExecFrame first;
  first.mutable_start()->set_job_id(held);
  first.mutable_start()->add_command("true");
  grpc::Status exec_status;
  const auto asked = std::chrono::steady_clock::now();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto cred = auth.Encode(jc::nexec::MungeAuth::Payload("Exec", first));
    REQUIRE(cred.ok());
    ctx.AddMetadata(jc::nexec::kMungeMetadataKey, *cred);
    auto stream = client.stub->Exec(&ctx);
    REQUIRE(stream->Write(first));
    npb::ExecFrame frame;
    bool started = false;
    while (stream->Read(&frame)) started = started || frame.started();
    CHECK_FALSE(started);
    exec_status = stream->Finish();
  }
  const auto exec_took = std::chrono::steady_clock::now() - asked;
  INFO(exec_status.error_message() << "\n" << agent.Log());
  CHECK_FALSE(exec_status.ok());
  CHECK(exec_status.error_message().find("did not start within 4000 ms") != std::string::npos);
  CHECK(exec_took < std::chrono::seconds(30));
  // Its children still before exec (the direct job's, the output job's helper, this
  // command's, given up in the kernel) hold no socket of the agent's: not its listening one,
  // not its master connections.
  const std::string agent_address = agent.WaitForLog(R"(listening on (127\.0\.0\.1:\d+))").value_or("");
  REQUIRE(!agent_address.empty());
  std::error_code no_exe;
  const auto agent_exe = std::filesystem::read_symlink("/proc/" + std::to_string(agent.pid()) + "/exe", no_exe);
  REQUIRE(!agent_exe.empty());
  // The agent's sockets: its listening one, its master connections.
  std::set<std::string> agent_sockets;
  {
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(agent.pid()) + "/fd", ec)) {
      std::error_code ignored;
      const std::string target = std::filesystem::read_symlink(fd.path(), ignored).string();
      if (target.rfind("socket:", 0) == 0) agent_sockets.insert(target);
    }
  }
  REQUIRE_FALSE(agent_sockets.empty());
  int stuck = 0;
  for (const auto& proc : std::filesystem::directory_iterator("/proc")) {
    std::ifstream stat_file(proc.path() / "stat");
    std::string line;
    if (!std::getline(stat_file, line) || line.rfind(')') == std::string::npos) continue;
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    std::error_code ec_exe;
    if (parent != agent.pid() || std::filesystem::read_symlink(proc.path() / "exe", ec_exe) != agent_exe) continue;
    ++stuck;
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator(proc.path() / "fd", ec)) {
      std::error_code ignored;
      const std::string target = std::filesystem::read_symlink(fd.path(), ignored).string();
      INFO(proc.path().string() << " holds " << fd.path().filename().string() << " -> " << target);
      // A helper holds its answer's socket, its own: none of the agent's.
      CHECK(agent_sockets.count(target) == 0);
      // Nor the agent's own output (here its log; under a supervisor a pipe whose reader
      // waits for its end): the output job's helper waits in the open of its output file.
      CHECK(target != (dir / "node1.log").string());
    }
  }
  // The direct job's child and the output job's helper, given up, and this command's
  // (reviewer helper-92).
  CHECK(stuck >= 3);
  // The agent stops when told, and one started on its address listens there.
  agent.Signal(SIGTERM);
  CHECK(agent.Wait(std::chrono::seconds(20)).has_value());
  Process again({JC_NEXEC_AGENT, "--master=127.0.0.1:" + port, "--host=node1", "--listen=" + agent_address,
                 "--resources=cpus=8,mem=8G", "--heartbeat=200ms", "--task_start_timeout=4s", "--metrics_address=",
                 "--state_dir=" + (dir / "node1").string()},
                (dir / "node1-again.log").string());
  CHECK(again.WaitForLog("listening on " + agent_address).has_value());
}

// Attacker helper-85: a regular file on a FUSE file system the account mounted itself, whose
// daemon answers everything but the FLUSH every close(2) sends. The agent's open-as-account
// helper used to hand it such a descriptor (its hostfile, its output for `nexec logs`), and
// whichever root thread closed it waited for ever, uninterruptibly: the thread that starts
// every task, a server thread per `nexec logs`, and at the end the agent's exit itself.
TEST_CASE("a file on a FUSE file system an account mounted is never handed to the agent, so a FLUSH never answered "
          "holds none of its threads, its host stays available, and it stops when told [B9][C6][C7]",
          "[B9][C6][C7]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: mounting the test's FUSE file systems and a second account need root");
    return;
  }
  auto dir = std::filesystem::temp_directory_path() / ("jc-nexec-fuse-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms(0755));
  RemovedAtEnd removed_at_end{dir};
  jc::testing::TestAccount account("jc-nexec-fuse");
  const std::string owner = std::to_string(account.uid) + ":" + std::to_string(account.gid);
  // As the account mounts one for itself (only it may enter), and as it may where the admin
  // allowed user_allow_other (everyone may, root too).
  HangFs own(dir / "own", {"--files", "--owner", owner});
  if (!own.ready) {
    INFO(own.why);
    REQUIRE(own.why.find("cannot mount") != std::string::npos);
    WARN("SKIPPED: " << own.why << " (no FUSE here)");
    return;
  }
  HangFs shared(dir / "shared", {"--files", "--owner", owner, "--allow-other"});
  REQUIRE(shared.ready);
  const auto home = dir / "home";  // an ordinary directory of the account's
  std::filesystem::create_directories(home);
  REQUIRE(chown(home.c_str(), account.uid, account.gid) == 0);

  const auto auth = jc::nexec::MungeAuth::Munge(jc::testing::UsePrivateMunged());
  std::string port;
  auto master_process = StartMaster(dir, &port);
  Process& master = *master_process;
  std::vector<std::unique_ptr<Process>> agents;
  for (const std::string host : {"node1", "node2"}) agents.push_back(StartAgent(dir, port, host));
  // Destroyed before the agents: whatever of theirs waits on a mount (a regression) gets
  // ENOTCONN instead of holding their end, and the test's, for ever.
  // And attacker helper-86's H1: a path the account's daemon answers "missing" for in one
  // walk (its 5th and 6th lookups of `gate` by a process: the 4 before are the helper's
  // mkdir -p) and not in the next, which leads back out of the mount, to a file of the
  // account's in an ordinary directory with its FUSE mounted on it. The helper took the
  // file for missing, created it in its checked directory, and so opened the mount.
  const auto atk = dir / "atk";
  std::filesystem::create_directories(atk / "fmnt");
  std::filesystem::create_directories(atk / "out");
  std::ofstream(atk / "out" / "mpi.hosts").close();
  for (const auto& p : {atk, atk / "fmnt", atk / "out", atk / "out" / "mpi.hosts"}) {
    REQUIRE(chown(p.c_str(), account.uid, account.gid) == 0);
  }
  HangFs gate(atk / "fmnt", {"--gate", "gate", "--missing-for", "5,6", "--owner", owner, "--allow-other"});
  HangFs on_file(atk / "out" / "mpi.hosts", {"--files", "--file-root", "--owner", owner, "--allow-other"});
  REQUIRE(gate.ready);
  REQUIRE(on_file.ready);
  // And attacker helper-88's H4: root's own job whose output lies below a directory of an
  // account's (everyone may enter) whose lookups are never answered. Root's files were
  // opened on the agent's own thread, unbounded; now through the helper too.
  HangFs hanging(dir / "hanging", {"--owner", owner, "--allow-other"});
  REQUIRE(hanging.ready);
  // And helper-89's N1: the account's own job naming a program on its mount, whose root says
  // it is root's alone: the agent's look for a program it may start without a shell stepped
  // onto the mount, as root, and waited there for ever.
  // (Below a directory root's alone, as a home is, or the agent's look stops before it: not
  // below /tmp, which everyone may write.)
  RemovedAtEnd trap_parent{std::filesystem::path("/run") / ("jc-nexec-trap-" + std::to_string(getpid()))};
  std::filesystem::create_directories(trap_parent.at);
  std::filesystem::permissions(trap_parent.at, std::filesystem::perms(0755));
  HangFs trap(trap_parent.at / "trap", {"--owner", owner, "--allow-other", "--root-owned"});
  REQUIRE(trap.ready);
  struct KillDaemonsFirst {
    std::vector<HangFs*> daemons;
    ~KillDaemonsFirst() {
      for (HangFs* d : daemons) d->Kill();
    }
  } kill_daemons_first{{&own, &shared, &gate, &on_file, &hanging, &trap}};

  MasterClient client(port, auth);
  auto submit = [&](const std::string& user, const std::string& command, const std::string& out, int slots) {
    npb::SubmitRequest req;
    req.mutable_spec()->set_command(command);
    req.mutable_spec()->set_user(user);
    req.mutable_spec()->set_slots(slots);
    if (slots > 1) req.mutable_spec()->set_requirement("span[ptile=1]");
    req.mutable_spec()->set_stdout_path(out);
    req.mutable_spec()->set_cwd(user == account.name ? home.string() : dir.string());
    return client.Submit(req);
  };
  auto job = [&](int64_t id) { return client.Job(id); };
  auto ended = [&](int64_t id) { return client.Ended(id); };
  // What `nexec logs` gets, within 15 s: the status and the text.
  auto logs = [&](int64_t id) {
    npb::ReadLogRequest req;
    req.set_job_id(id);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
    REQUIRE(auth.Sign(&ctx, "ReadLog", req).ok());
    auto reader = client.stub->ReadLog(&ctx, req);
    std::string text;
    npb::LogChunk chunk;
    while (reader->Read(&chunk)) text += chunk.data();
    return std::make_pair(reader->Finish(), text);
  };

  const int64_t bystander = submit(UserName(), "echo $$ > " + (dir / "by.pid").string() + "; exec sleep 300",
                                   (dir / "by.out").string(), 1);
  REQUIRE(WaitUntil([&] { return Exists(dir / "by.pid") && job(bystander).state() == npb::RUNNING; }));

  // Over two hosts, whose hostfile the agent writes beside the output: on the account's own
  // mount (which the agent's helper may not enter), and on the one everyone may enter.
  const int64_t spread_own = submit(account.name, "true", own.at + "/out", 2);
  const int64_t spread_shared = submit(account.name, "true", shared.at + "/out", 2);
  const std::string gated = (atk / "fmnt" / "gate" / ".." / ".." / "out" / "mpi").string();
  const int64_t spread_gated = submit(account.name, "true", gated, 2);
  // On one host, its output on the account's mount: the task's open is refused, and then its
  // output is asked for, three times. And on the mount everyone may enter, where the task's
  // own child would wait in the close of its output, given up after the start timeout and
  // counted against whoever's job it was (attacker helper-86: another account's FUSE mounted
  // where a job's output was to go); now it is refused before anything is opened.
  const int64_t single = submit(account.name, "echo hi", own.at + "/single.out", 1);
  const auto shared_started = std::chrono::steady_clock::now();
  const int64_t single_shared = submit(account.name, "echo hi", shared.at + "/single.out", 1);
  // And a job over both hosts in an ordinary directory, which runs.
  const int64_t later = submit(account.name, "echo ran", (home / "later.out").string(), 2);
  REQUIRE(WaitUntil([&] { return ended(single_shared); }, std::chrono::seconds(60)));
  const auto shared_took = std::chrono::steady_clock::now() - shared_started;
  REQUIRE(WaitUntil([&] { return ended(spread_own) && ended(spread_shared) && ended(single) && ended(later); },
                    std::chrono::seconds(60)));
  {
    npb::SubmitRequest req;
    req.mutable_spec()->set_command(trap.at + "/hangprog");
    req.mutable_spec()->set_user(account.name);
    req.mutable_spec()->set_slots(1);
    req.mutable_spec()->set_requirement("select[hname==node1]");
    req.mutable_spec()->set_stdout_path((home / "trap.out").string());
    req.mutable_spec()->set_cwd(home.string());
    client.Submit(req);  // its shell waits on the mount: the task's own wait, not the agent's
    req.mutable_spec()->set_command("echo after > " + (home / "after-trap").string());
    req.mutable_spec()->set_stdout_path((home / "after.out").string());
    const int64_t after = client.Submit(req);
    const bool ran = WaitUntil([&] { return job(after).state() == npb::DONE; }, std::chrono::seconds(30));
    INFO(agents[0]->Log());
    CHECK(ran);
  }
  // Root's, last: its hostfile's helper holds a launching thread for the start timeout.
  const int64_t root_hung = submit(UserName(), "true", hanging.at + "/hangdir/out", 2);
  REQUIRE(WaitUntil([&] { return ended(spread_gated) && ended(root_hung); }, std::chrono::seconds(60)));
  {
    const npb::Job r = job(root_hung);
    INFO(r.DebugString());
    CHECK(r.state() == npb::EXIT);
    CHECK(r.reason().find("hostfile: cannot open " + hanging.at + "/hangdir/out.hosts as " + UserName() +
                          ": it did not open within 4s") != std::string::npos);
  }
  {
    const npb::Job g = job(spread_gated);
    INFO(g.DebugString());
    CHECK(g.state() == npb::EXIT);
    // Refused, whichever way the walk was answered ("missing", or the FUSE file).
    CHECK(g.reason().find("hostfile: cannot open " + gated + ".hosts as " + account.name + ": ") !=
          std::string::npos);
  }
  {
    const npb::Job e = job(single_shared);
    INFO(e.DebugString());
    CHECK(e.state() == npb::EXIT);
    CHECK(e.reason().find("output file: cannot open " + shared.at + "/single.out as " + account.name +
                          ": it lies on a FUSE file system an account mounted") != std::string::npos);
    CHECK(shared_took < std::chrono::seconds(4));  // the start timeout: nothing waited for it
  }
  const npb::Job a = job(spread_own), b = job(spread_shared), c = job(single), d = job(later);
  INFO(a.DebugString() << b.DebugString() << c.DebugString() << d.DebugString() << agents[0]->Log()
                       << agents[1]->Log());
  CHECK(a.state() == npb::EXIT);
  CHECK(a.reason().find("hostfile: cannot open " + own.at + "/out.hosts as " + account.name +
                        ": Permission denied") != std::string::npos);
  CHECK(b.state() == npb::EXIT);
  CHECK(b.reason().find("hostfile: cannot open " + shared.at + "/out.hosts as " + account.name +
                        ": it lies on a FUSE file system an account mounted") != std::string::npos);
  CHECK(c.state() == npb::EXIT);
  CHECK(c.reason().find("Permission denied") != std::string::npos);
  CHECK(d.state() == npb::DONE);
  CHECK(std::ifstream(home / "later.out.hosts").good());
  {
    auto [status, text] = logs(later);
    INFO(status.error_message());
    CHECK(status.ok());
    CHECK(text == "ran\n");
  }
  for (int64_t id : {single, single, single, single_shared}) {
    const auto asked = std::chrono::steady_clock::now();
    auto [status, text] = logs(id);
    INFO(status.error_message());
    CHECK_FALSE(status.ok());
    // Refused at once (the agent reports any failed open as NOT_FOUND, a helper's timeout too).
    CHECK(std::chrono::steady_clock::now() - asked < std::chrono::seconds(4));
    CHECK((status.error_message().find("Permission denied") != std::string::npos ||
           status.error_message().find("lies on a FUSE file system an account mounted") != std::string::npos));
    CHECK(text.empty());
  }
  // Heartbeats went on: neither host lapsed, the bystander runs on.
  CHECK(master.Log().find("is unavailable") == std::string::npos);
  CHECK(job(bystander).state() == npb::RUNNING);
  // And each agent stops when told: no thread of its waits on the account's file system.
  for (auto& agent : agents) agent->Signal(SIGTERM);
  for (auto& agent : agents) {
    INFO(agent->Log());
    CHECK(agent->Wait(std::chrono::seconds(20)).has_value());
  }
}

// Attacker helper-93's (c): an agent that runs as an account (not root; `--agent_uid` at its
// master) opened that account's output files in the thread that starts every task, so the
// account's own FUSE mount that never answers, named as one job's output, held every later
// start of that agent for ever. Now the task's child opens them, as it does for a root agent,
// and its start is bounded by --task_start_timeout; what the agent writes itself (a hostfile)
// it opens through its bounded helper, as a root agent does. And attacker helper-95's: the
// master's output directory (this account's) opened in the agent's thread, a task's output
// /proc/self/mem (the agent's memory, in the child that shares it), another account's elastic
// job truncating this account's file before its launch was refused.
TEST_CASE("an agent that runs as an account: an output or hostfile on that account's own file system that never "
          "answers fails its job after --task_start_timeout, and the agent's later tasks start [B9][C7]",
          "[B9][C7]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: mounting the test's FUSE file system and an agent run as a second account need root");
    return;
  }
  auto dir = std::filesystem::temp_directory_path() / ("jc-nexec-account-agent-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms(0755));
  RemovedAtEnd removed_at_end{dir};
  jc::testing::TestAccount account("jc-nexec-own");
  jc::testing::TestAccount other("jc-nexec-other");  // whose launches these agents refuse
  const std::string owner = std::to_string(account.uid) + ":" + std::to_string(account.gid);
  // The account's own mount: only it may enter (the agent, which runs as it, too); a lookup
  // of anything below its root is never answered.
  HangFs own(dir / "own", {"--owner", owner});
  if (!own.ready) {
    INFO(own.why);
    REQUIRE(own.why.find("cannot mount") != std::string::npos);
    WARN("SKIPPED: " << own.why << " (no FUSE here)");
    return;
  }
  const auto home = dir / "home";  // an ordinary directory of the account's
  std::filesystem::create_directories(home);
  REQUIRE(chown(home.c_str(), account.uid, account.gid) == 0);
  // A copy of the agent the account may run (the build tree may be closed to it).
  const auto agent_binary = dir / "nexec-agent";
  std::filesystem::copy_file(JC_NEXEC_AGENT, agent_binary);
  std::filesystem::permissions(agent_binary, std::filesystem::perms(0755));

  const auto auth = jc::nexec::MungeAuth::Munge(jc::testing::UsePrivateMunged());
  auto master_process = std::make_unique<Process>(
      std::vector<std::string>{JC_NEXEC_MASTER, "--listen=127.0.0.1:0", "--data_dir=" + (dir / "data").string(),
                               "--host_timeout=2s", "--metrics_address=", "--agent_uid=" + std::to_string(account.uid),
                               // The default output directory: an agent's that runs as an
                               // account is that account's, here on its mount that never answers.
                               "--log_dir=" + own.at + "/logs"},
      (dir / "master.log").string());
  const auto port = master_process->WaitForLog(R"(nexec master listening on port (\d+))");
  REQUIRE(port.has_value());
  Process& master = *master_process;
  // Two agents, as the account; setpriv execs each in its place: the test's signals reach it.
  std::vector<std::unique_ptr<Process>> agents;
  for (const std::string host : {"node1", "node2"}) {
    const auto state = dir / (host + "-state");
    std::filesystem::create_directories(state);
    REQUIRE(chown(state.c_str(), account.uid, account.gid) == 0);
    std::filesystem::permissions(state, std::filesystem::perms(0700));
    agents.push_back(std::make_unique<Process>(
        std::vector<std::string>{"/usr/bin/setpriv", "--reuid=" + std::to_string(account.uid),
                                 "--regid=" + std::to_string(account.gid), "--clear-groups", "--",
                                 agent_binary.string(), "--master=127.0.0.1:" + *port, "--host=" + host,
                                 "--resources=cpus=8,mem=8G", "--heartbeat=200ms", "--task_start_timeout=4s",
                                 "--metrics_address=", "--cgroups=off", "--master_uid=0",
                                 "--munge_socket=" + jc::testing::UsePrivateMunged(), "--state_dir=" + state.string()},
        (dir / (host + ".log")).string()));
    REQUIRE(agents.back()->WaitForLog("listening on").has_value());
  }
  Process& agent = *agents[0];
  struct KillDaemonFirst {  // whatever of the agent's waits on the mount (a regression) then ends
    HangFs& fuse;
    ~KillDaemonFirst() { fuse.Kill(); }
  } kill_daemon_first{own};

  MasterClient client(port.value(), auth);
  auto submit = [&](const std::string& command, const std::string& stdout_path, int slots = 1,
                    const std::string& user = "", int max_slots = 0) {
    npb::SubmitRequest req;
    req.mutable_spec()->set_command(command);
    req.mutable_spec()->set_user(user.empty() ? account.name : user);
    req.mutable_spec()->set_slots(slots);
    req.mutable_spec()->set_max_slots(max_slots);
    if (slots > 1) req.mutable_spec()->set_requirement("span[ptile=1]");
    req.mutable_spec()->set_cwd(home.string());
    req.mutable_spec()->set_stdout_path(stdout_path);
    return client.Submit(req);
  };
  auto job = [&](int64_t id) { return client.Job(id); };
  auto ended = [&](int64_t id) { return client.Ended(id); };

  const int64_t bystander = submit("echo $$ > " + (home / "by.pid").string() + "; exec sleep 300", (home / "by.out").string());
  {
    const bool running = WaitUntil([&] { return Exists(home / "by.pid") && job(bystander).state() == npb::RUNNING; });
    INFO(job(bystander).DebugString() << agent.Log() << master.Log());
    REQUIRE(running);
  }
  // Its output below the mount: the walk to its directory is never answered.
  const int64_t hung = submit("echo ran > " + (home / "hung.ran").string(), own.at + "/hang/out");
  // Its output where the account may not write (root's directory): refused, as the user's
  // shell would refuse it.
  const int64_t refused = submit("echo ran > " + (home / "refused.ran").string(), (dir / "refused.out").string());
  // Over both hosts, below the mount: the hostfile the agent writes beside the output, opened
  // by the bounded helper (which a root agent uses for every account's), not in its thread.
  const int64_t spread = submit("echo ran > " + (home / "spread.ran").string(), own.at + "/hang2/out", 2);
  // Its output where the master puts it by default, below the same mount (attacker helper-95:
  // the agent opened files in the master's output directory in its own thread).
  const int64_t by_default = submit("echo ran > " + (home / "default.ran").string(), "");
  // Its output the agent's own memory: the child that opens it shares the agent's (attacker
  // helper-95: the task wrote over the agent's code through its stdout).
  const int64_t into_agent = submit("printf 'XXXXXXXXXXXXXXXX%.0s' $(seq 1 4096)", "/proc/self/mem");
  // Another account's elastic job, its event file beside an output in this account's home:
  // refused before anything is made (attacker helper-95: it truncated this account's file).
  std::ofstream(home / "precious.events") << "the account's own\n";
  REQUIRE(chown((home / "precious.events").c_str(), account.uid, account.gid) == 0);
  const int64_t others = submit("true", (home / "precious").string(), 1, other.name, 2);
  const int64_t others_new = submit("true", (home / "newdir" / "sub" / "x").string(), 1, other.name, 2);
  // And one after them, its output in a directory the child makes: it runs.
  const int64_t later = submit("echo ran", (home / "sub" / "later.out").string());
  REQUIRE(WaitUntil(
      [&] {
        for (int64_t id : {hung, refused, spread, by_default, into_agent, others, others_new, later}) {
          if (!ended(id)) return false;
        }
        return true;
      },
      std::chrono::seconds(90)));
  const npb::Job h = job(hung), r = job(refused), sp = job(spread), l = job(later), df = job(by_default),
                 ia = job(into_agent), ot = job(others), on = job(others_new);
  INFO(h.DebugString() << r.DebugString() << sp.DebugString() << l.DebugString() << df.DebugString()
                       << ia.DebugString() << ot.DebugString() << on.DebugString() << agent.Log());
  CHECK(df.state() == npb::EXIT);
  CHECK(df.reason().find("did not start its command within 4000 ms") != std::string::npos);
  CHECK_FALSE(Exists(home / "default.ran"));
  CHECK(ia.state() == npb::EXIT);
  CHECK(ia.reason().find("output file: cannot open /proc/self/mem as " + account.name + ": it lies in /proc") !=
        std::string::npos);
  for (const npb::Job& o : {ot, on}) {
    CHECK(o.state() == npb::EXIT);
    CHECK(o.reason().find("cannot run tasks as " + other.name) != std::string::npos);
  }
  {
    std::ifstream precious(home / "precious.events");
    std::string kept((std::istreambuf_iterator<char>(precious)), std::istreambuf_iterator<char>());
    CHECK(kept == "the account's own\n");
  }
  CHECK_FALSE(Exists(home / "newdir"));
  CHECK(sp.state() == npb::EXIT);
  CHECK(sp.reason().find("hostfile: cannot open " + own.at + "/hang2/out.hosts as " + account.name +
                         ": it did not open within 4s") != std::string::npos);
  CHECK_FALSE(Exists(home / "spread.ran"));
  CHECK(h.state() == npb::EXIT);
  CHECK(h.reason().find("did not start its command within 4000 ms") != std::string::npos);
  CHECK_FALSE(Exists(home / "hung.ran"));
  CHECK(r.state() == npb::EXIT);
  CHECK(r.reason().find("output file: cannot open " + (dir / "refused.out").string() + " as " + account.name +
                        ": Permission denied") != std::string::npos);
  CHECK_FALSE(Exists(home / "refused.ran"));
  CHECK_FALSE(Exists(dir / "refused.out"));
  CHECK(l.state() == npb::DONE);
  struct stat out {};
  REQUIRE(stat((home / "sub" / "later.out").c_str(), &out) == 0);
  CHECK(out.st_uid == account.uid);
  CHECK((out.st_mode & 0777) == 0600);
  std::ifstream later_out(home / "sub" / "later.out");
  std::string text((std::istreambuf_iterator<char>(later_out)), std::istreambuf_iterator<char>());
  CHECK(text == "ran\n");
  // Heartbeats went on: the host never lapsed, the bystander runs on; the agent stops when told.
  CHECK(master.Log().find("is unavailable") == std::string::npos);
  CHECK(job(bystander).state() == npb::RUNNING);
  for (auto& a : agents) a->Signal(SIGTERM);
  for (auto& a : agents) {
    INFO(a->Log());
    CHECK(a->Wait(std::chrono::seconds(20)).has_value());
  }
}
