#include "services/server/access_policy.h"

namespace jc::server {

std::shared_ptr<const auth::MethodAccess> ControlPlaneAccess() {
  using auth::Access;
  using Rule = auth::MethodRule;
  // Reads: any caller, or admins; changes (audited): any caller (checked on the object by
  // the handler), or admins.
  const Rule kAny{Access::kAuthenticated, false};
  const Rule kAdmin{Access::kAdmin, false};
  const Rule kAnyChange{Access::kAuthenticated, true};
  const Rule kAdminChange{Access::kAdmin, true};
  const Rule kPublic{Access::kPublic, false};
  auto table = std::make_shared<auth::MethodAccess>(auth::MethodAccess{
      // Load balancers and orchestrators probe health without credentials.
      {"/grpc.health.v1.Health/Check", kPublic},
      {"/grpc.health.v1.Health/Watch", kPublic},
      // Reflection (grpcurl, grpcui): the API's shape and no data, public as the OpenAPI
      // document at /openapi/v1/openapi.json is.
      {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", kPublic},

      // Centers: the federation's admins register and remove them; a center's operator
      // updates it and reports its heartbeats (checked on the center by the handler).
      {"/jointcloud.v1.RegistryService/CreateCenter", kAdminChange},
      {"/jointcloud.v1.RegistryService/DeleteCenter", kAdminChange},
      {"/jointcloud.v1.RegistryService/UpdateCenter", kAnyChange},
      {"/jointcloud.v1.RegistryService/ReportHeartbeat", kAnyChange},
      {"/jointcloud.v1.RegistryService/IssueAdapterKey", kAnyChange},
      {"/jointcloud.v1.RegistryService/GetCenter", kAny},
      {"/jointcloud.v1.RegistryService/ListCenters", kAny},
      {"/jointcloud.v1.RegistryService/WatchCenters", kAny},

      // Catalogs: admins curate specs; an operator prices its own center. Images belong to
      // a project (its members change them) or to the federation (admins change them):
      // checked on the image by the handler.
      {"/jointcloud.v1.CatalogService/CreateResourceSpec", kAdminChange},
      {"/jointcloud.v1.CatalogService/UpdateResourceSpec", kAdminChange},
      {"/jointcloud.v1.CatalogService/DeleteResourceSpec", kAdminChange},
      {"/jointcloud.v1.CatalogService/SetSpecCenterPrice", kAnyChange},
      {"/jointcloud.v1.CatalogService/GetResourceSpec", kAny},
      {"/jointcloud.v1.CatalogService/ListResourceSpecs", kAny},
      {"/jointcloud.v1.CatalogService/ListSpecCenterOffers", kAny},
      {"/jointcloud.v1.CatalogService/CreateImage", kAnyChange},
      {"/jointcloud.v1.CatalogService/UpdateImage", kAnyChange},
      {"/jointcloud.v1.CatalogService/DeleteImage", kAnyChange},
      {"/jointcloud.v1.CatalogService/GetImage", kAny},
      {"/jointcloud.v1.CatalogService/ListImages", kAny},

      // Datasets name storage at centers that adapters copy from. Like images, a project's
      // members register its own (under the center's {project} data roots), admins the
      // federation's: checked on the dataset by the handler.
      {"/jointcloud.v1.DatamonService/CreateDataset", kAnyChange},
      {"/jointcloud.v1.DatamonService/UpdateDataset", kAnyChange},
      {"/jointcloud.v1.DatamonService/DeleteDataset", kAnyChange},
      {"/jointcloud.v1.DatamonService/GetDataset", kAny},
      {"/jointcloud.v1.DatamonService/ListDatasets", kAny},
      {"/jointcloud.v1.DatamonService/SelectMigrationSources", kAny},

      {"/jointcloud.v1.MonitorService/GetCenterUsage", kAny},
      {"/jointcloud.v1.MonitorService/ListCenterUsage", kAny},

      {"/jointcloud.v1.SchedulerService/GetAlgorithmScore", kAny},
      {"/jointcloud.v1.SchedulerService/EvaluateScore", kAny},
      {"/jointcloud.v1.SchedulerService/ListAlgorithms", kAny},
      {"/jointcloud.v1.SchedulerService/ListWeightProfiles", kAny},
      {"/jointcloud.v1.SchedulerService/PlanJob", kAny},
      {"/jointcloud.v1.SchedulerService/GetJobPlacement", kAny},

      // Jobs: any caller; the handler checks the caller's role in the job's project.
      {"/jointcloud.v1.JobService/CreateTrainJob", kAnyChange},
      {"/jointcloud.v1.JobService/StopTrainJob", kAnyChange},
      {"/jointcloud.v1.JobService/ScaleTrainJob", kAnyChange},
      {"/jointcloud.v1.JobService/OpenEndpoint", kAnyChange},
      {"/jointcloud.v1.JobService/GetTrainJob", kAny},
      {"/jointcloud.v1.JobService/ListTrainJobs", kAny},
      {"/jointcloud.v1.JobService/GetReplicaLog", kAny},
      {"/jointcloud.v1.JobService/ReadReplicaLog", kAny},
      {"/jointcloud.v1.JobService/WatchTrainJobs", kAny},
      // Accounting: any caller; the handler limits it to the projects it views.
      {"/jointcloud.v1.AccountingService/ListUsageRecords", kAny},
      {"/jointcloud.v1.AccountingService/GetUsageReport", kAny},
      {"/jointcloud.v1.AccountingService/GetSettlement", kAny},
      {"/jointcloud.v1.AccountingService/ListSettlements", kAny},
      {"/jointcloud.v1.AccountingService/CloseSettlement", kAdminChange},
      {"/jointcloud.v1.AccountingService/Reconcile", kAny},  // admins and the center's operators
      {"/jointcloud.v1.AccountingService/GetUtilisation", kAny},  // admins and the centers' operators

      {"/jointcloud.v1.IdentityService/CreateUser", kAdminChange},
      {"/jointcloud.v1.IdentityService/GetUser", kAdmin},
      {"/jointcloud.v1.IdentityService/ListUsers", kAdmin},
      {"/jointcloud.v1.IdentityService/DeleteUser", kAdminChange},
      {"/jointcloud.v1.IdentityService/SetMembership", kAnyChange},  // admins, or the project's owners,
      {"/jointcloud.v1.IdentityService/CreateProject", kAdminChange},
      // A project's members read it (its quota and budget); checked by the handler.
      {"/jointcloud.v1.IdentityService/GetProject", kAny},
      {"/jointcloud.v1.IdentityService/ListProjects", kAdmin},
      {"/jointcloud.v1.IdentityService/DeleteProject", kAdminChange},
      {"/jointcloud.v1.IdentityService/SetProjectQuota", kAdminChange},
      {"/jointcloud.v1.IdentityService/SetProjectBudget", kAdminChange},
      // A user's own tokens are its to manage; others' are admins' (checked by the handler).
      {"/jointcloud.v1.IdentityService/CreateToken", kAnyChange},
      {"/jointcloud.v1.IdentityService/ListTokens", kAny},
      {"/jointcloud.v1.IdentityService/RevokeToken", kAnyChange},
      {"/jointcloud.v1.IdentityService/WhoAmI", kAny},
      {"/jointcloud.v1.IdentityService/ListAuditRecords", kAdmin},
  });
  return table;
}

}  // namespace jc::server
