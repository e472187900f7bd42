#include "services/scheduler/placement_journal.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/timestamp.h"

namespace jc::scheduler {

namespace v1 = jointcloud::v1;

namespace {

// `text` cut to at most `max` bytes on a UTF-8 character's boundary, "…" marking the cut.
void Cut(std::string* text, size_t max) {
  if (text->size() <= max) return;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>((*text)[end]) & 0xc0) == 0x80) --end;
  text->resize(end);
  text->append("…");
}

}  // namespace

PlacementJournal::PlacementJournal(store::Store* store, const ScorerRegistry* scorers,
                                   PlacementJournalOptions options)
    : store_(store), scorers_(scorers), options_(options) {}

PlacementJournal::~PlacementJournal() { Stop(); }

void PlacementJournal::Start() {
  task_.Start(options_.flush_interval, [this] {
    if (absl::Status s = Flush(); !s.ok()) {
      spdlog::warn("scheduler: placement explanations not written yet (kept for the next try): {}", s.ToString());
    }
  }, "jc-journal");
}

void PlacementJournal::Stop() {
  task_.Stop();
  if (absl::Status s = Flush(); !s.ok()) {
    spdlog::warn("scheduler: the last placement explanations were not written: {}", s.ToString());
  }
}

void PlacementJournal::Add(std::shared_ptr<const PlacementRecord> record, absl::Time decided_at) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string job_id = record->job_id;
  pending_[job_id] = Pending{std::move(record), decided_at, next_order_++};
  DropPastBound();
}

