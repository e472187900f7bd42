// The monitor's gRPC edge toward adapters.
#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "jointcloud/adapter/v1/adapter.grpc.pb.h"
#include "services/monitor/adapter_probe.h"

namespace jc::monitor {
namespace {

class GrpcAdapterProbe final : public AdapterProbe {
 public:
  absl::StatusOr<apb::Usage> GetUsage(const std::string& address, absl::Duration timeout) override {
    apb::Usage usage;
    grpc::Status s = Call(address, timeout, [&](apb::Adapter::Stub* stub, grpc::ClientContext* ctx) {
      return stub->GetUsage(ctx, apb::GetUsageRequest(), &usage);
    });
    if (!s.ok()) return Failure(address, s);
    return usage;
  }
  absl::StatusOr<apb::CenterInfo> GetCenterInfo(const std::string& address, absl::Duration timeout) override {
    apb::CenterInfo info;
    grpc::Status s = Call(address, timeout, [&](apb::Adapter::Stub* stub, grpc::ClientContext* ctx) {
      return stub->GetCenterInfo(ctx, apb::GetCenterInfoRequest(), &info);
    });
    if (!s.ok()) return Failure(address, s);
    return info;
  }

 private:
  template <typename Fn>
  grpc::Status Call(const std::string& address, absl::Duration timeout, Fn fn) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    return fn(Stub(address), &ctx);
  }
  static absl::Status Failure(const std::string& address, const grpc::Status& s) {
    absl::Status st = FromGrpcStatus(s);
    return absl::Status(st.code(), absl::StrCat("adapter at ", address, ": ", st.message()));
  }
  apb::Adapter::Stub* Stub(const std::string& address) {
    absl::MutexLock lock(&mu_);
    auto& stub = stubs_[address];
    if (stub == nullptr) {
      stub = apb::Adapter::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    }
    return stub.get();
  }

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<apb::Adapter::Stub>> stubs_;
};

}  // namespace

std::unique_ptr<AdapterProbe> MakeGrpcAdapterProbe() { return std::make_unique<GrpcAdapterProbe>(); }

}  // namespace jc::monitor
