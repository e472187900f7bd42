// The masters an agent is given (issue 47): at its start, an address that answers and is
// not a nexec master is refused; one down, or not serving yet, is taken.

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "executor/client/master_list.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {
namespace {

// A master whose Leadership answers `code` (OK: leads).
class FakeMaster final : public ::nexec::v1::Master::Service {
 public:
  explicit FakeMaster(grpc::StatusCode code) : code_(code) {}
  grpc::Status Leadership(grpc::ServerContext*, const ::nexec::v1::LeadershipRequest*,
                          ::nexec::v1::LeadershipInfo* info) override {
    if (code_ != grpc::StatusCode::OK) return grpc::Status(code_, "");
    info->set_leading(true);
    return grpc::Status::OK;
  }

 private:
  grpc::StatusCode code_;
};

struct Served {
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

Served Serve(grpc::Service* service) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  Served out;
  out.server = builder.BuildAndStart();
  REQUIRE(out.server != nullptr);
  out.address = "127.0.0.1:" + std::to_string(port);
  return out;
}

TEST_CASE("an agent's master list takes a master that is starting (CANCELLED) or down, and refuses a server that is "
          "not a master [C7]",
          "[C7]") {
  FakeMaster leading(grpc::StatusCode::OK), starting(grpc::StatusCode::CANCELLED);
  Served leader = Serve(&leading);
  Served not_yet = Serve(&starting);
  // A server of another service (nexec's Agent, which has no Leadership method): it
  // answers Leadership with UNIMPLEMENTED, as anything that is not a master does.
  ::nexec::v1::Agent::Service agent_only;
  Served other = Serve(&agent_only);

  auto list = MasterList::Parse(leader.address + "," + not_yet.address + ",127.0.0.1:1");
  REQUIRE(list.ok());
  CHECK((*list)->Check(absl::Seconds(2)).ok());

  auto wrong = MasterList::Parse(leader.address + "," + other.address);
  REQUIRE(wrong.ok());
  const absl::Status refused = (*wrong)->Check(absl::Seconds(2));
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message().find(other.address + ", which answers but is not a nexec master") != std::string::npos);
}

}  // namespace
}  // namespace jc::nexec
