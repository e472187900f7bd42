// Appendix A.1–A.4: /openapi/v1/trainjob, with Appendix A's camelCase names.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "jointcloud/v1/jobs.grpc.pb.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {

namespace v1 = ::jointcloud::v1;

namespace {

absl::Status PathIndex(const std::string& text, const char* name, int32_t* out) {
  if (!absl::SimpleAtoi(text, out) || *out < 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": \"", text, "\" is not an index (0, 1, ...)"));
  }
  return absl::OkStatus();
}

// The job service's unary methods: straight to its handlers when it runs here (ADR 0014),
// else over the channel.
struct Jobs {
  using S = v1::JobService::Stub;
  using H = v1::JobService::Service;
  std::shared_ptr<S> stub;
  H* local;
  std::shared_ptr<const auth::CallAdmission> admission;
  template <typename Req, typename Resp>
  RestResult Call(grpc::Status (S::*remote)(grpc::ClientContext*, const Req&, Resp*),
                  grpc::Status (H::*handler)(grpc::ServerContext*, const Req*, Resp*), const char* name,
                  const Req& req, bool with_data = true) const {
    return CallUnary(stub.get(), remote, local, admission.get(), handler,
                     absl::StrCat("/jointcloud.v1.JobService/", name), req, JsonNames::kCamelCase, with_data);
  }
};

}  // namespace

