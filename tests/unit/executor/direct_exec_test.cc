// A command without shell syntax is exec'd as its program (issue 48): which commands qualify,
// how the program is found, and that a task keeps the shell's answers (127, 126, its
// messages) wherever the shell is still the one to give them.

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/agent/direct_exec.h"
#include "executor/agent/task_runner.h"
#include "tests/testing/process.h"

using jc::nexec::DirectArgv;
using jc::nexec::TaskLaunch;
using jc::nexec::TaskRunner;
using jc::testing::WaitUntil;

namespace {

constexpr char kPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Where the shell would find `program` on kPath (what `command -v` says).
std::string Found(const std::string& program) {
  for (const char* dir : {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    const std::string candidate = std::string(dir) + "/" + program;
    if (access(candidate.c_str(), F_OK) == 0) return candidate;
  }
  return "";
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A directory of the test's own, removed at the end; `mode` as given.
struct Dir {
  std::string path;
  Dir(const std::string& parent, mode_t mode) {
    static int n = 0;
    path = parent + "/jc-direct-" + std::to_string(getpid()) + "-" + std::to_string(n++);
    std::filesystem::create_directories(path);
    chmod(path.c_str(), mode);
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) const {
    const std::string file = path + "/" + name;
    std::ofstream(file) << text;
    chmod(file.c_str(), mode);
    return file;
  }
};

int WaitExit(TaskRunner& runner, const std::string& key) {
  int code = -1;
  REQUIRE(WaitUntil([&] {
    for (const auto& e : runner.Reap()) {
      if (e.key == key) code = e.exit_code;
    }
    return code != -1;
  }));
  return code;
}

// What `cache` answers for `jc-prog` on `path` ("" : the shell's).
std::string FoundProg(jc::nexec::ProgramCache& cache, const std::string& path) {
  auto direct = cache.DirectArgv("jc-prog x", path);
  return direct ? direct->program : std::string();
}

// The answer, then the same answer from what was kept once the files looked at settled
// (one changed in the last 2 s is not trusted to show the next change).
void FoundThenKept(jc::nexec::ProgramCache& cache, const std::string& path, const std::string& want) {
  CHECK(FoundProg(cache, path) == want);
  const int64_t before = cache.hits();
  REQUIRE(WaitUntil([&] { return FoundProg(cache, path) == want && cache.hits() > before; }));
}

// argv[0] of a running process.
std::string Argv0(pid_t pid) {
  std::string cmdline = Read("/proc/" + std::to_string(pid) + "/cmdline");
  return cmdline.substr(0, cmdline.find('\0'));
}

}  // namespace

TEST_CASE("a command of plain words runs as its program, found on PATH as the shell finds it", "[B11]") {
  const std::string sleep = Found("sleep");
  REQUIRE(!sleep.empty());
  auto direct = DirectArgv("sleep 60", kPath);
  REQUIRE(direct.has_value());
  CHECK(direct->program == sleep);
  CHECK(direct->argv == std::vector<std::string>{"sleep", "60"});  // argv[0] as typed, as the shell passes it
  // Runs of spaces separate words as in the shell; options, paths, numbers, '=' and ',' are plain.
  direct = DirectArgv("  sleep   1.5  ", kPath);
  REQUIRE(direct.has_value());
  CHECK(direct->argv == std::vector<std::string>{"sleep", "1.5"});
  direct = DirectArgv("env -u A --chdir=/tmp a,b:c+d@e%f", kPath);
  REQUIRE(direct.has_value());
  CHECK(direct->argv.size() == 5);
  CHECK(direct->argv[4] == "a,b:c+d@e%f");
  direct = DirectArgv(sleep + " 1", "");  // a path: no search
  REQUIRE(direct.has_value());
  CHECK(direct->program == sleep);
  CHECK(direct->argv[0] == sleep);
}

TEST_CASE("an environment the shell would not pass on whole keeps the task under the shell", "[B11]") {
  CHECK(jc::nexec::ShellName("PATH"));
  CHECK(jc::nexec::ShellName("_A1"));
  CHECK_FALSE(jc::nexec::ShellName("BASH_FUNC_ls%%"));  // an exported bash function
  CHECK_FALSE(jc::nexec::ShellName("A-B"));
  CHECK_FALSE(jc::nexec::ShellName("PATH=/home/u/bin:/usr/bin:/x"));
  CHECK_FALSE(jc::nexec::ShellName("1A"));
  CHECK_FALSE(jc::nexec::ShellName(""));
  Dir dir(std::filesystem::temp_directory_path().string(), 0777);
  TaskRunner runner;
  TaskLaunch t{"e.1", "env"};
  t.stdout_path = dir.path + "/out";
  t.cwd = dir.path;
  t.env["PWD"] = "/wrong";
  t.env["BASH_FUNC_ls%%"] = "() { echo HIJACKED; }";
  REQUIRE(runner.Launch(t).ok());
  CHECK(WaitExit(runner, "e.1") == 0);
  const std::string out = Read(dir.path + "/out");
  CHECK(out.find("BASH_FUNC") == std::string::npos);  // dash drops it
  CHECK(out.find("PWD=" + dir.path + "\n") != std::string::npos);
  // Direct, the program gets PWD as the shell would have set it.
  TaskLaunch d{"e.2", "env"};
  d.stdout_path = dir.path + "/out2";
  d.cwd = dir.path;
  d.env["PWD"] = "/wrong";
  REQUIRE(runner.Launch(d).ok());
  CHECK(WaitExit(runner, "e.2") == 0);
  const std::string out2 = Read(dir.path + "/out2");
  CHECK(out2.find("PWD=" + dir.path + "\n") != std::string::npos);
  CHECK(out2.find("/wrong") == std::string::npos);
}

TEST_CASE("a command the shell would read otherwise goes through /bin/sh -c", "[B11]") {
  for (const char* command :
       {"echo $HOME", "sleep 1 | cat", "sleep 1; true", "true && false", "true || false", "cat > f", "cat < f",
        "ls *", "ls ?", "ls [ab]", "echo \"a b\"", "echo 'a b'", "echo a\\ b", "ls ~", "ls ~/x", "A=1 env",
        "sleep 1 &", "sleep\t1", "sleep 1\ntrue", "(sleep 1)", "{ sleep 1; }", "echo `id`", "echo $(id)",
        "true # note", "! true", "exit 3", "cd /tmp", "export A=1", ". ./x", "set -e", "exec sleep 1",
        "ulimit -n", "umask 077", "wait", "trap x INT", "echo a", "printf a", "test -f x", "kill 1", "pwd",
        "if", "for", "while", "case", "true", "false --version", "chdir /tmp", "-x", "", "   "}) {
    INFO(command);
    CHECK_FALSE(DirectArgv(command, kPath).has_value());
  }
}

TEST_CASE("a program the shell would not find where root finds it, or that is not root's alone, is the shell's "
          "to run",
          "[B9][B11]") {
  // Not found at all: the shell's "not found" and 127.
  CHECK_FALSE(DirectArgv("no-such-program-jc 1", kPath).has_value());
  // Relative paths, and a PATH that searches the working directory or a relative one.
  CHECK_FALSE(DirectArgv("./sleep 1", kPath).has_value());
  CHECK_FALSE(DirectArgv("bin/sleep 1", kPath).has_value());
  CHECK_FALSE(DirectArgv("sleep 1", std::string(":") + kPath).has_value());
  CHECK_FALSE(DirectArgv("sleep 1", std::string("bin:") + kPath).has_value());
  // A directory anyone writes (/tmp): whatever is in it, and whatever it shadows on PATH.
  Dir open(std::filesystem::temp_directory_path().string(), 0777);
  open.Write("sleep", "#!/bin/sh\necho mine\n", 0755);
  CHECK_FALSE(DirectArgv("sleep 1", open.path + ":" + kPath).has_value());
  CHECK_FALSE(DirectArgv(open.path + "/sleep 1", kPath).has_value());
  // /proc's links name whoever follows them: the agent when it looks, the task when it runs.
  CHECK_FALSE(DirectArgv("/proc/self/exe -c id", kPath).has_value());
  CHECK_FALSE(DirectArgv("ls", std::string("/proc/self/cwd:") + kPath).has_value());
  CHECK_FALSE(DirectArgv("ls /x", std::string("/dev/fd/3:") + kPath).has_value());
  // A PATH longer than anyone sets: the shell's to search.
  std::string long_path;
  for (int i = 0; i < 1000; ++i) long_path += "/nonexistent-jc" + std::to_string(i) + ":";
  CHECK_FALSE(DirectArgv("sleep 1", long_path + kPath).has_value());
  // A program that is not executable by all, or that anyone may write.
  if (geteuid() == 0) {
    Dir mine("/run", 0755);  // root's, in root's directories
    mine.Write("private", "#!/bin/sh\n", 0750);
    mine.Write("writable", "#!/bin/sh\n", 0757);
    mine.Write("data", "just text\n", 0755);
    mine.Write("fine", "#!/bin/sh\nexit 0\n", 0755);
    CHECK_FALSE(DirectArgv(mine.path + "/private", kPath).has_value());
    CHECK_FALSE(DirectArgv(mine.path + "/writable", kPath).has_value());
    CHECK_FALSE(DirectArgv(mine.path + "/data", kPath).has_value());  // neither ELF nor #!: the shell runs it
    CHECK(DirectArgv(mine.path + "/fine", kPath).has_value());
    CHECK(DirectArgv("fine x", mine.path + ":" + kPath).has_value());
    // A directory the account cannot enter ends root's search, whatever is in it: root's look
    // must not tell the account whether a name exists there.
    Dir private_dir("/run", 0700);
    std::filesystem::create_directory(private_dir.path + "/exists");
    CHECK_FALSE(DirectArgv("sleep 1", private_dir.path + ":" + kPath).has_value());
    CHECK_FALSE(DirectArgv("sleep 1", private_dir.path + "/exists/../../../usr/bin:" + kPath).has_value());
    CHECK_FALSE(DirectArgv("sleep 1", private_dir.path + "/absent/../../../usr/bin:" + kPath).has_value());
    // Another account's file shadowing a system program: the shell's.
    mine.Write("sleep", "#!/bin/sh\n", 0755);
    REQUIRE(chown((mine.path + "/sleep").c_str(), 65534, 65534) == 0);
    CHECK_FALSE(DirectArgv("sleep 1", mine.path + ":" + kPath).has_value());
  } else {
    WARN("not root: files of root's alone cannot be made here; their cases are skipped");
  }
}

TEST_CASE("a task run as its program keeps the shell's exit codes and messages", "[B11]") {
  Dir dir(std::filesystem::temp_directory_path().string(), 0777);
  TaskRunner runner;
  TaskLaunch t{"d.1", "sleep 30"};
  auto pid = runner.Launch(t);
  REQUIRE(pid.ok());
  // No shell between: the task's process is sleep itself, its argv[0] the word typed.
  REQUIRE(WaitUntil([&] { return Argv0(*pid) == "sleep"; }));
  CHECK(std::filesystem::read_symlink("/proc/" + std::to_string(*pid) + "/exe") ==
        std::filesystem::canonical(Found("sleep")));
  REQUIRE(runner.Kill("d.1").ok());
  CHECK(WaitExit(runner, "d.1") == 137);

  TaskLaunch f{"d.2", "false"};
  REQUIRE(runner.Launch(f).ok());
  CHECK(WaitExit(runner, "d.2") == 1);

  TaskLaunch missing{"d.3", "no-such-program-jc 1"};
  missing.stderr_path = dir.path + "/err3";
  REQUIRE(runner.Launch(missing).ok());
  CHECK(WaitExit(runner, "d.3") == 127);
  CHECK(Read(dir.path + "/err3").find("no-such-program-jc: not found") != std::string::npos);

  TaskLaunch data{"d.4", dir.Write("data", "text\n", 0644)};
  data.stderr_path = dir.path + "/err4";
  REQUIRE(runner.Launch(data).ok());
  CHECK(WaitExit(runner, "d.4") == 126);
  CHECK(Read(dir.path + "/err4").find("Permission denied") != std::string::npos);

  // Turned off, every command goes through the shell.
  TaskRunner shell;
  shell.ExecDirectly(false);
  TaskLaunch s{"d.5", "sleep 30"};
  auto shell_pid = shell.Launch(s);
  REQUIRE(shell_pid.ok());
  REQUIRE(WaitUntil([&] { return !Argv0(*shell_pid).empty(); }));
  CHECK(std::filesystem::read_symlink("/proc/" + std::to_string(*shell_pid) + "/exe") ==
        std::filesystem::canonical("/bin/sh"));  // Debian's dash forks the command: sh is the task's process
  REQUIRE(shell.Kill("d.5").ok());
  CHECK(WaitExit(shell, "d.5") == 137);
}

TEST_CASE("a program that cannot be exec'd after it was found is run by the shell, which says why", "[B11]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: a program of root's alone can be made only as root");
    return;
  }
  Dir mine("/run", 0755);
  const std::string broken = mine.Write("broken", "#!/no/such/interpreter\n", 0755);
  REQUIRE(DirectArgv(broken, kPath).has_value());  // it qualifies; its exec fails
  Dir out(std::filesystem::temp_directory_path().string(), 0777);
  for (bool in_child : {false, true}) {
    TaskRunner runner;
    TaskLaunch t{in_child ? "b.2" : "b.1", broken};
    t.stderr_path = out.path + "/" + t.key;
    if (in_child) t.stdin_pipe = true;  // the forked child's path rather than posix_spawn's
    REQUIRE(runner.Launch(t).ok());
    CHECK(WaitExit(runner, t.key) == 127);
    CHECK(Read(t.stderr_path).find("not found") != std::string::npos);
  }
}

