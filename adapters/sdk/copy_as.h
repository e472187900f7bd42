#pragma once

// Copying a project's dataset with the project's own rights (issue 44): the adapter runs
// as root, and a dataset's source is below a data source where every project keeps files.
// Copied as root, a project's dataset could take in what its account may not read (another
// project's file, 0600, beside it); copied as the account the center maps the project to,
// the copy holds only what that account could have read itself.
//
// Two ways, one per mover: the file mover's opens run on the calling thread with the
// account's file-system identity (setfsuid/setfsgid and its groups, for this thread only:
// the adapter's other threads keep root's), and a center's mover command runs as the
// account (setpriv). Either writes only into a holding directory the account owns.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::adapter {

// A local account, as its copies run.
struct CopyAccount {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // its supplementary groups (initgroups' list)
};

// The account named `name` with its groups; InvalidArgument when the center has none.
absl::StatusOr<CopyAccount> LookUpCopyAccount(const std::string& name);

// While alive, this thread opens, creates and searches files as `account` (its fsuid,
// fsgid and groups; root's capabilities over files are gone meanwhile, as the kernel
// drops them with a non-zero fsuid). Restored when it ends; a failure to restore stops the
// process (carrying on would act as the wrong account). Only for a process running as
// root; `ok()` says whether the switch took.
class ScopedFileIdentity {
 public:
  explicit ScopedFileIdentity(const CopyAccount& account);
  ~ScopedFileIdentity();
  ScopedFileIdentity(const ScopedFileIdentity&) = delete;
  ScopedFileIdentity& operator=(const ScopedFileIdentity&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  void Restore();
  absl::Status status_;
  bool switched_ = false;
  std::vector<gid_t> saved_groups_;
};

// `argv` prefixed to run as `account` (setpriv: real, effective and saved ids, its groups,
// no capabilities).
std::vector<std::string> RunAsArgv(const CopyAccount& account, const std::vector<std::string>& argv);

}  // namespace jc::adapter
