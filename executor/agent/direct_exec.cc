#include "executor/agent/direct_exec.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "executor/agent/user_files.h"

namespace jc::nexec {
namespace {

constexpr size_t kMaxPath = 4096;

// Characters that mean nothing to a shell outside quotes (besides the space between words).
bool Plain(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./:,+@%=", c) != nullptr;
}

// Words a shell takes itself: builtins that are not programs (or act otherwise than the
// program of that name) and reserved words.
bool ShellsOwn(absl::string_view word) {
  static const auto* own = new absl::flat_hash_set<std::string>{
      "cd",     "exit",  "export", "set",    "unset",   ".",     "source", "eval",     "exec",  "ulimit", "umask",
      "wait",   "trap",  "shift",  "read",   "return",  "break", "continue", "alias",  "unalias", "type",
      "command", "hash", "getopts", "local", "readonly", "times", "jobs",   "fg",       "bg",    "echo",   "printf",
      "test",   "kill",  "pwd",    "if",     "then",    "else",  "elif",   "fi",       "for",   "while",  "until",
      "do",     "done",  "case",   "esac",   "in",      "function", "select", "time",  "logout", "builtin",
      // dash's own, which answer otherwise than the programs of those names (`true --help`)
      "true", "false", "chdir", "fc"};
  return own->contains(word);
}

// Root's alone: owned by root, written by no one else.
bool RootsAlone(const struct stat& st) { return st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0; }

// A file reached by a walk, and the walk's path to it.
struct Reached {
  std::string path;
  OwnedFd fd;  // O_PATH, not following a link at its name
};

// What one program search has done: what it may still do, and the mounts it has found to
// be none of an account's FUSE file systems (each look at the kernel's mount table reads
// all of it: attacker helper-91 made one PATH of /dev repeated cost ~800 of them, 0.8 s of
// the launching thread per job on a host of 1,000 mounts).
struct Walk {
  // Past these the search is the shell's, in the task, as the account: each step costs the
  // agent's launching thread what it costs the shell after, and each look at the mount table
  // more (a host of 1,000 mounts: ~1 ms).
  static constexpr int kMaxSteps = 256;
  static constexpr int kMaxMountLooks = 16;
  int steps_left = kMaxSteps;
  int mount_looks_left = kMaxMountLooks;
  std::vector<uint64_t> cleared_mounts;  // mount ids (statx) RefusalFor passed
};

// `name` in the directory `dir`, opened O_PATH without following a link at it, once it is
// known to lie on no FUSE file system an account mounted, with its attributes; nullopt with
// errno set (ENOENT: not there) otherwise. Nothing is asked of the file system the name
// lies on before that check: the open crosses onto a mount without a request to it, and
// RefusalFor asks none; then fstat (a FUSE daemon's, an account's, may never answer).
std::optional<Reached> Step(Walk& walk, int dir, const std::string& dir_path, const std::string& name,
                            struct stat* st) {
  if (--walk.steps_left < 0) {
    errno = E2BIG;
    return std::nullopt;
  }
  OwnedFd fd(openat(dir, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return std::nullopt;
  struct statx where {};
  const bool looked = statx(fd.get(), "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &where) == 0;
  const bool has_id = looked && (where.stx_mask & STATX_MNT_ID) != 0;
  // A file system on a block device is no account's FUSE (RefusalFor's own shortcut); one
  // cleared already in this search is not looked up again.
  const bool cleared = looked && (where.stx_dev_major != 0 ||
                                  (has_id && std::find(walk.cleared_mounts.begin(), walk.cleared_mounts.end(),
                                                       where.stx_mnt_id) != walk.cleared_mounts.end()));
  if (!cleared) {
    if (--walk.mount_looks_left < 0) {
      errno = E2BIG;
      return std::nullopt;
    }
    if (const int refused = RefusalFor(fd.get()); refused != 0) {
      errno = refused;
      return std::nullopt;
    }
    if (has_id) walk.cleared_mounts.push_back(where.stx_mnt_id);
  }
  if (fstat(fd.get(), st) != 0) return std::nullopt;
  // Never through a /proc, however it is reached (a bind of / elsewhere: attacker
  // helper-91; a proc mounted again: reviewer helper-92): its links name whoever follows
  // them (self/cwd is the agent's directory to the agent, the task's to the task that execs
  // the path). Asked of a file system off a disk only (proc's is), checked above.
  struct statfs fs;
  if ((!looked || where.stx_dev_major == 0) && (fstatfs(fd.get(), &fs) != 0 || fs.f_type == PROC_SUPER_MAGIC)) {
    errno = ELOOP;
    return std::nullopt;
  }
  return Reached{dir_path + "/" + name, std::move(fd)};
}

// The file `path` names, resolved component by component as exec resolves it, when every
// directory and link on the way is root's and no one else may change any of them (so what
// is checked now is what exec finds later); nullopt otherwise. A link's own mode means
// nothing: its owner and the directory holding it are what keep it.
//
// Walked by descriptors (Step): the walk never steps onto a FUSE file system an account
// mounted, whose daemon answers for the account, can make its root look root's alone, and
// can leave the agent's lookup there waiting for ever (attacker helper-89, with a daemon
// everyone may enter); and a mount made on a step once it was checked does not change what
// the walk goes on from (the reviewer of session 82: a list of mount points read before the
// walk could be raced by an account mounting and unmounting on its own directory).
std::optional<Reached> ResolveThroughRootsAlone(Walk& walk, const std::string& path) {
  std::vector<Reached> levels;  // "/" first, then each directory walked into
  {
    OwnedFd root(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    struct stat st;
    if (!root || fstat(root.get(), &st) != 0 || !RootsAlone(st)) return std::nullopt;
    levels.push_back(Reached{"", std::move(root)});
  }
  std::vector<std::string> remaining;  // components still to walk, the next one last
  auto push = [&remaining](absl::string_view p) {
    std::vector<std::string> parts = absl::StrSplit(p, '/', absl::SkipEmpty());
    remaining.insert(remaining.end(), parts.rbegin(), parts.rend());
  };
  push(path);
  int links = 0;
  while (!remaining.empty()) {
    const std::string part = std::move(remaining.back());
    remaining.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      if (levels.size() > 1) levels.pop_back();
      continue;
    }
    // /proc's links name the process that follows them (/proc/self/exe is the agent's
    // program, /proc/self/cwd its directory): what root checks is not what the task execs.
    if (levels.size() == 1 && part == "proc") return std::nullopt;
    struct stat st;
    std::optional<Reached> next = Step(walk, levels.back().fd.get(), levels.back().path, part, &st);
    if (!next) return std::nullopt;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      const ssize_t n = readlinkat(next->fd.get(), "", target, sizeof(target));
      if (st.st_uid != 0 || ++links > 40 || n <= 0 || n == static_cast<ssize_t>(sizeof(target))) return std::nullopt;
      if (target[0] == '/') levels.resize(1);
      push(absl::string_view(target, static_cast<size_t>(n)));
      continue;
    }
    if (!RootsAlone(st)) return std::nullopt;
    if (S_ISDIR(st.st_mode) ? (st.st_mode & S_IXOTH) == 0 : !remaining.empty()) return std::nullopt;
    levels.push_back(std::move(*next));
  }
  if (levels.size() == 1) return std::nullopt;  // "/" itself is no program
  return std::move(levels.back());
}

// A system program anyone may run, which exec starts as it is (an ELF file or a "#!" script).
bool SystemProgram(Walk& walk, const std::string& file) {
  const std::optional<Reached> real = ResolveThroughRootsAlone(walk, file);
  struct stat st;
  if (!real || fstat(real->fd.get(), &st) != 0) return false;
  if (!S_ISREG(st.st_mode) || (st.st_mode & S_IXOTH) == 0) return false;
  // The file checked, opened through its descriptor: not its path again.
  const int fd = open(absl::StrCat("/proc/self/fd/", real->fd.get()).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char head[4] = {0};
  const ssize_t n = read(fd, head, sizeof(head));
  close(fd);
  return (n == 4 && std::memcmp(head, "\x7f" "ELF", 4) == 0) || (n >= 2 && head[0] == '#' && head[1] == '!');
}

using Looked = std::vector<std::pair<std::string, ProgramCache::Identity>>;

ProgramCache::Identity IdentityOf(const std::string& path) {
  ProgramCache::Identity id;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return id;
  id.exists = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
  return id;
}

// A file the answer depends on, noted once it is known to be root's alone (so the agent
// stats, following links, nothing a user controls) and before the agent looks into it (a
// directory's identity before the name is looked up in it): a change after shows.
void Note(Looked* looked, const std::string& path) {
  if (looked != nullptr) looked->emplace_back(path, IdentityOf(path));
}

// The command's words when it has no shell syntax and its first word is no shell's own;
// the program is not looked for yet.
std::optional<DirectCommand> Words(absl::string_view command) {
  for (char c : command) {
    if (c != ' ' && !Plain(c)) return std::nullopt;
  }
  DirectCommand direct;
  direct.argv = absl::StrSplit(command, ' ', absl::SkipEmpty());
  if (direct.argv.empty()) return std::nullopt;
  const std::string& word = direct.argv[0];
  // An assignment (A=1 prog), an option-looking or builtin first word: the shell's.
  if (word.find('=') != std::string::npos || word[0] == '-' || ShellsOwn(word)) return std::nullopt;
  return direct;
}

// A PATH longer than any a person sets is the shell's to search (each entry costs the
// agent, before the task starts, what it costs the shell after).
bool Searchable(const std::string& word, absl::string_view path) {
  return word.find('/') != std::string::npos || path.size() <= kMaxPath;
}

// The program the shell would run for `word` on `path` when it may be run directly, else
// "". `looked`, when given, gets what the answer depends on.
std::string Search(const std::string& word, absl::string_view path, Looked* looked) {
  Walk walk;
  if (word.find('/') != std::string::npos) {
    if (word[0] != '/' || !SystemProgram(walk, word)) return "";
    Note(looked, word.substr(0, word.rfind('/') + 1));
    Note(looked, word);
    return word;
  }
  // As the shell searches: the first directory of $PATH that has it. Root looks only in
  // directories anyone may search, reached through root's alone: a directory the account
  // may not enter, or one it (or anyone but root) could change, ends the search here and
  // leaves it to the shell, as the account — so root's look tells the account nothing it
  // could not see itself. An empty entry (the working directory) or a relative one: the same.
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty() || dir[0] != '/') return "";
    const std::optional<Reached> real_dir = ResolveThroughRootsAlone(walk, std::string(dir));
    if (!real_dir) return "";
    Note(looked, std::string(dir));
    // The name looked at in the directory checked, and checked itself before anything is
    // asked of it: it may be the mount point of an account's FUSE (PATH=/home, an account's
    // mount on /home/alice, the command `alice`; reviewer, session 82).
    struct stat st;
    if (!Step(walk, real_dir->fd.get(), real_dir->path, word, &st)) {
      if (errno == ENOENT) continue;  // not there, for anyone
      return "";
    }
    const std::string candidate = std::string(dir) + (dir.back() == '/' ? "" : "/") + word;
    if (!SystemProgram(walk, candidate)) return "";
    Note(looked, candidate);
    return candidate;
  }
  return "";
}

}  // namespace

std::optional<DirectCommand> DirectArgv(absl::string_view command, absl::string_view path) {
  std::optional<DirectCommand> direct = Words(command);
  if (!direct || !Searchable(direct->argv[0], path)) return std::nullopt;
  direct->program = Search(direct->argv[0], path, nullptr);
  if (direct->program.empty()) return std::nullopt;
  return direct;
}

namespace {

// Files whose every change is made through this kernel, which inotify therefore reports: a
// disk of this host, or memory. Not NFS, Lustre, CIFS or a FUSE file system, which other
// hosts (or a daemon) change unseen.
bool ChangedOnlyHere(const std::string& path) {
  struct statfs fs;
  if (statfs(path.c_str(), &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case EXT4_SUPER_MAGIC:  // ext2 and ext3 too
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
    case F2FS_SUPER_MAGIC:
    case TMPFS_MAGIC:
    case RAMFS_MAGIC:
    case SQUASHFS_MAGIC:
    case OVERLAYFS_SUPER_MAGIC:
    case 0x2fc12fc1:  // ZFS
      return true;
    default:
      return false;
  }
}

// What changes a directory searched, or the program found (its own attributes and content,
// a name made, removed or moved in a directory, the file itself removed or moved).
constexpr uint32_t kChanges = IN_ATTRIB | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MODIFY | IN_MOVE_SELF |
                              IN_MOVED_FROM | IN_MOVED_TO;

}  // namespace

ProgramCache::ProgramCache(bool watch) : watch_(watch) {
  if (watch_) changes_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);  // none (-1): every file stat'ed
}

ProgramCache::~ProgramCache() {
  absl::MutexLock lock(&mu_);
  if (changes_ >= 0) close(changes_);
}

void ProgramCache::DropIfChangedLocked() {
  if (changes_ < 0) return;
  alignas(inotify_event) char events[4096];
  const ssize_t n = read(changes_, events, sizeof events);
  if (n < 0 && errno == EAGAIN) return;  // nothing changed (the one system call of a look)
  // Something changed (or the queue overflowed, or cannot be read): every answer goes, with
  // every watch, and what is looked for next is searched and watched anew.
  DropAllLocked();
}

void ProgramCache::DropAllLocked() {
  entries_.clear();
  if (changes_ < 0 || watches_.empty()) return;
  // A new queue: closing the old one ends its watches (kept on root's inotify budget, which
  // the host's other daemons share, they must not outlive the answers they keep).
  close(changes_);
  watches_.clear();
  changes_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
}

bool ProgramCache::WatchLocked(const Entry& entry) {
  if (changes_ < 0) return false;
  // Each file looked at and every directory on its way from /, as its path names them: a
  // link on the way re-pointed (`current -> v2`) or a directory above renamed changes which
  // files the path names without changing those files, and is an event in the directory
  // that holds the link or the name (attacker helper-80).
  absl::flat_hash_set<std::string> paths;
  for (const auto& [file, identity] : entry.looked) {
    for (size_t slash = file.find('/', 1); slash != std::string::npos; slash = file.find('/', slash + 1)) {
      paths.insert(file.substr(0, slash));
    }
    paths.insert("/");
    paths.insert(file);
  }
  // An account's $PATH names the directories: however many it names, root's watches stay
  // few (past them, answers are stat'ed).
  if (paths.size() > kMaxWatchesPerAnswer) return false;
  if (watches_.size() + paths.size() > kMaxWatches) DropAllLocked();  // the kept answers go with them
  if (changes_ < 0) return false;
  for (const std::string& file : paths) {
    if (!ChangedOnlyHere(file)) return false;
    const int watch = inotify_add_watch(changes_, file.c_str(), kChanges);
    if (watch < 0) return false;
    watches_.insert(watch);
  }
  // Changed between the search's look and its watch: no event came for that change.
  return std::all_of(entry.looked.begin(), entry.looked.end(),
                     [](const auto& l) { return IdentityOf(l.first) == l.second; });
}

size_t ProgramCache::watches() const {
  absl::MutexLock lock(&mu_);
  return watches_.size();
}

std::optional<DirectCommand> ProgramCache::DirectArgv(absl::string_view command, absl::string_view path) {
  std::optional<DirectCommand> direct = Words(command);
  if (!direct || !Searchable(direct->argv[0], path)) return std::nullopt;
  const std::string& word = direct->argv[0];
  // A name longer than any file's is never found: not worth a key (an account could pin a
  // megabyte per entry, helper-62 finding 1). A path is not searched: $PATH is no part of it.
  const bool is_path = word.find('/') != std::string::npos;
  if (word.size() > (is_path ? kMaxPath : NAME_MAX)) return ::jc::nexec::DirectArgv(command, path);
  const std::string key = is_path ? word : absl::StrCat(word, std::string(1, '\0'), path);
  const absl::Time now = absl::Now();  // for file times
  // The age of an answer on the monotonic clock: a wall clock stepped back must not keep one
  // past its 10 s (helper-62 finding 2).
  const absl::Duration since_boot = absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  std::optional<Entry> kept;
  {
    absl::MutexLock lock(&mu_);
    DropIfChangedLocked();
    auto it = entries_.find(key);
    if (it != entries_.end() && since_boot - it->second.walked < kWalkedAgainAfter) {
      if (it->second.watched) {  // unchanged: no event came
        ++hits_;
        if (it->second.program.empty()) return std::nullopt;
        direct->program = it->second.program;
        return direct;
      }
      kept = it->second;
    }
  }
  // Stat'ed outside the lock: what was kept holds while every file looked at is unchanged.
  if (kept && std::all_of(kept->looked.begin(), kept->looked.end(),
                          [](const auto& l) { return IdentityOf(l.first) == l.second; })) {
    absl::MutexLock lock(&mu_);
    ++hits_;
    if (kept->program.empty()) return std::nullopt;
    direct->program = std::move(kept->program);
    return direct;
  }
  Entry entry;
  entry.walked = since_boot;
  entry.program = Search(direct->argv[0], path, &entry.looked);
  // "The shell's" holds whatever changed (the shell searches for itself): nothing to stat.
  if (entry.program.empty()) entry.looked.clear();
  direct->program = entry.program;
  const int64_t settled_before = absl::ToUnixNanos(now - kRacy);
  const bool settled = std::all_of(entry.looked.begin(), entry.looked.end(), [&](const auto& l) {
    return l.second.mtime_ns < settled_before && l.second.ctime_ns < settled_before;
  });
  if (settled) {
    absl::MutexLock lock(&mu_);
    if (entries_.size() >= kMaxEntries) DropAllLocked();
    entry.watched = entry.looked.empty() || WatchLocked(entry);
    entries_.insert_or_assign(key, std::move(entry));
  }
  if (direct->program.empty()) return std::nullopt;
  return direct;
}

int64_t ProgramCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

bool ShellName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace jc::nexec
