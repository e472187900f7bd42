// The agent's task runner with real processes: output files, exit codes, environment,
// suspend/resume/kill of whole process groups, usage from /proc, running as another user.

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <future>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "executor/agent/task_runner.h"
#include "tests/testing/process.h"

using jc::nexec::TaskLaunch;
using jc::nexec::TaskRunner;
using jc::testing::WaitUntil;

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("jc-runner-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path);
    std::filesystem::permissions(path, std::filesystem::perms::all);  // other users write here
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Waits for the task to end and returns its exit code.
int WaitExit(TaskRunner& runner, const std::string& key) {
  int code = -1;
  bool done = WaitUntil([&] {
    for (const auto& e : runner.Reap()) {
      if (e.key == key) code = e.exit_code;
    }
    return code != -1;
  });
  REQUIRE(done);
  return code;
}

// A process is gone once it no longer exists or is a zombie nobody reaped yet (orphans
// are reaped by init, which may take its time).
bool Gone(int pid);

char ProcState(pid_t pid) {
  std::string stat = Read("/proc/" + std::to_string(pid) + "/stat");
  auto p = stat.rfind(')');
  return p == std::string::npos || p + 2 >= stat.size() ? '?' : stat[p + 2];
}

bool Gone(int pid) { return kill(pid, 0) != 0 || ProcState(pid) == 'Z'; }

// Cgroups of this test's own, below the agent's place in each hierarchy ("/nexec/<name>.<pid>"),
// removed when it goes out of scope (after the runners using them: declare it first). No
// layout, with a warning, where this host has no cgroup hierarchy to test with.
struct TestCgroups {
  std::optional<jc::nexec::CgroupLayout> layout;
  std::string mine;  // the part below each hierarchy's base
  std::vector<std::string> made;
  explicit TestCgroups(const std::string& name) {
    auto found = jc::nexec::CgroupLayout::Discover();
    if (!found.ok()) {
      WARN("no cgroup hierarchy here (" << found.status().ToString() << "): nothing to test");
      return;
    }
    mine = "/nexec/" + name + "." + std::to_string(getpid());
    // Where this process may not make cgroups (not root, no subtree delegated to it), the
    // runner could not either.
    if (!found->dirs.empty()) {
      const std::string probe = found->dirs.begin()->second + "/nexec/probe." + std::to_string(getpid());
      std::error_code made_probe;
      std::filesystem::create_directories(probe, made_probe);
      if (made_probe) {
        WARN("SKIPPED: cannot make cgroups here (" << probe << ": " << made_probe.message() << ")");
        return;
      }
      rmdir(probe.c_str());
    }
    for (auto& [controller, dir] : found->dirs) {
      dir += mine;
      made.push_back(dir);
    }
    layout = std::move(*found);
  }
  ~TestCgroups() {
    for (const std::string& dir : made) rmdir(dir.c_str());  // cgroupfs: rmdir, not unlink; runners removed their own
  }
};

}  // namespace

TEST_CASE("a task's stdout, stderr and exit code are kept", "[B11]") {
  TempDir dir;
  TaskRunner runner;
  TaskLaunch t{"1.0.0", "echo hello; echo oops >&2; exit 3"};
  t.stdout_path = dir / "out";
  t.stderr_path = dir / "err";
  REQUIRE(runner.Launch(t).ok());
  CHECK(WaitExit(runner, "1.0.0") == 3);
  CHECK(Read(dir / "out") == "hello\n");
  CHECK(Read(dir / "err") == "oops\n");
}

TEST_CASE("a task sees its GPUs, its job's host list and a hostfile", "[B1][B10]") {
  TempDir dir;
  TaskRunner runner;
  TaskLaunch t{"2.0.0",
               "echo \"$CUDA_VISIBLE_DEVICES|$NEXEC_HOSTS|$NEXEC_JOBID|$FOO\"; cat \"$NEXEC_HOSTFILE\""};
  t.gpus = {1, 3};
  t.hosts = {"h1", "h1", "h2"};
  t.job_id = "2";
  t.env = {{"FOO", "bar"}};
  t.stdout_path = dir / "out";
  t.hostfile_path = dir / "hostfile";
  REQUIRE(runner.Launch(t).ok());
  CHECK(WaitExit(runner, "2.0.0") == 0);
  CHECK(Read(dir / "out") == "1,3|h1 h1 h2|2|bar\nh1 slots=2\nh2 slots=1\n");
}

