#include "services/jobs/job_store.h"

#include <set>

#include "common/audit/audit_log.h"

#include <algorithm>
#include <random>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/validate.h"
#include "common/timestamp.h"
#include "common/store/doc_table.h"
#include "common/store/store_identity.h"
#include "services/accounting/usage_book.h"
#include "services/jobs/burst_writer.h"

namespace jc::jobs {

namespace {

absl::Status UpsertCursor(store::Transaction& txn, const std::string& center, uint64_t cursor) {
  // Portable upsert: both SQLite and PostgreSQL know ON CONFLICT ... DO UPDATE.
  return txn
      .Exec("INSERT INTO job_watch_cursors (center_id, cursor) VALUES ($1, $2) "
            "ON CONFLICT (center_id) DO UPDATE SET cursor = excluded.cursor "
            "WHERE job_watch_cursors.cursor < excluded.cursor",
            {center, static_cast<int64_t>(cursor)})
      .status();
}

// Every saved job in one statement (one round trip however many jobs a burst changed); a
// row is written only when its version is newer than the stored one. Portable: SQLite
// (3.33+) and PostgreSQL both take a CTE of VALUES and UPDATE ... FROM; each value is cast,
// so PostgreSQL types every parameter.
absl::Status UpdateMany(store::Transaction& txn, const std::vector<JobWrites::Save>& saves) {
  constexpr size_t kColumns = 6;
  constexpr size_t kRowsPerStatement = 5000;  // 30,000 parameters: under PostgreSQL's 65,535
  for (size_t first = 0; first < saves.size(); first += kRowsPerStatement) {
    size_t n = std::min(kRowsPerStatement, saves.size() - first);
    std::string sql = "WITH v(id, status, version, doc, open_attempts, centers) AS (VALUES ";
    store::Params params;
    params.reserve(n * kColumns);
    for (size_t i = 0; i < n; ++i) {
      const auto& w = saves[first + i];
      size_t p = i * kColumns;
      absl::StrAppend(&sql, i == 0 ? "" : ", ", "(CAST($", p + 1, " AS TEXT), CAST($", p + 2, " AS TEXT), CAST($",
                      p + 3, " AS BIGINT), CAST($", p + 4, " AS TEXT), CAST($", p + 5, " AS INTEGER), CAST($", p + 6,
                      " AS TEXT))");
      params.insert(params.end(), {w.job_id, w.status, w.version, w.doc, w.open_attempts, w.centers});
    }
    absl::StrAppend(&sql,
                    ") UPDATE jobs SET status = v.status, version = v.version, doc = v.doc, "
                    "open_attempts = v.open_attempts, centers = v.centers FROM v WHERE jobs.id = v.id AND "
                    "jobs.version < v.version");
    JC_RETURN_IF_ERROR(txn.Exec(sql, params).status());
  }
  return absl::OkStatus();
}

}  // namespace

std::string CentersColumn(const v1::JobRecord& job) {
  std::set<std::string> centers;
  for (const auto& r : job.replicas()) {
    if (!r.center_id().empty()) centers.insert(r.center_id());
    for (const auto& a : r.attempts()) {
      if (!a.center_id().empty()) centers.insert(a.center_id());
    }
  }
  if (centers.empty()) return "";
  return absl::StrCat(",", absl::StrJoin(centers, ","), ",");
}

void JobStore::FenceWith(const store::Lease* lease) {
  committer_.SetPrologue([lease](store::Transaction& txn) { return lease->CheckHeld(txn, absl::Now()); });
}

absl::Status JobStore::Write(const JobWrites& writes) {
  if (writes.empty()) return absl::OkStatus();
  return committer_.Commit([&](store::Transaction& txn) -> absl::Status {
    for (const auto& n : writes.inserts) {
      store::SqlValue key = n.idempotency_key.empty() ? store::SqlValue(nullptr) : store::SqlValue(n.idempotency_key);
      // One multi-row INSERT for the batch (see GroupCommitter).
      JC_RETURN_IF_ERROR(
          txn.InsertRow("INSERT INTO jobs (id, seq, user_name, project, status, idempotency_key, version, "
                        "open_attempts, doc, created_us, centers)",
                        {n.job_id, n.seq, n.user_name, n.project, n.status, key, n.version, n.open_attempts, n.doc,
                         n.created_us, n.centers}));
    }
    // Audit rows of the creates and stops, in the transaction of the change they record.
    for (const auto& n : writes.inserts) {
      if (!n.audit.empty()) JC_RETURN_IF_ERROR(txn.InsertRow(audit::AuditLog::Insert(), n.audit));
    }
    for (const auto& row : writes.audits) JC_RETURN_IF_ERROR(txn.InsertRow(audit::AuditLog::Insert(), row));
    // Each change's event, in the transaction of the change (job_events.h).
    constexpr char kEvent[] = "INSERT INTO job_events (revision, job_id, doc)";
    for (const auto& n : writes.inserts) {
      if (n.event.revision > 0) {
        JC_RETURN_IF_ERROR(txn.InsertRow(kEvent, {n.event.revision, n.event.job_id, n.event.doc}));
      }
    }
    for (const auto& e : writes.events) JC_RETURN_IF_ERROR(txn.InsertRow(kEvent, {e.revision, e.job_id, e.doc}));
    if (writes.prune_events_below > 0) {
      JC_RETURN_IF_ERROR(
          txn.Exec("DELETE FROM job_events WHERE revision < $1", {writes.prune_events_below}).status());
    }
    JC_RETURN_IF_ERROR(UpdateMany(txn, writes.saves));
    // The usage records of the attempts these saves closed: with them or not at all.
    JC_RETURN_IF_ERROR(accounting::AppendUsage(txn, writes.usage));
    for (const auto& [center, cursor] : writes.cursors) JC_RETURN_IF_ERROR(UpsertCursor(txn, center, cursor));
    // What the estimator learned from the attempts these saves closed: with them.
    for (const auto& [key, sketch] : writes.durations) {
      // An empty sketch: the estimator evicted the key (its project's share, or the bound).
      if (sketch.empty()) {
        JC_RETURN_IF_ERROR(txn.Exec("DELETE FROM job_durations WHERE key = $1", {key}).status());
        continue;
      }
      JC_RETURN_IF_ERROR(txn.Exec("INSERT INTO job_durations (key, sketch, updated_at) VALUES ($1, $2, $3) "
                                  "ON CONFLICT (key) DO UPDATE SET sketch = excluded.sketch, "
                                  "updated_at = excluded.updated_at",
                                  {key, sketch, writes.durations_at})
                             .status());
    }
    if (writes.keep_durations > 0 && !writes.durations.empty()) {
      // The estimator's bound holds in the store too: what memory evicted goes (the oldest).
      // Portable (SQLite has no LIMIT ALL, PostgreSQL no LIMIT -1): older than the newest
      // rows kept; rows of that very second stay (a few more than the bound).
      JC_RETURN_IF_ERROR(txn.Exec("DELETE FROM job_durations WHERE updated_at < (SELECT updated_at FROM "
                                  "job_durations ORDER BY updated_at DESC LIMIT 1 OFFSET $1)",
                                  {writes.keep_durations})
                             .status());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<estimator::DurationEstimator::Row>> JobStore::LoadDurations(int64_t limit) {
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      store_->Query("SELECT key, sketch FROM job_durations ORDER BY updated_at DESC, key LIMIT $1",
                                    {limit}));
  std::vector<estimator::DurationEstimator::Row> out;
  out.reserve(rows.size());
  for (auto& row : rows) out.push_back({row[0].value_or(""), row[1].value_or("")});
  return out;
}

absl::StatusOr<v1::JobRecord> JobStore::Get(const std::string& job_id) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(auto doc, store::LoadDocText(*txn, "jobs", "job", job_id, ""));
  return store::DecodeAnyDoc<v1::JobRecord>(doc);
}

absl::StatusOr<std::optional<v1::JobRecord>> JobStore::FindByKey(const std::string& key) {
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT doc FROM jobs WHERE idempotency_key = $1", {key}));
  if (rows.empty()) return std::optional<v1::JobRecord>();
  JC_ASSIGN_OR_RETURN(auto job, store::DecodeAnyDoc<v1::JobRecord>(rows[0][0]));
  return std::optional<v1::JobRecord>(std::move(job));
}

absl::StatusOr<std::vector<std::pair<v1::JobRecord, int64_t>>> JobStore::LoadActive() {
  // Ended jobs too whose attempts have not all reported their end (their usage is due).
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT doc, version, seq FROM jobs WHERE status IN "
                                                      "('pending', 'running') UNION ALL "
                                                      "SELECT doc, version, seq FROM jobs WHERE open_attempts > 0 "
                                                      "AND status NOT IN ('pending', 'running') ORDER BY 3"));
  std::vector<std::pair<v1::JobRecord, int64_t>> out;
  for (const auto& row : rows) {
    JC_ASSIGN_OR_RETURN(auto job, store::DecodeAnyDoc<v1::JobRecord>(row[0]));
    int64_t version = 0;
    if (!row[1] || !absl::SimpleAtoi(*row[1], &version)) {
      return absl::DataLossError(absl::StrCat("job ", job.job_id(), " has no readable version"));
    }
    out.emplace_back(std::move(job), version);
  }
  return out;
}

absl::StatusOr<int64_t> JobStore::BackfillListColumns() {
  int64_t filled = 0;
  for (;;) {
    JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT id, doc FROM jobs WHERE created_us = 0 LIMIT 1000"));
    if (rows.empty()) return filled;
    JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
    for (const auto& row : rows) {
      if (!row[0]) continue;  // an id is the primary key: never null
      // A row that does not decode is marked filled (1 µs, no center) and left as it was:
      // an old finished job must not stop the control plane from leading (helper-50 F2).
      auto job = store::DecodeAnyDoc<v1::JobRecord>(row[1]);
      if (!job.ok()) spdlog::warn("job store: job {}: {}; listed without its centers", *row[0], std::string(job.status().message()));
      // A job with no receipt time (none has one before 1970) is marked 1 µs: filled.
      const int64_t created =
          job.ok() ? std::max<int64_t>(1, absl::ToUnixMicros(FromTimestamp(job->received_at()))) : int64_t{1};
      JC_RETURN_IF_ERROR(txn->Exec("UPDATE jobs SET created_us = $1, centers = $2 WHERE id = $3 AND created_us = 0",
                                   {created, job.ok() ? CentersColumn(*job) : std::string(), *row[0]})
                             .status());
      ++filled;
    }
    JC_RETURN_IF_ERROR(txn->Commit());
  }
}

absl::StatusOr<std::string> JobStore::Identity() { return store::StoreIdentity(*store_, "control_plane"); }

absl::StatusOr<int64_t> JobStore::MaxSeq() {
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT MAX(seq) FROM jobs"));
  int64_t seq = 0;
  if (!rows.empty() && rows[0][0].has_value()) (void)absl::SimpleAtoi(*rows[0][0], &seq);
  return seq;
}

absl::StatusOr<std::map<std::string, uint64_t>> JobStore::Cursors() {
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT center_id, cursor FROM job_watch_cursors"));
  std::map<std::string, uint64_t> out;
  for (const auto& row : rows) {
    uint64_t cursor = 0;
    if (row[0] && row[1] && absl::SimpleAtoi(*row[1], &cursor)) out[*row[0]] = cursor;
  }
  return out;
}

absl::StatusOr<std::pair<std::vector<v1::JobRecord>, std::string>> JobStore::List(
    const v1::ListTrainJobsRequest& req, const std::optional<std::vector<std::string>>& projects) {
  std::vector<store::Condition> conditions;
  if (!req.project().empty()) conditions.push_back({"project = $?", req.project()});
  if (projects.has_value()) {
    if (projects->empty()) return std::make_pair(std::vector<v1::JobRecord>(), std::string());
    conditions.push_back(store::InList("project", *projects));
  }
  if (!req.user_name().empty()) conditions.push_back({"user_name = $?", req.user_name()});
  if (!req.status().empty()) {
    // A misspelt status would list nothing and look like "no such jobs".
    static const std::set<std::string> kStatuses = {"pending", "running", "completed", "failed"};
    if (!kStatuses.count(req.status())) {
      return absl::InvalidArgumentError(
          absl::StrCat("status \"", req.status(), "\" is not a job status: pending, running, completed or failed"));
    }
    conditions.push_back({"status = $?", req.status()});
  }
  if (!req.center().empty()) {
    JC_RETURN_IF_ERROR(CheckId("center", req.center()));
    // ",east," in ",east,west,": an exact name, not a prefix or a pattern.
    conditions.push_back({store_->backend() == "postgres" ? "strpos(centers, $?) > 0" : "instr(centers, $?) > 0",
                          absl::StrCat(",", req.center(), ",")});
  }
  if (req.has_created_after()) {
    conditions.push_back({"created_us >= $?", absl::ToUnixMicros(FromTimestamp(req.created_after()))});
  }
  if (req.has_created_before()) {
    conditions.push_back({"created_us < $?", absl::ToUnixMicros(FromTimestamp(req.created_before()))});
  }
  // Job ids grow with their creation (job-%08d of the sequence): by id is by age.
  if (!req.order().empty() && req.order() != "newest" && req.order() != "oldest") {
    return absl::InvalidArgumentError(
        absl::StrCat("order \"", req.order(), "\" is not an order of jobs: newest (the default) or oldest"));
  }
  JC_ASSIGN_OR_RETURN(store::DocPage page,
                      req.order() == "oldest"
                          ? store::ListDocs(*store_, "jobs", conditions, req.page_token(), req.page_size())
                          : store::ListDocsDescending(*store_, "jobs", conditions, req.page_token(), req.page_size()));
  std::vector<v1::JobRecord> jobs;
  for (const auto& doc : page.docs) {
    JC_ASSIGN_OR_RETURN(auto job, store::DecodeAnyDoc<v1::JobRecord>(doc));
    jobs.push_back(std::move(job));
  }
  return std::make_pair(std::move(jobs), page.next_page_token);
}

}  // namespace jc::jobs
