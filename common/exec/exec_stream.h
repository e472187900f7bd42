#pragma once

// The exec stream (SPEC A17): how a command run in a replica (`jcctl job exec`) and its
// caller talk over one byte stream — jcctl to the endpoint listener after its 101, the
// listener's tunnel to the center's adapter (TunnelFrame.data) — so that the control plane
// in between passes bytes and reads none of them. Each frame is a type byte, a 4-byte
// big-endian length and that many bytes (at most kMaxPayload).
//
//   toward the command:  stdin (bytes), resize (rows, cols: two 16-bit big-endian
//                        numbers), stdin_end (no more input; a terminal gets ^D)
//   from the command:    stdout, stderr (bytes), exit (a 32-bit big-endian status: the
//                        exit code, or 128 + N when signal N ended it), sent last

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace jc::exec_stream {

enum class Type : uint8_t {
  kStdin = 0,
  kStdout = 1,
  kStderr = 2,
  kResize = 3,
  kStdinEnd = 4,
  kExit = 5,
};

inline constexpr size_t kMaxPayload = 64 << 10;
inline constexpr size_t kHeaderBytes = 5;

struct Frame {
  Type type;
  std::string payload;
};

// One frame; a payload over kMaxPayload must be cut by the caller (Encode cuts none).
std::string Encode(Type type, absl::string_view payload);
// `data` in as many stdin/stdout/stderr frames as it takes.
std::string EncodeData(Type type, absl::string_view data);
std::string EncodeResize(int rows, int cols);
std::string EncodeExit(int status);

// Rows and columns of a resize frame's payload; nullopt when it is not 4 bytes or either is 0.
std::optional<std::pair<int, int>> ParseResize(absl::string_view payload);
// The status of an exit frame's payload; nullopt when it is not 4 bytes.
std::optional<int> ParseExit(absl::string_view payload);

// The command a request may carry (`jcctl job exec`): argv of at most kMaxArgs arguments,
// kMaxCommandBytes in all, none holding a NUL byte, the first not empty. Checked where the
// request enters (JobService.OpenEndpoint) and again by the adapter.
inline constexpr size_t kMaxArgs = 256;
inline constexpr size_t kMaxCommandBytes = 64 << 10;
template <typename Strings>
absl::Status CheckCommand(const Strings& command) {
  if (command.empty() || command.begin()->empty()) {
    return absl::InvalidArgumentError("exec.command: the command to run, its first argument not empty");
  }
  if (static_cast<size_t>(command.size()) > kMaxArgs) {
    return absl::InvalidArgumentError(
        absl::StrCat("exec.command: at most ", kMaxArgs, " arguments, not ", command.size()));
  }
  size_t bytes = 0;
  for (const auto& arg : command) {
    if (arg.find('\0') != std::string::npos) return absl::InvalidArgumentError("exec.command: an argument holds a NUL byte");
    bytes += arg.size();
  }
  if (bytes > kMaxCommandBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("exec.command: the arguments take ", bytes, " bytes; the most is ", kMaxCommandBytes));
  }
  return absl::OkStatus();
}

// Frames out of a byte stream that arrives in pieces.
class Decoder {
 public:
  // Once the stream is broken nothing more is kept (an attacker helper's finding: a frame
  // of an unknown type, then gigabytes, grew a root agent's memory without end).
  void Feed(absl::string_view data) {
    if (error_.ok()) buffer_.append(data.data(), data.size());
  }
  // The next whole frame; nullopt when more bytes are needed, or the stream is broken
  // (broken() says; InvalidArgument in error()).
  std::optional<Frame> Next();
  bool broken() const { return !error_.ok(); }
  const absl::Status& error() const { return error_; }
  size_t buffered() const { return buffer_.size() - start_; }

 private:
  std::string buffer_;
  size_t start_ = 0;  // where the next frame begins in buffer_
  absl::Status error_;
};

}  // namespace jc::exec_stream
