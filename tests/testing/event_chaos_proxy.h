#pragma once

// A gRPC proxy of the adapter API for fault-injection tests: it serves
// jointcloud.adapter.v1.Adapter on loopback and forwards every call to an upstream
// adapter, but mangles event streams as a faulty network or adapter might: some events
// arrive twice, some are held back and arrive after the next one (out of order, with a
// lower cursor than one already delivered). What it did is counted, so a test can check
// that the faults really happened. Draws come from a seed, so a run can be repeated.
//
// It also plays a rogue center: events a test injects are written into its event
// streams as if the center had reported them, and it remembers the last replica key the
// control plane submitted through it (what a center learns about the control plane).

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "jointcloud/adapter/v1/adapter.pb.h"

namespace jc::testing {

class EventChaosProxy {
 public:
  struct Odds {
    double duplicate = 0.1;  // an event is written a second time
    double reorder = 0.1;    // an event is held and written after the next one
  };

  // Listens on 127.0.0.1 on a free port; forwards to `upstream` ("host:port").
  EventChaosProxy(const std::string& upstream, uint64_t seed, Odds odds);
  ~EventChaosProxy();
  EventChaosProxy(const EventChaosProxy&) = delete;
  EventChaosProxy& operator=(const EventChaosProxy&) = delete;

  int port() const;
  int64_t duplicated() const;
  int64_t reordered() const;
  // Written into every open and later event stream, after what the upstream sends.
  void Inject(const ::jointcloud::adapter::v1::ReplicaEvent& e);
  // How many injected events streams wrote so far (all streams together).
  int64_t injected_written() const;
  // From now on every usage answer carries these queue reports instead of the upstream's
  // (a rogue center's, SPEC A16).
  void ForgeStartEstimates(std::vector<::jointcloud::adapter::v1::SpecStartEstimate> estimates);
  // From now on every usage answer says it was measured at `at` (any value, valid or not).
  void ForgeUsageAt(const google::protobuf::Timestamp& at);
  // From now on every submit is answered with `answer` (under the submitted key) and never
  // reaches the upstream: a center whose answer says more than "accepted".
  void AnswerSubmitsWith(const ::jointcloud::adapter::v1::Replica& answer);
  // The next `n` stops are answered UNAVAILABLE and never reach the upstream (lost on the
  // way); how many were.
  void LoseStops(int n);
  int64_t stops_lost() const;
  // While on, the center says it forgot its ended replicas' events and replicas: every event
  // stream ends OUT_OF_RANGE (the control plane reads each replica there) and every
  // GetReplica is answered FAILED_PRECONDITION, as a book that forgot it may be.
  void ClaimForgotten(bool on);
  // Until called, WatchBatches is answered UNIMPLEMENTED, as by an adapter built before it.
  // From then on the upstream's batches pass as they come (no chaos), or, with `forged`, a
  // stream is that one message (a rogue center's) and then silence.
  void ServeWatchBatches(std::optional<::jointcloud::adapter::v1::ReplicaEvents> forged = std::nullopt);
  // How many Watch and WatchBatches streams were opened through the proxy.
  int64_t watch_calls() const;
  int64_t watch_batches_calls() const;
  // From now on SubmitReplicas (a batch) is answered UNIMPLEMENTED, as by an adapter built
  // before it, which takes SubmitReplica one at a time; how many batches were asked.
  void RefuseSubmitReplicas();
  int64_t submit_replicas_calls() const;
  // The key of the last replica submitted through the proxy (empty before one).
  ::jointcloud::adapter::v1::ReplicaKey LastSubmittedKey() const;

 private:
  class Service;
  std::unique_ptr<Service> service_;
};

}  // namespace jc::testing
