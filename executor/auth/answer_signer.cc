#include "executor/auth/answer_signer.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/interceptor.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace jc::nexec {
namespace {

using grpc::experimental::InterceptionHookPoints;

// The session and counter a call came in: from the caller's session metadata, or, for the
// call that offered one, from this side's acceptance (counter 0).
struct CallSession {
  std::string id;
  uint64_t counter = 0;
};

std::optional<CallSession> FromCallerMetadata(grpc::ServerContextBase* ctx) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(kSessionMetadataKey);
  if (it == md.end()) return std::nullopt;
  std::vector<absl::string_view> f = absl::StrSplit(absl::string_view(it->second.data(), it->second.size()), ' ');
  CallSession s;
  if (f.size() != 3 || !absl::SimpleAtoi(f[1], &s.counter)) return std::nullopt;
  s.id = std::string(f[0]);
  return s;
}

// The answer's type, from the method's name ("/nexec.v1.Master/Heartbeat"): the bytes gRPC
// wrote are read back and digested deterministically, as the caller digests what it read.
const google::protobuf::Message* AnswerPrototype(const char* method) {
  if (method == nullptr || method[0] != '/') return nullptr;
  const std::string full = absl::StrReplaceAll(std::string(method + 1), {{"/", "."}});
  const auto* m = google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(full);
  if (m == nullptr) return nullptr;
  return google::protobuf::MessageFactory::generated_factory()->GetPrototype(m->output_type());
}

class AnswerSigner final : public grpc::experimental::Interceptor {
 public:
  AnswerSigner(grpc::experimental::ServerRpcInfo* info, MungeAuth auth) : info_(info), auth_(std::move(auth)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      // The call that offered a session is answered in it (counter 0).
      auto* md = methods->GetSendInitialMetadata();
      if (auto it = md->find(kSessionAcceptMetadataKey); it != md->end()) {
        session_ = CallSession{it->second.substr(0, it->second.find(' ')), 0};
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      if (!session_) session_ = FromCallerMetadata(info_->server_context());
      if (session_) proof_ = Proof(methods->GetSerializedSendMessage());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      // A refusal is an answer too (NOT_FOUND makes the adapter report a replica lost):
      // signed over its code and message. Not UNAUTHENTICATED: the call's own proof failed,
      // so this side does not know the caller holds the session it named.
      if (!status.ok() && status.error_code() != grpc::StatusCode::UNAUTHENTICATED) {
        if (!session_) session_ = FromCallerMetadata(info_->server_context());
        if (session_) {
          Caller in_session;
          in_session.session = session_->id;
          in_session.counter = session_->counter;
          auto proof = auth_.StatusProof(in_session, status.error_code(), status.error_message());
          if (proof.ok()) proof_ = *proof;
        }
      }
      if (!proof_.empty()) methods->GetSendTrailingMetadata()->emplace(kAnswerMetadataKey, proof_);
    }
    methods->Proceed();
  }

 private:
  std::string Proof(grpc::ByteBuffer* serialized) {
    const google::protobuf::Message* prototype = AnswerPrototype(info_->method());
    if (prototype == nullptr || serialized == nullptr) return "";
    std::vector<grpc::Slice> slices;
    if (!serialized->Dump(&slices).ok()) return "";
    std::string bytes;
    for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    std::unique_ptr<google::protobuf::Message> answer(prototype->New());
    if (!answer->ParseFromString(bytes)) return "";
    Caller in_session;
    in_session.session = session_->id;
    in_session.counter = session_->counter;
    auto proof = auth_.AnswerProof(in_session, *answer);
    return proof.ok() ? *proof : "";
  }

  grpc::experimental::ServerRpcInfo* info_;
  MungeAuth auth_;
  std::optional<CallSession> session_;
  std::string proof_;
};

class AnswerSignerFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit AnswerSignerFactory(MungeAuth auth) : auth_(std::move(auth)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    // Unary answers only: streams carry their own proofs or none, and a generic service's
    // messages are raw bytes of no known type.
    if (!auth_.enabled() || info->type() != grpc::experimental::ServerRpcInfo::Type::UNARY) return nullptr;
    return new AnswerSigner(info, auth_);
  }

 private:
  MungeAuth auth_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAnswerSigner(const MungeAuth& auth) {
  return std::make_unique<AnswerSignerFactory>(auth);
}

}  // namespace jc::nexec
