#include "executor/master/standby_service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/str_cat.h"

namespace jc::nexec {
namespace {

constexpr char kLeadershipMethod[] = "/nexec.v1.Master/Leadership";

class StandbyReactor final : public grpc::ServerGenericBidiReactor {
 public:
  StandbyReactor(grpc::GenericCallbackServerContext* ctx, ::nexec::v1::LeadershipInfo info) {
    if (ctx->method() == kLeadershipMethod) {
      // Whoever asks who leads is answered, as the leader answers it.
      std::string bytes = info.SerializeAsString();
      grpc::Slice slice(bytes);
      answer_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&answer_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    if (!info.leader().empty()) ctx->AddTrailingMetadata(kLeaderMetadataKey, info.leader());
    Finish(grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrCat("this nexec master (", info.address(), ") stands by and acts on nothing: ",
                     info.leader().empty() ? absl::StrCat("no master leads now (", info.state(), ")")
                                           : absl::StrCat("the master at ", info.leader(), " leads"),
                     "; call the leader (give clients every master's address: --master=A,B,C)")));
  }
  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer answer_;
};

class StandbyService final : public grpc::CallbackGenericService {
 public:
  explicit StandbyService(std::function<::nexec::v1::LeadershipInfo()> leadership)
      : leadership_(std::move(leadership)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new StandbyReactor(ctx, leadership_());
  }

 private:
  std::function<::nexec::v1::LeadershipInfo()> leadership_;
};

}  // namespace

std::unique_ptr<grpc::CallbackGenericService> MakeStandbyService(
    std::function<::nexec::v1::LeadershipInfo()> leadership) {
  return std::make_unique<StandbyService>(std::move(leadership));
}

}  // namespace jc::nexec
