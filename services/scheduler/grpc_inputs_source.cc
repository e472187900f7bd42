// The scheduler's gRPC edge toward the registry, catalog and datamon.
#include "services/scheduler/grpc_inputs_source.h"

#include <grpcpp/grpcpp.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "jointcloud/v1/catalog.grpc.pb.h"
#include "jointcloud/v1/datamon.grpc.pb.h"
#include "jointcloud/v1/registry.grpc.pb.h"

namespace jc::scheduler {
namespace {

template <typename Stub, typename Req, typename Resp>
absl::Status Call(Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*), const Req& req,
                  Resp* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = (stub->*method)(&ctx, req, resp);
  return s.ok() ? absl::OkStatus() : FromGrpcStatus(s);
}

// Every page of a paged List call, appended to `out` by `take`.
template <typename Stub, typename Req, typename Resp, typename Take>
absl::Status AllPages(Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*), Req req,
                      Take take) {
  req.set_page_size(1000);
  do {
    Resp page;
    JC_RETURN_IF_ERROR(Call(stub, method, req, &page));
    take(page);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  return absl::OkStatus();
}

class GrpcInputsSource final : public InputsSource {
 public:
  GrpcInputsSource(ChannelSource registry, ChannelSource catalog, ChannelSource datamon, monitor::Monitor* monitor)
      : registry_source_(std::move(registry)),
        catalog_source_(std::move(catalog)),
        datamon_source_(std::move(datamon)),
        monitor_(monitor) {}

  absl::StatusOr<SchedulerInputs> Fetch() override {
    std::call_once(once_, [this] {
      registry_ = v1::RegistryService::NewStub(registry_source_());
      catalog_ = v1::CatalogService::NewStub(catalog_source_());
      datamon_ = v1::DatamonService::NewStub(datamon_source_());
    });
    SchedulerInputs in;
    JC_RETURN_IF_ERROR(AllPages(registry_.get(), &v1::RegistryService::Stub::ListCenters, v1::ListCentersRequest(),
                                [&](auto& p) { in.centers.insert(in.centers.end(), p.centers().begin(), p.centers().end()); }));
    JC_RETURN_IF_ERROR(AllPages(catalog_.get(), &v1::CatalogService::Stub::ListResourceSpecs,
                                v1::ListResourceSpecsRequest(),
                                [&](auto& p) { in.specs.insert(in.specs.end(), p.specs().begin(), p.specs().end()); }));
    for (const auto& spec : in.specs) {
      v1::ListSpecCenterOffersRequest req;
      req.set_resource_spec_id(spec.resource_spec_id());
      v1::ListSpecCenterOffersResponse offers;
      JC_RETURN_IF_ERROR(Call(catalog_.get(), &v1::CatalogService::Stub::ListSpecCenterOffers, req, &offers));
      in.offers.insert(in.offers.end(), offers.offers().begin(), offers.offers().end());
    }
    JC_RETURN_IF_ERROR(AllPages(catalog_.get(), &v1::CatalogService::Stub::ListImages, v1::ListImagesRequest(),
                                [&](auto& p) { in.images.insert(in.images.end(), p.images().begin(), p.images().end()); }));
    JC_RETURN_IF_ERROR(AllPages(
        datamon_.get(), &v1::DatamonService::Stub::ListDatasets, v1::ListDatasetsRequest(),
        [&](auto& p) { in.datasets.insert(in.datasets.end(), p.datasets().begin(), p.datasets().end()); }));
    if (monitor_ != nullptr) {
      in.observations = monitor_->Observations();
      in.monitored = true;
    }
    return in;
  }

 private:
  ChannelSource registry_source_, catalog_source_, datamon_source_;
  monitor::Monitor* monitor_;
  std::once_flag once_;
  std::unique_ptr<v1::RegistryService::Stub> registry_;
  std::unique_ptr<v1::CatalogService::Stub> catalog_;
  std::unique_ptr<v1::DatamonService::Stub> datamon_;
};

}  // namespace

std::unique_ptr<InputsSource> MakeGrpcInputsSource(ChannelSource registry, ChannelSource catalog,
                                                   ChannelSource datamon, monitor::Monitor* monitor) {
  return std::make_unique<GrpcInputsSource>(std::move(registry), std::move(catalog), std::move(datamon), monitor);
}

}  // namespace jc::scheduler
