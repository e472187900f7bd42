#include "services/accounting/accounting_service.h"

#include "common/auth/auth_interceptor.h"
#include "common/auth/project_scope.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/accounting.grpc.pb.h"

namespace jc::accounting {
namespace {

using grpc::ServerContext;
using grpc::Status;

class AccountingService final : public v1::AccountingService::Service {
 public:
  explicit AccountingService(UsageBook* book) : book_(book) {}

  Status ListUsageRecords(ServerContext* ctx, const v1::ListUsageRecordsRequest* req,
                          v1::ListUsageRecordsResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(book_->List(*req, auth::VisibleProjects(caller)), resp);
  }
  Status GetUsageReport(ServerContext* ctx, const v1::GetUsageReportRequest* req,
                        v1::GetUsageReportResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(book_->Report(*req, auth::VisibleProjects(caller)), resp);
  }

 private:
  UsageBook* book_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeAccountingService(UsageBook* book) {
  return std::make_unique<AccountingService>(book);
}

}  // namespace jc::accounting