TEST_CASE("a program found is used again while what the search looked at is unchanged, and looked for again as "
          "soon as root changes it",
          "[B11]") {
  // Watched (inotify: the files here are on this host's disks and /run's memory), and
  // stat'ed again before each use, as files of other hosts (NFS) are.
  const bool watch = GENERATE(true, false);
  CAPTURE(watch);
  jc::nexec::ProgramCache cache(watch);
  const std::string sleep = Found("sleep");
  for (int i = 0; i < 3; ++i) {
    auto direct = cache.DirectArgv("sleep " + std::to_string(i), kPath);
    REQUIRE(direct.has_value());
    CHECK(direct->program == sleep);
    CHECK(direct->argv == std::vector<std::string>{"sleep", std::to_string(i)});  // the words are this command's
  }
  CHECK(cache.hits() == 2);
  CHECK_FALSE(cache.DirectArgv("sleep 1 | cat", kPath).has_value());  // the shell's, searched for nothing
  CHECK(cache.hits() == 2);
  // A path is found without $PATH, so every $PATH shares its answer; a word longer than any
  // file's name is the shell's and keeps nothing (an account must not pin the agent's memory
  // with megabyte words or $PATHs: helper-62 finding 1).
  REQUIRE(cache.DirectArgv(sleep + " 1", "/a").has_value());
  REQUIRE(cache.DirectArgv(sleep + " 1", "/b").has_value());
  CHECK(cache.hits() == 3);
  const std::string long_word(300, 'z');
  CHECK_FALSE(cache.DirectArgv(long_word, kPath).has_value());
  CHECK_FALSE(cache.DirectArgv(long_word, kPath).has_value());
  CHECK(cache.hits() == 3);
  if (geteuid() != 0) {
    WARN("SKIPPED: directories of root's alone can be made only as root");
    return;
  }
  Dir early("/run", 0755), late("/run", 0755);
  const std::string path = early.path + ":" + late.path + ":" + kPath;
  const std::string late_prog = late.Write("jc-prog", "#!/bin/sh\nexit 0\n", 0755);
  auto found = [&] { return FoundProg(cache, path); };
  auto found_then_kept = [&](const std::string& want) { FoundThenKept(cache, path, want); };
  found_then_kept(late_prog);
  // Put earlier on PATH: the shell would run that one now, and so does the next task.
  const std::string early_prog = early.Write("jc-prog", "#!/bin/sh\nexit 1\n", 0755);
  found_then_kept(early_prog);
  // Removed: the later one again.
  REQUIRE(std::filesystem::remove(early_prog));
  found_then_kept(late_prog);
  // No longer anyone's to run: the shell's (which says so), at once.
  REQUIRE(chmod(late_prog.c_str(), 0750) == 0);
  CHECK(found().empty());
  // Found by its path too, and seen when it changes.
  const std::string fine = late.Write("fine", "#!/bin/sh\nexit 0\n", 0755);
  const int64_t before = cache.hits();
  REQUIRE(WaitUntil([&] { return cache.DirectArgv(fine, "").has_value() && cache.hits() > before; }));
  REQUIRE(chown(fine.c_str(), 65534, 65534) == 0);
  CHECK_FALSE(cache.DirectArgv(fine, "").has_value());
}

