#include "services/accounting/accounting_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
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
  AccountingService(UsageBook* book, Settlements* settlements, Reconciler* reconciler, Utilisation* utilisation)
      : book_(book), settlements_(settlements), reconciler_(reconciler), utilisation_(utilisation) {}

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

  Status GetSettlement(ServerContext* ctx, const v1::GetSettlementRequest* req,
                       v1::SettlementStatement* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    Settlements::Viewer viewer;
    viewer.all = caller.IsAdmin();
    if (!viewer.all) {
      viewer.projects = auth::VisibleProjects(caller).value_or(std::vector<std::string>());
      viewer.centers = caller.operator_of;
    }
    return Reply(settlements_->Get(req->month(), req->ai_center_id(), viewer), resp);
  }
  Status CloseSettlement(ServerContext* ctx, const v1::CloseSettlementRequest* req,
                         v1::SettlementStatement* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (absl::Status s = auth::NeedAdmin(caller, "closing a settlement period"); !s.ok()) return ToGrpcStatus(s);
    return Reply(settlements_->Close(req->month(), caller.name), resp);
  }
  Status ListSettlements(ServerContext* ctx, const v1::ListSettlementsRequest*,
                         v1::ListSettlementsResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    auto closed = settlements_->ListClosed();
    if (closed.ok()) {
      for (auto& s : *closed) *resp->add_statements() = std::move(s);
    }
    return ToGrpcStatus(closed.status());
  }

  Status Reconcile(ServerContext* ctx, const v1::ReconcileRequest* req, v1::ReconcileResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    const auto& ops = caller.operator_of;
    if (!caller.IsAdmin() && std::find(ops.begin(), ops.end(), req->ai_center_id()) == ops.end()) {
      return ToGrpcStatus(absl::PermissionDeniedError(
          absl::StrCat("reconciling center ", req->ai_center_id(), " is for admins and the center's operators")));
    }
    return Reply(reconciler_->Reconcile(*req), resp);
  }

  Status GetUtilisation(ServerContext* ctx, const v1::GetUtilisationRequest* req,
                        v1::GetUtilisationResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    std::optional<std::vector<std::string>> centers;  // an admin's: every center
    if (!caller.IsAdmin()) {
      const auto& ops = caller.operator_of;
      if (ops.empty()) {
        return ToGrpcStatus(absl::PermissionDeniedError(
            "a center's utilisation and revenue are for admins and the center's operators"));
      }
      if (!req->ai_center_id().empty() && std::find(ops.begin(), ops.end(), req->ai_center_id()) == ops.end()) {
        return ToGrpcStatus(absl::PermissionDeniedError(absl::StrCat(
            "the utilisation of center ", req->ai_center_id().substr(0, 64),
            " is for admins and the center's operators")));
      }
      centers = std::vector<std::string>(ops.begin(), ops.end());
    }
    return Reply(utilisation_->Report(*req, centers), resp);
  }

 private:
  UsageBook* book_;
  Settlements* settlements_;
  Reconciler* reconciler_;
  Utilisation* utilisation_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeAccountingService(UsageBook* book, Settlements* settlements,
                                                     Reconciler* reconciler, Utilisation* utilisation) {
  return std::make_unique<AccountingService>(book, settlements, reconciler, utilisation);
}

}  // namespace jc::accounting
