#pragma once

// The adapter's end of a tunnel to a replica's port (SPEC A17, adapter.proto TunnelFrame):
// a TCP connection from the adapter's host to the endpoint, and the bytes pumped between it
// and the gRPC stream until either side ends.

#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jointcloud/adapter/v1/adapter.pb.h"

namespace jc::adapter {

// A connected TCP socket to host:port within `deadline`; UNAVAILABLE naming the endpoint
// when nothing answers there.
absl::StatusOr<int> DialEndpoint(const std::string& host, int port, absl::Duration deadline);

// Says the endpoint is connected (a frame with `connected`), then pumps `fd` (which it
// closes) and `stream` both ways: the stream's frames into the socket on
// this thread, the socket's bytes into frames on another, until both directions closed or
// either failed (a cancelled call, a send not taken in 30 s, 15 minutes without a byte from
// the endpoint). Returns once both are done.
void PumpTunnel(int fd, grpc::ServerContext* ctx,
                grpc::ServerReaderWriter<::jointcloud::adapter::v1::TunnelFrame,
                                         ::jointcloud::adapter::v1::TunnelFrame>* stream);

// Tunnels open at once; each holds a thread of the adapter's gRPC server for its life,
// on top of the threads its other calls have (run_adapter.cc), so that tunnels never
// starve them.
inline constexpr int kMaxOpenTunnels = 256;
inline constexpr int kAdapterCallThreads = 64;

// The most bytes a frame carries.
inline constexpr size_t kTunnelFrameBytes = 64 << 10;

}  // namespace jc::adapter