TEST_CASE("suspend stops the whole task, resume continues it, kill ends its group",
          "[B11]") {
  TempDir dir;
  TaskRunner runner;
  // A parent shell with a child that counts; both are in the task's process group.
  TaskLaunch t{"3.0.0", "sh -c 'i=0; while true; do i=$((i+1)); echo $i > " + (dir / "count") +
                            "; sleep 0.01; done' & echo $! > " + (dir / "child") + "; wait"};
  auto pid = runner.Launch(t);
  REQUIRE(pid.ok());
  REQUIRE(WaitUntil([&] { return !Read(dir / "child").empty() && !Read(dir / "count").empty(); }));
  pid_t child = std::stoi(Read(dir / "child"));

  REQUIRE(runner.Suspend("3.0.0").ok());
  // A shell that vforked `sleep` waits in the kernel (D) while `sleep` is stopped: it
  // cannot run either.
  auto held = [](pid_t p) {
    char state = ProcState(p);
    std::string wchan = Read("/proc/" + std::to_string(p) + "/wchan");
    return state == 'T' || (state == 'D' && (wchan == "kernel_clone" || wchan.find("vfork") != std::string::npos));
  };
  bool stopped = WaitUntil([&] { return held(child) && held(*pid); });
  INFO("child " << child << " in state " << ProcState(child) << ", leader " << *pid << " in state "
                << ProcState(*pid) << "; the group: " << Read("/proc/" + std::to_string(child) + "/stat"));
  REQUIRE(stopped);
  // Both processes are held (checked above), so the count is frozen here.
  std::string frozen = Read(dir / "count");

  REQUIRE(runner.Resume("3.0.0").ok());
  REQUIRE(WaitUntil([&] { return Read(dir / "count") != frozen; }));

  REQUIRE(runner.Kill("3.0.0").ok());
  CHECK(WaitExit(runner, "3.0.0") == 128 + SIGKILL);
  CHECK(WaitUntil([&] { return Gone(child); }));  // the child went with the group
  CHECK(absl::IsNotFound(runner.Kill("3.0.0")));
}

TEST_CASE("a task killed before it started is killed the moment it starts, and does not run on [B11]", "[B11]") {
  TempDir dir;
  TaskRunner runner;
  // The stop came while the agent was still setting the launch up.
  runner.KillWhenStarted("5.0.0");
  TaskLaunch t{"5.0.0", "sleep 1000; echo ran > " + (dir / "ran")};
  auto pid = runner.Launch(t);
  REQUIRE(pid.ok());
  CHECK(WaitExit(runner, "5.0.0") == 128 + SIGKILL);
  CHECK(Read(dir / "ran").empty());
  // Another task of another key is not touched.
  TaskLaunch other{"6.0.0", "exit 4"};
  REQUIRE(runner.Launch(other).ok());
  CHECK(WaitExit(runner, "6.0.0") == 4);
}

TEST_CASE("usage is sampled from /proc for the task's process group", "[B8]") {
  TaskRunner runner;
  TaskLaunch t{"4.0.0", "while true; do :; done"};
  REQUIRE(runner.Launch(t).ok());
  REQUIRE(WaitUntil([&] { return runner.Usage("4.0.0")->cpu_seconds >= 0.05; }));
  auto usage = runner.Usage("4.0.0");
  CHECK(usage->processes >= 1);
  CHECK(usage->threads >= 1);
  CHECK(usage->rss_kb > 0);
  REQUIRE(runner.Kill("4.0.0").ok());
  WaitExit(runner, "4.0.0");
}

TEST_CASE("launch problems are errors, not tasks that die at once", "[B11][C5]") {
  TempDir dir;
  TaskRunner runner;
  TaskLaunch t{"5.0.0", "true"};
  t.user = "no-such-user-xyz";
  CHECK(absl::IsInvalidArgument(runner.Launch(t).status()));
  t.user = "";
  t.stdout_path = "/proc/no-such-dir/out";  // a directory nobody can create, root included
  CHECK(absl::IsInvalidArgument(runner.Launch(t).status()));
  t.stdout_path = dir / "out";
  t.command = "";
  CHECK(absl::IsInvalidArgument(runner.Launch(t).status()));
  CHECK(runner.Running().empty());
}

