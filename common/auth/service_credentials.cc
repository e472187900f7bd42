#include "common/auth/service_credentials.h"

#include <grpcpp/create_channel.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace jc::auth {
namespace {

using grpc::experimental::InterceptionHookPoints;

class BearerInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      auto* metadata = methods->GetSendInitialMetadata();
      if (metadata != nullptr && metadata->find("authorization") == metadata->end()) {
        metadata->emplace("authorization", *header_);
      }
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class BearerFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerFactory(std::string secret) : header_(absl::StrCat("Bearer ", secret)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new BearerInterceptor(&header_);
  }

 private:
  std::string header_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> MakeBearerInterceptor(std::string secret) {
  return std::make_unique<BearerFactory>(std::move(secret));
}

std::shared_ptr<grpc::Channel> ServiceChannel(const std::string& target,
                                              std::shared_ptr<grpc::ChannelCredentials> credentials,
                                              const std::string& secret) {
  ClientInterceptors interceptors;
  interceptors.push_back(MakeBearerInterceptor(secret));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, std::move(credentials),
                                                                 grpc::ChannelArguments(), std::move(interceptors));
}

absl::StatusOr<std::string> ReadServiceSecret(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the service token file ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::string secret(absl::StripAsciiWhitespace(text.str()));
  if (secret.size() < 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("the service token in ", path, " is shorter than 32 characters; make one with "
                     "`openssl rand -base64 48 > ", path, "`"));
  }
  return secret;
}

}  // namespace jc::auth
