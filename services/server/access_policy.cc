#include "services/server/access_policy.h"

namespace jc::server {

std::shared_ptr<const auth::MethodAccess> ControlPlaneAccess() {
  using auth::Access;
  constexpr Access kAny = Access::kAuthenticated;
  constexpr Access kAdmin = Access::kAdmin;
  auto table = std::make_shared<auth::MethodAccess>(auth::MethodAccess{
      // Load balancers and orchestrators probe health without credentials.
      {"/grpc.health.v1.Health/Check", Access::kPublic},
      {"/grpc.health.v1.Health/Watch", Access::kPublic},

      // Centers: the federation's admins register and remove them; a center's operator
      // updates it and reports its heartbeats (checked on the center by the handler).
      {"/jointcloud.v1.RegistryService/CreateCenter", kAdmin},
      {"/jointcloud.v1.RegistryService/DeleteCenter", kAdmin},
      {"/jointcloud.v1.RegistryService/UpdateCenter", kAny},
      {"/jointcloud.v1.RegistryService/ReportHeartbeat", kAny},
      {"/jointcloud.v1.RegistryService/GetCenter", kAny},
      {"/jointcloud.v1.RegistryService/ListCenters", kAny},
      {"/jointcloud.v1.RegistryService/WatchCenters", kAny},

      // Catalogs: admins curate specs and images; an operator prices its own center.
      {"/jointcloud.v1.CatalogService/CreateResourceSpec", kAdmin},
      {"/jointcloud.v1.CatalogService/UpdateResourceSpec", kAdmin},
      {"/jointcloud.v1.CatalogService/DeleteResourceSpec", kAdmin},
      {"/jointcloud.v1.CatalogService/SetSpecCenterPrice", kAny},
      {"/jointcloud.v1.CatalogService/GetResourceSpec", kAny},
      {"/jointcloud.v1.CatalogService/ListResourceSpecs", kAny},
      {"/jointcloud.v1.CatalogService/ListSpecCenterOffers", kAny},
      {"/jointcloud.v1.CatalogService/CreateImage", kAdmin},
      {"/jointcloud.v1.CatalogService/UpdateImage", kAdmin},
      {"/jointcloud.v1.CatalogService/DeleteImage", kAdmin},
      {"/jointcloud.v1.CatalogService/GetImage", kAny},
      {"/jointcloud.v1.CatalogService/ListImages", kAny},

      // Datasets name storage at centers that adapters copy from: admins register them.
      {"/jointcloud.v1.DatamonService/CreateDataset", kAdmin},
      {"/jointcloud.v1.DatamonService/UpdateDataset", kAdmin},
      {"/jointcloud.v1.DatamonService/DeleteDataset", kAdmin},
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
      {"/jointcloud.v1.JobService/CreateTrainJob", kAny},
      {"/jointcloud.v1.JobService/StopTrainJob", kAny},
      {"/jointcloud.v1.JobService/GetTrainJob", kAny},
      {"/jointcloud.v1.JobService/ListTrainJobs", kAny},
      {"/jointcloud.v1.JobService/GetReplicaLog", kAny},
      {"/jointcloud.v1.JobService/ReadReplicaLog", kAny},

      {"/jointcloud.v1.IdentityService/CreateUser", kAdmin},
      {"/jointcloud.v1.IdentityService/GetUser", kAdmin},
      {"/jointcloud.v1.IdentityService/ListUsers", kAdmin},
      {"/jointcloud.v1.IdentityService/DeleteUser", kAdmin},
      {"/jointcloud.v1.IdentityService/SetMembership", kAdmin},
      {"/jointcloud.v1.IdentityService/CreateProject", kAdmin},
      {"/jointcloud.v1.IdentityService/GetProject", kAdmin},
      {"/jointcloud.v1.IdentityService/ListProjects", kAdmin},
      {"/jointcloud.v1.IdentityService/DeleteProject", kAdmin},
      {"/jointcloud.v1.IdentityService/CreateToken", kAdmin},
      {"/jointcloud.v1.IdentityService/ListTokens", kAdmin},
      {"/jointcloud.v1.IdentityService/RevokeToken", kAdmin},
      {"/jointcloud.v1.IdentityService/WhoAmI", kAny},
  });
  return table;
}

}  // namespace jc::server
