#pragma once

// Thread settings for every synchronous gRPC server. gRPC's defaults keep at most two
// idle polling threads: under a few concurrent calls, the thread that finishes a call
// exits and the next call starts a new one, a thread per request (measured: 5% of the
// control plane's CPU in benchmark (b)). Here finished threads stay as pollers up to
// `max_threads`, which also bounds how many calls run at once (a burst queues).

#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>

namespace jc {

inline void ConfigureServerThreads(grpc::ServerBuilder& builder, const std::string& name, int max_threads) {
  grpc::ResourceQuota quota(name);
  quota.SetMaxThreads(max_threads);
  builder.SetResourceQuota(quota);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, max_threads);
}

}  // namespace jc
