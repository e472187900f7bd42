// Dataset staging attacked by accounts at the center (issue 44 holes 8 and 11, SPEC A6 and
// C6). The adapter copies as root out of directories project members write:
// - hole 8: a member of project a swaps links in and out of a's dataset while the center
//   stages it, hoping root follows one into project b's private files mid-copy;
// - hole 11: any other account at the center reads what was staged for a project.
// Needs root (as CI runs the suite): it creates unprivileged accounts and acts as them.

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "adapters/sdk/dataset_mover.h"
#include "adapters/sdk/staged_dataset.h"
#include "tests/testing/test_account.h"

namespace fs = std::filesystem;

namespace {

std::string Slurp(const fs::path& p) {
  std::stringstream s;
  s << std::ifstream(p, std::ios::binary).rdbuf();
  return s.str();
}

// Every regular file below `root` (links not followed) holding `marker`.
int FilesHolding(const fs::path& root, const std::string& marker) {
  int found = 0;
  std::error_code ec;
  if (fs::is_regular_file(fs::symlink_status(root, ec))) return Slurp(root).find(marker) != std::string::npos;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file() && !it->is_symlink() && Slurp(it->path()).find(marker) != std::string::npos) ++found;
  }
  return found;
}

// Runs `body` in a child that became `uid`:`gid` (no other group); its exit status.
template <typename Body>
int AsAccount(uid_t uid, gid_t gid, Body body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) _exit(99);
    _exit(body());
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// 0 when `path` opens for reading as the calling process, else errno.
int TryRead(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char c;
  const int err = read(fd, &c, 1) < 0 ? errno : 0;
  close(fd);
  return err;
}

struct Sandbox {
  fs::path root = fs::temp_directory_path() / ("jc-staging-" + std::to_string(getpid()));
  Sandbox() {
    fs::remove_all(root);
    fs::create_directories(root);
    fs::permissions(root, fs::perms(0755));
  }
  ~Sandbox() { fs::remove_all(root); }
};

}  // namespace

