// The job manager's gRPC edge toward datamon, for staging.
#include <grpcpp/grpcpp.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/datamon.grpc.pb.h"
#include "services/datamon/source_selection.h"
#include "services/jobs/data_mover.h"

namespace jc::jobs {
namespace {

namespace v1 = ::jointcloud::v1;

class GrpcDataMover final : public DataMover {
 public:
  explicit GrpcDataMover(std::function<std::shared_ptr<grpc::Channel>()> source) : source_(std::move(source)) {}

  absl::StatusOr<std::vector<std::string>> Sources(const std::string& name, const std::string& version,
                                                   const std::string& target) override {
    v1::SelectMigrationSourcesRequest req;
    req.mutable_key()->set_data_name(name);
    req.mutable_key()->set_data_version(version);
    req.set_target_center_id(target);
    v1::SelectMigrationSourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status s = Stub()->SelectMigrationSources(&ctx, req, &resp);
    if (!s.ok()) return FromGrpcStatus(s);
    std::vector<std::string> urls;
    if (resp.target_has_data()) return urls;
    for (const auto& src : resp.sources()) urls.push_back(src.dataset_url());
    if (urls.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("dataset ", name, ":", version, " has no source that center ", target, " can read"));
    }
    return urls;
  }

  absl::Status AddLocation(const std::string& name, const std::string& version, const std::string& center,
                           const std::string& url, const Transfer& transfer) override {
    v1::GetDatasetRequest get;
    get.mutable_key()->set_data_name(name);
    get.mutable_key()->set_data_version(version);
    v1::Dataset dataset;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      grpc::Status s = Stub()->GetDataset(&ctx, get, &dataset);
      if (!s.ok()) return FromGrpcStatus(s);
    }
    bool changed = false;
    bool present = false;
    for (auto& loc : *dataset.mutable_location()) {
      present |= loc.ai_center_id() == center;
      if (!transfer.source_url.empty() && loc.dataset_url() == transfer.source_url) {
        datamon::RecordDownload(&loc, true, transfer.seconds);
        changed = true;
      }
      for (const auto& failed : transfer.failed_source_urls) {
        if (loc.dataset_url() == failed) {
          datamon::RecordDownload(&loc, false, 0);
          changed = true;
        }
      }
    }
    if (!present) {
      auto* loc = dataset.add_location();
      loc->set_ai_center_id(center);
      loc->set_dataset_url(url);
      loc->set_access("r");
      changed = true;
    }
    if (!changed) return absl::OkStatus();
    v1::UpdateDatasetRequest update;
    *update.mutable_dataset() = std::move(dataset);
    update.mutable_update_mask()->add_paths("location");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::Dataset out;
    grpc::Status s = Stub()->UpdateDataset(&ctx, update, &out);
    return s.ok() ? absl::OkStatus() : FromGrpcStatus(s);
  }

 private:
  v1::DatamonService::Stub* Stub() {
    std::call_once(once_, [this] { stub_ = v1::DatamonService::NewStub(source_()); });
    return stub_.get();
  }
  std::function<std::shared_ptr<grpc::Channel>()> source_;
  std::once_flag once_;
  std::unique_ptr<v1::DatamonService::Stub> stub_;
};

}  // namespace

std::unique_ptr<DataMover> MakeGrpcDataMover(std::function<std::shared_ptr<grpc::Channel>()> datamon) {
  return std::make_unique<GrpcDataMover>(std::move(datamon));
}

}  // namespace jc::jobs
