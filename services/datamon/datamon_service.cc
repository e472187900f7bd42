#include "services/datamon/datamon_service.h"

#include "common/auth/auth_interceptor.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/datamon.grpc.pb.h"

namespace jc::datamon {
namespace {

using grpc::ServerContext;
using grpc::Status;

class DatamonService final : public v1::DatamonService::Service {
 public:
  explicit DatamonService(Datamon* datamon) : d_(datamon) {}

  Status CreateDataset(ServerContext* ctx, const v1::CreateDatasetRequest* req,
                       v1::Dataset* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(d_->Create(req->dataset()), resp);
  }
  Status GetDataset(ServerContext* ctx, const v1::GetDatasetRequest* req, v1::Dataset* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(d_->Get(req->key()), resp);
  }
  Status UpdateDataset(ServerContext* ctx, const v1::UpdateDatasetRequest* req,
                       v1::Dataset* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(d_->Update(req->dataset(), req->update_mask()), resp);
  }
  Status DeleteDataset(ServerContext* ctx, const v1::DeleteDatasetRequest* req,
                       google::protobuf::Empty*) override {
    JC_GRPC_CALLER(caller, ctx);
    return ToGrpcStatus(d_->Delete(req->key()));
  }
  Status ListDatasets(ServerContext* ctx, const v1::ListDatasetsRequest* req,
                      v1::ListDatasetsResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(d_->List(*req), resp);
  }
  Status SelectMigrationSources(ServerContext* ctx, const v1::SelectMigrationSourcesRequest* req,
                                v1::SelectMigrationSourcesResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(d_->SelectSources(*req), resp);
  }

 private:
  Datamon* d_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeDatamonService(Datamon* datamon) {
  return std::make_unique<DatamonService>(datamon);
}

}  // namespace jc::datamon
