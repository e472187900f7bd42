#include "common/auth/auth_interceptor.h"

#include <array>
#include <functional>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace jc::auth {
namespace {

using grpc::experimental::InterceptionHookPoints;
using Verdict = absl::StatusOr<std::shared_ptr<const Principal>>;

// Each admitted (or refused) call's verdict, by its server context, for as long as the
// call lives. Sharded so that concurrent calls rarely share a lock.
class CallVerdicts {
 public:
  static CallVerdicts& Get() {
    static auto* verdicts = new CallVerdicts();
    return *verdicts;
  }
  void Put(const grpc::ServerContextBase* ctx, Verdict verdict) {
    Shard& s = ShardOf(ctx);
    std::lock_guard<std::mutex> lock(s.mu);
    s.verdicts.insert_or_assign(ctx, std::move(verdict));
  }
  void Erase(const grpc::ServerContextBase* ctx) {
    Shard& s = ShardOf(ctx);
    std::lock_guard<std::mutex> lock(s.mu);
    s.verdicts.erase(ctx);
  }
  Verdict Find(const grpc::ServerContextBase* ctx) {
    Shard& s = ShardOf(ctx);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.verdicts.find(ctx);
    if (it == s.verdicts.end()) {
      return absl::UnauthenticatedError("this server did not authenticate the call");
    }
    return it->second;
  }

 private:
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<const grpc::ServerContextBase*, Verdict> verdicts;
  };
  Shard& ShardOf(const grpc::ServerContextBase* ctx) {
    return shards_[std::hash<const void*>()(ctx) % shards_.size()];
  }
  std::array<Shard, 16> shards_;
};

class AuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  AuthInterceptor(grpc::experimental::ServerRpcInfo* info, const Authenticator* authenticator,
                  const MethodAccess* access, RateLimiter* limiter)
      : context_(info->server_context()),
        method_(info->method() != nullptr ? info->method() : ""),
        authenticator_(authenticator),
        access_(access),
        limiter_(limiter) {}
  ~AuthInterceptor() override { CallVerdicts::Get().Erase(context_); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const auto* metadata = methods->GetRecvInitialMetadata();
      std::string authorization;
      if (metadata != nullptr) {
        auto it = metadata->find("authorization");
        if (it != metadata->end()) authorization.assign(it->second.data(), it->second.size());
      }
      CallVerdicts::Get().Put(context_, Decide(authorization));
    }
    methods->Proceed();
  }

 private:
  Verdict Decide(const std::string& authorization) const {
    auto level = access_->find(method_);
    if (level == access_->end()) {
      return absl::PermissionDeniedError(absl::StrCat("method ", method_, " is not open to callers"));
    }
    if (level->second == Access::kPublic) {
      auto principal = std::make_shared<Principal>();
      principal->name = "anonymous";
      principal->auth_method = "none";
      return std::shared_ptr<const Principal>(std::move(principal));
    }
    auto principal = authenticator_->Authenticate(authorization);
    if (!principal.ok()) return principal.status();
    if (level->second == Access::kAdmin && !principal->IsAdmin()) {
      return absl::PermissionDeniedError(
          absl::StrCat(method_, " needs a federation admin; ", principal->name, " is not one"));
    }
    if (limiter_ != nullptr && !principal->IsAdmin()) {
      if (absl::Status admitted = limiter_->Admit(principal->name); !admitted.ok()) return admitted;
    }
    return std::shared_ptr<const Principal>(std::make_shared<Principal>(std::move(*principal)));
  }

  const grpc::ServerContextBase* context_;
  std::string method_;
  const Authenticator* authenticator_;
  const MethodAccess* access_;
  RateLimiter* limiter_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  Factory(std::shared_ptr<const Authenticator> authenticator, std::shared_ptr<const MethodAccess> access,
          std::shared_ptr<RateLimiter> limiter)
      : authenticator_(std::move(authenticator)), access_(std::move(access)), limiter_(std::move(limiter)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new AuthInterceptor(info, authenticator_.get(), access_.get(), limiter_.get());
  }

 private:
  std::shared_ptr<const Authenticator> authenticator_;
  std::shared_ptr<const MethodAccess> access_;
  std::shared_ptr<RateLimiter> limiter_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAuthInterceptor(
    std::shared_ptr<const Authenticator> authenticator, std::shared_ptr<const MethodAccess> access,
    std::shared_ptr<RateLimiter> limiter) {
  return std::make_unique<Factory>(std::move(authenticator), std::move(access), std::move(limiter));
}

absl::StatusOr<std::shared_ptr<const Principal>> CallerOf(const grpc::ServerContextBase* context) {
  return CallVerdicts::Get().Find(context);
}

}  // namespace jc::auth
