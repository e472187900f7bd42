#include "services/catalog/catalog_service.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/auth/auth_interceptor.h"
#include "common/auth/project_scope.h"
#include "common/status_macros.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/catalog.grpc.pb.h"

namespace jc::catalog {
namespace {

using grpc::ServerContext;
using grpc::Status;

// A client generated before prices were decimals sends its price in the int32 field they
// had (ResourceSpec 5, SetSpecCenterPriceRequest 3): an unknown field now, which would be
// read as no price (0) and answered back to it unchanged (helper-52 F3). Refused instead.
Status OldPriceField(const google::protobuf::Message& m, int old_field) {
  const auto& unknown = m.GetReflection()->GetUnknownFields(m);
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (unknown.field(i).number() == old_field) {
      return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
          m.GetDescriptor()->name(), ".price: this client sends it as an integer (field ", old_field,
          "), which prices no longer are: they are exact decimals as text (\"12\", \"0.75\"); generate the "
          "client again from the current protos")));
    }
  }
  return Status::OK;
}

class CatalogService final : public v1::CatalogService::Service {
 public:
  explicit CatalogService(Catalog* catalog) : c_(catalog) {}

  Status CreateResourceSpec(ServerContext* ctx, const v1::CreateResourceSpecRequest* req,
                            v1::ResourceSpec* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (Status old = OldPriceField(req->spec(), 5); !old.ok()) return old;
    return Reply(c_->CreateSpec(req->spec()), resp);
  }
  Status GetResourceSpec(ServerContext* ctx, const v1::GetResourceSpecRequest* req,
                         v1::ResourceSpec* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(c_->GetSpec(req->resource_spec_id()), resp);
  }
  Status UpdateResourceSpec(ServerContext* ctx, const v1::UpdateResourceSpecRequest* req,
                            v1::ResourceSpec* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (Status old = OldPriceField(req->spec(), 5); !old.ok()) return old;
    return Reply(c_->UpdateSpec(req->spec(), req->update_mask()), resp);
  }
  Status DeleteResourceSpec(ServerContext* ctx, const v1::DeleteResourceSpecRequest* req,
                            google::protobuf::Empty*) override {
    JC_GRPC_CALLER(caller, ctx);
    return ToGrpcStatus(c_->DeleteSpec(req->resource_spec_id()));
  }
  Status ListResourceSpecs(ServerContext* ctx, const v1::ListResourceSpecsRequest* req,
                           v1::ListResourceSpecsResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(c_->ListSpecs(*req), resp);
  }
  Status SetSpecCenterPrice(ServerContext* ctx, const v1::SetSpecCenterPriceRequest* req,
                            v1::SpecCenterOffer* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (auto s = auth::NeedOperator(caller, req->ai_center_id(), "pricing a spec at a center"); !s.ok()) {
      return ToGrpcStatus(s);
    }
    if (Status old = OldPriceField(*req, 3); !old.ok()) return old;
    return Reply(c_->SetSpecCenterPrice(*req), resp);
  }
  Status ListSpecCenterOffers(ServerContext* ctx, const v1::ListSpecCenterOffersRequest* req,
                              v1::ListSpecCenterOffersResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(c_->ListOffers(*req), resp);
  }
  // Images belong to a project, or to the whole federation (SPEC C6): checked on the
  // image as stored; another project's image is "not found".
  Status CreateImage(ServerContext* ctx, const v1::CreateImageRequest* req, v1::Image* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    v1::Image image = req->image();
    if (absl::Status s = auth::AdmitProjectObject(caller, image.mutable_project(), "an image"); !s.ok()) {
      return ToGrpcStatus(s);
    }
    if (caller_decision_.audit != nullptr) caller_decision_.audit->record.set_project(image.project());
    // A registration may wait on a registry: it stops when the caller gives up (or the
    // server, stopping, cancels its calls).
    return Reply(c_->CreateImage(std::move(image), [ctx] { return ctx->IsCancelled(); }), resp);
  }
  Status GetImage(ServerContext* ctx, const v1::GetImageRequest* req, v1::Image* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Visible(caller, req->project(), req->image_id(), auth::ProjectRole::kViewer), resp);
  }
  Status UpdateImage(ServerContext* ctx, const v1::UpdateImageRequest* req, v1::Image* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    auto image = Visible(caller, req->image().project(), req->image().image_id(), auth::ProjectRole::kMember);
    if (!image.ok()) return ToGrpcStatus(image.status());
    if (caller_decision_.audit != nullptr) caller_decision_.audit->record.set_project(image->project());
    v1::UpdateImageRequest update = *req;
    update.mutable_image()->set_project(image->project());
    return Reply(c_->UpdateImage(update.image(), update.update_mask()), resp);
  }
  Status DeleteImage(ServerContext* ctx, const v1::DeleteImageRequest* req,
                     google::protobuf::Empty*) override {
    JC_GRPC_CALLER(caller, ctx);
    auto image = Visible(caller, req->project(), req->image_id(), auth::ProjectRole::kMember);
    if (!image.ok()) return ToGrpcStatus(image.status());
    if (caller_decision_.audit != nullptr) caller_decision_.audit->record.set_project(image->project());
    return ToGrpcStatus(c_->DeleteImage(image->project(), req->image_id()));
  }
  Status ListImages(ServerContext* ctx, const v1::ListImagesRequest* req,
                    v1::ListImagesResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(c_->ListImages(*req, auth::VisibleProjects(caller)), resp);
  }

 private:
  // The image as stored, if the caller's role in its project is at least `need`. Ids are
  // unique within a project: `project` names it ("-": the federation's); left empty, the
  // image of that id in the caller's projects, else the federation's — what a job of the
  // caller's project would use. Another project's image is "not found", as one that does
  // not exist; a caller who sees the id in several projects is asked to name one.
  absl::StatusOr<v1::Image> Visible(const auth::Principal& caller, const std::string& project, const std::string& id,
                                    auth::ProjectRole need) {
    const std::string not_found = absl::StrCat("image \"", id, "\" not found");
    v1::Image image;
    if (!project.empty()) {
      auto found = c_->GetImage(project == "-" ? "" : project, id);
      if (!found.ok()) return found.status();
      image = std::move(*found);
    } else {
      JC_ASSIGN_OR_RETURN(std::vector<v1::Image> all, c_->FindImages(id));
      JC_ASSIGN_OR_RETURN(image, auth::PickVisible(caller, std::move(all), absl::StrCat("image \"", id, "\""), not_found));
    }
    JC_RETURN_IF_ERROR(auth::CheckProjectObject(caller, image.project(), need, not_found));
    return image;
  }

  Catalog* c_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeCatalogService(Catalog* catalog) {
  return std::make_unique<CatalogService>(catalog);
}

}  // namespace jc::catalog