TEST_CASE("a kept program is looked for again as soon as root re-points a link on the way to a PATH directory, or "
          "renames a directory above one",
          "[B11]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: directories of root's alone can be made only as root");
    return;
  }
  const bool watch = GENERATE(true, false);
  CAPTURE(watch);
  jc::nexec::ProgramCache cache(watch);
  Dir app("/run", 0755), late("/run", 0755);
  const std::string late_prog = late.Write("jc-prog", "#!/bin/sh\nexit 0\n", 0755);
  // A release layout: `current` points at one release's directory; a deploy re-points it
  // (a new link renamed over the old, as `ln -sfn` does). Release 1 lacks the program.
  std::filesystem::create_directories(app.path + "/v1/bin");
  std::filesystem::create_directories(app.path + "/v2/bin");
  std::filesystem::create_directories(app.path + "/stage/bin");
  std::filesystem::create_directories(app.path + "/live/bin");
  const std::string v2_prog = app.path + "/v2/bin/jc-prog";
  std::ofstream(v2_prog) << "#!/bin/sh\nexit 2\n";
  chmod(v2_prog.c_str(), 0755);
  std::ofstream(app.path + "/stage/bin/jc-prog") << "#!/bin/sh\nexit 3\n";
  chmod((app.path + "/stage/bin/jc-prog").c_str(), 0755);
  std::filesystem::create_directory_symlink("v1", app.path + "/current");
  const std::string path = app.path + "/current/bin:" + app.path + "/live/bin:" + late.path + ":" + kPath;
  auto found = [&] { return FoundProg(cache, path); };
  auto found_then_kept = [&](const std::string& want) { FoundThenKept(cache, path, want); };
  found_then_kept(late_prog);
  // current -> v2: the program is on PATH's first directory now, for the next task.
  std::filesystem::create_directory_symlink("v2", app.path + "/current.new");
  std::filesystem::rename(app.path + "/current.new", app.path + "/current");
  found_then_kept(app.path + "/current/bin/jc-prog");
  // Back to v1, then `live` swapped for `stage` by renames: `live/bin` names another
  // directory, which has the program.
  std::filesystem::create_directory_symlink("v1", app.path + "/current.new");
  std::filesystem::rename(app.path + "/current.new", app.path + "/current");
  found_then_kept(late_prog);
  std::filesystem::rename(app.path + "/live", app.path + "/old");
  std::filesystem::rename(app.path + "/stage", app.path + "/live");
  CHECK(found() == app.path + "/live/bin/jc-prog");
}

