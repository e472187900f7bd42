// Commands and forwarded ports in running replicas (SPEC A17, issue 46 item 4): the real
// `jcctl job exec` and `jcctl job port-forward` against a real control plane over REST and
// its endpoint listener, through a real local center's adapter, to real processes of the
// replica — and every refusal as the attacker: a viewer, another project's member, a link
// used twice or on another path, a replica that ended, a caller who leaves or is removed
// from the project while a command runs.

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/exec/exec_stream.h"
#include "tests/testing/local_adapter.h"
#include "tests/testing/process.h"
#include "tests/testing/server_processes.h"
#include "tests/testing/test_system.h"

using nlohmann::json;
namespace es = jc::exec_stream;

namespace {

// The replica's port: a TCP echo server, one thread per connection.
constexpr char kEchoServer[] = R"PY(
import socket, sys, threading
def serve(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1])))
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
)PY";

// Which of this suite's ten port bands this process holds, for its life: the first whose lock
// file it can take, from its pid on. Two of its tests run at once under ctest -j2; a band by
// pid alone was the same for both one time in ten, and a replica of one then found its port
// taken by the other's and restarted ("not running (waiting)").
int OwnBand() {
  static const int band = [] {
    for (int i = 0; i < 10; ++i) {
      const int k = static_cast<int>((getpid() + i) % 10);
      const std::string lock = absl::StrCat("/tmp/jc-replica-session-band-", k, ".lock");
      const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) return k;  // held until the process ends
      if (fd >= 0) ::close(fd);
    }
    return static_cast<int>(getpid() % 10);  // every band held: as before
  }();
  return band;
}

std::string CenterConfig() {
  // A band of its own below the ephemeral ports (the other suites hold 20000-32099).
  const int first = 32100 + OwnBand() * 10;
  return "security_grade: 3\nspecs:\n  - {id: svc-1, cpu: 1, memory: 256Mi}\nports: {first: " + std::to_string(first) +
         ", last: " + std::to_string(first + 9) + "}\n";
}

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

// Reads from `fd` until `done` holds of what came, the peer closes, or 15 s pass.
std::string ReadUntil(int fd, const std::function<bool(const std::string&)>& done) {
  std::string got;
  char chunk[65536];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline && !done(got)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    got.append(chunk, static_cast<size_t>(n));
  }
  return got;
}

struct Sessions : jc::testing::TestSystem {
  jc::testing::LocalAdapter center{"solo", 8, CenterConfig()};
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("jc-sessions-" + std::to_string(getpid()));

