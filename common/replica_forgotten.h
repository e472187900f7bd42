#pragma once

// GetReplica's answer for a key an adapter's book may have forgotten (it forgets a replica
// its center's replica_retention after it ended): FAILED_PRECONDITION carrying this trailing
// metadata, so that no other FAILED_PRECONDITION (an adapter that cannot prove its center, a
// backend's refusal, the client's own identity check) is ever taken for it. In process the
// answer carries an absl::Status payload instead: the adapter's core sets it, its gRPC edge
// turns it into the metadata, the control plane's adapter client turns the metadata back.

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace jc {

inline constexpr char kReplicaForgottenMetadata[] = "jc-replica-forgotten";
inline constexpr absl::string_view kReplicaForgottenPayload = "jointcloud.adapter/replica-forgotten";

inline absl::Status MarkReplicaForgotten(absl::Status status) {
  status.SetPayload(kReplicaForgottenPayload, absl::Cord("1"));
  return status;
}

inline bool IsReplicaForgotten(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) && status.GetPayload(kReplicaForgottenPayload).has_value();
}

}  // namespace jc