TEST_CASE("an output file that is a FIFO no one reads is refused at once, not waited on, and the next task starts",
          "[B11][C6]") {
  // The open would hold the thread that starts every account's tasks (attacker helper-81).
  TempDir dir;
  const std::string fifo = dir / "pipe";
  REQUIRE(mkfifo(fifo.c_str(), 0666) == 0);
  chmod(fifo.c_str(), 0666);
  TaskRunner runner;
  std::vector<std::string> users{""};  // opened by the agent
  if (geteuid() == 0) users.push_back("nobody");  // opened by the task's child, as the account
  int n = 0;
  for (const std::string& user : users) {
    CAPTURE(user);
    TaskLaunch t{"30." + std::to_string(n++) + ".0", "echo never"};
    t.user = user;
    t.stdout_path = fifo;
    auto started = std::async(std::launch::async, [&] { return runner.Launch(t); });
    if (started.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      // Held: a reader lets the open go on, so that the test can end, and fails it.
      const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
      started.wait();
      if (reader >= 0) close(reader);
      FAIL("a launch waited on a FIFO's reader");
    }
    auto pid = started.get();
    CHECK(absl::IsInvalidArgument(pid.status()));
    CHECK(absl::StrContains(pid.status().message(), "output file"));
    // The next task starts, and a task may still write to a FIFO someone reads.
    TaskLaunch next{"30." + std::to_string(n++) + ".0", "echo next"};
    next.user = user;
    next.stdout_path = dir / ("next-" + std::to_string(n));
    REQUIRE(runner.Launch(next).ok());
    CHECK(WaitExit(runner, next.key) == 0);
    const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    REQUIRE(reader >= 0);
    TaskLaunch read{"30." + std::to_string(n++) + ".0", "echo through-the-pipe"};
    read.user = user;
    read.stdout_path = fifo;
    REQUIRE(runner.Launch(read).ok());
    CHECK(WaitExit(runner, read.key) == 0);
    char buf[64] = {0};
    CHECK(::read(reader, buf, sizeof buf - 1) > 0);
    CHECK(std::string(buf).find("through-the-pipe") != std::string::npos);
    close(reader);
  }
}

// Each of `paths` as a task's output, then as its error file, refused at launch with `why`, as
// the agent's own account's task (opened by its helper when root, else by the child) and, as
// root, as another account's (opened by the child, as the account). Keys `job`.N.0.
void ExpectRefusedOutputs(TaskRunner& runner, const std::filesystem::path& dir, const std::string& job,
                          const std::vector<std::string>& paths, const std::string& why) {
  std::vector<std::string> users{""};
  if (geteuid() == 0) users.push_back("nobody");
  int n = 0;
  for (const std::string& user : users) {
    for (const std::string& path : paths) {
      for (const bool as_error : {false, true}) {
        CAPTURE(user, path, as_error);
        TaskLaunch t{job + "." + std::to_string(n++) + ".0", "echo lost"};
        t.user = user;
        t.stdout_path = as_error ? (dir / ("out-" + job + "-" + std::to_string(n))).string() : path;
        if (as_error) t.stderr_path = path;
        const auto pid = runner.Launch(t);
        CHECK(absl::IsInvalidArgument(pid.status()));
        CHECK(absl::StrContains(pid.status().message(), "cannot open " + path));
        CHECK(absl::StrContains(pid.status().message(), why));
      }
    }
  }
  CHECK(runner.Running().empty());
}

TEST_CASE("an output or error file that names a process's open descriptor (/dev/stdout, /dev/fd/N, /proc/self/fd/N) "
          "is refused with why, not written to whatever the opener holds there",
          "[B11][C6]") {
  // The child or helper that opens it holds /dev/null there, and before that the agent's own
  // output: a task's output went nowhere without a word, or into the agent's log (attacker
  // helper-93).
  TempDir dir;
  TaskRunner runner;
  ExpectRefusedOutputs(runner, dir.path, "31", {"/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/2"},
                       "names a process's open descriptor");
  // A file reached through an ordinary link is still one (an existing file: a link to none
  // is not followed to create it).
  std::ofstream(dir / "target").close();
  std::filesystem::create_symlink(dir / "target", dir / "link");
  TaskLaunch t{"31.99.0", "echo through-a-link"};
  t.stdout_path = dir / "link";
  REQUIRE(runner.Launch(t).ok());
  CHECK(WaitExit(runner, t.key) == 0);
  CHECK(Read(dir / "target") == "through-a-link\n");
}