TEST_CASE("staging under a member swapping links in and out of the dataset, at its path, a directory and a file "
          "inside, never copies a byte of another project's files [A6][C6]",
          "[A6][C6]") {
  if (geteuid() != 0) {
    WARN("not run: the attack needs root (the adapter's account) and unprivileged accounts (CI runs as root)");
    return;
  }
  Sandbox box;
  jc::testing::TestAccount member("jc-stage-atk");
  const fs::path data = box.root / "data", ds = data / "a" / "ds", secret_dir = data / "b" / "private";
  const std::string marker = "PROJECT-B-SECRET";
  // Many entries, so that a copy passes many moments where a swap could land.
  constexpr int kEntries = 48;
  fs::create_directories(secret_dir);
  std::ofstream(secret_dir / "secret") << marker << "\n";
  fs::create_directories(secret_dir / "deeper");
  std::ofstream(secret_dir / "deeper" / "part-0") << marker << " deeper\n";
  std::vector<fs::path> owned{data / "a", ds};
  for (int i = 0; i < kEntries; ++i) {
    const fs::path sub = ds / ("sub-" + std::to_string(i)), file = ds / ("f-" + std::to_string(i));
    fs::create_directories(sub);
    std::ofstream(sub / "part-0") << "a's part\n";
    std::ofstream(file) << "a's file\n";
    owned.insert(owned.end(), {sub, sub / "part-0", file});
  }
  // b's directory is b's (here root's) alone; a's is the member's to change.
  fs::permissions(data / "b", fs::perms(0700));
  for (const fs::path& p : owned) REQUIRE(lchown(p.c_str(), member.uid, member.gid) == 0);
  // The member's links, made before it starts: into b's directory and at b's file.
  std::vector<std::pair<std::string, std::string>> flips;  // (entry, its link)
  for (int i = 0; i < kEntries; ++i) {
    for (const std::string kind : {"sub-", "f-"}) {
      const fs::path entry = ds / (kind + std::to_string(i)), link = ds / (kind + std::to_string(i) + ".link");
      fs::create_symlink(kind == "sub-" ? secret_dir : secret_dir / "secret", link);
      REQUIRE(lchown(link.c_str(), member.uid, member.gid) == 0);
      flips.emplace_back(entry.string(), link.string());
    }
  }
  const fs::path ds_link = data / "a" / "ds.link";
  fs::create_directory_symlink(secret_dir, ds_link);
  REQUIRE(lchown(ds_link.c_str(), member.uid, member.gid) == 0);
  fs::create_directories(box.root / "staged");
  fs::permissions(box.root / "staged", fs::perms(0700));

  // The member, as its own process: flips the dataset itself, a directory and a file in it
  // between the real thing and a link into b's directory, as fast as it can.
  const pid_t swapper = fork();
  REQUIRE(swapper >= 0);
  if (swapper == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(member.gid, member.gid, member.gid) != 0 ||
        setresuid(member.uid, member.uid, member.uid) != 0) {
      _exit(99);
    }
    // Each name flips between the real entry and its link with one atomic exchange, so
    // that it is a link half of the time; the dataset itself now and then.
    for (unsigned i = 0;; ++i) {
      for (const auto& [entry, link] : flips) renameat2(AT_FDCWD, entry.c_str(), AT_FDCWD, link.c_str(), RENAME_EXCHANGE);
      if (i % 8 == 0) renameat2(AT_FDCWD, ds.c_str(), AT_FDCWD, ds_link.c_str(), RENAME_EXCHANGE);
    }
  }

  struct Reap {
    pid_t pid;
    ~Reap() {
      if (pid > 0 && kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
    }
  } reap{swapper};
  auto mover = jc::adapter::MakeFileMover({data.string()});
  const std::string url = "file://" + ds.string();
  int copied = 0, disturbed = 0, foreign = 0, attempts = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (attempts < 300 && std::chrono::steady_clock::now() < deadline) {
    const fs::path target = box.root / "staged" / ("copy-" + std::to_string(attempts++));
    absl::Status s = mover->Copy(url, target);
    if (fs::exists(fs::symlink_status(target))) {
      const int holding = FilesHolding(target, marker);
      if (holding > 0) {
        UNSCOPED_INFO("copy " << attempts << " holds " << holding << " of b's files (" << s.ToString() << ")");
      }
      foreign += holding;
      int parts = 0;
      for (int i = 0; i < kEntries; ++i) {
        parts += fs::exists(target / ("sub-" + std::to_string(i)) / "part-0");
        parts += fs::exists(target / ("f-" + std::to_string(i)));
      }
      if (s.ok() && parts > 0) ++copied;
      if (!s.ok() || parts < 2 * kEntries) ++disturbed;
      fs::remove_all(target);
    } else {
      ++disturbed;
    }
  }
  kill(swapper, SIGKILL);
  int status = 0;
  REQUIRE(waitpid(swapper, &status, 0) == swapper);
  reap.pid = 0;
  INFO(attempts << " stagings: " << copied << " copied something, " << disturbed << " met a swap");
  CHECK(WIFSIGNALED(status));  // it ran (an exit 99 would mean it never became the member)
  CHECK(foreign == 0);
  CHECK(disturbed > 0);  // the race was on
  // Between swaps the dataset still stages: a real dataset is never refused for nothing.
  fs::create_directories(data / "a" / "quiet");
  std::ofstream(data / "a" / "quiet" / "part-0") << "a's quiet part\n";
  REQUIRE(mover->Copy("file://" + (data / "a" / "quiet").string(), box.root / "staged" / "quiet").ok());
  CHECK(Slurp(box.root / "staged" / "quiet" / "part-0") == "a's quiet part\n");
}

