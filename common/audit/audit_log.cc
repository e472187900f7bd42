#include "common/audit/audit_log.h"

#include "common/utf8.h"

#include <google/protobuf/util/time_util.h>
#include <spdlog/spdlog.h>



#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/auth/api_token.h"
#include "common/json_print.h"
#include "common/status_macros.h"
#include "common/paging.h"
#include "common/store/doc_table.h"
#include "common/timestamp.h"
#include "common/validate.h"

namespace jc::audit {

namespace v1 = ::jointcloud::v1;

AuditLog::AuditLog(store::Store* store, const Clock* clock, double refused_per_second)
    : store_(store),
      clock_(clock),
      refusals_({refused_per_second, refused_per_second}, clock),
      all_refusals_({10 * refused_per_second, 10 * refused_per_second}, clock) {}

namespace {

// The address a refusal came from, without the port (a new connection per request must
// not make a new source): "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7", "ipv6:[::1]:80" ->
// "ipv6:[::1]"; a forwarded client address stays as it is.
std::string SourceHost(const std::string& source) {
  if (!absl::StartsWith(source, "ipv4:") && !absl::StartsWith(source, "ipv6:")) return source;
  const auto colon = source.rfind(':');
  return colon != std::string::npos && colon > 5 ? source.substr(0, colon) : source;
}

}  // namespace

const char* AuditLog::Insert() {
  return "INSERT INTO audit_log (id, at, actor, auth_method, project, action, object, outcome, message, request_id, "
         "source)";
}

store::Params AuditLog::Values(const v1::AuditRecord& r) {
  // A record carries what callers sent (a request id, the object a request names, a
  // message quoting it); what is not UTF-8 is stored as U+FFFD, or no page of the log
  // holding the row could be answered (a string field must be UTF-8).
  // The time as protobuf writes it, without TimeUtil's formatting cost (out of range: its answer).
  std::string at;
  if (!AppendTimestampText(r.at().seconds(), r.at().nanos(), &at)) {
    at = google::protobuf::util::TimeUtil::ToString(r.at());
  }
  return store::Params{ToUtf8(r.id()),      std::move(at),
                       ToUtf8(r.actor()),   ToUtf8(r.auth_method()),
                       ToUtf8(r.project()), ToUtf8(r.action()),
                       ToUtf8(r.object()),  ToUtf8(r.outcome()),
                       ToUtf8(r.message()), ToUtf8(r.request_id()),
                       ToUtf8(r.source())};
}

std::shared_ptr<CallAudit> AuditLog::Begin() {
  auto call = std::make_shared<CallAudit>();
  absl::Time now = clock_->Now();
  // Time-ordered ids: microseconds since the epoch, then this process's random tag and a
  // counter, for calls of the same microsecond here and in other instances.
  static const std::string tag = [] {
    auto random = auth::RandomSecret(6);
    return random.ok() ? *random : std::string("process");
  }();
  static std::atomic<uint64_t> counter{0};
  call->record.set_id(absl::StrFormat("%016d-%s-%08d", absl::ToUnixMicros(now), tag,
                                      counter.fetch_add(1) % 100000000));
  *call->record.mutable_at() = ToTimestamp(now);
  call->record.set_outcome("OK");
  call->rider.insert = Insert();
  CallAudit* raw = call.get();
  call->rider.values = [raw] { return Values(raw->record); };
  return call;
}

absl::Status AuditLog::WriteAlone(const v1::AuditRecord& given) {
  v1::AuditRecord record = given;
  if (record.outcome() != "OK") {
    const std::string source = SourceHost(record.source());
    std::lock_guard<std::mutex> lock(dropped_mu_);
    if (!refusals_.Admit(source).ok() || !all_refusals_.Admit("all").ok()) {
      if (dropped_.size() > 100000) dropped_.clear();  // bounded, whatever the sources
      ++dropped_[source];
      return absl::OkStatus();
    }
    if (auto d = dropped_.find(source); d != dropped_.end()) {
      record.set_message(absl::StrCat(record.message(), " (and ", d->second,
                                      " earlier refusal(s) from this source, not recorded: over the audit's rate)"));
      dropped_.erase(d);
    }
  }
  store::Params values = Values(record);
  return store_->Exec(absl::StrCat(Insert(), " VALUES ", store::ValuesList(1, values.size())), values).status();
}

absl::StatusOr<v1::ListAuditRecordsResponse> AuditLog::List(const v1::ListAuditRecordsRequest& req) {
  JC_ASSIGN_OR_RETURN(int page_size, NormalizePageSize(req.page_size()));
  JC_ASSIGN_OR_RETURN(std::string after, DecodePageToken(req.page_token()));
  std::string sql =
      "SELECT id, at, actor, auth_method, project, action, object, outcome, message, request_id, source "
      "FROM audit_log WHERE id > $1";
  store::Params params{after};
  for (const auto& [column, value] : {std::pair<const char*, const std::string*>{"actor", &req.actor()},
                                      {"action", &req.action()},
                                      {"object", &req.object()},
                                      {"outcome", &req.outcome()},
                                      {"project", &req.project()}}) {
    if (value->empty()) continue;
    params.push_back(*value);
    absl::StrAppend(&sql, " AND ", column, " = $", params.size());
  }
  params.push_back(int64_t{page_size + 1});
  absl::StrAppend(&sql, " ORDER BY id LIMIT $", params.size());
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query(sql, params));
  v1::ListAuditRecordsResponse resp;
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < page_size; ++i) {
    const store::Row& row = rows[i];
    // Rows written before Values made them UTF-8 are read as such too.
    auto text = [&](size_t c) { return ToUtf8(row[c].value_or("")); };
    v1::AuditRecord* r = resp.add_records();
    r->set_id(text(0));
    if (!google::protobuf::util::TimeUtil::FromString(text(1), r->mutable_at())) {
      return absl::DataLossError(absl::StrCat("audit record ", text(0), " has a malformed time"));
    }
    r->set_actor(text(2));
    r->set_auth_method(text(3));
    r->set_project(text(4));
    r->set_action(text(5));
    r->set_object(text(6));
    r->set_outcome(text(7));
    r->set_message(text(8));
    r->set_request_id(text(9));
    r->set_source(text(10));
  }
  if (static_cast<int>(rows.size()) > page_size) resp.set_next_page_token(EncodePageToken(*rows[page_size - 1][0]));
  return resp;
}

}  // namespace jc::audit
