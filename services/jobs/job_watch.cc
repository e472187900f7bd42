#include "services/jobs/job_watch.h"

#include <algorithm>
#include <utility>

#include "common/auth/project_scope.h"
#include "common/status_macros.h"
#include "common/timestamp.h"
#include "services/jobs/job_access.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {
namespace {

bool IsEnd(const std::string& status) { return status == kCompleted || status == kFailed; }

class JobWatchFeed final : public WatchFeed<v1::TrainJobEvent> {
 public:
  JobWatchFeed(JobManager* jobs, std::shared_ptr<const auth::Principal> caller, v1::WatchTrainJobsRequest request)
      : jobs_(jobs), caller_(std::move(caller)), request_(std::move(request)), since_(request_.since_revision()) {}

  absl::Status Open(std::vector<v1::TrainJobEvent>* first, bool* end) override {
    const std::string& job_id = request_.job_id();
    if (!job_id.empty()) {
      JC_ASSIGN_OR_RETURN(auto job, jobs_->Get(job_id));
      JC_RETURN_IF_ERROR(CheckJobAccess(*caller_, job, auth::ProjectRole::kViewer));
      ended_ = IsEnd(job.status());
    }
    std::vector<v1::TrainJobEvent> batch;
    if (since_ > 0) {
      // The cursor is checked before the stream starts: a bad one is the call's status.
      JC_ASSIGN_OR_RETURN(batch, jobs_->events().Read(since_, absl::ZeroDuration()));
    } else {
      // List, then watch (as Kubernetes): the snapshot is at least as new as `since`, so
      // nothing between the two is missed (a change may be told twice).
      JC_ASSIGN_OR_RETURN(since_, jobs_->events().LastRevision());
      if (!job_id.empty() && request_.history()) {
        // Its story from CREATED, when the store still has it whole.
        const uint64_t upto = since_;
        JC_ASSIGN_OR_RETURN(batch, jobs_->events().OfJob(job_id, upto));
        if (!batch.empty() && batch.front().type() == v1::TrainJobEvent::CREATED) {
          ended_ = IsEnd(batch.back().status());
          absl::Status taken = Take(std::move(batch), first, end);
          since_ = std::max(since_, upto);  // the cursor stays at the newest revision, not the job's last
          return taken;
        }
        batch.clear();
      }
      JC_RETURN_IF_ERROR(Snapshot(&batch));
      if (!job_id.empty() && !batch.empty()) ended_ = IsEnd(batch[0].status());
    }
    return Take(std::move(batch), first, end);
  }

  absl::Status Next(std::vector<v1::TrainJobEvent>* out, bool* end) override {
    JC_ASSIGN_OR_RETURN(auto batch, jobs_->events().Read(since_, absl::ZeroDuration()));
    return Take(std::move(batch), out, end);
  }

  absl::Duration heartbeat() const override { return absl::Seconds(request_.heartbeat_seconds()); }

  v1::TrainJobEvent Heartbeat() override {
    v1::TrainJobEvent beat;
    beat.set_revision(since_);
    beat.set_type(v1::TrainJobEvent::HEARTBEAT);
    *beat.mutable_at() = ToTimestamp(absl::Now());
    return beat;
  }

 private:
  // The events of `batch` this watch sends; the cursor moves past all of them.
  absl::Status Take(std::vector<v1::TrainJobEvent> batch, std::vector<v1::TrainJobEvent>* out, bool* end) {
    const std::string& job_id = request_.job_id();
    bool replayed_all = batch.empty();
    for (auto& event : batch) {
      if (event.type() != v1::TrainJobEvent::SNAPSHOT) since_ = event.revision();
      bool wanted = job_id.empty() ? MaySeeJobsOf(*caller_, event.project()) : event.job_id() == job_id;
      if (!wanted) continue;
      bool last = !job_id.empty() && event.type() == v1::TrainJobEvent::ENDED;
      out->push_back(std::move(event));
      if (last) {
        *end = true;
        return absl::OkStatus();
      }
    }
    // A watched job that had ended: the stream closes once it replayed what the job had.
    if (ended_ && replayed_all) *end = true;
    return absl::OkStatus();
  }

  // SNAPSHOT events at `since_`: of the job, or of every job not ended the caller sees.
  absl::Status Snapshot(std::vector<v1::TrainJobEvent>* out) {
    auto add = [&](const v1::TrainJob& job) {
      v1::TrainJobEvent e;
      e.set_revision(since_);
      e.set_type(v1::TrainJobEvent::SNAPSHOT);
      e.set_job_id(job.job_id());
      e.set_status(job.status());
      e.set_status_reason(job.status_reason());
      e.set_project(job.project());
      e.set_name(job.name());
      *e.mutable_at() = job.updated_at();
      *e.mutable_job() = job;
      out->push_back(std::move(e));
    };
    if (!request_.job_id().empty()) {
      JC_ASSIGN_OR_RETURN(auto job, jobs_->Get(request_.job_id()));
      add(job);
      return absl::OkStatus();
    }
    for (const char* status : {kPending, kRunning}) {
      v1::ListTrainJobsRequest page;
      page.set_status(status);
      page.set_order("oldest");  // a watch's snapshot in the order the jobs came
      page.set_page_size(1000);
      do {
        JC_ASSIGN_OR_RETURN(auto listed, jobs_->List(page, auth::VisibleProjects(*caller_)));
        for (const auto& job : listed.jobs()) add(job);
        page.set_page_token(listed.next_page_token());
      } while (!page.page_token().empty());
    }
    return absl::OkStatus();
  }

  JobManager* const jobs_;
  const std::shared_ptr<const auth::Principal> caller_;
  const v1::WatchTrainJobsRequest request_;
  uint64_t since_;
  bool ended_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WatchFeed<v1::TrainJobEvent>>> MakeJobWatchFeed(
    JobManager* jobs, std::shared_ptr<const auth::Principal> caller, const v1::WatchTrainJobsRequest& request) {
  if (request.heartbeat_seconds() < 0 || request.heartbeat_seconds() > 3600) {
    return absl::InvalidArgumentError("heartbeat_seconds: from 1 to 3600, or 0 for none");
  }
  return std::make_unique<JobWatchFeed>(jobs, std::move(caller), request);
}

}  // namespace jc::jobs