TEST_CASE("an output or error file in /proc (/proc/self/mem) is refused with why, never opened where the opener "
          "shares the agent's memory",
          "[B11][C6]") {
  // A task's child shares the agent's memory until it execs: /proc/self/mem opened there, the
  // agent's own account's, was the agent's memory, and the task wrote over the agent's code
  // through its stdout (attacker helper-95, an agent that runs as an account).
  TempDir dir;
  TaskRunner runner;
  ExpectRefusedOutputs(runner, dir.path, "32",
                       {"/proc/self/mem", "/proc/" + std::to_string(getpid()) + "/mem", "/proc/self/clear_refs"},
                       "it lies in /proc");
}

TEST_CASE("a task runs in a session of its own, never the agent's, whose controlling terminal it could type into",
          "[B11][C6]") {
  // Attacker helper-97: an agent started from a root shell (the quickstart's `&`), its task in
  // the agent's session opened /dev/tty and typed a command into the root shell (TIOCSTI).
  TempDir dir;
  TaskRunner runner;
  std::vector<std::string> users{""};
  if (geteuid() == 0) users.push_back("nobody");
  int n = 0;
  for (const std::string& user : users) {
    CAPTURE(user);
    // Fields 1, 5 and 6 of its stat: its pid, process group and session.
    TaskLaunch t{"33." + std::to_string(n++) + ".0", "cut -d' ' -f1,5,6 /proc/$$/stat"};
    t.user = user;
    t.stdout_path = dir / ("session-" + std::to_string(n));
    REQUIRE(runner.Launch(t).ok());
    CHECK(WaitExit(runner, t.key) == 0);
    std::istringstream fields(Read(t.stdout_path));
    pid_t pid = 0, group = 0, session = 0;
    fields >> pid >> group >> session;
    CHECK(pid > 0);
    CHECK(group == pid);
    CHECK(session == pid);
    CHECK(session != getsid(0));
  }
}

TEST_CASE("a task starts with every signal at its default, whatever the agent ignores", "[B11][C6]") {
  // An agent started by a background shell ignores SIGINT and SIGQUIT, under nohup SIGHUP:
  // its tasks must not inherit that (^C to an interactive task, a kill by SIGINT).
  struct sigaction ignore {}, old_int {}, old_quit {}, old_hup {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  REQUIRE(sigaction(SIGINT, &ignore, &old_int) == 0);
  REQUIRE(sigaction(SIGQUIT, &ignore, &old_quit) == 0);
  REQUIRE(sigaction(SIGHUP, &ignore, &old_hup) == 0);
  TempDir dir;
  TaskRunner runner;
  std::vector<std::string> users{""};
  if (geteuid() == 0) users.push_back("nobody");
  int n = 0;
  for (const std::string& user : users) {
    CAPTURE(user);
    TaskLaunch t{"31." + std::to_string(n++) + ".0", "grep SigIgn /proc/self/status"};
    t.user = user;
    t.stdout_path = dir / ("ignored-" + std::to_string(n));
    REQUIRE(runner.Launch(t).ok());
    CHECK(WaitExit(runner, t.key) == 0);
    const std::string line = Read(t.stdout_path);
    CAPTURE(line);
    uint64_t mask = ~0ULL;
    const auto colon = line.find(':');
    REQUIRE(colon != std::string::npos);
    mask = std::stoull(line.substr(colon + 1), nullptr, 16);
    CHECK((mask & (1ULL << (SIGINT - 1))) == 0);
    CHECK((mask & (1ULL << (SIGQUIT - 1))) == 0);
    CHECK((mask & (1ULL << (SIGHUP - 1))) == 0);
    CHECK((mask & (1ULL << (SIGPIPE - 1))) == 0);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
}

TEST_CASE("as root, a task runs as the job's user", "[B9]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: the agent runs tasks as other users only as root; this run is not root");
    return;
  }
  TempDir dir;
  TaskRunner runner;
  TaskLaunch t{"6.0.0", "id -un; echo $HOME"};
  t.user = "nobody";
  t.stdout_path = dir / "out";
  REQUIRE(runner.Launch(t).ok());
  CHECK(WaitExit(runner, "6.0.0") == 0);
  CHECK(Read(dir / "out").rfind("nobody\n", 0) == 0);
  struct stat st {};
  REQUIRE(::stat((dir / "out").c_str(), &st) == 0);
  CHECK(st.st_uid != 0);  // the output file belongs to the user, not to root
}

