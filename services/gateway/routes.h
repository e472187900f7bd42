#pragma once

#include "common/admin_server.h"

#include <memory>
#include <string>
#include <vector>

#include "services/gateway/rest_call.h"
#include "services/gateway/route.h"

namespace grpc {
class Channel;
}

namespace jc::gateway {

// REST routes per northbound service, each calling its gRPC service over `channel`.
std::vector<Route> RegistryRoutes(std::shared_ptr<grpc::Channel> channel);
std::vector<Route> CatalogRoutes(std::shared_ptr<grpc::Channel> channel);
std::vector<Route> DatamonRoutes(std::shared_ptr<grpc::Channel> channel);
std::vector<Route> MonitorRoutes(std::shared_ptr<grpc::Channel> channel);
std::vector<Route> SchedulerRoutes(std::shared_ptr<grpc::Channel> channel);
// With `local`, the job service's unary methods are called in this process (ADR 0014).
std::vector<Route> TrainJobRoutes(std::shared_ptr<grpc::Channel> channel, LocalService local = {});
// The job event streams (Server-Sent Events); part of TrainJobRoutes.
std::vector<Route> TrainJobEventRoutes(std::shared_ptr<grpc::Channel> channel);
// Usage records and reports (issue 31); served by the jobs service's process.
std::vector<Route> AccountingRoutes(std::shared_ptr<grpc::Channel> channel);
std::vector<Route> IdentityRoutes(std::shared_ptr<grpc::Channel> channel);
// The console's charts from Prometheus (/openapi/v1/metrics/history); empty URL: 501.
// Callers are authenticated through the identity service at `identity`.
std::vector<Route> MetricsHistoryRoutes(std::string prometheus_url, std::shared_ptr<grpc::Channel> identity);
// Admits federation admins (and Jointcloud's services, and everyone with authentication
// off) to the series of /metrics that name projects, asking the identity service who the
// Authorization header proves.
MetricsReader AdminMetricsReader(std::shared_ptr<grpc::Channel> identity);

}  // namespace jc::gateway
