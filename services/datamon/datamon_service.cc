#include "services/datamon/datamon_service.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/auth/auth_interceptor.h"
#include "common/auth/project_scope.h"
#include "common/status_macros.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/datamon.grpc.pb.h"

namespace jc::datamon {
namespace {

using grpc::ServerContext;
using grpc::Status;

class DatamonService final : public v1::DatamonService::Service {
 public:
  explicit DatamonService(Datamon* datamon) : d_(datamon) {}

  // Datasets belong to a project, or to the whole federation (SPEC C6): checked on the
  // dataset as stored; another project's dataset is "not found". The uploader is the caller.
  Status CreateDataset(ServerContext* ctx, const v1::CreateDatasetRequest* req,
                       v1::Dataset* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    v1::Dataset dataset = req->dataset();
    if (absl::Status s = auth::AdmitProjectObject(caller, dataset.mutable_project(), "a dataset"); !s.ok()) {
      return ToGrpcStatus(s);
    }
    if (dataset.created_user().empty()) dataset.set_created_user(caller.name);
    if (absl::Status s = CheckUploader(caller, dataset.created_user()); !s.ok()) return ToGrpcStatus(s);
    if (caller_decision_.audit != nullptr) caller_decision_.audit->record.set_project(dataset.project());
    return Reply(d_->Create(std::move(dataset), caller.IsAdmin()), resp);
  }
  Status GetDataset(ServerContext* ctx, const v1::GetDatasetRequest* req, v1::Dataset* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Visible(caller, req->key(), auth::ProjectRole::kViewer), resp);
  }
  Status UpdateDataset(ServerContext* ctx, const v1::UpdateDatasetRequest* req,
                       v1::Dataset* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    v1::DatasetKey key;
    key.set_data_name(req->dataset().data_name());
    key.set_data_version(req->dataset().data_version());
    key.set_project(req->dataset().project());
    auto stored = Visible(caller, key, auth::ProjectRole::kMember);
    if (!stored.ok()) return ToGrpcStatus(stored.status());
    v1::Dataset patch = req->dataset();
    patch.set_project(stored->project());  // the one addressed; a project never changes
    bool names_uploader = req->update_mask().paths().empty();
    for (const auto& path : req->update_mask().paths()) names_uploader |= path == "created_user";
    if (names_uploader && !caller.IsAdmin()) {
      // A replacement that leaves the uploader out keeps it; only admins change it.
      if (patch.created_user().empty()) patch.set_created_user(stored->created_user());
      if (absl::Status s = CheckUploader(caller, patch.created_user(), stored->created_user()); !s.ok()) {
        return ToGrpcStatus(s);
      }
    }
    if (caller_decision_.audit != nullptr) caller_decision_.audit->record.set_project(stored->project());
    return Reply(d_->Update(patch, req->update_mask(), caller.IsAdmin()), resp);
  }
  Status DeleteDataset(ServerContext* ctx, const v1::DeleteDatasetRequest* req,
                       google::protobuf::Empty*) override {
    JC_GRPC_CALLER(caller, ctx);
    auto stored = Visible(caller, req->key(), auth::ProjectRole::kMember);
    if (!stored.ok()) return ToGrpcStatus(stored.status());
    if (caller_decision_.audit != nullptr) caller_decision_.audit->record.set_project(stored->project());
    v1::DatasetKey key = req->key();
    key.set_project(stored->project().empty() ? "-" : stored->project());
    return ToGrpcStatus(d_->Delete(key));
  }
  Status ListDatasets(ServerContext* ctx, const v1::ListDatasetsRequest* req,
                      v1::ListDatasetsResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(d_->List(*req, auth::VisibleProjects(caller)), resp);
  }
  Status SelectMigrationSources(ServerContext* ctx, const v1::SelectMigrationSourcesRequest* req,
                                v1::SelectMigrationSourcesResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    auto visible = Visible(caller, req->key(), auth::ProjectRole::kViewer);
    if (!visible.ok()) return ToGrpcStatus(visible.status());
    v1::SelectMigrationSourcesRequest resolved = *req;
    resolved.mutable_key()->set_project(visible->project().empty() ? "-" : visible->project());
    return Reply(d_->SelectSources(resolved), resp);
  }

 private:
  // The dataset as stored, if the caller's role in its project is at least `need`. Names
  // and versions are unique within a project (issue 44): key.project names it ("-": the
  // federation's); left empty, the caller's projects' dataset, else the federation's —
  // what a job of the caller's project would use. Another project's is "not found", as
  // one that does not exist; a caller who sees it in several projects is asked to name one.
  absl::StatusOr<v1::Dataset> Visible(const auth::Principal& caller, const v1::DatasetKey& key,
                                      auth::ProjectRole need) {
    const std::string not_found = absl::StrCat("dataset ", key.data_name(), ":", key.data_version(), " not found");
    v1::Dataset dataset;
    if (!key.project().empty()) {
      auto found = d_->Get(key);
      if (!found.ok()) return found.status();
      dataset = std::move(*found);
    } else {
      JC_ASSIGN_OR_RETURN(std::vector<v1::Dataset> all, d_->Find(key));
      JC_ASSIGN_OR_RETURN(dataset,
                          auth::PickVisible(caller, std::move(all),
                                            absl::StrCat("dataset ", key.data_name(), ":", key.data_version()), not_found));
    }
    JC_RETURN_IF_ERROR(auth::CheckProjectObject(caller, dataset.project(), need, not_found));
    return dataset;
  }

  // Table 6's created_user is who uploaded the data: the caller, unless an admin says
  // otherwise (or it is the one already recorded).
  static absl::Status CheckUploader(const auth::Principal& caller, const std::string& named,
                                    const std::string& recorded = "") {
    if (caller.IsAdmin() || named == caller.name || (!recorded.empty() && named == recorded)) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat("created_user \"", named, "\" is not the caller (\"", caller.name,
                                                   "\"): a dataset's uploader is whoever registers it; leave "
                                                   "created_user out"));
  }

  Datamon* d_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeDatamonService(Datamon* datamon) {
  return std::make_unique<DatamonService>(datamon);
}

}  // namespace jc::datamon
