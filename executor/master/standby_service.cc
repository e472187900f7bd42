#include "executor/master/standby_service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace jc::nexec {
namespace {

constexpr char kLeadershipMethod[] = "/nexec.v1.Master/Leadership";

class StandbyReactor final : public grpc::ServerGenericBidiReactor {
 public:
  StandbyReactor(grpc::GenericCallbackServerContext* ctx, ::nexec::v1::LeadershipInfo info, const MungeAuth* auth)
      : ctx_(ctx), info_(std::move(info)), auth_(auth) {
    if (ctx->method() == kLeadershipMethod) {
      // Whoever asks who leads is answered, as the leader answers it: the request is read
      // first, so that a caller with a credential is answered in its session (signed).
      StartRead(&request_);
      return;
    }
    if (!info_.leader().empty()) ctx->AddTrailingMetadata(kLeaderMetadataKey, info_.leader());
    Finish(grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrCat("this nexec master (", info_.address(), ") stands by and acts on nothing: ",
                     info_.leader().empty() ? absl::StrCat("no master leads now (", info_.state(), ")")
                                            : absl::StrCat("the master at ", info_.leader(), " leads"),
                     "; call the leader (give clients every master's address: --master=A,B,C)")));
  }
  void OnReadDone(bool ok) override {
    ::nexec::v1::LeadershipRequest request;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (ok && request_.Dump(&slices).ok()) {
      for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    if (!ok || !request.ParseFromString(bytes)) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "Leadership: no request, or one that does not parse"));
      return;
    }
    if (MungeAuth::CarriesCredential(ctx_)) {
      auto caller = auth_->Verify(ctx_, "Leadership", request);
      if (!caller.ok()) {
        Finish(ToGrpcStatus(caller.status()));
        return;
      }
      auth_->SignAnswer(ctx_, *caller, info_);
    }
    std::string answer = info_.SerializeAsString();
    grpc::Slice slice(answer);
    answer_ = grpc::ByteBuffer(&slice, 1);
    StartWriteAndFinish(&answer_, grpc::WriteOptions(), grpc::Status::OK);
  }
  void OnDone() override { delete this; }

 private:
  grpc::GenericCallbackServerContext* ctx_;
  ::nexec::v1::LeadershipInfo info_;
  const MungeAuth* auth_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer answer_;
};

class StandbyService final : public grpc::CallbackGenericService {
 public:
  StandbyService(std::function<::nexec::v1::LeadershipInfo()> leadership, MungeAuth auth)
      : leadership_(std::move(leadership)), auth_(std::move(auth)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new StandbyReactor(ctx, leadership_(), &auth_);
  }

 private:
  std::function<::nexec::v1::LeadershipInfo()> leadership_;
  MungeAuth auth_;
};

}  // namespace

std::unique_ptr<grpc::CallbackGenericService> MakeStandbyService(
    std::function<::nexec::v1::LeadershipInfo()> leadership, const MungeAuth& auth) {
  return std::make_unique<StandbyService>(std::move(leadership), auth);
}

}  // namespace jc::nexec