TEST_CASE("a submission directory the job's user cannot enter is replaced by /tmp, with a line on stderr", "[B9][B11]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: the agent runs tasks as other users only as root; this run is not root");
    return;
  }
  TempDir dir;
  const std::string locked = dir / "root-only";
  std::filesystem::create_directory(locked);
  std::filesystem::permissions(locked, std::filesystem::perms::owner_all);  // 0700, root's
  TaskRunner runner;
  TaskLaunch t{"6.1.0", "pwd"};
  t.user = "nobody";
  t.cwd = locked;
  t.stdout_path = dir / "out";
  t.stderr_path = dir / "err";
  REQUIRE(runner.Launch(t).ok());
  CHECK(WaitExit(runner, "6.1.0") == 0);
  CHECK(Read(dir / "out") == "/tmp\n");
  CHECK(Read(dir / "err") == "nexec: nobody cannot enter " + locked + "; running in /tmp\n");
}

TEST_CASE("a submission directory missing on this host gives way to the home, then to /, with PWD to match, and "
          "whether a path the account cannot reach exists is not told",
          "[B9][B11]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: the agent runs tasks as other users only as root; this run is not root");
    return;
  }
  auto nobody = jc::nexec::LookupAccount("nobody");
  REQUIRE(nobody.ok());
  if (std::filesystem::is_directory(nobody->home)) {  // Debian's is /nonexistent; some hosts give it /
    WARN("SKIPPED: nobody's home " << nobody->home << " exists here; the case needs one that does not");
    return;
  }
  TempDir dir;
  TaskRunner runner;
  // Missing: its home, missing too, then /; the program run directly sees PWD=/.
  TaskLaunch t{"6.2.0", "printenv PWD"};
  t.user = "nobody";
  t.cwd = dir / "missing";
  t.stdout_path = dir / "out";
  t.stderr_path = dir / "err";
  REQUIRE(runner.Launch(t).ok());
  CHECK(WaitExit(runner, "6.2.0") == 0);
  CHECK(Read(dir / "out") == "/\n");
  CHECK(Read(dir / "err").empty());
  // Below a directory only root may enter, a directory that exists and one that does not
  // are told apart by nothing: both are /tmp with the same note.
  const std::string locked = dir / "root-only";
  std::filesystem::create_directory(locked);
  std::filesystem::create_directory(locked + "/exists");
  std::filesystem::permissions(locked, std::filesystem::perms::owner_all);  // 0700, root's
  for (const char* name : {"exists", "absent"}) {
    TaskLaunch probe{std::string("6.3.") + (name[0] == 'e' ? "0" : "1"), "pwd"};
    probe.user = "nobody";
    probe.cwd = locked + "/" + name;
    probe.stdout_path = dir / (std::string(name) + ".out");
    probe.stderr_path = dir / (std::string(name) + ".err");
    REQUIRE(runner.Launch(probe).ok());
    CHECK(WaitExit(runner, probe.key) == 0);
    CHECK(Read(probe.stdout_path) == "/tmp\n");
    CHECK(Read(probe.stderr_path) == "nexec: nobody cannot enter " + probe.cwd + "; running in /tmp\n");
  }
}

