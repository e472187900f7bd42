#include "common/auth/auth_interceptor.h"

#include <array>
#include <functional>
#include <mutex>

namespace jc::auth {
namespace {

using grpc::experimental::InterceptionHookPoints;

std::string Metadata(const std::multimap<grpc::string_ref, grpc::string_ref>* metadata, const char* key) {
  if (metadata == nullptr) return "";
  auto it = metadata->find(key);
  return it == metadata->end() ? "" : std::string(it->second.data(), it->second.size());
}

// Each live call's decision, by its server context. Sharded so that concurrent calls
// rarely share a lock.
class CallDecisions {
 public:
  static CallDecisions& Get() {
    static auto* decisions = new CallDecisions();
    return *decisions;
  }
  void Put(const grpc::ServerContextBase* ctx, CallDecision decision) {
    Shard& s = ShardOf(ctx);
    std::lock_guard<std::mutex> lock(s.mu);
    s.decisions.insert_or_assign(ctx, std::move(decision));
  }
  void Erase(const grpc::ServerContextBase* ctx) {
    Shard& s = ShardOf(ctx);
    std::lock_guard<std::mutex> lock(s.mu);
    s.decisions.erase(ctx);
  }
  CallDecision Find(const grpc::ServerContextBase* ctx) {
    Shard& s = ShardOf(ctx);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.decisions.find(ctx);
    if (it == s.decisions.end()) {
      return {absl::UnauthenticatedError("this server did not authenticate the call"), nullptr};
    }
    return it->second;
  }

 private:
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<const grpc::ServerContextBase*, CallDecision> decisions;
  };
  Shard& ShardOf(const grpc::ServerContextBase* ctx) {
    return shards_[std::hash<const void*>()(ctx) % shards_.size()];
  }
  std::array<Shard, 16> shards_;
};

class AuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  AuthInterceptor(grpc::experimental::ServerRpcInfo* info, const CallAdmission* admission)
      : context_(info->server_context()), method_(info->method() != nullptr ? info->method() : ""),
        admission_(admission) {}
  ~AuthInterceptor() override { CallDecisions::Get().Erase(context_); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const auto* metadata = methods->GetRecvInitialMetadata();
      std::string authorization = Metadata(metadata, "authorization");
      std::string forwarded_for = Metadata(metadata, "x-forwarded-for");
      std::string request_id = Metadata(metadata, "x-request-id");
      // The gateway marks every call it makes for a REST request.
      bool via_rest = metadata != nullptr && metadata->find(kViaRestMetadata) != metadata->end();
      CallDecision decision =
          admission_->Decide({method_, authorization, forwarded_for, request_id, context_, via_rest});
      audit_ = decision.audit;
      CallDecisions::Get().Put(context_, std::move(decision));
    }
    if (audit_ != nullptr && methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // The request is a generated protobuf message (Message is its only base).
      if (const void* message = methods->GetRecvMessage(); message != nullptr) {
        CallAdmission::DescribeRequest({nullptr, audit_}, *static_cast<const google::protobuf::Message*>(message));
      }
    }
    if (audit_ != nullptr && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      admission_->Conclude({nullptr, audit_}, methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  const grpc::ServerContextBase* context_;
  std::string method_;
  const CallAdmission* admission_;
  std::shared_ptr<audit::CallAudit> audit_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(std::shared_ptr<const CallAdmission> admission) : admission_(std::move(admission)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new AuthInterceptor(info, admission_.get());
  }

 private:
  std::shared_ptr<const CallAdmission> admission_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAuthInterceptor(
    std::shared_ptr<const CallAdmission> admission) {
  return std::make_unique<Factory>(std::move(admission));
}

CallDecision DecisionOf(const grpc::ServerContextBase* context) { return CallDecisions::Get().Find(context); }

DecidedCall::DecidedCall(const grpc::ServerContextBase* context, CallDecision decision) : context_(context) {
  CallDecisions::Get().Put(context_, std::move(decision));
}
DecidedCall::~DecidedCall() { CallDecisions::Get().Erase(context_); }

}  // namespace jc::auth
