// The console's charts from Prometheus (issue 33 item 4): with --prometheus_url the gateway
// answers the last minutes of the job and scheduling rates as Prometheus recorded them, so
// the charts start full and survive a restart of the control plane (sampled in the browser
// they start empty and reset). Fixed queries only: no caller's PromQL reaches Prometheus,
// and no series that names a project.

#include <google/protobuf/empty.pb.h>
#include "common/json_depth.h"
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "jointcloud/v1/identity.grpc.pb.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {
namespace {

using nlohmann::json;

struct Series {
  const char* name;
  const char* unit;
  const char* promql;
};

constexpr Series kSeries[] = {
    {"jobs_scheduled", "jobs/s", "sum(rate(jc_jobs_scheduled_total[1m]))"},
    {"jobs_ended", "jobs/s", "sum(rate(jc_jobs_ended_total[1m]))"},
    {"scheduling_ms", "ms",
     "1000 * sum(rate(jc_scheduling_time_seconds_sum[1m])) / sum(rate(jc_scheduling_time_seconds_count[1m]))"},
};

// One range query; the points of its first series as [[unix seconds, value], ...].
absl::StatusOr<json> RangeQuery(const std::string& url, const char* promql, absl::Time start, absl::Time end,
                                int step_seconds) {
  httplib::Client client(url);
  client.set_connection_timeout(3, 0);
  client.set_read_timeout(5, 0);
  httplib::Params params = {{"query", promql},
                            {"start", absl::StrCat(absl::ToUnixSeconds(start))},
                            {"end", absl::StrCat(absl::ToUnixSeconds(end))},
                            {"step", absl::StrCat(step_seconds)}};
  auto res = client.Get("/api/v1/query_range", params, httplib::Headers{});
  if (!res) {
    return absl::UnavailableError(absl::StrCat("Prometheus at ", url, " cannot be reached: ", httplib::to_string(res.error())));
  }
  json body = NestsDeeperThan(res->body, 16) ? json(json::value_t::discarded) : json::parse(res->body, nullptr, false);
  if (res->status != 200 || body.is_discarded() || body.value("status", "") != "success") {
    return absl::UnavailableError(absl::StrCat("Prometheus at ", url, " answered ", res->status, ": ",
                                               body.is_discarded() ? res->body.substr(0, 200) : body.value("error", "")));
  }
  json points = json::array();
  const json& result = body["data"]["result"];
  if (!result.empty()) {
    for (const json& p : result[0].value("values", json::array())) {
      double v = 0;
      if (p.size() == 2 && absl::SimpleAtod(p[1].get<std::string>(), &v) && std::isfinite(v)) {
        points.push_back({p[0].get<double>(), v});
      }
    }
  }
  return points;
}

}  // namespace

std::vector<Route> MetricsHistoryRoutes(std::string prometheus_url, std::shared_ptr<grpc::Channel> identity) {
  std::shared_ptr<::jointcloud::v1::IdentityService::Stub> who = ::jointcloud::v1::IdentityService::NewStub(identity);
  std::vector<Route> routes;
  routes.push_back(
      {"GET", "/openapi/v1/metrics/history", "monitor",
       "The job and scheduling rates of the last minutes as Prometheus recorded them (--prometheus_url): "
       "series jobs_scheduled, jobs_ended (jobs/s) and scheduling_ms, each [[unix seconds, value], ...]. 501 "
       "without --prometheus_url",
       nullptr, nullptr, JsonNames::kSnakeCase,
       {{"minutes", "integer", "how far back (default 30, at most 1440)"}},
       [prometheus_url, who](const httplib::Request& r, const std::vector<std::string>&) {
         // Anyone the federation knows may read the rates (as the console's /metrics); a
         // caller who proves no one is refused here, as by every service's edge.
         grpc::ClientContext ctx;
         PrepareContext(&ctx);
         ::jointcloud::v1::Caller caller;
         if (grpc::Status s = who->WhoAmI(&ctx, google::protobuf::Empty(), &caller); !s.ok()) {
           return RestResult{FromGrpcStatus(s), ""};
         }
         if (prometheus_url.empty()) {
           return RestResult{absl::UnimplementedError("this gateway reads no Prometheus (--prometheus_url)"), ""};
         }
         int32_t minutes = 30;
         if (absl::Status s = QueryInt(r, "minutes", &minutes); !s.ok()) return RestResult{s, ""};
         if (r.has_param("minutes") && (minutes < 1 || minutes > 1440)) {
           return RestResult{absl::InvalidArgumentError("minutes: from 1 to 1440"), ""};
         }
         if (!r.has_param("minutes")) minutes = 30;
         const absl::Time end = absl::Now();
         const absl::Time start = end - absl::Minutes(minutes);
         const int step = std::max(2, minutes * 60 / 300);  // about 300 points a series
         json out = {{"source", prometheus_url}, {"series", json::array()}};
         for (const Series& s : kSeries) {
           auto points = RangeQuery(prometheus_url, s.promql, start, end, step);
           if (!points.ok()) return RestResult{points.status(), ""};
           out["series"].push_back({{"name", s.name}, {"unit", s.unit}, {"points", *points}});
         }
         return RestResult{absl::OkStatus(), out.dump()};
       }});
  return routes;
}

}  // namespace jc::gateway
