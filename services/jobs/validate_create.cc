#include "services/jobs/validate_create.h"

#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/jobs/job_kind.h"
#include "services/jobs/status_policy.h"
#include "common/validate.h"
#include "services/scheduler/snapshot_builder.h"  // kMaxReplicasPerTask

namespace jc::jobs {
namespace {

// Where `name` holds a control character (C0, DEL, or C1 in UTF-8), as "byte 0x0a at 5";
// "" when none. Names reach logs, events and the plan's explanation ("median of 37 runs of
// this name ..."): a newline there forges a line, an escape sequence rewrites a terminal.
std::string ControlCharacterIn(const std::string& name) {
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    const bool c1 = c == 0xc2 && i + 1 < name.size() && static_cast<unsigned char>(name[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(name[i + 1]) <= 0x9f;
    if (c < 0x20 || c == 0x7f || c1) {
      return c1 ? absl::StrFormat("U+%04X at %d", static_cast<unsigned char>(name[i + 1]), i)
                : absl::StrFormat("byte 0x%02x at %d", c, i);
    }
    // Bidirectional controls (U+202A..U+202E, U+2066..U+2069): a name that reorders the
    // text around it in a terminal or a page (attacker helper-51's "Trojan source").
    if (c == 0xe2 && i + 2 < name.size()) {
      const auto b1 = static_cast<unsigned char>(name[i + 1]), b2 = static_cast<unsigned char>(name[i + 2]);
      if ((b1 == 0x80 && b2 >= 0xaa && b2 <= 0xae) || (b1 == 0x81 && b2 >= 0xa6 && b2 <= 0xa9)) {
        return absl::StrFormat("U+%04X at %d", 0x2000 + ((b1 & 0x3f) << 6) + (b2 & 0x3f), i);
      }
    }
  }
  return "";
}

}  // namespace

void NormalizeCreate(v1::CreateTrainJobRequest& req) {
  for (auto& task : *req.mutable_tasks()) {
    if (!task.has_replica_number()) task.set_replica_number(1);
  }
}

absl::Status ValidateCreate(const v1::CreateTrainJobRequest& req) {
  // A deadline no printer can write would be stored, and every list holding it fail.
  if (absl::Status times = CheckTimestamps(req); !times.ok()) return times;
  if (req.name().empty()) return absl::InvalidArgumentError("name: a job needs a name");
  if (req.name().size() > kMaxJobNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: at most ", kMaxJobNameLength, " characters, got ", req.name().size()));
  }
  if (std::string at = ControlCharacterIn(req.name()); !at.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("name: no control characters, got ", at));
  }
  if (req.tasks().empty()) return absl::InvalidArgumentError("tasks: a job needs at least one task");
  for (int t = 0; t < req.tasks_size(); ++t) {
    const auto& task = req.tasks(t);
    std::string where = absl::StrCat("tasks[", t, "]");
    if (task.name().size() > kMaxTaskNameLength) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".name: at most ", kMaxTaskNameLength, " characters, got ", task.name().size()));
    }
    if (std::string at = ControlCharacterIn(task.name()); !at.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".name: no control characters, got ", at));
    }
    if (task.command().find_first_not_of(" \t\n") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".command: a task needs a command"));
    }
    if (task.resource_spec_id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".resourceSpecId: a task needs a resource spec"));
    }
    if (task.replica_number() < 1 || task.replica_number() > scheduler::kMaxReplicasPerTask) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".replicaNumber: must be 1 to ",
                                                     scheduler::kMaxReplicasPerTask, ", got ", task.replica_number()));
    }
    // Named ports (SPEC A17): each replica is given one per name by its center.
    if (task.ports_size() > kMaxPortsPerTask) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".ports: at most ", kMaxPortsPerTask, " ports a task, got ", task.ports_size()));
    }
    for (int k = 0; k < task.ports_size(); ++k) {
      const auto& port = task.ports(k);
      const std::string at = absl::StrCat(where, ".ports[", k, "]");
      if (absl::Status s = CheckPort(at, port.name(), port.port(), port.readiness_path()); !s.ok()) return s;
      if (!port.activity_path().empty()) {
        // Asked by the control plane as the request line's target: nothing that could end it.
        bool path_ok = port.activity_path()[0] == '/' && port.activity_path().size() <= 256;
        for (char c : port.activity_path()) path_ok &= c > 0x20 && c < 0x7f;
        if (!path_ok) {
          return absl::InvalidArgumentError(absl::StrCat(
              at, ".activityPath: '/' then printable ASCII without spaces, at most 256 bytes (\"/api/status\"); got \"",
              absl::CHexEscape(port.activity_path().substr(0, 64)), "\""));
        }
      }
      for (int j = 0; j < k; ++j) {
        if (task.ports(j).name() == port.name()) {
          return absl::InvalidArgumentError(absl::StrCat(at, ".name: \"", port.name(), "\" is named twice"));
        }
        if (port.port() != 0 && task.ports(j).port() == port.port()) {
          return absl::InvalidArgumentError(absl::StrCat(at, ".port: ", port.port(), " is asked twice"));
        }
      }
      if (port.port() != 0 && task.replica_number() > 1) {
        // Two replicas of one task cannot both hold one port of a center's range.
        return absl::InvalidArgumentError(absl::StrCat(at, ".port: a fixed port is for a task of one replica (got ",
                                                       task.replica_number(), "); leave it 0 and read ",
                                                       PortEnvName(port.name())));
      }
    }
    // Kinds (SPEC A17): one per job, and an interactive job is one person's one replica.
    const std::optional<JobKind> kind = ParseJobKind(task.kind());
    if (!kind) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".kind: must be one of ", kJobKinds, ", got \"",
                                                     absl::CHexEscape(task.kind().substr(0, 64)), "\""));
    }
    if (t > 0 && *kind != KindOf(req.tasks(0))) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".kind: every task of a job is of one kind; tasks[0] is ",
                                                     KindName(KindOf(req.tasks(0))), ", this one ", KindName(*kind)));
    }
    if (*kind == JobKind::kInteractive && (req.tasks_size() > 1 || task.replica_number() > 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, req.tasks_size() > 1 ? ".kind: an interactive job has one task, got " : ".replicaNumber: an interactive job has one replica, got ",
          req.tasks_size() > 1 ? req.tasks_size() : task.replica_number()));
    }
  }
  if (LongRunning(KindOf(req.tasks(0))) && req.has_time_limit()) {
    return absl::InvalidArgumentError(absl::StrCat("timeLimit: ", WithArticle(KindOf(req.tasks(0))),
                                                   " job runs until stopped; it takes no time limit"));
  }
  if (req.has_idle_timeout() && KindOf(req.tasks(0)) != JobKind::kInteractive) {
    return absl::InvalidArgumentError(absl::StrCat("idleTimeout: only an interactive job is stopped when idle; this is ",
                                                   WithArticle(KindOf(req.tasks(0))), " job"));
  }
  if (req.has_idle_timeout() && req.tasks(0).ports_size() == 0) {
    return absl::InvalidArgumentError(
        "idleTimeout: an interactive job's use is counted on its endpoints, and tasks[0] declares no ports");
  }
  if (LongRunning(KindOf(req.tasks(0))) && req.scheduling().gang()) {
    return absl::InvalidArgumentError(absl::StrCat("scheduling.gang: ", WithArticle(KindOf(req.tasks(0))),
                                                   " job's replicas start, and start again, one by one; no gang"));
  }
  if (req.scheduling().priority() < -kMaxPriority || req.scheduling().priority() > kMaxPriority) {
    return absl::InvalidArgumentError(absl::StrCat("scheduling.priority: must be -", kMaxPriority, " to ", kMaxPriority,
                                                   ", got ", req.scheduling().priority()));
  }
  if (req.retry_policy().max_retries() < 0 || req.retry_policy().max_retries() > kMaxRetries) {
    return absl::InvalidArgumentError(
        absl::StrCat("retryPolicy.maxRetries: must be 0 to ", kMaxRetries, ", got ", req.retry_policy().max_retries()));
  }
  if (!v1::StatusPolicy_IsValid(req.status_policy())) {
    return absl::InvalidArgumentError("statusPolicy: unknown policy");
  }
  // Run times (SPEC A16): positive, at most 366 days (what a cluster would run at all).
  constexpr int64_t kMaxDurationSeconds = 366 * 86400;
  for (const auto& [field, set, d] : {std::tuple<const char*, bool, const google::protobuf::Duration*>{
                                          "estimatedDuration", req.has_estimated_duration(), &req.estimated_duration()},
                                      {"timeLimit", req.has_time_limit(), &req.time_limit()},
                                      {"idleTimeout", req.has_idle_timeout(), &req.idle_timeout()}}) {
    if (!set) continue;
    // nanos outside 0..999,999,999 is no duration at all: the record could not be encoded
    // (protobuf's JSON refuses it), and its write would fail.
    if (d->seconds() < 0 || d->nanos() < 0 || d->nanos() > 999999999 || (d->seconds() == 0 && d->nanos() == 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": must be a positive duration such as \"600s\", got ", d->seconds(), "s"));
    }
    if (d->seconds() > kMaxDurationSeconds) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": at most 366 days (", kMaxDurationSeconds, "s), got ", d->seconds(), "s"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckScale(const v1::JobRecord& job, int task_index, int replicas) {
  const auto& req = job.request();
  if (task_index < 0 || task_index >= req.tasks_size()) {
    return absl::NotFoundError(absl::StrCat("job ", job.job_id(), " has no task ", task_index, " (it has ",
                                            req.tasks_size(), req.tasks_size() == 1 ? " task: 0)" : " tasks: 0 to ",
                                            req.tasks_size() == 1 ? "" : absl::StrCat(req.tasks_size() - 1, ")")));
  }
  const JobKind kind = KindOf(req.tasks(task_index));
  if (!LongRunning(kind)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.job_id(), " is ", WithArticle(kind), " job: only service and streaming jobs scale (",
        kind == JobKind::kInteractive ? "an interactive job has one replica)" : "a batch job's replicas are fixed when it is submitted)"));
  }
  if (replicas < 1 || replicas > scheduler::kMaxReplicasPerTask) {
    return absl::InvalidArgumentError(absl::StrCat("replicaNumber: must be 1 to ", scheduler::kMaxReplicasPerTask,
                                                   ", got ", replicas,
                                                   replicas == 0 ? " (to end the job, stop it)" : ""));
  }
  for (const auto& port : req.tasks(task_index).ports()) {
    if (port.port() != 0 && replicas > 1) {
      return absl::FailedPreconditionError(absl::StrCat("task ", task_index, " of job ", job.job_id(), " asks for port ",
                                                        port.port(), " (", port.name(),
                                                        "), which one replica holds: it does not scale past 1"));
    }
  }
  if (job.status() == kCompleted || job.status() == kFailed) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.job_id(), " has already ended (", job.status(), "); there is nothing to scale"));
  }
  if (job.stop_requested()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.job_id(), " is being stopped; it does not scale"));
  }
  return absl::OkStatus();
}

}  // namespace jc::jobs
