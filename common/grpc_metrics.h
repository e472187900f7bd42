#pragma once

// Server-side gRPC metrics for every service: calls handled by method and status code,
// and handling time by method, through a gRPC interceptor.

#include <memory>

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/registry.h>

namespace jc {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeGrpcMetricsInterceptor(
    std::shared_ptr<prometheus::Registry> registry);

}  // namespace jc
