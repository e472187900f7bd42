#pragma once

// What becomes of a nexec job when something happens to it, decided without I/O, locks or
// the master's tables (issue 32 item 1, first part): the master gathers the facts, asks
// here, and applies the outcome (requeue or finish) under its lock, then commits. The
// decisions are table-tested in tests/unit/executor/job_state_test.cc. Still inside the
// master: submit, dispatch, launch results, suspend/resume, preemption and elastic
// growth; they move here next.

#include <string>

#include "nexec/v1/nexec.pb.h"

namespace jc::nexec::job_state {

// What a user asked of a running job that has not taken effect yet.
enum class Asked { kNothing, kKill, kRequeue };

// The job's first task ended (its agent reported the exit).
struct FirstTaskEnded {
  int exit_code = 0;
  bool pre_exec_failed = false;  // the pre-exec command failed: the task never ran
  std::string message;           // the agent's words (the pre-exec's exit, its timeout)
  Asked asked = Asked::kNothing;
  std::string killed_because;    // why the master killed it (run limit, GPU misuse, ...), if it did
  int pre_exec_failures = 0;     // this attempt's included
  int pre_exec_retries = 3;      // the queue's
};

// Requeue: the job waits again for a host (its attempt ends); finish: it ends for good.
struct Outcome {
  enum class Kind { kRequeue, kFinish };
  Kind kind = Kind::kFinish;
  ::nexec::v1::JobState state = ::nexec::v1::EXIT;  // kFinish: DONE or EXIT
  int exit_code = 0;
  std::string reason;  // the history line's and the job's reason

  bool operator==(const Outcome&) const = default;
};

Outcome AfterFirstTaskEnded(const FirstTaskEnded& e);

// A host the job runs on was lost: it stopped heartbeating (`where` = "host node1 failed"),
// or its agent no longer knows the task it reported before (`where` = "task lost on node1").
Outcome AfterHostLost(bool rerun_on_host_failure, const std::string& where);

}  // namespace jc::nexec::job_state
