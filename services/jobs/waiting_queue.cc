#include "services/jobs/waiting_queue.h"

#include <algorithm>

#include "common/timestamp.h"
#include "services/estimator/job_class.h"
#include "services/jobs/job_state.h"

namespace jc::jobs {

WaitingQueue::Entry WaitingQueue::EntryOf(const v1::JobRecord& r) const {
  return {-PriorityOf(r.request()), absl::ToUnixMicros(WaitingSince(r)), r.seq(), r.job_id()};
}

bool WaitingQueue::SetPriorityGrants(absl::flat_hash_map<std::string, int> grants) {
  const bool changed = !granted_ || grants != grants_;
  grants_ = std::move(grants);
  granted_ = true;
  return changed;
}

int WaitingQueue::PriorityOf(const v1::CreateTrainJobRequest& request) const {
  const int asked = request.scheduling().priority();
  if (asked <= 0 || request.project().empty()) return asked;
  auto it = grants_.find(request.project());
  return std::min(asked, it == grants_.end() ? 0 : it->second);
}

WaitingQueue::Expectation WaitingQueue::ExpectationOf(const v1::CreateTrainJobRequest& request,
                                                      const v1::DurationEstimate* estimate) {
  Expectation out;
  if (estimate != nullptr && estimate->runs() > 0) {
    const auto& e = *estimate;
    const double median = e.median().seconds() + e.median().nanos() / 1e9;
    // A record written before `assumed` existed ranks at its median, as it did then.
    const double assumed = e.has_assumed() ? e.assumed().seconds() + e.assumed().nanos() / 1e9 : 0;
    out.expected_s = assumed > 0 ? assumed : median;
    out.one_off = assumed > median;
  } else if (auto limit = estimator::TimeLimitOf(request)) {
    out.expected_s = absl::ToDoubleSeconds(*limit);
  }
  return out;
}

void WaitingQueue::Put(const v1::JobRecord& r, double attained_s) {
  Entry entry = EntryOf(r);
  if (auto it = by_seq_.find(r.seq()); it != by_seq_.end()) in_line_.erase(it->second);  // its place may have moved
  in_line_.insert(entry);
  by_seq_[r.seq()] = std::move(entry);
  scheduler::QueuedJob q;
  q.seq = r.seq();
  q.priority = PriorityOf(r.request());
  q.project = r.request().project();
  q.submitted = absl::ToDoubleSeconds(WaitingSince(r) - absl::UnixEpoch());
  auto again = reestimated_.find(r.seq());
  const Expectation e =
      again != reestimated_.end() ? again->second : ExpectationOf(r.request(), r.has_expected() ? &r.expected() : nullptr);
  q.expected_s = e.expected_s;
  q.one_off = e.one_off;
  q.attained_s = attained_s;
  ordered_.Erase(q.seq);  // brought up to date in place
  ordered_.Push(q);
}

void WaitingQueue::Reestimate(int64_t seq, const v1::CreateTrainJobRequest& request,
                              const v1::DurationEstimate* estimate) {
  if (!by_seq_.contains(seq)) return;
  const Expectation e = ExpectationOf(request, estimate);
  reestimated_[seq] = e;
  ordered_.SetExpected(seq, e.expected_s, e.one_off);
}

void WaitingQueue::Remove(int64_t seq) {
  auto it = by_seq_.find(seq);
  if (it == by_seq_.end()) return;
  in_line_.erase(it->second);
  by_seq_.erase(it);
  reestimated_.erase(seq);
  ordered_.Erase(seq);
}

bool WaitingQueue::Contains(const v1::JobRecord& r) const { return by_seq_.count(r.seq()) > 0; }

void WaitingQueue::Clear() {
  for (const auto& [priority, since, seq, id] : in_line_) ordered_.Erase(seq);
  in_line_.clear();
  by_seq_.clear();
  reestimated_.clear();
}

bool WaitingQueue::FirstInLine(const v1::JobRecord& r) const {
  return in_line_.empty() || EntryOf(r) < *in_line_.begin();
}

std::string WaitingQueue::IdOf(int64_t seq) const {
  auto it = by_seq_.find(seq);
  return it == by_seq_.end() ? std::string() : std::get<3>(it->second);
}

}  // namespace jc::jobs
