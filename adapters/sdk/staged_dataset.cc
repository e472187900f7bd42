#include "adapters/sdk/staged_dataset.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace jc::adapter {
namespace {

namespace fs = std::filesystem;

std::atomic<uint64_t> next_staging{0};

}  // namespace

absl::StatusOr<TreeAccess> StagedAccessFor(const std::string& account, bool federation) {
  TreeAccess access;
  access.others_read = federation;
  if (federation || account.empty()) return access;  // the adapter's own account keeps it
  std::vector<char> buf(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwnam_r(account.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no local account \"", account, "\" to stage the dataset for"));
  }
  if (found->pw_uid == 0) {
    return absl::FailedPreconditionError("datasets are never staged for root; configure an ordinary account");
  }
  access.uid = found->pw_uid;
  access.gid = found->pw_gid;
  // Only root hands files to another account; an adapter running as the account itself
  // already owns what it copies.
  access.change_owner = geteuid() == 0 && found->pw_uid != geteuid();
  if (geteuid() != 0 && found->pw_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat("the adapter does not run as root: it cannot stage datasets that "
                                                      "only account \"", account, "\" may read"));
  }
  return access;
}

absl::StatusOr<fs::path> StageInto(const DatasetMover& mover, const std::string& url, const fs::path& data_dir,
                                   const std::string& name, const std::string& version, const TreeAccess& access) {
  std::error_code ec;
  fs::create_directories(data_dir, ec);  // the operator's directory, made if missing
  UniqueFd data(open(data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (data.get() < 0) return absl::UnavailableError(absl::StrCat(data_dir.string(), ": ", std::strerror(errno)));
  if (mkdirat(data.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat("creating ", (data_dir / name).string(), ": ", std::strerror(errno)));
  }
  UniqueFd named(openat(data.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (named.get() < 0 || fstat(named.get(), &st) != 0) {
    return absl::UnavailableError(absl::StrCat((data_dir / name).string(), ": ", std::strerror(errno)));
  }
  // The directory of a dataset's versions is the adapter's alone: anyone else who could
  // write there could plant entries among the copies.
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat((data_dir / name).string(),
                                                      " is not the adapter's own directory (owner uid ", st.st_uid,
                                                      ", mode ", absl::StrFormat("%o", st.st_mode & 07777), ")"));
  }
  const std::string staging = absl::StrCat(".staging-", version, "-", getpid(), "-", next_staging.fetch_add(1));
  (void)RemoveTreeAt(named.get(), staging);
  absl::Status copied = mover.Copy(url, data_dir / name / staging);
  struct stat made;
  if (copied.ok() && fstatat(named.get(), staging.c_str(), &made, AT_SYMLINK_NOFOLLOW) != 0) {
    copied = absl::UnavailableError(absl::StrCat(url, ": the copy left nothing at ", staging));
  } else if (copied.ok() && !S_ISDIR(made.st_mode) && !S_ISREG(made.st_mode)) {
    copied = absl::UnavailableError(absl::StrCat(url, ": the copy is neither a directory nor a file"));
  }
  if (copied.ok()) copied = SealTreeAt(named.get(), staging, access);
  if (copied.ok() && renameat2(named.get(), staging.c_str(), named.get(), version.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST &&
        renameat2(named.get(), staging.c_str(), named.get(), version.c_str(), RENAME_EXCHANGE) == 0) {
      // The earlier copy, now under the staging name: taken back from its owner first, so
      // that no account can enter it while it is removed.
      UniqueFd old(openat(named.get(), staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (old.get() >= 0) {
        if (geteuid() == 0) (void)fchown(old.get(), 0, 0);
        (void)fchmod(old.get(), 0700);
      }
    } else {
      copied = absl::UnavailableError(
          absl::StrCat("placing the copy at ", (data_dir / name / version).string(), ": ", std::strerror(errno)));
    }
  }
  // A partial copy, or the earlier one swapped out (root's now: a failure leaves it
  // reachable by no account but root).
  (void)RemoveTreeAt(named.get(), staging);
  if (!copied.ok()) return copied;
  return data_dir / name / version;
}

}  // namespace jc::adapter
