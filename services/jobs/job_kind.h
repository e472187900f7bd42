#pragma once

// What kind of work a task is (SPEC A17, Table 3's service_type): batch jobs that end,
// interactive ones a person works in, and services and streams that run until stopped.
// Header-only: the create's checks, the scheduler's spec check and the state machine all
// read it.

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "jointcloud/v1/jobs.pb.h"

namespace jc::jobs {

enum class JobKind { kBatch, kInteractive, kService, kStreaming };

inline constexpr const char* kJobKinds = "batch, interactive, service, streaming";

// "" is batch (every job before kinds existed); an unknown name is nullopt.
inline std::optional<JobKind> ParseJobKind(std::string_view name) {
  if (name.empty() || name == "batch") return JobKind::kBatch;
  if (name == "interactive") return JobKind::kInteractive;
  if (name == "service") return JobKind::kService;
  if (name == "streaming") return JobKind::kStreaming;
  return std::nullopt;
}

inline JobKind KindOf(const ::jointcloud::v1::TaskSpec& task) {
  return ParseJobKind(task.kind()).value_or(JobKind::kBatch);
}

inline const char* KindName(JobKind kind) {
  switch (kind) {
    case JobKind::kInteractive: return "interactive";
    case JobKind::kService: return "service";
    case JobKind::kStreaming: return "streaming";
    case JobKind::kBatch: break;
  }
  return "batch";
}

// "a batch", "an interactive", "a service", "a streaming": for messages.
inline std::string WithArticle(JobKind kind) {
  return std::string(kind == JobKind::kInteractive ? "an " : "a ") + KindName(kind);
}

// How the stop of an interactive job idle past its idleTimeout begins (SPEC A17): such a job
// ends completed, as one its user stopped, saying so.
inline constexpr char kIdleStop[] = "stopped: idle for";

// A replica of this kind that ends is started again: it runs until the job is stopped.
inline bool LongRunning(JobKind kind) { return kind == JobKind::kService || kind == JobKind::kStreaming; }

// The service_type a resource spec must offer to run the kind (Table 3 names interactive,
// batch and streaming; a service is long-running like a stream, so it runs on specs
// offering streaming).
inline const char* ServiceTypeFor(JobKind kind) {
  switch (kind) {
    case JobKind::kInteractive: return "interactive";
    case JobKind::kService:
    case JobKind::kStreaming: return "streaming";
    case JobKind::kBatch: break;
  }
  return "batch";
}

// How long a long-running replica that ended waits before its next start: 5 s, doubling
// with each restart in a row, at most 5 minutes (Kubernetes' CrashLoopBackOff, whose cap
// this is). A replica that ran at least kRestartResetAfter before it ended starts its
// count again (restarts_in_a_row is then 0).
inline constexpr absl::Duration kRestartResetAfter = absl::Minutes(10);
// A service's record keeps this many of a replica's latest attempts (older ones are closed,
// and their usage records hold what they cost).
inline constexpr int kKeptAttempts = 32;
inline absl::Duration RestartBackoff(int restarts_in_a_row) {
  const int doublings = std::clamp(restarts_in_a_row, 0, 6);
  return std::min(absl::Seconds(5) * (1 << doublings), absl::Minutes(5));
}

}  // namespace jc::jobs
