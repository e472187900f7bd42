// /openapi/v1/accounting: usage records and reports (issue 31), camelCase like the jobs.
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/timestamp.h"
#include "jointcloud/v1/accounting.grpc.pb.h"
#include "services/accounting/period.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {

namespace v1 = ::jointcloud::v1;

namespace {

// from, to (a month, a day or an instant; `to` of a month or day is its end) or month,
// set on the request only when given.
template <typename Request>
absl::Status ParsePeriod(const httplib::Request& r, Request* req) {
  std::string month = QueryString(r, "month");
  if (!month.empty()) {
    if (!QueryString(r, "from").empty() || !QueryString(r, "to").empty()) {
      return absl::InvalidArgumentError("give month, or from and to, not both");
    }
    auto period = accounting::ParseMonth(month);
    if (!period.ok()) return absl::InvalidArgumentError(absl::StrCat("month: ", period.status().message()));
    *req->mutable_from() = ToTimestamp(period->first);
    *req->mutable_to() = ToTimestamp(period->second);
    return absl::OkStatus();
  }
  if (std::string text = QueryString(r, "from"); !text.empty()) {
    auto t = accounting::ParseBound(text);
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("from: ", t.status().message()));
    *req->mutable_from() = ToTimestamp(*t);
  }
  if (std::string text = QueryString(r, "to"); !text.empty()) {
    auto t = accounting::ParseEndBound(text);
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("to: ", t.status().message()));
    *req->mutable_to() = ToTimestamp(*t);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Route> AccountingRoutes(std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<v1::AccountingService::Stub> stub = v1::AccountingService::NewStub(channel);
  using S = v1::AccountingService::Stub;
  const std::string base = "/openapi/v1/accounting";
  constexpr auto kCamel = JsonNames::kCamelCase;
  const QueryParam kFrom{"from", "string", "period start: a month (2026-11), a day (2026-11-26) or an RFC 3339 instant"};
  const QueryParam kTo{"to", "string", "period end (exclusive); a month or day means its end"};
  const QueryParam kMonth{"month", "string", "the period is this month (2026-11), instead of from and to"};
  std::vector<Route> routes;
  routes.push_back({"GET", base + "/records", "accounting",
                    "Usage records: one per replica attempt that ran, as its center measured it, with the price "
                    "in force when it started and its cost",
                    nullptr, v1::ListUsageRecordsResponse::descriptor(), kCamel,
                    {{"project", "string", "only this project's"},
                     {"userName", "string", "only this user's"},
                     {"center", "string", "only this center's"},
                     {"jobId", "string", "only this job's"},
                     kFrom, kTo, kMonth,
                     {"pageSize", "integer", "items per page (default 100, at most 1000)"},
                     {"pageToken", "string", "nextPageToken of the previous page"}},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ListUsageRecordsRequest req;
                      req.set_project(QueryString(r, "project"));
                      req.set_user_name(QueryString(r, "userName"));
                      req.set_ai_center_id(QueryString(r, "center"));
                      req.set_job_id(QueryString(r, "jobId"));
                      req.set_page_token(QueryString(r, "pageToken"));
                      int32_t size = 0;
                      absl::Status s = QueryInt(r, "pageSize", &size);
                      req.set_page_size(size);
                      if (s.ok()) s = ParsePeriod(r, &req);
                      return IfOk(s, [&] { return CallUnary(stub.get(), &S::ListUsageRecords, req, kCamel); });
                    }});
  routes.push_back({"GET", base + "/report", "accounting",
                    "Usage and cost summed per period (day, month or the whole) and per project, user, center "
                    "or spec",
                    nullptr, v1::GetUsageReportResponse::descriptor(), kCamel,
                    {kFrom, kTo, kMonth,
                     {"groupBy", "string", "comma-separated: project, user, center, spec"},
                     {"granularity", "string", "day, month, or empty for the whole period"},
                     {"project", "string", "only this project's"},
                     {"center", "string", "only this center's"},
                     {"userName", "string", "only this user's"}},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::GetUsageReportRequest req;
                      absl::Status s = ParsePeriod(r, &req);
                      for (absl::string_view g : absl::StrSplit(QueryString(r, "groupBy"), ',', absl::SkipEmpty())) {
                        req.add_group_by(std::string(absl::StripAsciiWhitespace(g)));
                      }
                      req.set_granularity(QueryString(r, "granularity"));
                      req.set_project(QueryString(r, "project"));
                      req.set_ai_center_id(QueryString(r, "center"));
                      req.set_user_name(QueryString(r, "userName"));
                      return IfOk(s, [&] { return CallUnary(stub.get(), &S::GetUsageReport, req, kCamel); });
                    }});
  routes.push_back({"GET", base + "/settlements", "accounting",
                    "Settlement periods closed so far, with their totals and digests (no lines)", nullptr,
                    v1::ListSettlementsResponse::descriptor(), kCamel, {},
                    [stub](const httplib::Request&, const std::vector<std::string>&) {
                      return CallUnary(stub.get(), &S::ListSettlements, v1::ListSettlementsRequest(), kCamel);
                    }});
  routes.push_back({"GET", base + "/settlements/{month}", "accounting",
                    "A month's settlement statement: what each project owes each center; frozen once closed, "
                    "else what it holds now (status open)",
                    nullptr, v1::SettlementStatement::descriptor(), kCamel,
                    {{"center", "string", "only this center's lines"}},
                    [stub](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::GetSettlementRequest req;
                      req.set_month(p[0]);
                      req.set_ai_center_id(QueryString(r, "center"));
                      return CallUnary(stub.get(), &S::GetSettlement, req, kCamel);
                    }});
  routes.push_back({"POST", base + "/settlements/{month}/close", "accounting",
                    "Close the settlement through this month (admins): its statement is frozen with a digest; "
                    "records that arrive later are billed in the first month still open",
                    nullptr, v1::SettlementStatement::descriptor(), kCamel, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::CloseSettlementRequest req;
                      req.set_month(p[0]);
                      return CallUnary(stub.get(), &S::CloseSettlement, req, kCamel);
                    }});
  routes.push_back({"GET", base + "/reconciliation", "accounting",
                    "The federation's usage records of a center for a period against the center's own accounting: "
                    "every run missing a record, record without a run, and figure apart beyond the tolerance "
                    "(admins and the center's operators)",
                    nullptr, v1::ReconcileResponse::descriptor(), kCamel,
                    {{"center", "string", "the center (required)"}, kFrom, kTo, kMonth,
                     {"toleranceSeconds", "string", "figures agree within this many seconds (default 5)"},
                     {"toleranceRatio", "string", "or within this share of the larger (default 0.05)"}},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ReconcileRequest req;
                      req.set_ai_center_id(QueryString(r, "center"));
                      absl::Status s = ParsePeriod(r, &req);
                      for (const auto& [name, set] :
                           {std::pair<const char*, void (v1::ReconcileRequest::*)(double)>{
                                "toleranceSeconds", &v1::ReconcileRequest::set_tolerance_seconds},
                            {"toleranceRatio", &v1::ReconcileRequest::set_tolerance_ratio}}) {
                        std::string text = QueryString(r, name);
                        double v = 0;
                        if (text.empty()) continue;
                        if (!absl::SimpleAtod(text, &v)) {
                          s.Update(absl::InvalidArgumentError(absl::StrCat(name, ": \"", text, "\" is not a number")));
                        }
                        (req.*set)(v);
                      }
                      return IfOk(s, [&] { return CallUnary(stub.get(), &S::Reconcile, req, kCamel); });
                    }});
  routes.push_back({"GET", base + "/utilisation", "accounting",
                    "Each center's offered capacity against what its replicas were allocated, its revenue and "
                    "idle hours, for a month and the months before it (admins and the centers' operators)",
                    nullptr, v1::GetUtilisationResponse::descriptor(), kCamel,
                    {{"month", "string", "2026-11 (default: this month, so far)"},
                     {"center", "string", "only this center"},
                     {"trendMonths", "integer", "months before it to answer too (default 5, at most 24)"}},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::GetUtilisationRequest req;
                      req.set_month(QueryString(r, "month"));
                      req.set_ai_center_id(QueryString(r, "center"));
                      absl::Status s;
                      if (!QueryString(r, "trendMonths").empty()) {
                        int32_t months = 0;
                        s = QueryInt(r, "trendMonths", &months);
                        req.set_trend_months(months);
                      }
                      return IfOk(s, [&] { return CallUnary(stub.get(), &S::GetUtilisation, req, kCamel); });
                    }});
  return routes;
}

}  // namespace jc::gateway