TEST_CASE("however many directories accounts' PATHs name, the agent holds few inotify watches, and its answers "
          "stay right",
          "[B11]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: directories of root's alone can be made only as root");
    return;
  }
  // The watches count against root's inotify budget, which the host's other daemons share
  // (attacker helper-80: an account's PATHs of many root directories pinned 18,788).
  jc::nexec::ProgramCache cache(/*watch=*/true);
  Dir many("/run", 0755);
  const size_t dirs = jc::nexec::ProgramCache::kMaxWatches + 44;
  for (size_t i = 0; i < dirs; ++i) std::filesystem::create_directories(many.path + "/" + std::to_string(i));
  const std::string sleep = Found("sleep");
  auto look = [&](size_t i) {
    auto direct = cache.DirectArgv("sleep 1", many.path + "/" + std::to_string(i) + ":" + kPath);
    return direct ? direct->program : std::string();
  };
  // Kept (and watched) once the directories made now are settled.
  const int64_t before = cache.hits();
  REQUIRE(WaitUntil([&] { return look(0) == sleep && cache.hits() > before; }, std::chrono::seconds(20)));
  size_t most = 0;
  for (size_t i = 0; i < dirs; ++i) {
    CHECK(look(i) == sleep);
    most = std::max(most, cache.watches());
  }
  CHECK(most > 0);
  CHECK(most <= jc::nexec::ProgramCache::kMaxWatches);
  // A PATH of more directories than an answer may watch: answered, kept, stat'ed, no watch added.
  std::string long_path;
  for (size_t i = 0; i < 40; ++i) absl::StrAppend(&long_path, many.path, "/", i, ":");
  long_path += kPath;
  const size_t held = cache.watches();
  CHECK(cache.DirectArgv("sleep 2", long_path)->program == sleep);
  CHECK(cache.DirectArgv("sleep 2", long_path)->program == sleep);
  CHECK(cache.watches() == held);
}