TEST_CASE("an interactive task reads what is written to it, and a command that stops reading or exits "
          "makes writes fail, not the agent",
          "[B6]") {
  TempDir dir;
  TaskRunner runner;
  TaskLaunch t;
  t.key = "1.0.0";
  t.command = "read a; read b; echo \"$b $a\"";
  t.stdout_path = dir / "out";
  t.stdin_pipe = true;
  REQUIRE(runner.Launch(t).ok());
  REQUIRE(*runner.WriteInput(t.key, "one\ntwo\n", absl::Seconds(5)) == 8);
  CHECK(WaitExit(runner, t.key) == 0);
  CHECK(Read(dir / "out") == "two one\n");
  // Its input is gone with it.
  CHECK(absl::IsFailedPrecondition(runner.WriteInput(t.key, "x", absl::Seconds(1)).status()));

  // A command that never reads: the pipe fills, and the write answers what it took
  // after the wait instead of blocking.
  TaskLaunch stuck = t;
  stuck.key = "2.0.0";
  stuck.command = "sleep 30";
  REQUIRE(runner.Launch(stuck).ok());
  std::string big(1 << 20, 'x');
  auto took = runner.WriteInput(stuck.key, big, absl::Milliseconds(200));
  REQUIRE(took.ok());
  CHECK(*took < big.size());
  REQUIRE(runner.Kill(stuck.key).ok());
  WaitExit(runner, stuck.key);

  // End of input closes the pipe: a reader sees EOF.
  TaskLaunch counts = t;
  counts.key = "3.0.0";
  counts.command = "wc -l";
  REQUIRE(runner.Launch(counts).ok());
  REQUIRE(runner.WriteInput(counts.key, "a\nb\nc\n", absl::Seconds(5)).ok());
  REQUIRE(runner.CloseInput(counts.key).ok());
  CHECK(WaitExit(runner, counts.key) == 0);
  CHECK(absl::StrContains(Read(dir / "out"), "3"));

  // A command that closed its stdin: EPIPE, reported (SIGPIPE would have killed us).
  TaskLaunch closed = t;
  closed.key = "4.0.0";
  closed.command = "exec 0<&-; sleep 30";
  REQUIRE(runner.Launch(closed).ok());
  CHECK(WaitUntil([&] {
    auto w = runner.WriteInput(closed.key, "x", absl::Milliseconds(100));
    return absl::IsFailedPrecondition(w.status());
  }));
  REQUIRE(runner.Kill(closed.key).ok());
  WaitExit(runner, closed.key);
}

TEST_CASE("a terminal task runs in its own session on a pseudo-terminal of the given size", "[B6]") {
  TempDir dir;
  TaskRunner runner;
  TaskLaunch t;
  t.key = "5.0.0";
  t.command = "tty; stty size; read x; echo got=$x";
  t.stdout_path = dir / "out";
  t.stdin_pipe = t.tty = true;
  t.tty_rows = 40;
  t.tty_cols = 120;
  REQUIRE(runner.Launch(t).ok());
  REQUIRE(runner.WriteInput(t.key, "hi\n", absl::Seconds(5)).ok());
  CHECK(WaitExit(runner, t.key) == 0);
  std::string out = Read(dir / "out");
  INFO(out);
  CHECK(absl::StrContains(out, "/dev/pts/"));
  CHECK(absl::StrContains(out, "40 120"));
  CHECK(absl::StrContains(out, "got=hi"));
}

TEST_CASE("a hostfile that is a FIFO someone holds open is refused at once, not written into (the agent's own "
          "write would wait as long as the holder liked)",
          "[B10][B11]") {
  TempDir dir;
  const std::string fifo = dir / "hostfile";
  REQUIRE(mkfifo(fifo.c_str(), 0666) == 0);
  const int holder = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // the attacker's end: never read
  REQUIRE(holder >= 0);
  TaskRunner runner;
  TaskLaunch t{"6.4.0", "true"};
  t.hosts = {"h1", "h2"};
  t.hostfile_path = fifo;
  t.stdout_path = dir / "out";
  const absl::Time began = absl::Now();
  auto started = runner.Launch(t);
  CHECK(absl::Now() - began < absl::Seconds(5));
  REQUIRE_FALSE(started.ok());
  CHECK(absl::IsInvalidArgument(started.status()));
  CHECK(absl::StrContains(started.status().message(), "not a regular file"));
  close(holder);
}

TEST_CASE("an interactive task whose output is a FIFO held full ends and is reaped: its terminal's copier gives up "
          "its writes, and the reaper does not wait on it",
          "[B6][B11]") {
  TempDir dir;
  const std::string fifo = dir / "out";
  REQUIRE(mkfifo(fifo.c_str(), 0666) == 0);
  const int holder = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // never read: the pipe fills
  REQUIRE(holder >= 0);
  TaskRunner runner;
  TaskLaunch t;
  t.key = "6.5.0";
  t.command = "exec head -c 100000000 /dev/zero";  // far more than a pipe holds
  t.stdout_path = fifo;
  t.stdin_pipe = t.tty = true;
  REQUIRE(runner.Launch(t).ok());
  // The pipe filling (soon full: the task then waits on its terminal, as a process writing to a
  // full pipe does, its account's own doing), the task is killed; its end is reaped at once.
  REQUIRE(WaitUntil([&] {
    int queued = 0;
    return ioctl(holder, FIONREAD, &queued) == 0 && queued >= 16384;  // filling: full long before the end
  }));
  REQUIRE(runner.Kill(t.key).ok());
  const absl::Time began = absl::Now();
  CHECK(WaitExit(runner, t.key) == 128 + SIGKILL);
  CHECK(absl::Now() - began < absl::Seconds(10));
  close(holder);
}