void PlacementJournal::DropPastBound() {
  // The store has not taken them for a while: the oldest explanations go.
  while (pending_.size() > options_.max_pending) {
    auto oldest = std::min_element(pending_.begin(), pending_.end(),
                                   [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    pending_.erase(oldest);
    if (dropped_ != nullptr) dropped_->Increment();
  }
}

void PlacementJournal::Trim(const PlacementJournalOptions& options, v1::Placement* placement) {
  if (placement->replicas_size() > options.max_replicas) {
    placement->set_replicas_left_out(placement->replicas_size() - options.max_replicas);
    placement->mutable_replicas()->DeleteSubrange(options.max_replicas,
                                                  placement->replicas_size() - options.max_replicas);
  }
  for (auto& replica : *placement->mutable_replicas()) {
    // The feasible centers' totals, best first: the top ones are kept.
    std::vector<double> totals;
    for (const auto& c : replica.centers()) {
      if (c.feasible()) totals.push_back(c.total());
    }
    std::sort(totals.rbegin(), totals.rend());
    const double bar = totals.empty() || options.top_scored <= 0 ? 0
                                      : totals[std::min(totals.size(), static_cast<size_t>(options.top_scored)) - 1];
    int scored = 0, filtered = 0, left_out = 0;
    google::protobuf::RepeatedPtrField<v1::CenterEvaluation> kept;
    for (auto& c : *replica.mutable_centers()) {
      const bool chosen = c.center_id() == replica.center_id() && !replica.center_id().empty();
      bool keep = chosen;
      if (!keep && c.feasible() && c.total() >= bar && scored < options.top_scored) keep = true;
      if (!keep && !c.feasible() && filtered < options.filtered) keep = true;
      if (!keep) {
        ++left_out;
        continue;
      }
      if (chosen) {
        // kept besides the best scored and the first filtered
      } else if (c.feasible()) {
        ++scored;
      } else {
        ++filtered;
      }
      Cut(c.mutable_reason(), options.max_reason_bytes);
      *kept.Add() = std::move(c);
    }
    replica.mutable_centers()->Swap(&kept);
    replica.set_centers_left_out(left_out);
  }
  // A line a task: as many as replicas are kept (helper-50 F3: a 32-task job kept all 32).
  if (placement->expected_durations_size() > options.max_replicas) {
    placement->mutable_expected_durations()->DeleteSubrange(
        options.max_replicas, placement->expected_durations_size() - options.max_replicas);
  }
  for (auto& d : *placement->mutable_expected_durations()) Cut(&d, options.max_reason_bytes);
  Cut(placement->mutable_reason(), 4 * options.max_reason_bytes);
}

void PlacementJournal::Kept(const PlacementJournalOptions& options, const PlacementRecord& record,
                            const ScorerRegistry& scorers, v1::Placement* placement) {
  placement->Clear();
  if (!record.job_id.empty()) placement->set_job_id(record.job_id);
  placement->set_placed(record.placed);
  placement->set_reason(record.reason);
  Cut(placement->mutable_reason(), 4 * options.max_reason_bytes);
  const size_t replicas = std::min(record.replicas.size(), static_cast<size_t>(options.max_replicas));
  if (record.replicas.size() > replicas) {
    placement->set_replicas_left_out(static_cast<int>(record.replicas.size() - replicas));
  }
  std::vector<bool> keep;
  std::vector<double> totals;
  for (size_t k = 0; k < replicas; ++k) {
    const ReplicaRecord& r = record.replicas[k];
    const std::vector<CenterGate>& centers = *r.centers;
    // Trim's choice, from the numbers: the chosen center, the best totals, the first filtered.
    totals.clear();
    for (const CenterRow& row : r.rows) {
      if (row.filtered_by == nullptr) totals.push_back(row.total);
    }
    std::sort(totals.rbegin(), totals.rend());
    const double bar = totals.empty() || options.top_scored <= 0 ? 0
                                      : totals[std::min(totals.size(), static_cast<size_t>(options.top_scored)) - 1];
    const std::string* chosen_id = r.chosen >= 0 ? &centers[r.chosen].id : nullptr;
    keep.assign(centers.size(), false);
    int scored = 0, filtered = 0, left_out = 0;
    size_t next = 0;
    for (size_t i = 0; i < centers.size(); ++i) {
      const bool visited = next < r.rows.size() && r.rows[next].center == static_cast<int>(i);
      const CenterRow* row = visited ? &r.rows[next++] : nullptr;
      const bool feasible = row != nullptr && row->filtered_by == nullptr;
      const bool chosen = chosen_id != nullptr && !chosen_id->empty() && centers[i].id == *chosen_id;
      bool kept = chosen;
      if (!kept && feasible && row->total >= bar && scored < options.top_scored) kept = true;
      if (!kept && !feasible && filtered < options.filtered) kept = true;
      if (!kept) {
        ++left_out;
        continue;
      }
      if (!chosen) ++(feasible ? scored : filtered);
      keep[i] = true;
    }
    v1::ReplicaPlacement* out = placement->add_replicas();
    ToProto(r, scorers, keep, out);
    for (auto& c : *out->mutable_centers()) Cut(c.mutable_reason(), options.max_reason_bytes);
    out->set_centers_left_out(left_out);
  }
  for (size_t k = 0; k < record.expected_durations.size() && k < static_cast<size_t>(options.max_replicas); ++k) {
    std::string* d = placement->add_expected_durations();
    *d = record.expected_durations[k];
    Cut(d, options.max_reason_bytes);
  }
}

absl::Status PlacementJournal::Flush() {
  std::lock_guard<std::mutex> flushing(flush_mu_);
  std::map<std::string, Pending> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(pending_);
  }
  if (batch.empty()) return absl::OkStatus();
  // Built here, off the decision path: the protobuf of what is kept (a few centers of
  // however many), as base64 protobuf (a tenth of JSON's cost; DecodeAnyDoc reads it).
  std::vector<store::Params> rows;
  rows.reserve(batch.size());
  // One message and buffer for the batch: a cleared message keeps its parts (the centers,
  // their score maps' tables) for the next row instead of allocating and freeing them each.
  v1::Placement placement;
  std::string bytes;
  for (const auto& [job_id, p] : batch) {
    Kept(options_, *p.record, *scorers_, &placement);
    *placement.mutable_decided_at() = ToTimestamp(p.decided_at);
    placement.SerializeToString(&bytes);
    rows.push_back({job_id, absl::ToUnixMicros(p.decided_at), absl::Base64Escape(bytes)});
  }
  const bool prune = (written_since_prune_ + static_cast<int64_t>(rows.size())) * 10 >= options_.keep_jobs;
  absl::Status written = [&]() -> absl::Status {
    JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
    constexpr size_t kRowsPerStatement = 1000;  // 3,000 parameters
    for (size_t first = 0; first < rows.size(); first += kRowsPerStatement) {
      const size_t n = std::min(kRowsPerStatement, rows.size() - first);
      store::Params params;
      params.reserve(n * 3);
      for (size_t i = 0; i < n; ++i) params.insert(params.end(), rows[first + i].begin(), rows[first + i].end());
      // Keys are unique within a batch (one pending entry a job): one upsert statement.
      JC_RETURN_IF_ERROR(txn->Exec(absl::StrCat("INSERT INTO job_placements (job_id, decided_us, doc) VALUES ",
                                                store::ValuesList(n, 3),
                                                " ON CONFLICT (job_id) DO UPDATE SET decided_us = excluded.decided_us, "
                                                "doc = excluded.doc"),
                                   params)
                             .status());
    }
    // Now and then (a tenth of the bound written since), the rows past the newest keep_jobs go.
    if (prune) {
      JC_RETURN_IF_ERROR(txn->Exec("DELETE FROM job_placements WHERE decided_us < (SELECT decided_us FROM "
                                   "job_placements ORDER BY decided_us DESC LIMIT 1 OFFSET $1)",
                                   {int64_t{options_.keep_jobs - 1}})
                             .status());
    }
    return txn->Commit();
  }();
  if (!written.ok()) {
    if (failed_ != nullptr) failed_->Increment();
    // Kept for the next flush, unless a newer placement of the job came meanwhile.
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [job_id, p] : batch) pending_.emplace(job_id, std::move(p));
    DropPastBound();
    return written;
  }
  written_since_prune_ = prune ? 0 : written_since_prune_ + static_cast<int64_t>(rows.size());
  if (written_ != nullptr) written_->Increment(static_cast<double>(rows.size()));
  return absl::OkStatus();
}

absl::StatusOr<v1::Placement> PlacementJournal::Read(const std::string& job_id) {
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT doc FROM job_placements WHERE job_id = $1", {job_id}));
  if (rows.empty()) {
    return absl::NotFoundError(absl::StrCat("no placement record of job \"", job_id,
                                            "\": it was never placed, or placed too long ago to be kept"));
  }
  JC_ASSIGN_OR_RETURN(v1::Placement placement, store::DecodeAnyDoc<v1::Placement>(rows[0][0]));
  placement.set_from_history(true);
  return placement;
}

void PlacementJournal::EnableMetrics(prometheus::Registry& registry) {
  auto& family = prometheus::BuildCounter()
                     .Name("jc_placement_records_total")
                     .Help("Placement explanations kept in the store (issue 49), by outcome: written; dropped "
                           "(the store did not take them and too many waited); write_failed (a flush that failed, "
                           "its records kept for the next)")
                     .Register(registry);
  written_ = &family.Add({{"outcome", "written"}});
  dropped_ = &family.Add({{"outcome", "dropped"}});
  failed_ = &family.Add({{"outcome", "write_failed"}});
}

}  // namespace jc::scheduler