TEST_CASE("a PATH that would hold the agent's look too long is left to the shell, however it repeats a directory "
          "[B11][C6]",
          "[B11][C6]") {
  const std::string sleep = Found("sleep");
  REQUIRE(!sleep.empty());
  const std::string dir = sleep.substr(0, sleep.rfind('/'));
  // /dev is no disk's file system: each look at it could read the kernel's whole mount
  // table (attacker helper-91: /dev repeated 800 times, 0.8 s of the launching thread a job).
  std::string few, many;
  for (int i = 0; i < 3; ++i) few += "/dev:";
  for (int i = 0; i < 200; ++i) many += "/dev:";
  auto direct = DirectArgv("sleep 1", few + dir);
  REQUIRE(direct.has_value());
  CHECK(direct->program == dir + "/sleep");
  CHECK_FALSE(DirectArgv("sleep 1", many + dir).has_value());  // the shell's to search, as the account
}

TEST_CASE("the agent's look for a program never goes through /proc, wherever /proc is reached from [B11][C6]",
          "[B11][C6]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: binding /proc elsewhere needs root");
    return;
  }
  const std::string sleep = Found("sleep");
  REQUIRE(!sleep.empty());
  // Below a directory root's alone (not /tmp, which anyone may write): /proc bound again.
  const std::string top = "/run/jc-direct-proc-" + std::to_string(getpid());
  const std::string bound = top + "/p";
  REQUIRE(mkdir(top.c_str(), 0755) == 0);
  REQUIRE(mkdir(bound.c_str(), 0755) == 0);
  // Bound again (its device is /proc's), or a proc mounted afresh (a device of its own:
  // reviewer helper-92).
  const bool fresh = GENERATE(false, true);
  CAPTURE(fresh);
  if ((fresh ? mount("proc", bound.c_str(), "proc", 0, nullptr) : mount("/proc", bound.c_str(), nullptr, MS_BIND, nullptr)) != 0) {
    rmdir(bound.c_str());
    rmdir(top.c_str());
    WARN("SKIPPED: cannot mount /proc here: " << std::strerror(errno));
    return;
  }
  // self/cwd is the agent's directory to the agent, and the task's to the task that execs
  // the path: what root checked would not be what ran (attacker helper-91, through a bind
  // of / elsewhere).
  const std::string through = bound + "/self/cwd" + sleep.substr(0, sleep.rfind('/'));
  REQUIRE(chdir("/") == 0);
  const bool found_directly = DirectArgv("sleep 1", through).has_value();
  const bool found_by_path = DirectArgv(through + "/sleep 1", "").has_value();
  umount2(bound.c_str(), MNT_DETACH);
  rmdir(bound.c_str());
  rmdir(top.c_str());
  CHECK_FALSE(found_directly);
  CHECK_FALSE(found_by_path);
}

