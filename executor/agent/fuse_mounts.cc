#include "executor/agent/fuse_mounts.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace jc::nexec {
namespace {

bool TokenIs(const char* token, size_t size, const char* text) {
  const size_t n = std::strlen(text);
  return size == n && std::memcmp(token, text, n) == 0;
}

bool TokenStarts(const char* token, size_t size, const char* prefix) {
  const size_t n = std::strlen(prefix);
  return size >= n && std::memcmp(token, prefix, n) == 0;
}

// The decimal number `text[0..size)` when it is one, else -1.
long Number(const char* text, size_t size) {
  if (size == 0 || size > 18) return -1;
  long n = 0;
  for (size_t i = 0; i < size; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    n = n * 10 + (text[i] - '0');
  }
  return n;
}

ssize_t ReadSome(int fd, char* buf, size_t size) {
  ssize_t n;
  while ((n = read(fd, buf, size)) < 0 && errno == EINTR) {
  }
  return n;
}

}  // namespace

// A line: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS".
// Spaces inside a field are escaped (\040), so spaces separate fields; the super options are
// split at commas as well, so each option is a token of its own.
void MountInfoScan::Feed(const char* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    const char c = data[i];
    if (c == '\n') {
      EndLine();
      continue;
    }
    if (skip_ || found_) continue;
    const bool in_super_options = separator_field_ >= 0 && field_ == separator_field_ + 3;
    if (c == ' ') {
      EndToken(true);
    } else if (c == ',' && in_super_options) {
      EndToken(false);
    } else if (token_size_ < sizeof token_) {
      token_[token_size_++] = c;
    } else {
      token_long_ = true;
    }
  }
}

void MountInfoScan::EndToken(bool end_of_field) {
  const size_t size = token_long_ ? sizeof token_ + 1 : token_size_;  // a long token matches nothing
  if (field_ == 0) {
    if (Number(token_, size) != target_) skip_ = true;
  } else if (separator_field_ < 0) {
    if (field_ >= 6 && TokenIs(token_, size, "-")) separator_field_ = field_;
  } else if (field_ == separator_field_ + 1) {
    fuse_ = TokenIs(token_, size, "fuse") || TokenIs(token_, size, "fuseblk") || TokenStarts(token_, size, "fuse.") ||
            TokenStarts(token_, size, "fuseblk.");
    proc_ = TokenIs(token_, size, "proc");
  } else if (field_ == separator_field_ + 3 && TokenStarts(token_, size, "user_id=")) {
    owner_ = Number(token_ + 8, size - 8);
  }
  token_size_ = 0;
  token_long_ = false;
  if (end_of_field) ++field_;
}

void MountInfoScan::EndLine() {
  if (!skip_ && !found_ && (field_ > 0 || token_size_ > 0)) {
    EndToken(true);
    // The mount's line, read to its end.
    if (!skip_ && separator_field_ >= 0) found_ = true;
  }
  field_ = 0;
  skip_ = false;
  if (!found_) {
    separator_field_ = -1;
    fuse_ = false;
    proc_ = false;
    owner_ = -1;
  }
  token_size_ = 0;
  token_long_ = false;
}

MountInfoScan::Verdict MountInfoScan::Finish() {
  EndLine();
  if (!found_) return Verdict::kNotFound;
  if (proc_) return Verdict::kProc;
  if (!fuse_) return Verdict::kNotFuse;
  return owner_ == 0 ? Verdict::kFuseOfRoot : Verdict::kFuseOfAccount;
}

char* AppendDecimal(char* out, long n) {
  char digits[24];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0);
  while (count > 0) *out++ = digits[--count];
  return out;
}

long MountIdOf(int fd) {
  if (fd < 0) {
    errno = EBADF;
    return -1;
  }
  char path[64] = "/proc/self/fdinfo/";
  *AppendDecimal(path + std::strlen(path), fd) = '\0';
  const int info = open(path, O_RDONLY | O_CLOEXEC);
  if (info < 0) return -1;
  char text[1024];
  size_t size = 0;
  ssize_t n;
  while (size < sizeof text - 1 && (n = ReadSome(info, text + size, sizeof text - 1 - size)) > 0) {
    size += static_cast<size_t>(n);
  }
  close(info);
  text[size] = '\0';
  // "pos:\t0\nflags:\t...\nmnt_id:\t42\n..."
  const char* at = std::strstr(text, "mnt_id:");
  if (at == nullptr) {
    errno = ENOSYS;  // a kernel before 3.15
    return -1;
  }
  at += 7;
  while (*at == ' ' || *at == '\t') ++at;
  size_t digits = 0;
  while (at[digits] >= '0' && at[digits] <= '9') ++digits;
  const long id = Number(at, digits);
  if (id < 0) errno = EINVAL;
  return id;
}

int MountVerdictOf(int fd, MountInfoScan::Verdict* verdict) {
  const long id = MountIdOf(fd);
  if (id < 0) return -1;
  const int mounts = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (mounts < 0) return -1;
  MountInfoScan scan(id);
  char buf[4096];
  ssize_t n;
  while ((n = ReadSome(mounts, buf, sizeof buf)) > 0) scan.Feed(buf, static_cast<size_t>(n));
  const int err = errno;
  close(mounts);
  if (n < 0) {
    errno = err;
    return -1;
  }
  *verdict = scan.Finish();
  if (*verdict != MountInfoScan::Verdict::kNotFound) return 0;
  errno = ESTALE;  // its mount went while we looked
  return -1;
}


}  // namespace jc::nexec
