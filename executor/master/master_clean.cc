// The clean period (LSF's CLEAN_PERIOD, Slurm's MinJobAge): an ended job leaves the
// master's memory and its live table some time after it ended, for the store's history,
// so that a master that runs for months holds what is live and recent, not every job it
// ever ran. What reads a job by its id (nexec job, logs, the native adapter's polls)
// still finds it there; lists show what memory holds.

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/timestamp.h"
#include "executor/master/master.h"

namespace jc::nexec {

namespace {

// At most this many jobs per burst: one transaction (and one turn of the loop) stays
// short however many jobs ended together; the rest go in the bursts after it.
constexpr size_t kMaxCleanedPerBurst = 1000;

}  // namespace

int Master::CleanEnded() {
  if (options_.clean_period <= absl::ZeroDuration() && options_.max_ended_jobs <= 0) return 0;
  const absl::Time ended_before = options_.clean_period > absl::ZeroDuration() ? clock_->Now() - options_.clean_period
                                                                               : absl::InfinitePast();
  // Bursts of at most kMaxCleanedPerBurst until none is left: the sweep keeps up with any
  // rate of ends (thousands a second), while other messages get the loop between bursts.
  int cleaned = 0;
  for (;;) {
    const int n = OnLoop([&] { return CleanEndedOnLoop(ended_before); });
    cleaned += n;
    if (n < static_cast<int>(kMaxCleanedPerBurst)) return cleaned;
  }
}

int Master::CleanEndedOnLoop(absl::Time ended_before) {
  struct Row {
    int64_t id;
    int64_t ended_at;
    std::string submit_key;
    std::string user;
    std::string doc;
  };
  std::vector<Row> rows;
  std::vector<std::pair<absl::Time, int64_t>> later;
  // Beyond max_ended_jobs, the oldest go whatever their age.
  int64_t over = options_.max_ended_jobs > 0 ? EndedHeld() - options_.max_ended_jobs : 0;
  while (!ended_by_time_.empty() && rows.size() < kMaxCleanedPerBurst) {
    auto first = ended_by_time_.begin();
    if (first->first > ended_before && over <= 0) break;
    const auto [at, id] = *first;
    ended_by_time_.erase(first);
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.filed_ended_at != at) continue;  // ran again since (rerun)
    // Written by this very burst (its commit reads the job from memory): the next sweep.
    const bool in_burst = burst_.jobs.count(id) > 0 ||
                          std::any_of(burst_.events_before.begin(), burst_.events_before.end(),
                                      [id = id](const pb::Job& j) { return j.id() == id; });
    if (in_burst) {
      later.emplace_back(at, id);
      continue;
    }
    JobRecord& rec = it->second;
    if (rec.counted) {
      auto counted = jobs_by_state_.find(*rec.counted);
      if (counted != jobs_by_state_.end() && --counted->second <= 0) jobs_by_state_.erase(counted);
    }
    --over;
    rows.push_back({id, absl::ToUnixSeconds(at),
                    rec.job.spec().submit_key().empty() ? std::string() : SubmitKeyIndex(rec.job.spec()),
                    rec.job.spec().user(), store::EncodeBinaryDoc(rec.job)});
    jobs_.erase(it);
  }
  for (const auto& entry : later) ended_by_time_.insert(entry);
  if (rows.empty()) return 0;
  const int cleaned = static_cast<int>(rows.size());
  // Moved in the burst's transaction (commit or stop): a master that dies before it
  // commits reloads the jobs from the live table, as if never cleaned.
  burst_.writes.push_back([rows = std::move(rows)](store::Transaction& txn) -> absl::Status {
    store::Params history, ids;
    std::string in;
    for (const Row& r : rows) {
      history.insert(history.end(), {r.id, r.ended_at, r.submit_key, r.user, r.doc});
      ids.push_back(r.id);
      absl::StrAppend(&in, in.empty() ? "" : ",", "$", ids.size());
    }
    JC_RETURN_IF_ERROR(txn.Exec(absl::StrCat("INSERT INTO nexec_job_history (id, ended_at, submit_key, user_name, doc) "
                                             "VALUES ",
                                             store::ValuesList(rows.size(), 5)),
                                history)
                           .status());
    return txn.Exec(absl::StrCat("DELETE FROM nexec_jobs WHERE id IN (", in, ")"), ids).status();
  });
  return cleaned;
}

int64_t Master::EndedHeld() const {
  int64_t n = 0;
  for (const auto& [key, count] : jobs_by_state_) {
    if (job_state::Ended(key.first)) n += count;
  }
  return n;
}

absl::StatusOr<pb::Job> Master::CleanedJob(int64_t id) {
  MustNotWaitOnLoop();  // a read of the store: never on the loop
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT doc FROM nexec_job_history WHERE id = $1", {id}));
  if (rows.empty()) return absl::NotFoundError(absl::StrCat("no job ", id));
  return store::DecodeAnyDoc<pb::Job>(rows[0][0]);
}

absl::Status Master::UnlessCleaned(absl::Status status, int64_t id, absl::string_view action) {
  if (!absl::IsNotFound(status)) return status;
  absl::StatusOr<pb::Job> cleaned = CleanedJob(id);
  if (absl::IsNotFound(cleaned.status())) return status;
  if (!cleaned.ok()) return cleaned.status();
  // Past the clean period, or sooner by the bound on ended jobs held: the message names both.
  return absl::FailedPreconditionError(absl::StrCat(
      "job ", id, " ended",
      cleaned->has_ended_at() ? absl::StrCat(" at ", absl::FormatTime(FromTimestamp(cleaned->ended_at()))) : "",
      " and the master no longer holds it (its clean period is ", absl::FormatDuration(options_.clean_period),
      ", its bound ", options_.max_ended_jobs, " ended jobs): it cannot be ", action, "; `nexec job ", id,
      "` shows its record"));
}

absl::StatusOr<Master::History> Master::ReadHistory(std::optional<absl::Time> forgotten_before) {
  History h;
  JC_ASSIGN_OR_RETURN(store::Rows newest, store_->Query("SELECT MAX(id) FROM nexec_job_history"));
  if (!newest.empty() && newest[0][0].has_value() && !absl::SimpleAtoi(*newest[0][0], &h.max_id)) {
    return absl::DataLossError(absl::StrCat("nexec_job_history: an id that is not a number: ", *newest[0][0]));
  }
  JC_ASSIGN_OR_RETURN(store::Rows keys, store_->Query("SELECT submit_key, id, user_name FROM nexec_job_history "
                                                      "WHERE submit_key <> ''"));
  for (const auto& row : keys) {
    KeyedJob job;
    if (!row[0].has_value() || !row[1].has_value() || !absl::SimpleAtoi(*row[1], &job.id)) continue;
    job.user = row[2].value_or("");
    h.submit_keys.emplace_back(*row[0], std::move(job));
  }
  if (forgotten_before.has_value()) {
    JC_ASSIGN_OR_RETURN(store::Rows recent,
                        store_->Query("SELECT doc FROM nexec_job_history WHERE ended_at >= $1",
                                      {absl::ToUnixSeconds(*forgotten_before)}));
    for (const auto& row : recent) {
      JC_ASSIGN_OR_RETURN(pb::Job job, store::DecodeAnyDoc<pb::Job>(row[0]));
      h.recent.push_back(std::move(job));
    }
  }
  return h;
}

}  // namespace jc::nexec
