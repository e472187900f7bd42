#include "common/exec/exec_stream.h"

#include "absl/strings/str_cat.h"

namespace jc::exec_stream {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}
uint32_t GetU32(absl::string_view s) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

}  // namespace

std::string Encode(Type type, absl::string_view payload) {
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  out.push_back(static_cast<char>(type));
  PutU32(out, static_cast<uint32_t>(payload.size()));
  out.append(payload.data(), payload.size());
  return out;
}

std::string EncodeData(Type type, absl::string_view data) {
  std::string out;
  for (size_t at = 0; at < data.size(); at += kMaxPayload) out += Encode(type, data.substr(at, kMaxPayload));
  return out;
}

std::string EncodeResize(int rows, int cols) {
  auto clamp = [](int v) { return static_cast<uint32_t>(v < 0 ? 0 : v > 0xffff ? 0xffff : v); };
  std::string payload;
  PutU32(payload, (clamp(rows) << 16) | clamp(cols));
  return Encode(Type::kResize, payload);
}

std::string EncodeExit(int status) {
  std::string payload;
  PutU32(payload, static_cast<uint32_t>(status));
  return Encode(Type::kExit, payload);
}

std::optional<std::pair<int, int>> ParseResize(absl::string_view payload) {
  if (payload.size() != 4) return std::nullopt;
  uint32_t v = GetU32(payload);
  int rows = static_cast<int>(v >> 16), cols = static_cast<int>(v & 0xffff);
  if (rows == 0 || cols == 0) return std::nullopt;
  return std::make_pair(rows, cols);
}

std::optional<int> ParseExit(absl::string_view payload) {
  if (payload.size() != 4) return std::nullopt;
  return static_cast<int>(static_cast<int32_t>(GetU32(payload)));
}

std::optional<Frame> Decoder::Next() {
  // Frames are read from `start_` on; what they took is dropped at once only when it is
  // most of the buffer (a flood of empty frames costs no copy of the rest each).
  if (start_ > 0 && start_ * 2 >= buffer_.size()) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  const absl::string_view rest = absl::string_view(buffer_).substr(start_);
  if (!error_.ok() || rest.size() < kHeaderBytes) return std::nullopt;
  const uint8_t type = static_cast<uint8_t>(rest[0]);
  const uint32_t length = GetU32(rest.substr(1, 4));
  if (type > static_cast<uint8_t>(Type::kExit)) {
    error_ = absl::InvalidArgumentError(absl::StrCat("the exec stream has a frame of unknown type ", type));
    return std::nullopt;
  }
  if (length > kMaxPayload) {
    error_ = absl::InvalidArgumentError(
        absl::StrCat("the exec stream has a frame of ", length, " bytes; the most is ", kMaxPayload));
    return std::nullopt;
  }
  if (rest.size() < kHeaderBytes + length) return std::nullopt;
  Frame out{static_cast<Type>(type), std::string(rest.substr(kHeaderBytes, length))};
  start_ += kHeaderBytes + length;
  return out;
}

}  // namespace jc::exec_stream
