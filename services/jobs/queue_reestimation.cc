#include "services/jobs/queue_reestimation.h"

#include <iterator>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "services/estimator/job_class.h"

namespace jc::jobs {
namespace {

std::string NameKey(const v1::CreateTrainJobRequest& job) {
  return absl::StrCat(job.project(), absl::string_view("\0", 1), job.name());
}

std::string UserSpecKey(const v1::CreateTrainJobRequest& job, const std::string& spec) {
  return absl::StrCat(job.project(), absl::string_view("\0", 1), job.user_name(), absl::string_view("\0", 1), spec);
}

// Everything SharedEstimator::EstimateJob reads of a job: two jobs alike in it are
// estimated alike. Commands by a hash (a job's command may be megabytes): two commands of
// one name by one user in one project that hash alike (a 64-bit hash seeded per process)
// would share an estimate, which moves only that user's job.
std::string FiguresOf(const v1::CreateTrainJobRequest& job) {
  const absl::string_view sep("\0", 1);
  std::string key = absl::StrCat(job.project(), sep, job.user_name(), sep, job.name(), sep);
  if (auto d = estimator::EstimatedDurationOf(job)) absl::StrAppend(&key, absl::ToInt64Nanoseconds(*d));
  absl::StrAppend(&key, sep);
  if (auto d = estimator::TimeLimitOf(job)) absl::StrAppend(&key, absl::ToInt64Nanoseconds(*d));
  for (const auto& task : job.tasks()) {
    absl::StrAppend(&key, sep, task.resource_spec_id(), sep, absl::Hash<absl::string_view>()(task.command()));
  }
  return key;
}

}  // namespace

void QueueReestimation::Learned(const v1::CreateTrainJobRequest& job) {
  ++generation_;
  learned_.names.insert(NameKey(job));
  for (const auto& task : job.tasks()) learned_.user_specs.insert(UserSpecKey(job, task.resource_spec_id()));
}

bool QueueReestimation::LearnedSince::Concerns(int64_t seq, const v1::CreateTrainJobRequest& job) const {
  if (all || again.contains(seq) || names.contains(NameKey(job))) return true;
  for (const auto& task : job.tasks()) {
    if (user_specs.contains(UserSpecKey(job, task.resource_spec_id()))) return true;
  }
  return false;
}

int64_t QueueReestimation::Apply(WaitingQueue& waiting, const RecordOf& record_of,
                                 const estimator::SharedEstimator& estimator, absl::Duration unknown, absl::Time now) {
  if (!pending() || now - last_ < kEvery) return -1;
  last_ = now;
  if (!sweeping_) {
    // A sweep asks for what was learned until now; what is learned meanwhile, the next.
    sweep_ = std::move(learned_);
    learned_ = LearnedSince();
    sweeping_ = true;
    resumes_ = false;
  }
  // One estimate per set of figures this time (what it was asked, its answer).
  absl::flat_hash_map<std::string, std::optional<v1::DurationEstimate>> asked;
  int64_t n = 0, visited = 0;
  const auto& in_line = waiting.in_line();
  for (auto it = resumes_ ? in_line.upper_bound(resume_) : in_line.begin(); it != in_line.end(); ++it) {
    if (visited++ == max_visited_) {
      // Enough for this time: on from here the next (an entry came before this one).
      resume_ = *std::prev(it);
      resumes_ = true;
      return n;
    }
    const auto& [priority, since, seq, id] = *it;
    const v1::JobRecord* r = record_of(id);
    if (r == nullptr) continue;
    const v1::CreateTrainJobRequest& job = r->request();
    if (!sweep_.Concerns(seq, job)) continue;
    std::string figures = FiguresOf(job);
    auto found = asked.find(figures);
    if (found == asked.end()) {
      if (static_cast<int64_t>(asked.size()) >= max_estimates_) {
        // Enough for this time: on from here the next.
        // (asked is not empty: an entry came before this one in this call)
        resume_ = *std::prev(it);
        resumes_ = true;
        return n;
      }
      std::optional<v1::DurationEstimate> answer;
      if (auto e = estimator.EstimateJob(job, unknown)) answer = estimator::ToProto(*e);
      found = asked.emplace(std::move(figures), std::move(answer)).first;
    }
    waiting.Reestimate(seq, job, found->second ? &*found->second : nullptr);
    ++n;
  }
  sweeping_ = false;
  resumes_ = false;
  sweep_ = LearnedSince();
  return n;
}

}  // namespace jc::jobs