TEST_CASE("a program search looks at each mount off a disk once, and at no more than 16 of them, the rest left to the "
          "shell [B11][C6]",
          "[B11][C6]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: mounting file systems for the search needs root");
    return;
  }
  const std::string sleep = Found("sleep");
  REQUIRE(!sleep.empty());
  const std::string dir = sleep.substr(0, sleep.rfind('/'));
  // 17 tmpfs mounts, each a mount table's look (reviewer helper-92: a test of /dev repeated
  // passed on the cap of steps alone).
  const std::string top = "/run/jc-direct-mounts-" + std::to_string(getpid());
  REQUIRE(mkdir(top.c_str(), 0755) == 0);
  std::vector<std::string> mounts;
  for (int i = 0; i < 17; ++i) {
    const std::string m = top + "/m" + std::to_string(i);
    REQUIRE(mkdir(m.c_str(), 0755) == 0);
    if (mount("tmpfs", m.c_str(), "tmpfs", 0, "size=64k,mode=0755") != 0) break;
    mounts.push_back(m);
  }
  std::string repeated, distinct;
  for (int i = 0; i < 20 && mounts.size() == 17; ++i) repeated += mounts[0] + ":";
  for (const std::string& m : mounts) distinct += m + ":";
  const bool found_repeated = DirectArgv("sleep 1", repeated + dir).has_value();
  const bool found_distinct = DirectArgv("sleep 1", distinct + dir).has_value();
  const bool found_few = mounts.size() == 17 && DirectArgv("sleep 1", mounts[0] + ":" + mounts[1] + ":" + dir).has_value();
  for (const std::string& m : mounts) umount2(m.c_str(), MNT_DETACH);
  for (int i = 0; i < 17; ++i) rmdir((top + "/m" + std::to_string(i)).c_str());
  rmdir(top.c_str());
  REQUIRE(mounts.size() == 17);
  CHECK(found_repeated);  // one mount, 20 times: looked at once
  CHECK(found_few);
  CHECK_FALSE(found_distinct);  // 17 mounts: the shell's
}
