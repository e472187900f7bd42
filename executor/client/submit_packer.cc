#include "executor/client/submit_packer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

std::vector<absl::StatusOr<int64_t>> PackResults(const grpc::Status& call, const pb::SubmitPackResponse& answer,
                                                 int submissions) {
  return PackResults(FromGrpcStatus(call), answer, submissions);
}

std::vector<absl::StatusOr<int64_t>> PackResults(const absl::Status& call, const pb::SubmitPackResponse& answer,
                                                 int submissions) {
  if (!call.ok()) return std::vector<absl::StatusOr<int64_t>>(submissions, call);
  if (answer.results_size() != submissions) {
    return std::vector<absl::StatusOr<int64_t>>(
        submissions, absl::InternalError(absl::StrCat("the master answered a pack of ", submissions, " submissions with ",
                                                      answer.results_size(), " results")));
  }
  std::vector<absl::StatusOr<int64_t>> out;
  out.reserve(submissions);
  for (const pb::SubmitPackResult& r : answer.results()) {
    if (r.code() == 0) {
      out.emplace_back(r.job_id());
    } else {
      out.emplace_back(absl::Status(static_cast<absl::StatusCode>(r.code()), r.message()));
    }
  }
  return out;
}

std::vector<pb::SubmitPackRequest> SplitIntoPacks(std::vector<pb::SubmitRequest> submissions) {
  std::vector<pb::SubmitPackRequest> packs;
  size_t bytes = 0;
  for (pb::SubmitRequest& submission : submissions) {
    const size_t size = submission.ByteSizeLong();
    if (packs.empty() || packs.back().submissions_size() >= kMaxPackSubmissions ||
        (packs.back().submissions_size() > 0 && bytes + size > kMaxPackBytes)) {
      packs.emplace_back();
      bytes = 0;
    }
    *packs.back().add_submissions() = std::move(submission);
    bytes += size;
  }
  return packs;
}

SubmitPacker::SubmitPacker(Send send, int max_pack)
    : send_(std::move(send)), max_pack_(std::clamp(max_pack, 1, kMaxPackSubmissions)) {}

absl::StatusOr<int64_t> SubmitPacker::Submit(pb::SubmitRequest request) {
  Pending pending{std::move(request)};
  absl::MutexLock lock(&mu_);
  queue_.push_back(&pending);
  // Woken when this submission is answered, or when no pack is in flight (the caller whose
  // pack that was has gone, and this one sends the next).
  const auto answered_or_idle = [&] { return pending.done || !sending_; };
  while (!pending.done) {
    if (sending_) {
      mu_.Await(absl::Condition(&answered_or_idle));
      continue;
    }
    SendPack();  // the pack with this caller's submission, or with those ahead of it
  }
  return std::move(pending.result);
}

void SubmitPacker::SendPack() {
  sending_ = true;
  std::vector<Pending*> pack;
  pb::SubmitPackRequest request;
  size_t bytes = 0;
  // The submissions are moved in: a waiting caller does not look at its request again.
  while (!queue_.empty() && static_cast<int>(pack.size()) < max_pack_) {
    const size_t size = queue_.front()->request.ByteSizeLong();
    if (!pack.empty() && bytes + size > kMaxPackBytes) break;
    bytes += size;
    pack.push_back(queue_.front());
    queue_.pop_front();
    *request.add_submissions() = std::move(pack.back()->request);
  }
  ++packs_sent_;
  mu_.Unlock();
  pb::SubmitPackResponse answer;
  grpc::Status call;
  try {
    call = send_(request, &answer);
  } catch (...) {
    // Whatever the call threw, every caller of the pack is answered and the next pack can
    // go (the lock is taken again below): none waits for good.
    call = grpc::Status(grpc::StatusCode::INTERNAL, "the pack's call failed with an exception");
  }
  std::vector<absl::StatusOr<int64_t>> results = PackResults(call, answer, static_cast<int>(pack.size()));
  mu_.Lock();
  for (size_t i = 0; i < pack.size(); ++i) {
    pack[i]->result = std::move(results[i]);
    pack[i]->done = true;
  }
  sending_ = false;
}

int64_t SubmitPacker::packs_sent() const {
  absl::MutexLock lock(&mu_);
  return packs_sent_;
}

size_t SubmitPacker::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

}  // namespace jc::nexec
