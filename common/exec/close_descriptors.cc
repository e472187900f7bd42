#include "common/exec/close_descriptors.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace jc {

namespace {

std::atomic<bool> close_range_works{true};

// A directory entry as getdents64 gives it.
struct Dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

// Every descriptor from 3 up but those `sorted` holds (`n` of them, ascending), one by one,
// as /proc/self/fd lists them: for a kernel without close_range (before 5.9). Raw system
// calls and a buffer on the stack: async-signal-safe, no allocation.
void CloseListedBut(const int* sorted, size_t n) {
  const long dir = syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buf[4096];
  long got;
  while ((got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
    for (long at = 0; at < got;) {
      const Dirent64* d = reinterpret_cast<const Dirent64*>(buf + at);
      at += d->d_reclen;
      long fd = 0;
      const char* c = d->d_name;
      if (*c < '0' || *c > '9') continue;  // "." and ".."
      for (; *c >= '0' && *c <= '9'; ++c) fd = fd * 10 + (*c - '0');
      if (fd < 3 || fd == dir) continue;
      bool kept = false;
      for (size_t i = 0; i < n && !kept; ++i) kept = sorted[i] == fd;
      if (!kept) syscall(SYS_close, fd);  // a listing goes on by number: closing behind it is safe
    }
  }
  syscall(SYS_close, dir);
}

// Every descriptor from 3 up but the `count` in `keep`: the kept ones from 3 up, in order (a
// few: an insertion sort), and the gaps closed.
void CloseAboveStandardBut(const int* keep, size_t count) {
  int sorted[kMaxKeptDescriptors];
  size_t n = 0;
  for (size_t i = 0; i < count && n < kMaxKeptDescriptors; ++i) {
    if (keep[i] < 3) continue;
    size_t at = n++;
    for (; at > 0 && sorted[at - 1] > keep[i]; --at) sorted[at] = sorted[at - 1];
    sorted[at] = keep[i];
  }
  if (!close_range_works.load(std::memory_order_relaxed)) {
    CloseListedBut(sorted, n);
    return;
  }
  unsigned from = 3;
  bool closed = true;
  for (size_t i = 0; i < n; ++i) {
    const unsigned fd = static_cast<unsigned>(sorted[i]);
    if (fd > from) closed = syscall(SYS_close_range, from, fd - 1, 0U) == 0 && closed;
    if (fd + 1 > from) from = fd + 1;
  }
  closed = syscall(SYS_close_range, from, ~0U, 0U) == 0 && closed;
  if (!closed) CloseListedBut(sorted, n);  // a kernel without close_range (before 5.9)
}

// stdin, stdout and stderr but those `keep` names, pointed at /dev/null.
void DetachStandardDescriptors(const int* keep, size_t count) {
  bool replace[3] = {true, true, true};
  for (size_t i = 0; i < count; ++i) {
    if (keep[i] >= 0 && keep[i] < 3) replace[keep[i]] = false;
  }
  if (!replace[0] && !replace[1] && !replace[2]) return;
  const long null = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) return;
  // dup3 (no dup2 on every architecture) leaves the copies open across exec.
  for (int fd = 0; fd < 3; ++fd) {
    if (replace[fd] && fd != null) syscall(SYS_dup3, null, fd, 0);
  }
  if (null >= 3) {
    syscall(SYS_close, null);
  } else {
    syscall(SYS_fcntl, null, F_SETFD, 0);  // it took a free one of the three: it stands for it
  }
}

}  // namespace

void UseCloseRange(bool use) { close_range_works.store(use, std::memory_order_relaxed); }

void CloseDescriptorsBut(const int* keep, size_t count) {
  CloseAboveStandardBut(keep, count);
  DetachStandardDescriptors(keep, count);
}

}  // namespace jc
