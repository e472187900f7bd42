#include "common/audit/audit_log.h"

#include <spdlog/spdlog.h>

#include <atomic>

#include "absl/strings/str_format.h"
#include "common/auth/api_token.h"
#include "common/status_macros.h"
#include "common/store/doc_table.h"
#include "common/timestamp.h"
#include "common/validate.h"

namespace jc::audit {

namespace v1 = ::jointcloud::v1;

AuditLog::AuditLog(store::Store* store, const Clock* clock, double refused_per_second)
    : store_(store), clock_(clock), refusals_({refused_per_second, refused_per_second}, clock) {}

const char* AuditLog::Insert() {
  return "INSERT INTO audit_log (id, actor, project, action, object, outcome, doc)";
}

absl::StatusOr<store::Params> AuditLog::Values(const v1::AuditRecord& r) {
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(r));
  return store::Params{r.id(), r.actor(), r.project(), r.action(), r.object(), r.outcome(), doc};
}

std::shared_ptr<CallAudit> AuditLog::Begin() {
  auto call = std::make_shared<CallAudit>();
  absl::Time now = clock_->Now();
  // Time-ordered ids: microseconds since the epoch, then a random part for calls of the
  // same microsecond (and of other instances).
  static std::atomic<uint64_t> counter{0};
  auto random = auth::RandomSecret(6);
  call->record.set_id(absl::StrFormat("%016d-%s-%06d", absl::ToUnixMicros(now), random.ok() ? *random : "x",
                                      counter.fetch_add(1) % 1000000));
  *call->record.mutable_at() = ToTimestamp(now);
  call->record.set_outcome("OK");
  call->rider.insert = Insert();
  CallAudit* raw = call.get();
  call->rider.values = [raw]() -> store::Params {
    auto values = Values(raw->record);
    // Encoding a record of strings cannot fail; an empty doc still records who did what.
    if (!values.ok()) return {raw->record.id(), raw->record.actor(), raw->record.project(), raw->record.action(),
                              raw->record.object(), raw->record.outcome(), std::string("{}")};
    return *values;
  };
  return call;
}

absl::Status AuditLog::WriteAlone(const v1::AuditRecord& record) {
  if (record.outcome() != "OK" && !refusals_.Admit("refused").ok()) return absl::OkStatus();
  JC_ASSIGN_OR_RETURN(store::Params values, Values(record));
  return store_->Exec(absl::StrCat(Insert(), " VALUES ", store::ValuesList(1, values.size())), values).status();
}

absl::StatusOr<v1::ListAuditRecordsResponse> AuditLog::List(const v1::ListAuditRecordsRequest& req) {
  std::vector<store::Condition> conditions;
  for (const auto& [column, value] : {std::pair<const char*, const std::string*>{"actor", &req.actor()},
                                      {"action", &req.action()},
                                      {"object", &req.object()},
                                      {"outcome", &req.outcome()},
                                      {"project", &req.project()}}) {
    if (!value->empty()) conditions.push_back({absl::StrCat(column, " = $?"), *value});
  }
  JC_ASSIGN_OR_RETURN(store::DocPage page,
                      store::ListDocs(*store_, "audit_log", conditions, req.page_token(), req.page_size()));
  v1::ListAuditRecordsResponse resp;
  for (const auto& doc : page.docs) {
    JC_ASSIGN_OR_RETURN(*resp.add_records(), store::DecodeDoc<v1::AuditRecord>(doc));
  }
  resp.set_next_page_token(page.next_page_token);
  return resp;
}

}  // namespace jc::audit