TEST_CASE("a kill still emptying a task's cgroup never reaches the next task that cgroup serves", "[B6][B11]") {
  // Ended tasks' cgroups serve the next tasks. A kill sent as a task ends keeps signalling
  // what is in the cgroup until it is empty; if the task is reaped meanwhile and its cgroup
  // handed to a new task, that kill must not end the new one (seen: an elastic job giving a
  // host back killed the job the host went to).
  TestCgroups cgroups("runner-test");
  if (!cgroups.layout) return;
  const auto& layout = cgroups.layout;
  {
    TaskRunner runner;
    runner.ContainIn(*layout);
    int hit = 0;
    for (int i = 0; i < 40; ++i) {
      TaskLaunch first{"1." + std::to_string(i) + ".0", "exec sleep 300"};
      REQUIRE(runner.Launch(first).ok());
      std::thread kill([&] { CHECK(runner.Kill(first.key).ok()); });
      // Reaped the moment it is gone, and its cgroup given to the next task at once.
      bool reaped = false;
      for (auto deadline = absl::Now() + absl::Seconds(10); !reaped && absl::Now() < deadline;) {
        for (const auto& e : runner.Reap()) reaped |= e.key == first.key;
      }
      REQUIRE(reaped);
      TaskLaunch next{"2." + std::to_string(i) + ".0", "exec sleep 300"};
      auto pid = runner.Launch(next);
      REQUIRE(pid.ok());
      kill.join();
      if (Gone(*pid)) ++hit;
      REQUIRE(runner.Kill(next.key).ok());
      WaitExit(runner, next.key);
    }
    CHECK(hit == 0);
  }
}

TEST_CASE("a task in a cgroup is in its own cgroup in every hierarchy that meters or contains it, its children too",
          "[B6][B8]") {
  TestCgroups cgroups("runner-joins");
  if (!cgroups.layout) return;
  const auto& layout = cgroups.layout;
  const std::string& mine = cgroups.mine;
  {
    TempDir dir;
    TaskRunner runner;
    runner.ContainIn(*layout);
    // Twice: the second task gets the first one's emptied cgroup.
    for (int i = 0; i < 2; ++i) {
      TaskLaunch t{"4." + std::to_string(i) + ".0", "cat /proc/self/cgroup; (cat /proc/self/cgroup) | cat"};
      t.stdout_path = dir / ("out" + std::to_string(i));
      REQUIRE(runner.Launch(t).ok());
      CHECK(WaitExit(runner, t.key) == 0);
      const std::string out = Read(dir / ("out" + std::to_string(i)));
      std::map<std::string, int> seen;  // controller -> lines naming the task's cgroup
      for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
        std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
        REQUIRE(f.size() == 3);
        const bool in_task_cgroup = absl::StrContains(f[2], mine + "/nexec/");
        if (layout->v2) {
          if (f[0] == "0") seen["unified"] += in_task_cgroup;
          continue;
        }
        for (absl::string_view c : absl::StrSplit(f[1], ',')) seen[std::string(c)] += in_task_cgroup;
      }
      // Two processes (the shell's cat and a subshell's): each line twice.
      if (layout->v2) {
        CHECK(seen["unified"] == 2);
      } else {
        for (const char* c : {"freezer", "memory", "pids", "cpuacct", "blkio"}) {
          if (!layout->dirs.count(c)) continue;
          INFO(c << " in " << out);
          CHECK(seen[c] == 2);
        }
      }
    }
  }
}