  // `more`: options beyond the suite's own (a listener behind a TLS proxy).
  explicit Sessions(const std::function<void(jc::server::AppOptions&)>& more = {})
      : TestSystem([&more](jc::server::AppOptions& o) {
          jc::testing::FastIntervals(o);
          o.endpoint_host = "127.0.0.1";
          o.endpoint_port = 0;
          if (more) more(o);
        }) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "echo.py") << kEchoServer;
    REQUIRE(jc::testing::AddServiceCenter(*rest, "solo", center.address()));
  }
  ~Sessions() { std::filesystem::remove_all(dir); }

  // `user` in `project` with `role`, and an API token of theirs for jcctl.
  std::string Token(const std::string& user, const std::string& project, const std::string& role) {
    UserClient(user, project, role);
    auto token = rest->Post("/openapi/v1/tokens", {{"user_name", user}});
    REQUIRE(token.http_status == 200);
    return token.body["data"]["secret"];
  }
  // jcctl as `token`'s holder; `shell_input`: what its stdin reads (through sh).
  jc::testing::Ran Jcctl(const std::string& token, std::vector<std::string> args, const std::string& shell_input = "") {
    args.insert(args.begin(), JC_JCCTL_BINARY);
    std::vector<std::string> env{"JCCTL_SERVER=http://127.0.0.1:" + std::to_string(app->rest_port()),
                                 "JCCTL_TOKEN=" + token};
    if (shell_input.empty()) return jc::testing::RunCaptured(dir.string(), args, env);
    std::ofstream(dir / "stdin") << shell_input;
    std::string line;
    for (const auto& a : args) absl::StrAppend(&line, "'", a, "' ");
    return jc::testing::RunCaptured(dir.string(), {"/bin/sh", "-c", line + "<" + (dir / "stdin").string()}, env);
  }
  // A service of alice's in project "lab" whose replica serves the echo on port "tcp", running.
  std::string StartEcho(const std::string& kind = "service") {
    auto alice = UserClient("alice", "lab", "MEMBER");
    json task = {{"name", "echo"},
                 {"command", "exec /usr/bin/python3 " + (dir / "echo.py").string() + " $JC_PORT_TCP"},
                 {"resourceSpecId", "svc-1"},
                 {"kind", kind},
                 {"ports", json::array({{{"name", "tcp"}}})}};
    auto r = alice->Post("/openapi/v1/trainjob", {{"name", "echo"}, {"project", "lab"}, {"tasks", json::array({task})}});
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
    std::string id = r.body["data"]["jobId"];
    bool ready = jc::testing::WaitUntil([&] {
      return rest->Get("/openapi/v1/trainjob/" + id).body["data"]["taskInfos"][0].value("readyReplicas", 0) == 1;
    });
    REQUIRE(ready);
    return id;
  }
  void StopAndWait(const std::string& id) {
    REQUIRE(rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 200);
    REQUIRE(jc::testing::WaitUntil([&] {
      std::string status = rest->Get("/openapi/v1/trainjob/" + id).body["data"].value("status", "");
      return status == "completed" || status == "failed";
    }));
  }
  // jcctl as `token`'s holder, left running (a forward, a long command).
  std::unique_ptr<jc::testing::Process> JcctlRunning(const std::string& token, std::vector<std::string> args,
                                                     const std::string& log) {
    args.insert(args.begin(), {JC_JCCTL_BINARY, "--server", "http://127.0.0.1:" + std::to_string(app->rest_port()),
                               "--token", token});
    return std::make_unique<jc::testing::Process>(args, (dir / log).string());
  }
  // `jcctl job port-forward JOB 0:tcp` as `token`'s holder: the process and its local port.
  std::pair<std::unique_ptr<jc::testing::Process>, int> Forward(const std::string& token, const std::string& id) {
    auto forward = JcctlRunning(token, {"job", "port-forward", id, "0:tcp"}, "forward.log");
    auto local = forward->WaitForLog(R"(Forwarding from 127\.0\.0\.1:(\d+) -> )");
    INFO(forward->Log());
    REQUIRE(local.has_value());
    return {std::move(forward), std::stoi(*local)};
  }
  // The pid of the (one) replica's wrapper at the local center: its session's leader.
  int ReplicaPid() {
    std::string pid;
    for (const auto& d : std::filesystem::directory_iterator(center.dir / "work")) std::ifstream(d.path() / "pid") >> pid;
    REQUIRE(!pid.empty());
    return std::stoi(pid);
  }
  // A command's link, as jcctl asks for it, for `as`.
  jc::testing::RestReply OpenExec(jc::testing::RestClient& as, const std::string& id, json command, bool tty = false) {
    return as.Post("/openapi/v1/trainjob/" + id + "/open",
                   {{"replicaIndex", 0}, {"exec", {{"command", command}, {"tty", tty}}}});
  }
};

// A raw switch to a link (what jcctl sends): the answer's head, and the socket.
struct Switched {
  int fd = -1;
  int status = 0;
  std::string rest;  // bytes after the head: the body of a refusal, or the first stream bytes
  ~Switched() {
    if (fd >= 0) ::close(fd);
  }
};
std::unique_ptr<Switched> SwitchTo(int port, const std::string& url, const std::string& upgrade,
                                   const std::string& path_override = "", const std::string& cookie = "") {
  std::string rest = url.substr(url.find("://") + 3);
  std::string host = rest.substr(0, rest.find('/')), target = rest.substr(rest.find('/'));
  if (!path_override.empty()) target = path_override;
  auto out = std::make_unique<Switched>();
  out->fd = Connect(port);
  std::string head = absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: ", host, "\r\nConnection: Upgrade\r\nUpgrade: ",
                                  upgrade, "\r\n", cookie.empty() ? "" : "Cookie: " + cookie + "\r\n", "\r\n");
  REQUIRE(::send(out->fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  std::string got = ReadUntil(out->fd, [](const std::string& g) { return g.find("\r\n\r\n") != std::string::npos; });
  REQUIRE(got.size() > 12);
  out->status = std::atoi(got.substr(9, 3).c_str());
  out->rest = got.substr(got.find("\r\n\r\n") + 4);
  return out;
}

}  // namespace

