#include "common/auth/adapter_proof.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/auth/api_token.h"
#include "common/hmac_sha256.h"

namespace jc::auth {
namespace {

constexpr absl::string_view kKeyPrefix = "jcak_";
constexpr absl::string_view kProofLabel = "jointcloud-adapter-proof-v1";
constexpr size_t kMaxKeyFileBytes = 4096;

}  // namespace

absl::StatusOr<std::string> NewAdapterKey() {
  auto secret = RandomSecret(32);
  if (!secret.ok()) return secret.status();
  return absl::StrCat(kKeyPrefix, *secret);
}

absl::StatusOr<std::string> NewAdapterChallenge() {
  // RandomSecret answers base64; the challenge is the raw bytes' encoding, which is as
  // unpredictable and keeps the proto field printable in logs.
  return RandomSecret(kAdapterChallengeBytes);
}

std::string AdapterProof(absl::string_view key, absl::string_view center_id, absl::string_view challenge) {
  // The label and the NULs keep the three parts apart: no (center, challenge) pair's
  // message is another's.
  std::string message = absl::StrCat(kProofLabel, absl::string_view("\0", 1), center_id,
                                     absl::string_view("\0", 1), challenge);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  size = HmacSha256(key, message, mac);
  return std::string(reinterpret_cast<const char*>(mac), size);
}

bool AdapterProofMatches(const AdapterKeys& keys, absl::Time now, absl::string_view center_id,
                         absl::string_view challenge, absl::string_view proof) {
  if (proof.empty() || challenge.empty()) return false;
  bool matches = !keys.current.empty() && ConstantTimeEquals(AdapterProof(keys.current, center_id, challenge), proof);
  if (!keys.previous.empty() && now < keys.previous_until) {
    matches = ConstantTimeEquals(AdapterProof(keys.previous, center_id, challenge), proof) || matches;
  }
  return matches;
}

absl::StatusOr<std::string> ReadAdapterKeyFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("center key file ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  std::string content;
  absl::Status status;
  if (fstat(fd, &st) != 0) {
    status = absl::FailedPreconditionError(absl::StrCat("center key file ", path, ": ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    status = absl::FailedPreconditionError(absl::StrCat("center key file ", path, " is not a regular file"));
  } else if (st.st_uid != geteuid()) {
    status = absl::FailedPreconditionError(
        absl::StrCat("center key file ", path, " belongs to uid ", st.st_uid, ", not to the adapter's (", geteuid(),
                     "): another account could replace the key"));
  } else if ((st.st_mode & 077) != 0) {
    status = absl::FailedPreconditionError(absl::StrCat("center key file ", path,
                                                        " is readable or writable by other accounts: chmod 600 it"));
  } else {
    char buf[kMaxKeyFileBytes + 1];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      status = absl::FailedPreconditionError(absl::StrCat("center key file ", path, ": ", std::strerror(errno)));
    } else {
      content.assign(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (!status.ok()) return status;
  absl::string_view key = absl::StripAsciiWhitespace(content);
  if (!absl::StartsWith(key, kKeyPrefix) || key.size() < kKeyPrefix.size() + 40 ||
      key.find_first_of(" \t\r\n") != absl::string_view::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        "center key file ", path, " holds no adapter key (one line, jcak_..., as IssueAdapterKey answers it)"));
  }
  return std::string(key);
}

}  // namespace jc::auth
