#pragma once

// How the control plane talks to centers' adapters (jointcloud.adapter.v1, standard
// Figure 4): the monitor asks for usage and center info; the job manager submits and stops
// replicas, follows their events from a cursor, stages datasets and reads logs. The real
// client speaks gRPC with one channel per adapter address; tests may use a fake.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/time/time.h"
#include "common/auth/adapter_proof.h"
#include "common/auth/tls.h"
#include "jointcloud/adapter/v1/adapter.pb.h"

namespace prometheus {
class Registry;
}

namespace jc::southbound {

namespace apb = ::jointcloud::adapter::v1;

// Which adapter to call: a center's, at the address it registered. Over mutual TLS the
// adapter's certificate must name the center (SPEC C6), so that a center pointed at another
// center's adapter, or at an impostor, is refused. Tests may name an address alone.
struct AdapterAt {
  AdapterAt(std::string address) : address(std::move(address)) {}  // NOLINT: tests name addresses
  AdapterAt(std::string center, std::string address) : center_id(std::move(center)), address(std::move(address)) {}
  AdapterAt(const char* address) : address(address) {}  // NOLINT
  std::string center_id;
  std::string address;
};

// A byte stream to a replica's named port through its center's adapter (SPEC A17,
// adapter.proto OpenTunnel): the control plane's only way to an endpoint. One thread may
// Send while another Receives; Cancel from any thread ends both.
class Tunnel {
 public:
  virtual ~Tunnel() = default;
  // Bytes toward the endpoint (in frames of at most 64 KiB); false once the tunnel is gone.
  virtual bool Send(std::string_view data) = 0;
  // Waits until the adapter says the endpoint took the connection: OK, or why not (the
  // adapter's refusal, as Finish would say; the tunnel is then over). Call it before the
  // first Receive, or not at all.
  virtual absl::Status AwaitConnected() { return absl::OkStatus(); }
  // Nothing more toward the endpoint; its answer still comes.
  virtual void CloseSend() = 0;
  // The endpoint's next bytes; nullopt once it closed its side or the tunnel ended (Finish
  // says how).
  virtual std::optional<std::string> Receive() = 0;
  virtual void Cancel() = 0;
  // After Receive returned nullopt: OK, or why the tunnel ended (the adapter's refusal:
  // NOT_FOUND, FAILED_PRECONDITION, UNAVAILABLE, RESOURCE_EXHAUSTED).
  virtual absl::Status Finish() = 0;
};

class AdapterClient {
 public:
  virtual ~AdapterClient() = default;
  virtual absl::StatusOr<apb::Usage> GetUsage(const AdapterAt& adapter, absl::Duration timeout) = 0;
  virtual absl::StatusOr<apb::CenterInfo> GetCenterInfo(const AdapterAt& adapter, absl::Duration timeout) = 0;
  // The center's own accounting of the replicas that ended in [from, to) (reconciliation).
  virtual absl::StatusOr<apb::ListAccountingResponse> ListAccounting(const AdapterAt& adapter,
                                                                     const apb::ListAccountingRequest& req) = 0;
  // Idempotent by the replica key: a repeated submit returns the replica already there.
  virtual absl::StatusOr<apb::Replica> Submit(const AdapterAt& adapter, const apb::SubmitReplicaRequest& req) = 0;
  // Several submits in one call (SubmitReplicas), answered in order. The default, and the
  // gRPC client toward an adapter without SubmitReplicas, submits one at a time.
  virtual std::vector<absl::StatusOr<apb::Replica>> SubmitMany(const AdapterAt& adapter,
                                                               const std::vector<apb::SubmitReplicaRequest>& reqs) {
    std::vector<absl::StatusOr<apb::Replica>> out;
    for (const auto& req : reqs) out.push_back(Submit(adapter, req));
    return out;
  }
  virtual absl::Status Stop(const AdapterAt& adapter, const apb::ReplicaKey& key) = 0;
  // Takes the replica back if it has not started (WithdrawReplica): the replica withdrawn,
  // or as it is when it started; Unimplemented where the center cannot.
  virtual absl::StatusOr<apb::Replica> Withdraw(const AdapterAt& adapter, const apb::ReplicaKey& key) = 0;
  virtual absl::StatusOr<apb::Replica> Get(const AdapterAt& adapter, const apb::ReplicaKey& key) = 0;
  // Streams events after `since_cursor` to `on_event` until the stream ends, `cancelled`
  // returns true (checked between events and every second), or an error.
  virtual absl::Status Watch(const AdapterAt& adapter, uint64_t since_cursor,
                             const std::function<void(const apb::ReplicaEvent&)>& on_event,
                             const std::function<bool()>& cancelled) = 0;
  // Copies a dataset into the center from the first source that works.
  // The dataset as staged, with the source it came from and how long the copy took.
  virtual absl::StatusOr<apb::StageDatasetResponse> Stage(const AdapterAt& adapter,
                                                         const apb::StageDatasetRequest& req) = 0;
  // Gives the center an image it lacks through its image mover (A4). Unimplemented by
  // default (a client that cannot, an adapter older than the call).
  virtual absl::StatusOr<apb::StageImageResponse> StageImage(const AdapterAt& adapter,
                                                             const apb::StageImageRequest& req) {
    return absl::UnimplementedError("this client cannot stage images");
  }
  // A tunnel to the running replica `key`'s port named `port_name` (SPEC A17). The
  // adapter's refusal comes with the first Receive (and Finish). Unimplemented by default.
  virtual absl::StatusOr<std::unique_ptr<Tunnel>> OpenTunnel(const AdapterAt& adapter, const apb::ReplicaKey& key,
                                                             const std::string& port_name) {
    return absl::UnimplementedError("this client opens no tunnels");
  }
  // A command run in the running replica `key` (SPEC A17, `jcctl job exec`): a tunnel whose
  // bytes are the exec stream (common/exec/exec_stream.h), which the control plane passes
  // without reading. AwaitConnected says the command started, or why not.
  virtual absl::StatusOr<std::unique_ptr<Tunnel>> OpenExec(const AdapterAt& adapter, const apb::ReplicaKey& key,
                                                           const apb::ExecStart& exec) {
    return absl::UnimplementedError("this client runs no commands in replicas");
  }
  // The replica's whole stdout (and stderr after it, if any), up to `max_bytes`.
  virtual absl::StatusOr<std::string> ReadLog(const AdapterAt& adapter, const apb::ReplicaKey& key,
                                              int64_t max_bytes) = 0;
};

// A call the client refused because the adapter did not prove the center it was called for
// (PERMISSION_DENIED with this payload): the center is unreachable until its adapter does,
// which says nothing of the replica asked for — a dispatcher retries, it does not fail it.
inline constexpr char kUnprovenAdapterPayload[] = "type.jointcloud.dev/adapter-unproven";
inline bool IsUnprovenAdapter(const absl::Status& s) {
  return s.GetPayload(kUnprovenAdapterPayload).has_value();
}

// How adapters prove their centers (issue 44, hole 5; common/auth/adapter_proof.h).
struct AdapterProofOptions {
  // The keys issued to a center; nullopt when none was. Unset: keys are not asked (tests
  // of other things); the adapter's reported id is still compared.
  std::function<absl::StatusOr<std::optional<auth::AdapterKeys>>(const std::string& center)> keys;
  // Refuse a center that was issued no key (--require_adapter_key).
  bool require_keys = false;
  // Where jc_adapter_refusals_total{center,reason} is counted; may be null.
  prometheus::Registry* metrics = nullptr;
};

// With `tls`, every channel is mutual TLS: this process's certificate is presented, and
// the adapter's must be signed by the CA and name the center called (AdapterAt without a
// center is then refused). Without, plaintext. Before a call to a center's adapter, on
// each new connection and at least every 10 s (long watches too), the adapter must report
// the center's id and, for a center issued a key, prove it holds the key.
std::unique_ptr<AdapterClient> MakeGrpcAdapterClient(std::shared_ptr<const auth::TlsMaterial> tls = nullptr,
                                                     AdapterProofOptions proof = {});

}  // namespace jc::southbound