TEST_CASE("jcctl job exec runs a command in a running replica, in its directory and environment: its output, errors "
          "and exit status come back, its input goes in, on a terminal it is one, and each is audited [A17][C6]",
          "[A17][C6]") {
  Sessions s;
  const std::string alice = s.Token("alice", "lab", "MEMBER");
  const std::string id = s.StartEcho();

  auto ran = s.Jcctl(alice, {"job", "exec", id, "--", "sh", "-c",
                             "echo out; echo err >&2; pwd; echo \"name=$JC_REPLICA_NAME\"; exit 3"});
  INFO(ran.out << ran.err);
  CHECK(ran.code == 3);
  CHECK(absl::StrContains(ran.out, "out\n"));
  CHECK(absl::StrContains(ran.err, "err\n"));
  CHECK(!absl::StrContains(ran.out, "err"));
  CHECK(absl::StrContains(ran.out, "/work\n"));                  // the replica's working directory
  CHECK(absl::StrContains(ran.out, "name=jc-"));  // the replica's environment: its own name
  CHECK(absl::StrContains(ran.out, id + "-0-0-0\n"));

  // Its input: what jcctl reads goes in, and its end ends the command's.
  auto echoed = s.Jcctl(alice, {"job", "exec", "-i", id, "--", "sh", "-c", "tr a-z A-Z; echo done"},
                        "hello through the listener\n");
  INFO(echoed.err);
  CHECK(echoed.code == 0);
  CHECK(echoed.out == "HELLO THROUGH THE LISTENER\ndone\n");
  // Without -i it reads nothing (at once, not forever).
  auto no_input = s.Jcctl(alice, {"job", "exec", id, "--", "cat"}, "not passed\n");
  CHECK(no_input.code == 0);
  CHECK(no_input.out.empty());

  // On a terminal: the command has one (of 24x80 when jcctl's output is none), and its
  // errors come with its output.
  auto tty = s.Jcctl(alice, {"job", "exec", "-t", id, "--", "sh", "-c", "tty; stty size; echo oops >&2"});
  INFO(tty.out << tty.err);
  CHECK(tty.code == 0);
  CHECK(absl::StrContains(tty.out, "/dev/pts/"));
  CHECK(absl::StrContains(tty.out, "24 80"));
  CHECK(absl::StrContains(tty.out, "oops"));
  CHECK(absl::StrContains(tty.err, "input is not a terminal") == false);
  // A killed command's status is 128 + its signal.
  CHECK(s.Jcctl(alice, {"job", "exec", id, "--", "sh", "-c", "kill -TERM $$"}).code == 128 + SIGTERM);
  // A program the replica does not have: said, and no status of the command's.
  auto missing = s.Jcctl(alice, {"job", "exec", id, "--", "no-such-program-here"});
  CHECK(missing.code != 0);
  CHECK(absl::StrContains(missing.err, "no-such-program-here"));

  // Input the command stops reading: the rest is dropped, nothing else (a write to its
  // closed stdin once ended the adapter, here the test process, with SIGPIPE).
  auto head = s.Jcctl(alice, {"job", "exec", "-i", id, "--", "head", "-n", "1"}, std::string(1 << 20, 'y') + "\n");
  CHECK(head.code == 0);
  CHECK(head.out.size() == (1u << 20) + 1);
  // What a command leaves in the background ends with it.
  auto background = s.Jcctl(alice, {"job", "exec", id, "--", "sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"});
  REQUIRE(background.code == 0);
  const int left = std::atoi(background.out.c_str());
  REQUIRE(left > 0);
  CHECK(jc::testing::WaitUntil([&] { return ::kill(left, 0) != 0; }, std::chrono::seconds(10)));
  // A command that cannot start leaves nothing open at the adapter (here, this process).
  auto fds = [] {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  const int fds_before = fds();
  for (int i = 0; i < 20; ++i) s.Jcctl(alice, {"job", "exec", id, "--", "/no/such/program"});
  CHECK(fds() < fds_before + 10);  // three a try leaked before

  // Each command is in the audit log: who, which replica, which command.
  auto audit = s.rest->Get("/openapi/v1/audit?page_size=1000&actor=alice&action=JobService.OpenEndpoint");
  INFO(audit.body.dump());
  bool found = false;
  for (const auto& r : audit.body["data"]["records"]) {
    found |= absl::StrContains(r.value("object", ""),
                               "job_id=" + id + " task=0 replica=0 exec=[\"sh\",\"-c\",\"echo out; echo err >&2;") &&
             r.value("outcome", "") == "OK";
  }
  CHECK(found);
  s.StopAndWait(id);
}

TEST_CASE("jcctl job exec refused as the attacker: a viewer, another project, a link used twice or elsewhere, a "
          "replica that ended, bad commands, and a caller who leaves or is removed ends the command [A17][C6]",
          "[A17][C6]") {
  Sessions s;
  const std::string alice = s.Token("alice", "lab", "MEMBER");
  const std::string victor = s.Token("victor", "lab", "VIEWER");
  const std::string mallory = s.Token("mallory", "other", "MEMBER");
  const std::string id = s.StartEcho();
  auto as_alice = s.UserClient("alice", "lab", "MEMBER");
  const int port = s.app->endpoint_port();

  auto viewer = s.Jcctl(victor, {"job", "exec", id, "--", "true"});
  CHECK(viewer.code == 4);
  CHECK(absl::StrContains(viewer.err, "may read but not change"));
  // Another member: a command would run as alice's account at the center (run_as may map
  // users to accounts of their own), so only alice runs commands in her job's replicas.
  const std::string bob = s.Token("bob", "lab", "MEMBER");
  auto other_member = s.Jcctl(bob, {"job", "exec", id, "--", "true"});
  CHECK(other_member.code == 4);
  CHECK(absl::StrContains(other_member.err, "for its submitter (alice) alone"));
  CHECK(s.Jcctl(mallory, {"job", "exec", id, "--", "true"}).code == 5);
  CHECK(s.Jcctl(alice, {"job", "exec", id}).code == 2);  // no command
  CHECK(s.Jcctl(alice, {"job", "exec", "--replica", "3", id, "--", "true"}).code == 5);

  // Bad asks over REST: 400 saying what, and no link.
  for (const auto& [body, says] : std::vector<std::pair<json, std::string>>{
           {{{"exec", {{"command", json::array()}}}}, "exec.command"},
           {{{"exec", {{"command", json::array({""})}}}}, "exec.command"},
           {{{"exec", {{"command", json::array({std::string("a\0b", 3)})}}}}, "NUL"},
           {{{"exec", {{"command", std::vector<std::string>(300, "x")}}}}, "at most 256"},
           {{{"exec", {{"command", {"true"}}}}, {"portName", "tcp"}}, "leave portName"},
           {{{"exec", {{"command", {"true"}}}}, {"allReplicas", true}}, "leave portName"}}) {
    auto r = as_alice->Post("/openapi/v1/trainjob/" + id + "/open", body);
    INFO(r.body.dump());
    CHECK(r.http_status == 400);
    CHECK(absl::StrContains(r.body.value("errorMsg", ""), says));
  }

  // A link runs its command once; not on the forward path, not with a port's session.
  auto link = s.OpenExec(*as_alice, id, {"true"});
  REQUIRE(link.http_status == 200);
  const std::string url = link.body["data"]["url"];
  CHECK(absl::StrContains(url, id + "-0-0.endpoints.localhost"));
  {
    auto wrong_upgrade = SwitchTo(port, url, "websocket");
    CHECK(wrong_upgrade->status == 400);
    auto forward_path = SwitchTo(port, url, "jointcloud-forward", "/.jointcloud/forward");
    CHECK(forward_path->status == 404);
  }
  {
    auto first = SwitchTo(port, url, "jointcloud-exec");
    CHECK(first->status == 101);
    std::string stream = first->rest + ReadUntil(first->fd, [](const std::string& g) { return g.size() >= 9; });
    es::Decoder d;
    d.Feed(stream);
    auto exit_frame = d.Next();
    REQUIRE(exit_frame.has_value());
    CHECK(exit_frame->type == es::Type::kExit);
    CHECK(es::ParseExit(exit_frame->payload) == 0);
  }
  auto again = SwitchTo(port, url, "jointcloud-exec");
  CHECK(again->status == 403);
  CHECK(absl::StrContains(again->rest, "opened already"));

  // The caller leaves while its command runs: the command is ended.
  auto sleeper = s.OpenExec(*as_alice, id, {"sh", "-c", "echo $$; exec sleep 1000"});
  REQUIRE(sleeper.http_status == 200);
  {
    auto running = SwitchTo(port, sleeper.body["data"]["url"], "jointcloud-exec");
    REQUIRE(running->status == 101);
    std::string stream = running->rest + ReadUntil(running->fd, [](const std::string& g) { return g.find('\n') != std::string::npos; });
    es::Decoder d;
    d.Feed(stream);
    auto out = d.Next();
    REQUIRE(out.has_value());
    int pid = std::atoi(out->payload.c_str());
    REQUIRE(pid > 0);
    CHECK(::kill(pid, 0) == 0);
    ::close(running->fd);
    running->fd = -1;
    CHECK(jc::testing::WaitUntil([&] { return ::kill(pid, 0) != 0; }, std::chrono::seconds(15)));
  }

  // Alice made a viewer while her command runs: it ends (within the listener's recheck).
  auto long_one = s.OpenExec(*as_alice, id, {"sleep", "1000"});
  REQUIRE(long_one.http_status == 200);
  {
    auto running = SwitchTo(port, long_one.body["data"]["url"], "jointcloud-exec");
    REQUIRE(running->status == 101);
    REQUIRE(s.rest->Send("PUT", "/openapi/v1/users/alice/projects/lab", json{{"role", "VIEWER"}}.dump()).http_status ==
            200);
    bool closed = jc::testing::WaitUntil([&] {
      pollfd p{running->fd, POLLIN, 0};
      char c;
      return ::poll(&p, 1, 100) == 1 && ::recv(running->fd, &c, 1, MSG_DONTWAIT) <= 0;
    }, std::chrono::seconds(40));
    CHECK(closed);
    REQUIRE(s.rest->Send("PUT", "/openapi/v1/users/alice/projects/lab", json{{"role", "MEMBER"}}.dump()).http_status ==
            200);
  }

  // A command lives no longer than its replica: the job stopped, it ends with it.
  auto outliving = s.OpenExec(*as_alice, id, {"sleep", "1000"});
  REQUIRE(outliving.http_status == 200);
  auto running = SwitchTo(port, outliving.body["data"]["url"], "jointcloud-exec");
  REQUIRE(running->status == 101);
  s.StopAndWait(id);
  std::string tail = running->rest + ReadUntil(running->fd, [](const std::string& g) { return g.size() >= 9; });
  es::Decoder d;
  d.Feed(tail);
  auto last = d.Next();
  REQUIRE(last.has_value());
  CHECK(last->type == es::Type::kExit);
  CHECK(es::ParseExit(last->payload) >= 128);  // ended by a signal

  // A replica that ended: a clear refusal, not a hang.
  auto ended = s.Jcctl(alice, {"job", "exec", id, "--", "true"});
  INFO(ended.err);
  CHECK(ended.code == 1);
  CHECK(absl::StrContains(ended.err, "has ended"));
}

TEST_CASE("jcctl job port-forward carries a local port's connections to a replica's named port, several at once, "
          "for members only [A17][C6]",
          "[A17][C6]") {
  Sessions s;
  const std::string alice = s.Token("alice", "lab", "MEMBER");
  const std::string victor = s.Token("victor", "lab", "VIEWER");
  const std::string id = s.StartEcho();

  auto [forward, local_port] = s.Forward(alice, id);
  // Two connections at once, each its own stream to the replica's port.
  int a = Connect(local_port), b = Connect(local_port);
  REQUIRE(::send(a, "first\n", 6, MSG_NOSIGNAL) == 6);
  REQUIRE(::send(b, "second\n", 7, MSG_NOSIGNAL) == 7);
  CHECK(ReadUntil(a, [](const std::string& g) { return g.size() >= 6; }) == "first\n");
  CHECK(ReadUntil(b, [](const std::string& g) { return g.size() >= 7; }) == "second\n");
  std::string big(300000, 'x');
  REQUIRE(::send(a, big.data(), big.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(big.size()));
  CHECK(ReadUntil(a, [&](const std::string& g) { return g.size() >= big.size(); }) == big);
  // A connection closed ends its stream; the others go on.
  ::shutdown(a, SHUT_WR);
  CHECK(ReadUntil(a, [](const std::string&) { return false; }).empty());
  ::close(a);
  REQUIRE(::send(b, "still\n", 6, MSG_NOSIGNAL) == 6);
  CHECK(ReadUntil(b, [](const std::string& g) { return g.size() >= 6; }) == "still\n");
  ::close(b);

  // A viewer forwards nothing.
  auto viewer = s.Jcctl(victor, {"job", "port-forward", id, "0:tcp"});
  CHECK(viewer.code == 4);
  auto bad = s.Jcctl(alice, {"job", "port-forward", id, "x:tcp"});
  CHECK(bad.code == 2);
  CHECK(s.Jcctl(alice, {"job", "port-forward", id, "0:nope"}).code == 5);

  // Alice is no member any more: the next connection is refused and port-forward ends.
  REQUIRE(s.rest->Send("PUT", "/openapi/v1/users/alice/projects/lab", json{{"role", "VIEWER"}}.dump()).http_status ==
          200);
  bool ended = jc::testing::WaitUntil([&] {
    int c = Connect(local_port);
    ::shutdown(c, SHUT_WR);  // the echo closes at once when the connection goes through
    ReadUntil(c, [](const std::string&) { return false; });
    ::close(c);
    return forward->Wait(std::chrono::milliseconds(200)).has_value();
  }, std::chrono::seconds(30));
  CHECK(ended);
  CHECK(absl::StrContains(forward->Log(), "not a member of project \"lab\""));
  REQUIRE(s.rest->Send("PUT", "/openapi/v1/users/alice/projects/lab", json{{"role", "MEMBER"}}.dump()).http_status ==
          200);
  s.StopAndWait(id);
}

TEST_CASE("a control plane that goes away while a command runs ends the command at its center: nothing is left "
          "running there, and the replica runs on [A17][C7]",
          "[A17][C7]") {
  Sessions s;
  s.Token("alice", "lab", "MEMBER");
  const std::string id = s.StartEcho();
  auto as_alice = s.UserClient("alice", "lab", "MEMBER");
  auto link = s.OpenExec(*as_alice, id, {"sh", "-c", "echo $$; exec sleep 1000"});
  REQUIRE(link.http_status == 200);
  auto running = SwitchTo(s.app->endpoint_port(), link.body["data"]["url"], "jointcloud-exec");
  REQUIRE(running->status == 101);
  std::string stream =
      running->rest + ReadUntil(running->fd, [](const std::string& g) { return g.find('\n') != std::string::npos; });
  es::Decoder d;
  d.Feed(stream);
  auto out = d.Next();
  REQUIRE(out.has_value());
  const int pid = std::atoi(out->payload.c_str());
  REQUIRE(pid > 0);
  // The replica's own process, to see it survive.
  const int replica_pid = s.ReplicaPid();
  s.app->Shutdown();  // its listener ends the connection; the adapter, the command
  CHECK(jc::testing::WaitUntil([&] { return ::kill(pid, 0) != 0; }, std::chrono::seconds(15)));
  CHECK(::kill(replica_pid, 0) == 0);
  ::kill(-replica_pid, SIGKILL);  // the wrapper's session: the replica, its echo server
}

TEST_CASE("a center's adapter that stops while a command runs ends the command, and the caller hears the stream "
          "end without an exit status [A17][C7]",
          "[A17][C7]") {
  Sessions s;
  const std::string alice = s.Token("alice", "lab", "MEMBER");
  const std::string id = s.StartEcho();
  const int replica_pid = s.ReplicaPid();
  // jcctl runs a command that says its pid, then the adapter goes.
  auto exec = s.JcctlRunning(alice, {"job", "exec", id, "--", "sh", "-c", "echo pid=$$; exec sleep 1000"}, "exec.log");
  auto pid = exec->WaitForLog(R"(pid=(\d+))");
  INFO(exec->Log());
  REQUIRE(pid.has_value());
  s.center.Stop();
  auto code = exec->Wait(std::chrono::seconds(20));
  REQUIRE(code.has_value());
  CHECK(*code == 3);
  CHECK(absl::StrContains(exec->Log(), "ended before its exit status came"));
  CHECK(jc::testing::WaitUntil([&] { return ::kill(std::stoi(*pid), 0) != 0; }, std::chrono::seconds(15)));
  ::kill(-replica_pid, SIGKILL);  // the replica outlives its adapter (its own session): ended here
}

TEST_CASE("an adapter restarted while a service runs: its open forward ends, its endpoint is reported again and "
          "forwards through the new adapter, and its replica never started again [A17][C7]",
          "[A17][C7]") {
  Sessions s;
  const std::string alice = s.Token("alice", "lab", "MEMBER");
  const std::string id = s.StartEcho();
  auto [forward, local_port] = s.Forward(alice, id);
  int before = Connect(local_port);
  REQUIRE(::send(before, "one\n", 4, MSG_NOSIGNAL) == 4);
  REQUIRE(ReadUntil(before, [](const std::string& g) { return g.size() >= 4; }) == "one\n");

  s.center.Restart();
  // The connection open through the old adapter ends (its tunnel went with it).
  CHECK(ReadUntil(before, [](const std::string&) { return false; }).empty());
  ::close(before);
  // Through the new one: the endpoint, reported again and ready, forwards as before.
  std::string echoed;
  CHECK(jc::testing::WaitUntil([&] {
    int c = Connect(local_port);
    ::send(c, "two\n", 4, MSG_NOSIGNAL);
    echoed = ReadUntil(c, [](const std::string& g) { return g.size() >= 4; });
    ::close(c);
    return echoed == "two\n";
  }, std::chrono::seconds(30)));
  json job = s.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
  INFO(job.dump());
  CHECK(job["taskInfos"][0].value("readyReplicas", 0) == 1);
  CHECK(job["history"].size() == 1);  // one attempt: the restart started nothing again
  CHECK(job["status"] == "running");
  s.StopAndWait(id);
}

TEST_CASE("jcctl job exec and port-forward reach an endpoint listener behind a TLS proxy (https links): the proxy's "
          "certificate is checked for the endpoint's own name, and one jcctl cannot check is refused [A17][C6]",
          "[A17][C6]") {
  // The deployment the server's --endpoint_scheme=https is for: a proxy that holds the
  // endpoints' certificate (*.endpoints.localhost, from the development CA) in front of the
  // listener. socat terminates TLS here, as stunnel or nginx would.
  const std::filesystem::path certs =
      std::filesystem::temp_directory_path() / ("jc-sessions-tls-" + std::to_string(getpid()));
  std::filesystem::remove_all(certs);
  const std::string dev_ca = std::string(JC_SOURCE_DIR) + "/scripts/dev-ca.sh";
  REQUIRE(std::system((dev_ca + " " + certs.string() + "/ca '*.endpoints.localhost' >/dev/null").c_str()) == 0);
  REQUIRE(std::system((dev_ca + " " + certs.string() + "/other elsewhere.example >/dev/null").c_str()) == 0);
  struct Removed {
    std::filesystem::path dir;
    ~Removed() { std::filesystem::remove_all(dir); }
  } removed{certs};
  // The proxy's port: the links name it (a band of this suite's own, 32200-32299).
  const int proxy_port = 32200 + OwnBand();
  Sessions s([&](jc::server::AppOptions& o) {
    o.endpoints.scheme = "https";
    o.endpoints.public_port = proxy_port;
  });
  auto start_proxy = [&](const std::string& cert) {
    auto proxy = std::make_unique<jc::testing::Process>(
        std::vector<std::string>{"/usr/bin/socat",
                                 absl::StrCat("OPENSSL-LISTEN:", proxy_port, ",reuseaddr,fork,verify=0,cert=",
                                              (certs / (cert + ".crt")).string(), ",key=",
                                              (certs / (cert + ".key")).string()),
                                 absl::StrCat("TCP:127.0.0.1:", s.app->endpoint_port())},
        (s.dir / ("socat-" + std::to_string(proxy_port) + ".log")).string());
    REQUIRE(jc::testing::WaitUntil([&] {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(proxy_port));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      ::close(fd);
      return up;
    }));
    return proxy;
  };
  auto proxy = start_proxy("ca/*.endpoints.localhost");
  const std::string alice = s.Token("alice", "lab", "MEMBER");
  const std::string id = s.StartEcho();
  const std::string ca = (certs / "ca" / "ca.crt").string();

  // A command, over TLS all the way to the proxy: its output and exit status.
  auto ran = s.Jcctl(alice, {"--ca_file", ca, "job", "exec", id, "--", "sh", "-c", "echo through-tls; exit 6"});
  INFO(ran.out << ran.err);
  CHECK(ran.code == 6);
  CHECK(ran.out == "through-tls\n");
  // A forward: bytes both ways through the proxy.
  auto forward = s.JcctlRunning(alice, {"--ca_file", ca, "job", "port-forward", id, "0:tcp"}, "tls-forward.log");
  auto local = forward->WaitForLog(R"(Forwarding from 127\.0\.0\.1:(\d+) -> )");
  INFO(forward->Log());
  REQUIRE(local.has_value());
  int fd = Connect(std::stoi(*local));
  REQUIRE(::send(fd, "over tls\n", 9, 0) == 9);
  CHECK(ReadUntil(fd, [](const std::string& g) { return g.size() >= 9; }) == "over tls\n");
  ::close(fd);
  forward.reset();

  // Without the CA that signed it the certificate is not trusted: refused, saying so and
  // what to give; nothing runs.
  auto untrusted = s.Jcctl(alice, {"job", "exec", id, "--", "touch", (s.dir / "ran-untrusted").string()});
  INFO(untrusted.err);
  CHECK(untrusted.code == 3);
  CHECK(absl::StrContains(untrusted.err, "TLS to the endpoint listener"));
  CHECK(absl::StrContains(untrusted.err, "--ca_file"));
  // A certificate for another name, from the trusted CA: refused.
  proxy.reset();
  proxy = start_proxy("other/elsewhere.example");
  auto misnamed = s.Jcctl(alice, {"--ca_file", (certs / "other" / "ca.crt").string(), "job", "exec", id, "--", "touch",
                                  (s.dir / "ran-misnamed").string()});
  INFO(misnamed.err);
  CHECK(misnamed.code == 3);
  CHECK(absl::StrContains(misnamed.err, "hostname mismatch"));
  CHECK_FALSE(std::filesystem::exists(s.dir / "ran-untrusted"));
  CHECK_FALSE(std::filesystem::exists(s.dir / "ran-misnamed"));
  s.StopAndWait(id);
}
