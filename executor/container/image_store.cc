#include "executor/container/image_store.h"

#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace jc::nexec {

std::vector<std::string> ImagesInStore(const std::string& store) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(store, ec)) {
    const std::string name = entry.path().filename().string();
    const bool hex = name.size() == 64 && std::all_of(name.begin(), name.end(), [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                     });
    if (hex && std::filesystem::exists(entry.path() / "ready", ec)) out.push_back("sha256:" + name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status CheckUnprivilegedUnpack(const std::string& store, uid_t unpack_uid) {
  if (unpack_uid == 0 || unpack_uid == static_cast<uid_t>(-1)) {
    return absl::InvalidArgumentError(absl::StrCat("--image_unpack_uid ", unpack_uid, " is not an unprivileged uid"));
  }
  std::vector<char> buf(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwuid_r(unpack_uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("--image_unpack_uid ", unpack_uid, " is the account ", pw.pw_name,
                                                      "'s; images are unpacked as a uid no account has"));
  }
  // The child reports which step failed (its exit code) and errno (through a pipe).
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    close(fds[0]);
    auto fail = [&](int step) {
      const int err = errno;
      (void)!write(fds[1], &err, sizeof err);
      _exit(step);
    };
    if (unshare(CLONE_NEWNS) != 0) fail(1);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) fail(2);
    if (mount(store.c_str(), store.c_str(), nullptr, MS_BIND, nullptr) != 0) fail(3);
    if (mount(nullptr, store.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NODEV | MS_NOSUID, nullptr) != 0) fail(4);
    struct statvfs st{};
    if (statvfs(store.c_str(), &st) != 0) fail(5);
    if ((st.f_flag & ST_NODEV) == 0 || (st.f_flag & ST_NOSUID) == 0) {
      errno = EPERM;
      fail(6);
    }
    _exit(0);
  }
  close(fds[1]);
  int err = 0;
  const bool told = read(fds[0], &err, sizeof err) == sizeof err;
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  static const char* const kSteps[] = {"",
                                       "make a mount namespace",
                                       "make its mounts slaves",
                                       "bind the store onto itself",
                                       "remount it nodev,nosuid",
                                       "statvfs it",
                                       "see nodev,nosuid on it"};
  const int step = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot mount the image store ", store, " nodev,nosuid in a mount namespace of its own (",
      step > 0 && step < 7 ? kSteps[step] : "the check died", told ? absl::StrCat(": ", std::strerror(err)) : "",
      ")"));
}

}  // namespace jc::nexec
