// Elastic jobs (SPEC B4) in the master: what a scheduling cycle grew or shrank goes into
// the jobs' records (stored with the cycle's other decisions), then to the jobs through
// their event files, and what a job gave back is cleared of its remote tasks.
//
// The event file is the job's interface, as LSF's resize notification is: one line per
// change, "grow HOST SLOTS" or "shrink HOST SLOTS". The record keeps every line; the agent
// running task 0 appends those its file lacks, so a lost notification (an agent call that
// failed, a master that restarted) is made good by the next heartbeat.

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "executor/master/master.h"

namespace jc::nexec {

void Master::ApplyResizesLocked(const std::vector<Resize>& resizes, std::vector<pb::Job>* changed,
                                std::vector<AgentCall>* calls) {
  std::vector<int64_t> touched;
  for (const Resize& r : resizes) {
    auto it = jobs_.find(r.job_id);
    if (it == jobs_.end()) {
      LogInconsistency(r.job_id, "resize", absl::NotFoundError("the master has no such job"));
      continue;
    }
    pb::Job& job = it->second.job;
    const HostAllocation& a = r.allocation;
    int held = 0;
    for (const pb::Task& t : job.tasks()) held += HeldAllocation(t) ? t.slots() : 0;
    if (r.grow) {
      pb::Task* t = job.add_tasks();
      t->set_index(job.tasks_size() - 1);
      DescribeAllocation(a, t);
      t->set_state(pb::TASK_RUNNING);
      t->set_grown(true);
      job.add_history(absl::StrCat(Stamp(), " grew by ", a.slots, " slot(s) on ", a.host, " (elastic: ", held + a.slots,
                                   " of at most ", job.spec().max_slots(), ")"));
      job.add_resize_events(absl::StrCat("grow ", a.host, " ", a.slots));
    } else {
      // The scheduler gives back the newest growth first: the last allocation still held.
      pb::Task* given = nullptr;
      for (int i = job.tasks_size() - 1; i >= 0 && given == nullptr; --i) {
        pb::Task* t = job.mutable_tasks(i);
        if (t->grown() && HeldAllocation(*t)) given = t;
      }
      if (given == nullptr || given->host() != a.host || given->slots() < a.slots) {
        LogInconsistency(r.job_id, "shrink",
                         absl::InternalError(absl::StrCat("its newest growth is not ", a.slots, " slot(s) on ", a.host)));
        continue;
      }
      // All of it, or part of its slots (the waiting job left the rest free).
      if (given->slots() == a.slots) {
        given->set_state(pb::TASK_EXITED);
      } else {
        given->set_slots(given->slots() - a.slots);
      }
      job.add_history(absl::StrCat(Stamp(), " gave back ", a.slots, " slot(s) on ", a.host, " to job ", r.for_job,
                                   " (elastic: ", held - a.slots, " left)"));
      job.add_resize_events(absl::StrCat("shrink ", a.host, " ", a.slots));
      // Its remote tasks there end once the job holds nothing more on that host.
      bool still_there = false;
      for (const pb::Task& t : job.tasks()) still_there |= HeldAllocation(t) && t.host() == a.host;
      if (!still_there) {
        for (const pb::Task& t : job.tasks()) {
          if (!t.remote() || t.host() != a.host || t.state() == pb::TASK_EXITED || t.state() == pb::TASK_LOST) continue;
          AgentCall kill{AddressOf(a.host), {}};
          kill.request.set_job_id(job.id());
          kill.request.set_task_index(t.index());
          kill.request.set_action(pb::SignalRequest::KILL);
          calls->push_back(std::move(kill));
        }
      }
    }
    if (metrics_) metrics_->CountResize(it->second.request.queue, r.grow);
    if (std::find(touched.begin(), touched.end(), r.job_id) == touched.end()) touched.push_back(r.job_id);
  }
  for (int64_t id : touched) {
    const pb::Job& job = jobs_.at(id).job;
    changed->push_back(job);
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
