#include "executor/master/job_state.h"

#include "absl/strings/str_cat.h"

namespace jc::nexec::job_state {

namespace pb = ::nexec::v1;

Outcome AfterFirstTaskEnded(const FirstTaskEnded& e) {
  using Kind = Outcome::Kind;
  if (e.pre_exec_failed && e.asked == Asked::kNothing) {
    // As LSF: the host was not ready for the job; it goes back to the queue, and ends after
    // the queue's number of retries.
    if (e.pre_exec_failures <= e.pre_exec_retries) return {Kind::kRequeue, pb::PENDING, 0, absl::StrCat(e.message, "; requeued")};
    return {Kind::kFinish, pb::EXIT, e.exit_code,
            absl::StrCat(e.message, "; ended after ", e.pre_exec_retries, " requeue(s)")};
  }
  if (e.asked == Asked::kRequeue) return {Kind::kRequeue, pb::PENDING, 0, "requeued by user"};
  if (e.asked == Asked::kKill) {
    return {Kind::kFinish, pb::EXIT, e.exit_code, e.killed_because.empty() ? "killed by user" : e.killed_because};
  }
  if (e.exit_code == 0) return {Kind::kFinish, pb::DONE, 0, ""};
  return {Kind::kFinish, pb::EXIT, e.exit_code,
          e.killed_because.empty() ? absl::StrCat("exited with ", e.exit_code) : e.killed_because};
}

Outcome AfterHostLost(bool rerun_on_host_failure, const std::string& where) {
  if (rerun_on_host_failure) return {Outcome::Kind::kRequeue, pb::PENDING, 0, absl::StrCat(where, "; rerun")};
  return {Outcome::Kind::kFinish, pb::EXIT, 128 + 9, where};  // as if SIGKILLed with its host
}

}  // namespace jc::nexec::job_state