TEST_CASE("a dataset staged for a project is its run-as account's: another account at the center cannot read "
          "it, and no set-id bit survives, while a federation dataset is readable by all [A6][C6]",
          "[A6][C6]") {
  if (geteuid() != 0) {
    WARN("not run: the attack needs root (the adapter's account) and unprivileged accounts (CI runs as root)");
    return;
  }
  Sandbox box;
  jc::testing::TestAccount owner("jc-stage-own");
  jc::testing::TestAccount other("jc-stage-oth");
  const fs::path src = box.root / "sources" / "ds";
  fs::create_directories(src / "sub");
  std::ofstream(src / "part-0") << "the project's data\n";
  std::ofstream(src / "sub" / "tool") << "#!/bin/sh\n";
  // World-readable at the source, as shared storage often is; a copy keeping these modes in
  // a 0755 data dir was readable by every account (the hole).
  fs::permissions(src / "part-0", fs::perms(0644));
  fs::permissions(src / "sub" / "tool", fs::perms(04755));
  const fs::path data_dir = box.root / "data";
  fs::create_directories(data_dir);
  fs::permissions(data_dir, fs::perms(0755));
  auto mover = jc::adapter::MakeFileMover({(box.root / "sources").string()});

  auto access = jc::adapter::StagedAccessFor(owner.name, /*federation=*/false);
  REQUIRE(access.ok());
  auto staged = jc::adapter::StageInto(*mover, "file://" + src.string(), data_dir, "ds", "v1", *access);
  INFO(staged.status().ToString());
  REQUIRE(staged.ok());
  CHECK(*staged == data_dir / "ds" / "v1");
  const std::string part = (*staged / "part-0").string(), dir = staged->string(),
                    tool = (*staged / "sub" / "tool").string();

  struct stat st;
  REQUIRE(stat(dir.c_str(), &st) == 0);
  CHECK(st.st_uid == owner.uid);
  CHECK((st.st_mode & 07777) == 0750);
  REQUIRE(stat(part.c_str(), &st) == 0);
  CHECK(st.st_uid == owner.uid);
  CHECK(st.st_gid == owner.gid);
  CHECK((st.st_mode & 07777) == 0640);
  REQUIRE(stat(tool.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0750);  // runnable by its owner, never set-uid

  // The other account: neither the file nor the directory.
  CHECK(AsAccount(other.uid, other.gid, [&] { return TryRead(part.c_str()); }) == EACCES);
  CHECK(AsAccount(other.uid, other.gid, [&] { return TryRead(tool.c_str()); }) == EACCES);
  CHECK(AsAccount(other.uid, other.gid, [&] {
          const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
          return fd < 0 ? errno : 0;
        }) == EACCES);
  // The project's account reads it.
  CHECK(AsAccount(owner.uid, owner.gid, [&] { return TryRead(part.c_str()); }) == 0);
  CHECK(Slurp(part) == "the project's data\n");

  // Staged again (a restarted adapter), the copy is replaced in place, still the owner's.
  std::ofstream(src / "part-0") << "the project's data, v1 again\n";
  staged = jc::adapter::StageInto(*mover, "file://" + src.string(), data_dir, "ds", "v1", *access);
  REQUIRE(staged.ok());
  CHECK(Slurp(part) == "the project's data, v1 again\n");
  REQUIRE(stat(part.c_str(), &st) == 0);
  CHECK(st.st_uid == owner.uid);
  CHECK(AsAccount(other.uid, other.gid, [&] { return TryRead(part.c_str()); }) == EACCES);
  // Nothing else is left in the dataset's directory: no partial or earlier copy.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(data_dir / "ds")) ++entries;
  CHECK(entries == 1);

  // A center's own mover command (run as root: cp -a keeps modes, set-uid bits and makes
  // FIFOs) gets the same hand-over: the owner's, no set-id bit, no special file.
  mkfifo((src / "sub" / "pipe").c_str(), 0666);
  auto command = jc::adapter::MakeCommandMover(
      {"copy", {"sh", "-c", "cp -a \"${1#copy://}\" \"$2\"", "mover", "{source}", "{target}"}});
  staged = jc::adapter::StageInto(*command, "copy://" + src.string(), data_dir, "by-command", "v1", *access);
  INFO(staged.status().ToString());
  REQUIRE(staged.ok());
  REQUIRE(stat((*staged / "sub" / "tool").c_str(), &st) == 0);
  CHECK(st.st_uid == owner.uid);
  CHECK((st.st_mode & 07777) == 0750);
  CHECK_FALSE(fs::exists(fs::symlink_status(*staged / "sub" / "pipe")));
  CHECK(AsAccount(other.uid, other.gid, [&] { return TryRead((*staged / "part-0").c_str()); }) == EACCES);
  CHECK(AsAccount(owner.uid, owner.gid, [&] { return TryRead((*staged / "part-0").c_str()); }) == 0);
  fs::remove(src / "sub" / "pipe");

  // A federation dataset (no project) is everyone's to read, still without set-id bits.
  auto everyone = jc::adapter::StagedAccessFor("", /*federation=*/true);
  REQUIRE(everyone.ok());
  staged = jc::adapter::StageInto(*mover, "file://" + src.string(), data_dir, "public", "v1", *everyone);
  REQUIRE(staged.ok());
  CHECK(AsAccount(other.uid, other.gid, [&] { return TryRead((*staged / "part-0").c_str()); }) == 0);
  REQUIRE(stat((*staged / "sub" / "tool").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);

  // Root is never the account a dataset is staged for; an unknown account is refused.
  CHECK(absl::IsFailedPrecondition(jc::adapter::StagedAccessFor("root", false).status()));
  CHECK(absl::IsInvalidArgument(jc::adapter::StagedAccessFor("jc-no-such-account-x", false).status()));
}

TEST_CASE("a project's dataset is copied with its account's rights: a file beside it only another account may read "
          "is not staged for the project, by the file mover or a mover command [A6][C6]",
          "[A6][C6]") {
  if (geteuid() != 0) {
    WARN("not run: the attack needs root (the adapter's account) and unprivileged accounts (CI runs as root)");
    return;
  }
  Sandbox box;
  jc::testing::TestAccount project("jc-stage-prj");
  jc::testing::TestAccount alice("jc-stage-ali");
  // The project's directory at the data source, where a member mapped to an account of her
  // own (run_as.users) keeps a file only she may read, and another member registers the
  // directory as a dataset of the project.
  const fs::path src = box.root / "sources" / "project-a";
  fs::create_directories(src / "notes");
  std::ofstream(src / "part-0") << "the project's data\n";
  std::ofstream(src / "notes" / "alice-private") << "alice's secret\n";
  REQUIRE(chown((src / "notes" / "alice-private").c_str(), alice.uid, alice.gid) == 0);
  fs::permissions(src / "notes" / "alice-private", fs::perms(0600));
  const fs::path data_dir = box.root / "data";
  fs::create_directories(data_dir);
  auto access = jc::adapter::StagedAccessFor(project.name, /*federation=*/false);
  REQUIRE(access.ok());

  auto mover = jc::adapter::MakeFileMover({(box.root / "sources").string()});
  auto staged = jc::adapter::StageInto(*mover, "file://" + src.string(), data_dir, "ds", "v1", *access);
  // Copied as root, the project's account got alice's file (the hole).
  INFO(staged.status().ToString());
  CHECK(absl::IsPermissionDenied(staged.status()));
  CHECK(absl::StrContains(staged.status().message(), project.name));
  CHECK(FilesHolding(data_dir, "alice's secret") == 0);

  auto command = jc::adapter::MakeCommandMover(
      {"copy", {"sh", "-c", "cp -a \"${1#copy://}\" \"$2\"", "mover", "{source}", "{target}"}});
  staged = jc::adapter::StageInto(*command, "copy://" + src.string(), data_dir, "by-command", "v1", *access);
  INFO(staged.status().ToString());
  CHECK_FALSE(staged.ok());
  CHECK(FilesHolding(data_dir, "alice's secret") == 0);

  // Once alice lets the project's account read it (group or mode), it is staged.
  fs::permissions(src / "notes" / "alice-private", fs::perms(0644));
  staged = jc::adapter::StageInto(*mover, "file://" + src.string(), data_dir, "ds", "v1", *access);
  INFO(staged.status().ToString());
  REQUIRE(staged.ok());
  CHECK(FilesHolding(*staged, "alice's secret") == 1);
  // Nothing is left of the copies that failed or of the holding directories.
  for (const auto& e : fs::directory_iterator(data_dir / "ds")) CHECK(e.path().filename() == "v1");
}

TEST_CASE("an account that puts someone else's file or directory where its copy is being made gets it neither "
          "handed over nor removed by root [A6][C6]",
          "[A6][C6]") {
  if (geteuid() != 0) {
    WARN("not run: the attack needs root (the adapter's account) and unprivileged accounts (CI runs as root)");
    return;
  }
  Sandbox box;
  jc::testing::TestAccount project("jc-stage-pr2");
  jc::testing::TestAccount alice("jc-stage-al2");
  // A directory alice shares with the project's group: the project's account may rename
  // what is in it, not read alice's 0600 file nor remove what is in her own subdirectory.
  const fs::path shared = box.root / "shared";
  fs::create_directories(shared / "G" / "sub");
  std::ofstream(shared / "alice-file") << "alice's secret\n";
  std::ofstream(shared / "G" / "sub" / "precious") << "alice's precious\n";
  REQUIRE(chown(shared.c_str(), alice.uid, project.gid) == 0);
  fs::permissions(shared, fs::perms(02770));
  REQUIRE(chown((shared / "alice-file").c_str(), alice.uid, project.gid) == 0);
  fs::permissions(shared / "alice-file", fs::perms(0600));
  REQUIRE(chown((shared / "G").c_str(), alice.uid, project.gid) == 0);
  fs::permissions(shared / "G", fs::perms(02770));
  REQUIRE(chown((shared / "G" / "sub").c_str(), alice.uid, alice.gid) == 0);
  REQUIRE(chown((shared / "G" / "sub" / "precious").c_str(), alice.uid, alice.gid) == 0);
  fs::permissions(shared / "G" / "sub", fs::perms(0755));
  const fs::path src = box.root / "sources" / "ds";
  fs::create_directories(src);
  std::ofstream(src / "part-0") << "the project's data\n";
  const fs::path data_dir = box.root / "data";
  fs::create_directories(data_dir);
  auto access = jc::adapter::StagedAccessFor(project.name, /*federation=*/false);
  REQUIRE(access.ok());

  // The account acts while its copy is made (here inside the mover, which runs as it, so
  // that the moment is certain): the copy moved aside, alice's file renamed in its place.
  auto swap_in_file = jc::adapter::MakeCommandMover(
      {"copy",
       {"sh", "-c", "cp -a \"${1#copy://}\" \"$2\" && mv \"$2\" \"$2.aside\" && mv \"$3\" \"$2\"", "mover", "{source}",
        "{target}", (shared / "alice-file").string()}});
  auto staged = jc::adapter::StageInto(*swap_in_file, "copy://" + src.string(), data_dir, "ds", "v1", access.value());
  INFO(staged.status().ToString());
  // Sealed as root, alice's file became the project account's (the hole).
  CHECK_FALSE(staged.ok());
  int found = 0;
  for (auto it = fs::recursive_directory_iterator(box.root); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file() || Slurp(it->path()).find("alice's secret") == std::string::npos) continue;
    ++found;
    struct stat st;
    REQUIRE(stat(it->path().c_str(), &st) == 0);
    CHECK(st.st_uid == alice.uid);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(AsAccount(project.uid, project.gid, [&] { return TryRead(it->path().c_str()); }) == EACCES);
  }
  CHECK(found == 1);  // not removed either

  // A directory of alice's renamed into the copy's holding directory: removed with the
  // account's rights, what the account could not remove stays.
  auto plant_dir = jc::adapter::MakeCommandMover(
      {"copy",
       {"sh", "-c", "cp -a \"${1#copy://}\" \"$2\" && mv \"$3\" \"$(dirname \"$2\")/G\"", "mover", "{source}",
        "{target}", (shared / "G").string()}});
  staged = jc::adapter::StageInto(*plant_dir, "copy://" + src.string(), data_dir, "ds2", "v1", access.value());
  INFO(staged.status().ToString());
  CHECK(staged.ok());  // the copy itself is fine
  CHECK(FilesHolding(box.root, "alice's precious") == 1);
}

TEST_CASE("a mover command run as a project's account gets none of the adapter's environment and is killed past "
          "its timeout, even when the account stops it [A6][C6]",
          "[A6][C6]") {
  if (geteuid() != 0) {
    WARN("not run: the attack needs root (the adapter's account) and unprivileged accounts (CI runs as root)");
    return;
  }
  Sandbox box;
  jc::testing::TestAccount project("jc-stage-pr3");
  const fs::path src = box.root / "sources" / "ds";
  fs::create_directories(src);
  const fs::path data_dir = box.root / "data";
  fs::create_directories(data_dir);
  auto access = jc::adapter::StagedAccessFor(project.name, /*federation=*/false);
  REQUIRE(access.ok());
  // The center's credentials for its own storage, in the adapter's environment.
  setenv("JC_CENTER_S3_SECRET", "center-secret-not-for-projects", 1);
  auto dump_env = jc::adapter::MakeCommandMover(
      {"copy", {"sh", "-c", "mkdir \"$2\" && env > \"$2/env\"", "mover", "{source}", "{target}"}});
  auto staged = jc::adapter::StageInto(*dump_env, "copy://" + src.string(), data_dir, "env", "v1", access.value());
  INFO(staged.status().ToString());
  REQUIRE(staged.ok());
  const std::string env = Slurp(*staged / "env");
  CHECK(env.find("center-secret-not-for-projects") == std::string::npos);
  CHECK(env.find("USER=" + project.name) != std::string::npos);
  unsetenv("JC_CENTER_S3_SECRET");

  // The account stops its own mover: the staging still ends, at the mover's timeout.
  jc::adapter::CommandMoverConfig stopping{"copy", {"sh", "-c", "kill -STOP $$", "mover", "{source}", "{target}"}};
  stopping.timeout = absl::Seconds(2);
  auto stopped = jc::adapter::MakeCommandMover(stopping);
  const auto started = std::chrono::steady_clock::now();
  staged = jc::adapter::StageInto(*stopped, "copy://" + src.string(), data_dir, "stopped", "v1", access.value());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO(staged.status().ToString());
  CHECK_FALSE(staged.ok());
  CHECK(staged.status().message().find("was killed") != std::string::npos);
  CHECK(took < 30);
}
