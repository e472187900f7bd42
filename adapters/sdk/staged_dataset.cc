#include "adapters/sdk/staged_dataset.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "adapters/sdk/copy_as.h"
#include "spdlog/spdlog.h"

namespace jc::adapter {
namespace {

namespace fs = std::filesystem;

std::atomic<uint64_t> next_staging{0};

// The mover copies into `holding`/data, a directory of the account whose rights the copy
// has (`as`: the project's; nullptr: root's own), and root moves that entry out as
// `staging` (renameat moves the name: a link stays a link, refused by the caller; an inode
// of someone else's the account put there is refused by the hand-over, which runs with the
// account's rights). The holding directory is then emptied with the account's rights, so
// root never removes what the account could not.
absl::Status CopyIntoHolding(const DatasetMover& mover, const std::string& url, int named, const fs::path& named_path,
                             const std::string& holding, const std::string& staging, const CopyAccount* as) {
  if (mkdirat(named, holding.c_str(), 0700) != 0) {
    return absl::UnavailableError(absl::StrCat("creating ", (named_path / holding).string(), ": ", std::strerror(errno)));
  }
  UniqueFd box(openat(named, holding.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (box.get() < 0) {
    return absl::UnavailableError(absl::StrCat((named_path / holding).string(), ": ", std::strerror(errno)));
  }
  if (as != nullptr && fchown(box.get(), as->uid, as->gid) != 0) {
    return absl::UnavailableError(absl::StrCat("handing ", holding, " to ", as->name, ": ", std::strerror(errno)));
  }
  absl::Status copied = mover.Copy(url, named_path / holding / "data", as);
  if (copied.ok() && renameat(box.get(), "data", named, staging.c_str()) != 0) {
    copied = absl::UnavailableError(absl::StrCat(url, ": the copy left nothing at ", holding, "/data: ",
                                                 std::strerror(errno)));
  }
  absl::Status removed = as != nullptr ? RemoveTreeAs(named, holding, as->uid, as->gid) : RemoveTreeAt(named, holding);
  if (!removed.ok()) spdlog::error("staging {}: {}", url, std::string(removed.message()));
  return copied;
}

// Removes a copy `as` controlled (see RemoveTreeAs; nullptr: root's own), saying what it
// had to leave.
void RemoveCopy(int named, const std::string& entry, const CopyAccount* as, const std::string& url) {
  absl::Status removed = as != nullptr ? RemoveTreeAs(named, entry, as->uid, as->gid) : RemoveTreeAt(named, entry);
  if (!removed.ok()) spdlog::error("staging {}: {}", url, std::string(removed.message()));
}

// The earlier copy, swapped out to `entry`: a directory in root's directory, handed to the
// account it was staged for (perhaps another than now), removed with that account's rights.
void RemoveEarlierCopy(int named, const std::string& entry, const std::string& url) {
  struct stat st;
  if (fstatat(named, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  absl::Status removed = RemoveTreeAs(named, entry, st.st_uid, st.st_gid);
  if (!removed.ok()) spdlog::error("staging {}: {}", url, std::string(removed.message()));
}

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
  access.account = account;
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
  const std::string holding = staging + ".holding";
  std::optional<CopyAccount> as;
  if (access.change_owner) {
    auto account = LookUpCopyAccount(access.account);
    if (!account.ok()) return account.status();
    as = std::move(*account);
  }
  const CopyAccount* copy_as = as.has_value() ? &*as : nullptr;
  // Leftovers of an earlier adapter process under these names (its pid, reused).
  RemoveCopy(named.get(), staging, copy_as, url);
  RemoveCopy(named.get(), holding, copy_as, url);
  absl::Status copied = CopyIntoHolding(mover, url, named.get(), data_dir / name, holding, staging, copy_as);
  struct stat made;
  if (copied.ok() && fstatat(named.get(), staging.c_str(), &made, AT_SYMLINK_NOFOLLOW) != 0) {
    copied = absl::UnavailableError(absl::StrCat(url, ": the copy left nothing at ", staging));
  } else if (copied.ok() && !S_ISDIR(made.st_mode) && !S_ISREG(made.st_mode)) {
    copied = absl::UnavailableError(absl::StrCat(url, ": the copy is neither a directory nor a file"));
  }
  if (copied.ok() && as.has_value()) {
    // With the account's rights: the copy is its by construction, and an inode of someone
    // else's it put in the copy (renamed or linked in) cannot be chmod-ed or chown-ed by
    // it, so it is refused rather than handed over.
    ScopedFileIdentity identity(*as);
    copied = identity.status();
    if (copied.ok()) copied = SealTreeAt(named.get(), staging, access);
    if (!copied.ok()) {
      copied = absl::PermissionDeniedError(absl::StrCat(url, ": the copy holds what account ", as->name,
                                                        " does not own, so it is not handed over: ", copied.message()));
    }
  } else if (copied.ok()) {
    copied = SealTreeAt(named.get(), staging, access);
  }
  if (copied.ok() && renameat2(named.get(), staging.c_str(), named.get(), version.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST &&
        renameat2(named.get(), staging.c_str(), named.get(), version.c_str(), RENAME_EXCHANGE) == 0) {
      // The earlier copy, now under the staging name: removed as the account it was for.
      RemoveEarlierCopy(named.get(), staging, url);
    } else {
      copied = absl::UnavailableError(
          absl::StrCat("placing the copy at ", (data_dir / name / version).string(), ": ", std::strerror(errno)));
    }
  }
  // A copy that was not placed: removed with the rights of the account that made it.
  RemoveCopy(named.get(), staging, copy_as, url);
  if (!copied.ok()) return copied;
  return data_dir / name / version;
}

}  // namespace jc::adapter
