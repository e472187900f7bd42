#include "executor/agent/direct_exec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

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

// The file `path` names, resolved component by component as exec resolves it, when every
// directory and link on the way is root's and no one else may change any of them (so what
// is checked now is what exec finds later); "" otherwise. A link's own mode means nothing:
// its owner and the directory holding it are what keep it.
std::string ResolveThroughRootsAlone(const std::string& path) {
  struct stat st;
  if (lstat("/", &st) != 0 || !RootsAlone(st)) return "";
  std::vector<std::string> remaining;  // components still to walk, the next one last
  auto push = [&remaining](absl::string_view p) {
    std::vector<std::string> parts = absl::StrSplit(p, '/', absl::SkipEmpty());
    remaining.insert(remaining.end(), parts.rbegin(), parts.rend());
  };
  push(path);
  std::string at;  // resolved so far ("" is /)
  int links = 0;
  while (!remaining.empty()) {
    const std::string part = std::move(remaining.back());
    remaining.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      at = at.substr(0, at.rfind('/'));
      continue;
    }
    // /proc's links name the process that follows them (/proc/self/exe is the agent's
    // program, /proc/self/cwd its directory): what root checks is not what the task execs.
    if (at.empty() && part == "proc") return "";
    const std::string next = at + "/" + part;
    if (lstat(next.c_str(), &st) != 0) return "";
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      const ssize_t n = readlink(next.c_str(), target, sizeof(target));
      if (st.st_uid != 0 || ++links > 40 || n <= 0 || n == static_cast<ssize_t>(sizeof(target))) return "";
      if (target[0] == '/') at.clear();
      push(absl::string_view(target, static_cast<size_t>(n)));
      continue;
    }
    if (!RootsAlone(st)) return "";
    if (S_ISDIR(st.st_mode) ? (st.st_mode & S_IXOTH) == 0 : !remaining.empty()) return "";
    at = next;
  }
  return at;
}

// A system program anyone may run, which exec starts as it is (an ELF file or a "#!" script).
bool SystemProgram(const std::string& file) {
  const std::string real = ResolveThroughRootsAlone(file);
  struct stat st;
  if (real.empty() || lstat(real.c_str(), &st) != 0) return false;
  if (!S_ISREG(st.st_mode) || (st.st_mode & S_IXOTH) == 0) return false;
  const int fd = open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  char head[4] = {0};
  const ssize_t n = read(fd, head, sizeof(head));
  close(fd);
  return (n == 4 && std::memcmp(head, "\x7f" "ELF", 4) == 0) || (n >= 2 && head[0] == '#' && head[1] == '!');
}

}  // namespace

std::optional<DirectCommand> DirectArgv(absl::string_view command, absl::string_view path) {
  for (char c : command) {
    if (c != ' ' && !Plain(c)) return std::nullopt;
  }
  DirectCommand direct;
  direct.argv = absl::StrSplit(command, ' ', absl::SkipEmpty());
  if (direct.argv.empty()) return std::nullopt;
  const std::string& word = direct.argv[0];
  // An assignment (A=1 prog), an option-looking or builtin first word: the shell's.
  if (word.find('=') != std::string::npos || word[0] == '-' || ShellsOwn(word)) return std::nullopt;
  if (word.find('/') != std::string::npos) {
    if (word[0] != '/' || !SystemProgram(word)) return std::nullopt;
    direct.program = word;
    return direct;
  }
  // A PATH longer than any a person sets is the shell's to search (each entry costs the
  // agent, before the task starts, what it costs the shell after).
  if (path.size() > kMaxPath) return std::nullopt;
  // As the shell searches: the first directory of $PATH that has it. Root looks only in
  // directories anyone may search, reached through root's alone: a directory the account
  // may not enter, or one it (or anyone but root) could change, ends the search here and
  // leaves it to the shell, as the account — so root's look tells the account nothing it
  // could not see itself. An empty entry (the working directory) or a relative one: the same.
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty() || dir[0] != '/') return std::nullopt;
    if (ResolveThroughRootsAlone(std::string(dir)).empty()) return std::nullopt;
    const std::string candidate = std::string(dir) + (dir.back() == '/' ? "" : "/") + word;
    struct stat st;
    if (lstat(candidate.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;  // not there, for anyone
      return std::nullopt;
    }
    if (!SystemProgram(candidate)) return std::nullopt;
    direct.program = candidate;
    return direct;
  }
  return std::nullopt;
}

bool ShellName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace jc::nexec
