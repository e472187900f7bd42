// Elastic jobs (SPEC B4) in the master: what a scheduling cycle grew or shrank goes into
// the jobs' records (job_state's Grew and Shrunk; stored with the cycle's other decisions),
// then to the jobs through their event files, and what a job gave back is cleared of its
// remote tasks.
//
// The event file is the job's interface, as LSF's resize notification is: one line per
// change, "grow HOST SLOTS" or "shrink HOST SLOTS". The record keeps every line; the agent
// running task 0 appends those its file lacks, so a lost notification (an agent call that
// failed, a master that restarted) is made good by the next heartbeat.

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "executor/master/master.h"

namespace jc::nexec {

void Master::ApplyResizes(const std::vector<Resize>& resizes, std::vector<AgentCall>* calls) {
  std::vector<int64_t> touched;
  for (const Resize& r : resizes) {
    auto it = jobs_.find(r.job_id);
    if (it == jobs_.end()) {
      LogInconsistency(r.job_id, "resize", absl::NotFoundError("the master has no such job"));
      continue;
    }
    JobRecord& rec = it->second;
    const HostAllocation& a = r.allocation;
    job_state::Effects fx;
    if (r.grow) {
      pb::Task allocation;
      DescribeAllocation(a, &allocation);
      fx = job_state::Grew(rec, std::move(allocation), Now());
    } else {
      auto shrunk = job_state::Shrunk(rec, a.host, a.slots, r.for_job, Now());
      if (!shrunk.ok()) {
        LogInconsistency(r.job_id, "shrink", shrunk.status());
        continue;
      }
      fx = std::move(*shrunk);
    }
    for (int index : fx.kill_tasks) {
      AgentCall kill{AddressOf(a.host), {}};
      kill.request.set_job_id(rec.job.id());
      kill.request.set_task_index(index);
      kill.request.set_action(pb::SignalRequest::KILL);
      calls->push_back(std::move(kill));
    }
    if (metrics_) metrics_->CountResize(it->second.request.queue, r.grow);
    if (std::find(touched.begin(), touched.end(), r.job_id) == touched.end()) touched.push_back(r.job_id);
  }
  for (int64_t id : touched) {
    const pb::Job& job = jobs_.at(id).job;
    MarkDirty(id);
    if (job.tasks().empty()) continue;
    AgentCall notify{AddressOf(job.tasks(0).host()), {}};
    notify.request.set_job_id(id);
    notify.request.set_action(pb::SignalRequest::NOTIFY);
    *notify.request.mutable_events() = job.resize_events();
    calls->push_back(std::move(notify));
  }
}

void Master::CarryOutAgentCalls(const std::vector<AgentCall>& calls) {
  for (const AgentCall& call : calls) {
    absl::Status sent = call.address.empty() ? absl::UnavailableError("its host is unknown")
                                             : dialer_->Signal(call.address, call.request);
    if (sent.ok() || absl::IsNotFound(sent)) continue;  // NotFound: the task ended meanwhile
    // A notification is sent again by the next heartbeat of task 0's agent; a remote task
    // on a host the job gave back that could not be killed is ended when its agent reports
    // it (it no longer belongs to a held allocation).
    spdlog::warn("job {}: {} on {} failed: {}", call.request.job_id(),
                 pb::SignalRequest::Action_Name(call.request.action()), call.address, sent.ToString());
  }
}

}  // namespace jc::nexec
