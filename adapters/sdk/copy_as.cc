#include "adapters/sdk/copy_as.h"

#include <grp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace jc::adapter {

absl::StatusOr<CopyAccount> LookUpCopyAccount(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no local account \"", name, "\""));
  }
  CopyAccount a;
  a.name = name;
  a.uid = found->pw_uid;
  a.gid = found->pw_gid;
  int n = 64;
  a.groups.resize(n);
  while (getgrouplist(name.c_str(), a.gid, a.groups.data(), &n) < 0) a.groups.resize(n);
  a.groups.resize(n);
  return a;
}

// glibc's setgroups changes every thread's groups; the system call changes the caller's.
static int ThreadSetGroups(const std::vector<gid_t>& groups) {
  return static_cast<int>(syscall(SYS_setgroups, groups.size(), groups.empty() ? nullptr : groups.data()));
}

ScopedFileIdentity::ScopedFileIdentity(const CopyAccount& account) {
  if (geteuid() != 0) {
    status_ = absl::FailedPreconditionError("only an adapter running as root copies as another account");
    return;
  }
  const int n = getgroups(0, nullptr);
  saved_groups_.resize(n > 0 ? n : 0);
  if (n > 0 && getgroups(n, saved_groups_.data()) != n) saved_groups_.clear();
  switched_ = true;  // from here, whatever took is undone by Restore
  if (ThreadSetGroups(account.groups) != 0) {
    status_ = absl::UnavailableError(absl::StrCat("setgroups: ", std::strerror(errno)));
    Restore();
    return;
  }
  // setfsgid/setfsuid return the previous value; the new one is checked by asking again.
  setfsgid(account.gid);
  setfsuid(account.uid);
  if (static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1))) != account.gid ||
      static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1))) != account.uid) {
    status_ = absl::UnavailableError(absl::StrCat("cannot take account ", account.name, "'s file identity"));
    Restore();
  }
}

void ScopedFileIdentity::Restore() {
  if (!switched_) return;
  switched_ = false;
  setfsuid(0);
  setfsgid(0);
  if (static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1))) != 0 ||
      static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1))) != 0 || ThreadSetGroups(saved_groups_) != 0) {
    std::fprintf(stderr, "fatal: cannot take the adapter's own file identity back after a copy\n");
    std::abort();
  }
}

ScopedFileIdentity::~ScopedFileIdentity() { Restore(); }

std::vector<std::string> RunAsArgv(const CopyAccount& account, const std::vector<std::string>& argv) {
  std::vector<std::string> out = {"setpriv",
                                  absl::StrCat("--reuid=", account.uid),
                                  absl::StrCat("--regid=", account.gid),
                                  "--init-groups",
                                  // HOME, USER, SHELL and PATH of the account, nothing of the
                                  // adapter's environment (its credentials stay its own).
                                  "--reset-env",
                                  "--inh-caps=-all",
                                  "--bounding-set=-all",
                                  "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace jc::adapter