std::vector<Route> TrainJobRoutes(std::shared_ptr<grpc::Channel> channel, LocalService local) {
  std::shared_ptr<v1::JobService::Stub> stub = v1::JobService::NewStub(channel);
  using S = v1::JobService::Stub;
  using H = v1::JobService::Service;
  auto jobs = std::make_shared<Jobs>(
      Jobs{stub, dynamic_cast<H*>(local.service), local.admission});
  const std::string base = "/openapi/v1/trainjob";
  constexpr auto kCamel = JsonNames::kCamelCase;
  std::vector<Route> routes;

  routes.push_back({"POST", base, "trainjob",
                    "Submit a training job (A.1). Acknowledged once committed; an Idempotency-Key header "
                    "makes a retried submit return the first job",
                    v1::CreateTrainJobRequest::descriptor(), v1::CreateTrainJobResponse::descriptor(), kCamel, {},
                    [jobs](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::CreateTrainJobRequest req;
                      absl::Status s = ParseBody(r, &req);
                      if (const std::string* key = FindHeader(r, "Idempotency-Key")) req.set_idempotency_key(*key);
                      return IfOk(s, [&] { return jobs->Call(&S::CreateTrainJob, &H::CreateTrainJob, "CreateTrainJob", req); });
                    }});
  routes.back().busy = true;
  routes.push_back({"GET", base, "trainjob", "List jobs, newest first, paged, by user, status, project, center and creation time", nullptr,
                    v1::ListTrainJobsResponse::descriptor(), kCamel,
                    {{"userName", "string", "only this user's jobs"},
                     {"status", "string", "pending, running, completed or failed"},
                     {"project", "string", "only this project's jobs"},
                     {"order", "string", "newest (the default: newest job first) or oldest"},
                     {"center", "string", "only jobs with a replica placed at this center (at any attempt)"},
                     {"createdAfter", "string", "only jobs created at or after this date (2026-12-01) or instant"},
                     {"createdBefore", "string", "only jobs created before this date (2026-12-01) or instant"},
                     {"pageSize", "integer", "items per page (default 100, at most 1000)"},
                     {"pageToken", "string", "nextPageToken of the previous page (of the same order)"}},
                    [jobs](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ListTrainJobsRequest req;
                      req.set_order(QueryString(r, "order"));
                      req.set_user_name(QueryString(r, "userName"));
                      req.set_status(QueryString(r, "status"));
                      req.set_project(QueryString(r, "project"));
                      req.set_page_token(QueryString(r, "pageToken"));
                      req.set_center(QueryString(r, "center"));
                      int32_t size = 0;
                      absl::Status s = QueryInt(r, "pageSize", &size);
                      if (s.ok() && r.has_param("createdAfter")) s = QueryTime(r, "createdAfter", req.mutable_created_after());
                      if (s.ok() && r.has_param("createdBefore")) {
                        s = QueryTime(r, "createdBefore", req.mutable_created_before());
                      }
                      req.set_page_size(size);
                      return IfOk(s, [&] { return jobs->Call(&S::ListTrainJobs, &H::ListTrainJobs, "ListTrainJobs", req); });
                    }});
  routes.push_back({"POST", base + "/{jobId}/stop", "trainjob", "Stop a job (A.2)", nullptr, nullptr, kCamel, {},
                    [jobs](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::StopTrainJobRequest req;
                      req.set_job_id(p[0]);
                      return jobs->Call(&S::StopTrainJob, &H::StopTrainJob, "StopTrainJob", req, false);
                    }});
  routes.push_back({"POST", base + "/{jobId}/scale", "trainjob",
                    "Scale a task of a running service or streaming job (SPEC A17): {taskIndex, replicaNumber}; "
                    "more replicas start, fewer stop the highest-numbered. Members of the job's project only",
                    v1::ScaleTrainJobRequest::descriptor(), v1::ScaleTrainJobResponse::descriptor(), kCamel, {},
                    [jobs](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::ScaleTrainJobRequest req;
                      absl::Status s = ParseBody(r, &req);
                      if (s.ok() && !req.job_id().empty() && req.job_id() != p[0]) {
                        s = absl::InvalidArgumentError(absl::StrCat("jobId: the body names job \"", req.job_id(),
                                                                    "\", the path ", p[0]));
                      }
                      req.set_job_id(p[0]);
                      return IfOk(s, [&] { return jobs->Call(&S::ScaleTrainJob, &H::ScaleTrainJob, "ScaleTrainJob", req); });
                    }});
  routes.push_back({"POST", base + "/{jobId}/open", "trainjob",
                    "A link that opens a running replica's named port in a browser (SPEC A17): {taskIndex, "
                    "replicaIndex, portName, path}. It works once, within a minute, on the endpoint's own origin. "
                    "Members of the job's project only",
                    v1::OpenEndpointRequest::descriptor(), v1::OpenEndpointResponse::descriptor(), kCamel, {},
                    [jobs](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::OpenEndpointRequest req;
                      absl::Status s = ParseBody(r, &req);
                      if (s.ok() && !req.job_id().empty() && req.job_id() != p[0]) {
                        s = absl::InvalidArgumentError(absl::StrCat("jobId: the body names job \"", req.job_id(),
                                                                    "\", the path ", p[0]));
                      }
                      req.set_job_id(p[0]);
                      return IfOk(s, [&] { return jobs->Call(&S::OpenEndpoint, &H::OpenEndpoint, "OpenEndpoint", req); });
                    }});
  routes.push_back({"GET", base + "/{jobId}", "trainjob",
                    "A job with its status (pending, running, completed, failed) and each replica's (A.3)", nullptr,
                    v1::TrainJob::descriptor(), kCamel, {},
                    [jobs](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::GetTrainJobRequest req;
                      req.set_job_id(p[0]);
                      return jobs->Call(&S::GetTrainJob, &H::GetTrainJob, "GetTrainJob", req);
                    }});
  routes.back().busy = true;
  routes.push_back(
      {"GET", base + "/{jobId}/task/{taskIndex}/replica/{replicaIndex}/log", "trainjob",
       "Where a replica's log downloads (A.4): logUrl", nullptr, v1::GetReplicaLogResponse::descriptor(), kCamel, {},
       [jobs](const httplib::Request&, const std::vector<std::string>& p) {
         v1::GetReplicaLogRequest req;
         req.set_job_id(p[0]);
         int32_t task = 0, replica = 0;
         absl::Status s = PathIndex(p[1], "taskIndex", &task);
         if (s.ok()) s = PathIndex(p[2], "replicaIndex", &replica);
         req.set_task_index(task);
         req.set_replica_index(replica);
         return IfOk(s, [&] { return jobs->Call(&S::GetReplicaLog, &H::GetReplicaLog, "GetReplicaLog", req); });
       }});
  routes.push_back(
      {"GET", base + "/{jobId}/task/{taskIndex}/replica/{replicaIndex}/log/content", "trainjob",
       "The replica's log itself (text/plain): what logUrl points at; ?offset=N from byte N on (what a "
       "follower has not seen yet)",
       nullptr, nullptr, kCamel, {},
       [stub](const httplib::Request& http, const std::vector<std::string>& p) {
         v1::ReadReplicaLogRequest req;
         req.set_job_id(p[0]);
         int32_t task = 0, replica = 0;
         absl::Status s = PathIndex(p[1], "taskIndex", &task);
         if (s.ok()) s = PathIndex(p[2], "replicaIndex", &replica);
         int64_t offset = 0;
         if (s.ok() && http.has_param("offset") &&
             (!absl::SimpleAtoi(http.get_param_value("offset"), &offset) || offset < 0)) {
           s = absl::InvalidArgumentError(
               absl::StrCat("offset: \"", http.get_param_value("offset"), "\" is not a byte offset (0 or more)"));
         }
         if (!s.ok()) return RestResult{s, ""};
         req.set_task_index(task);
         req.set_replica_index(replica);
         req.set_offset(offset);
         grpc::ClientContext ctx;
         PrepareContext(&ctx);
         auto reader = stub->ReadReplicaLog(&ctx, req);
         std::string text;
         v1::LogChunk chunk;
         while (reader->Read(&chunk)) text += chunk.data();
         grpc::Status status = reader->Finish();
         if (!status.ok()) return RestResult{FromGrpcStatus(status), ""};
         return RestResult{absl::OkStatus(), std::move(text), "text/plain; charset=utf-8"};
       }});
  auto events = TrainJobEventRoutes(channel);
  routes.insert(routes.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
  return routes;
}

}  // namespace jc::gateway
