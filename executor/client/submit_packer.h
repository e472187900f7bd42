#pragma once

// Job packs from the client's side (issue 48; LSF's `bsub -pack`): the submissions of many
// threads go to the master as Master.SubmitPack calls, one pack in flight at a time. A
// submission made while a pack is in flight waits for it and goes in the next one, with
// every other that came meanwhile; so N threads that submit as fast as they are answered
// cost about one call per commit of the master instead of one each, and no thread is made
// for it (the caller whose submission finds no pack in flight sends it). Each caller gets
// its own job's answer: its id, its own refusal, or the whole call's failure.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

// The most submissions one pack may carry: the master refuses a larger pack whole.
inline constexpr int kMaxPackSubmissions = 1000;
// The most bytes a job's spec may take (the master's Master::kMaxJobSpecBytes): a client
// refuses a larger one before sending it (in a pack, one past 4 MiB failed the whole call).
inline constexpr size_t kMaxSubmissionBytes = 1 << 20;
// The most bytes of submissions a client puts in one pack (a lone submission past it goes
// alone): well inside gRPC's 4 MiB a message, which a master takes, when each job carries
// its submitter's whole environment.
inline constexpr size_t kMaxPackBytes = 2 << 20;

// `submissions` as the packs a master takes, in order: at most kMaxPackSubmissions each,
// and at most kMaxPackBytes unless a pack is one submission.
std::vector<::nexec::v1::SubmitPackRequest> SplitIntoPacks(std::vector<::nexec::v1::SubmitRequest> submissions);

// A pack's answer for each of its submissions, in its order: the job's id, or why not. A
// call that failed is every submission's failure; an answer whose count does not match
// the pack's is INTERNAL for each (nothing of it can be told apart).
std::vector<absl::StatusOr<int64_t>> PackResults(const absl::Status& call, const ::nexec::v1::SubmitPackResponse& answer,
                                                 int submissions);
std::vector<absl::StatusOr<int64_t>> PackResults(const grpc::Status& call, const ::nexec::v1::SubmitPackResponse& answer,
                                                 int submissions);

class SubmitPacker {
 public:
  // Makes one SubmitPack call: the client's own credential, deadline and choice of master.
  using Send = std::function<grpc::Status(const ::nexec::v1::SubmitPackRequest&, ::nexec::v1::SubmitPackResponse*)>;
  // `max_pack`: the most submissions a pack carries (1..kMaxPackSubmissions).
  explicit SubmitPacker(Send send, int max_pack = kMaxPackSubmissions);

  // Submits `request` in the next pack and waits for that pack's answer.
  absl::StatusOr<int64_t> Submit(::nexec::v1::SubmitRequest request);

  // Packs sent so far, and submissions waiting for a pack (tests and benchmarks read them).
  int64_t packs_sent() const;
  size_t queued() const;

 private:
  struct Pending {
    ::nexec::v1::SubmitRequest request;
    absl::StatusOr<int64_t> result = absl::UnknownError("not answered");
    bool done = false;
  };
  // Marks a pack in flight, takes the queue's first submissions into it (at most max_pack_,
  // and kMaxPackBytes unless it is one), sends it with mu_ released, and answers each of its
  // callers. Called with mu_ held and no pack in flight; returns with mu_ held.
  void SendPack() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Send send_;
  const int max_pack_;
  mutable absl::Mutex mu_;
  std::deque<Pending*> queue_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  int64_t packs_sent_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace jc::nexec
