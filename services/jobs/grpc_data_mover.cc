// The job manager's gRPC edge toward datamon, for staging.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "jointcloud/v1/catalog.grpc.pb.h"
#include "jointcloud/v1/datamon.grpc.pb.h"
#include "services/datamon/source_selection.h"
#include "services/jobs/data_mover.h"

namespace jc::jobs {
namespace {

namespace v1 = ::jointcloud::v1;

class GrpcDataMover final : public DataMover {
 public:
  GrpcDataMover(std::function<std::shared_ptr<grpc::Channel>()> source,
                std::function<std::shared_ptr<grpc::Channel>()> catalog)
      : source_(std::move(source)), catalog_source_(std::move(catalog)) {}

  absl::StatusOr<std::vector<std::string>> Sources(const std::string& name, const std::string& version,
                                                   const std::string& project, const std::string& target) override {
    v1::SelectMigrationSourcesRequest req;
    req.mutable_key()->set_data_name(name);
    req.mutable_key()->set_data_version(version);
    req.mutable_key()->set_project(project.empty() ? "-" : project);
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

  absl::StatusOr<std::string> Project(const std::string& name, const std::string& version,
                                      const std::string& job_project) override {
    // The job's project's dataset, else the federation's.
    for (const std::string& project : {job_project, std::string("-")}) {
      if (project.empty()) continue;
      v1::GetDatasetRequest get;
      get.mutable_key()->set_data_name(name);
      get.mutable_key()->set_data_version(version);
      get.mutable_key()->set_project(project);
      v1::Dataset dataset;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      grpc::Status s = Stub()->GetDataset(&ctx, get, &dataset);
      if (s.error_code() == grpc::StatusCode::NOT_FOUND && project != "-") continue;
      if (!s.ok()) return FromGrpcStatus(s);
      return dataset.project();
    }
    return absl::NotFoundError(absl::StrCat("dataset ", name, ":", version, " not found"));
  }

  absl::Status AddLocation(const std::string& name, const std::string& version, const std::string& project,
                           const std::string& center,
                           const std::string& url, const Transfer& transfer) override {
    v1::GetDatasetRequest get;
    get.mutable_key()->set_data_name(name);
    get.mutable_key()->set_data_version(version);
    get.mutable_key()->set_project(project.empty() ? "-" : project);
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

  absl::StatusOr<ImageCopies> Image(const std::string& project, const std::string& image_id) override {
    absl::StatusOr<v1::Image> found = absl::NotFoundError("");
    if (!project.empty()) found = GetImage(project, image_id);
    if (absl::IsNotFound(found.status())) found = GetImage("", image_id);
    JC_RETURN_IF_ERROR(found.status());
    const v1::Image& image = *found;
    ImageCopies out{image.name(), {image.ai_center_id()}, image.project()};
    out.centers.insert(out.centers.end(), image.present_at().begin(), image.present_at().end());
    return out;
  }

  absl::Status AddImageCenter(const std::string& project, const std::string& image_id,
                              const std::string& center) override {
    JC_ASSIGN_OR_RETURN(v1::Image image, GetImage(project, image_id));
    if (image.ai_center_id() == center ||
        std::find(image.present_at().begin(), image.present_at().end(), center) != image.present_at().end()) {
      return absl::OkStatus();
    }
    v1::UpdateImageRequest update;
    update.mutable_image()->set_image_id(image_id);
    update.mutable_image()->set_project(project.empty() ? "-" : project);
    *update.mutable_image()->mutable_present_at() = image.present_at();
    update.mutable_image()->add_present_at(center);
    update.mutable_update_mask()->add_paths("present_at");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::Image out;
    grpc::Status s = Catalog()->UpdateImage(&ctx, update, &out);
    return s.ok() ? absl::OkStatus() : FromGrpcStatus(s);
  }

 private:
  // `project`'s image `image_id` ('': the federation's), exactly that one.
  absl::StatusOr<v1::Image> GetImage(const std::string& project, const std::string& image_id) {
    v1::GetImageRequest get;
    get.set_image_id(image_id);
    get.set_project(project.empty() ? "-" : project);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::Image image;
    grpc::Status s = Catalog()->GetImage(&ctx, get, &image);
    if (!s.ok()) return FromGrpcStatus(s);
    return image;
  }
  v1::CatalogService::Stub* Catalog() {
    std::call_once(catalog_once_, [this] { catalog_ = v1::CatalogService::NewStub(catalog_source_()); });
    return catalog_.get();
  }
  v1::DatamonService::Stub* Stub() {
    std::call_once(once_, [this] { stub_ = v1::DatamonService::NewStub(source_()); });
    return stub_.get();
  }
  std::function<std::shared_ptr<grpc::Channel>()> source_;
  std::once_flag once_;
  std::unique_ptr<v1::DatamonService::Stub> stub_;
  std::function<std::shared_ptr<grpc::Channel>()> catalog_source_;
  std::once_flag catalog_once_;
  std::unique_ptr<v1::CatalogService::Stub> catalog_;
};

}  // namespace

std::unique_ptr<DataMover> MakeGrpcDataMover(std::function<std::shared_ptr<grpc::Channel>()> datamon,
                                             std::function<std::shared_ptr<grpc::Channel>()> catalog) {
  return std::make_unique<GrpcDataMover>(std::move(datamon), std::move(catalog));
}

}  // namespace jc::jobs
