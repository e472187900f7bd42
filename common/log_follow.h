#pragma once

// A server-streaming gRPC call that sends a log file's bytes from an offset, and with
// `follow` keeps sending what is appended until the writer of the log has ended: the
// adapter's ReadLog and the nexec master's (issue 32 item 4: one copy of the loop).

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"

namespace jc {

struct LogFollow {
  // Up to a chunk's worth of bytes at `offset` (empty: none there yet).
  std::function<absl::StatusOr<std::string>(int64_t offset)> read;
  // Whether what writes the log has ended (asked when there is nothing more to read).
  std::function<absl::StatusOr<bool>()> ended;
  // How long to wait before reading again while it runs.
  std::function<absl::Duration()> poll = [] { return absl::Milliseconds(200); };
};

// Chunk: a message with set_offset(int64) and set_data(string) (LogChunk of either API).
// Once the writer has ended, one more read takes what it wrote last; then the call ends.
template <typename Chunk>
grpc::Status FollowLog(grpc::ServerContext* ctx, int64_t offset, bool follow, const LogFollow& log,
                       grpc::ServerWriter<Chunk>* writer) {
  bool ended = false;
  while (!ctx->IsCancelled()) {
    auto data = log.read(offset);
    if (!data.ok()) return ToGrpcStatus(data.status());
    if (!data->empty()) {
      Chunk chunk;
      chunk.set_offset(offset);
      chunk.set_data(*data);
      if (!writer->Write(chunk)) return grpc::Status::OK;
      offset += static_cast<int64_t>(data->size());
      continue;
    }
    if (!follow || ended) return grpc::Status::OK;
    auto done = log.ended();
    if (!done.ok()) return ToGrpcStatus(done.status());
    ended = *done;
    if (!ended) std::this_thread::sleep_for(absl::ToChronoNanoseconds(log.poll()));
  }
  return grpc::Status::OK;
}

}  // namespace jc
