#include "common/grpc_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>

#include <chrono>

namespace jc {
namespace {

using grpc::experimental::InterceptionHookPoints;

struct Families {
  prometheus::Family<prometheus::Counter>* handled;
  prometheus::Family<prometheus::Histogram>* seconds;
};

const char* CodeName(grpc::StatusCode code) {
  static const char* names[] = {"OK",        "CANCELLED",        "UNKNOWN",
                                "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                                "ALREADY_EXISTS",   "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                "FAILED_PRECONDITION", "ABORTED",       "OUT_OF_RANGE",
                                "UNIMPLEMENTED",    "INTERNAL",          "UNAVAILABLE",
                                "DATA_LOSS",        "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? names[i] : "UNKNOWN";
}

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(const char* method, const Families* families)
      : method_(method != nullptr ? method : ""),
        families_(families),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status status = methods->GetSendStatus();
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      families_->handled->Add({{"method", method_}, {"code", CodeName(status.error_code())}})
          .Increment();
      families_->seconds
          ->Add({{"method", method_}},
                prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                        0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1})
          .Observe(seconds);
    }
    methods->Proceed();
  }

 private:
  std::string method_;
  const Families* families_;
  std::chrono::steady_clock::time_point start_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(std::shared_ptr<prometheus::Registry> registry) : registry_(std::move(registry)) {
    families_.handled = &prometheus::BuildCounter()
                             .Name("jc_grpc_server_handled_total")
                             .Help("gRPC calls completed, by method and status code")
                             .Register(*registry_);
    families_.seconds = &prometheus::BuildHistogram()
                             .Name("jc_grpc_server_handling_seconds")
                             .Help("gRPC call handling time, by method")
                             .Register(*registry_);
  }

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(info->method(), &families_);
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  Families families_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeGrpcMetricsInterceptor(
    std::shared_ptr<prometheus::Registry> registry) {
  return std::make_unique<Factory>(std::move(registry));
}

}  // namespace jc