TEST_CASE("a task in a cgroup holds none of the agent's descriptors, inherited ones included, and its own output "
          "and input are where it expects them",
          "[B6][B9]") {
  // The agent keeps its cgroups' files open (above half the open-files limit) and starts a
  // task sharing its descriptor table until the task joined its cgroup; what the task then
  // takes is the low range alone, and exec closes what is close-on-exec there.
  TestCgroups cgroups("runner-fds");
  if (!cgroups.layout) return;
  const auto& layout = cgroups.layout;
  {
    TempDir dir;
    TaskRunner runner;
    runner.ContainIn(*layout);
    // As an agent started by a careless parent: a descriptor without close-on-exec.
    const int inherited = open("/dev/null", O_RDONLY);
    REQUIRE(inherited >= 0);
    // Several tasks, so that ended tasks' cgroups (and their kept files) are in the pool.
    for (int i = 0; i < 3; ++i) {
      TaskLaunch t{"3." + std::to_string(i) + ".0", "ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; cat; echo err >&2"};
      t.stdout_path = dir / ("out" + std::to_string(i));
      t.stderr_path = dir / ("err" + std::to_string(i));
      REQUIRE(runner.Launch(t).ok());
      CHECK(WaitExit(runner, t.key) == 0);
      // stdin (here: /dev/null, read to its end by cat), stdout and stderr, and the one ls
      // opens to list the directory.
      CHECK(Read(dir / ("out" + std::to_string(i))) == "0 1 2 3 \n");
      CHECK(Read(dir / ("err" + std::to_string(i))) == "err\n");
    }
    close(inherited);
  }
}

TEST_CASE("a directory an account names for its container is opened as that account: one it cannot enter, a link to "
          "one, and a magic link are refused, and the one opened is the one it could reach",
          "[B9][C6]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: directories are opened as other users only as root; this run is not root");
    return;
  }
  auto nobody = jc::nexec::LookupAccount("nobody");
  REQUIRE(nobody.ok());
  TempDir dir;
  std::filesystem::permissions(dir.path, std::filesystem::perms::all);
  const std::string locked = dir / "root-only";
  const std::string own = dir / "nobodys";
  std::filesystem::create_directory(locked);
  std::filesystem::permissions(locked, std::filesystem::perms::owner_all);  // 0700, root's
  std::filesystem::create_directory(own);
  REQUIRE(chown(own.c_str(), nobody->uid, nobody->gid) == 0);
  std::filesystem::permissions(own, std::filesystem::perms::owner_all);
  const std::string to_locked = dir / "to-locked";
  const std::string to_own = dir / "to-own";
  std::filesystem::create_directory_symlink(locked, to_locked);
  std::filesystem::create_directory_symlink(own, to_own);

  auto opened = jc::nexec::OpenDirectoryAs(*nobody, own);
  REQUIRE(opened.ok());
  struct stat via{}, at{};
  REQUIRE(fstat(opened->get(), &via) == 0);
  REQUIRE(stat(own.c_str(), &at) == 0);
  CHECK(via.st_ino == at.st_ino);
  auto linked = jc::nexec::OpenDirectoryAs(*nobody, to_own);  // a link is followed as the account
  REQUIRE(linked.ok());
  REQUIRE(fstat(linked->get(), &via) == 0);
  CHECK(via.st_ino == at.st_ino);

  for (const std::string& refused : {locked, to_locked}) {
    auto r = jc::nexec::OpenDirectoryAs(*nobody, refused);
    INFO(refused << ": " << r.status().ToString());
    CHECK(absl::IsPermissionDenied(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("as nobody: Permission denied"));
  }
  // /proc's magic links lead to what the helper holds (the agent's descriptors, its root):
  // never followed, for root either.
  for (const char* magic : {"/proc/self/cwd", "/proc/self/root/tmp"}) {
    CHECK(absl::IsInvalidArgument(jc::nexec::OpenDirectoryAs(*nobody, magic).status()));
  }
  CHECK_FALSE(jc::nexec::OpenDirectoryAs(*nobody, "/proc/" + std::to_string(getpid()) + "/cwd").ok());
  auto root = jc::nexec::LookupAccount("root");
  REQUIRE(root.ok());
  CHECK(absl::IsInvalidArgument(jc::nexec::OpenDirectoryAs(*root, "/proc/self/root/tmp").status()));
  CHECK(jc::nexec::OpenDirectoryAs(*root, locked).ok());
  CHECK(absl::IsNotFound(jc::nexec::OpenDirectoryAs(*nobody, dir / "missing").status()));
  CHECK(absl::IsInvalidArgument(jc::nexec::OpenDirectoryAs(*nobody, "relative").status()));
}
