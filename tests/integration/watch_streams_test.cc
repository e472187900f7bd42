// Open watch streams do not starve the federation (SPEC C8, C6): job and center watches run
// on gRPC's callback API, so a hundred of them hold none of the threads other calls need;
// a caller is held to its own limit of open streams (429 / RESOURCE_EXHAUSTED for it alone);
// and a REST client that goes away ends its stream within about a second. Before, 64 open
// watches held all 64 request threads and every other call got 429.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <regex>

#include "absl/strings/str_cat.h"
#include "jointcloud/v1/jobs.grpc.pb.h"
#include "jointcloud/v1/registry.grpc.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/test_system.h"

namespace {

namespace v1 = ::jointcloud::v1;
using json = nlohmann::json;

std::string NewToken(jc::testing::TestSystem& s, const std::string& user) {
  auto r = s.rest->Post("/openapi/v1/tokens", {{"user_name", user}});
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
  return r.body["data"]["secret"];
}

// The value of jc_watch_streams_open in /metrics; -1 when it is not there.
double OpenStreams(jc::testing::TestSystem& s) {
  auto res = s.rest->http().Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::smatch m;
  if (!std::regex_search(res->body, m, std::regex("\\njc_watch_streams_open ([0-9.e+]+)"))) return -1;
  return std::stod(m[1]);
}

// A held-open watch of one caller, over gRPC.
struct GrpcWatch {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderInterface<v1::TrainJobEvent>> jobs;
  std::unique_ptr<grpc::ClientReaderInterface<v1::CenterEvent>> centers;
};

}  // namespace

TEST_CASE("open watch streams hold no request thread: a hundred leave every other call answered, a caller past its "
          "limit is refused alone, and a REST client that leaves ends its stream at once [C8][C6]",
          "[C8][C6]") {
  constexpr int kLimit = 100;
  jc::testing::TestSystem s([](jc::server::AppOptions& o) { o.watches.per_caller = kLimit; });
  auto viewer_rest = s.UserClient("vera", "vision", "VIEWER");
  s.UserClient("bob", "vision", "VIEWER");
  std::string vera = NewToken(s, "vera");
  std::string bob = NewToken(s, "bob");
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", s.app->grpc_port()), grpc::InsecureChannelCredentials());
  auto job_stub = v1::JobService::NewStub(channel);
  auto center_stub = v1::RegistryService::NewStub(channel);
  REQUIRE(jc::testing::WaitUntil([&] { return OpenStreams(s) == 0; }));

  // A viewer opens its limit of watches (more than the server's 64 request threads), each
  // accepted (its headers came).
  std::vector<std::unique_ptr<GrpcWatch>> watches;
  for (int i = 0; i < kLimit; ++i) {
    auto w = std::make_unique<GrpcWatch>();
    w->ctx.AddMetadata("authorization", "Bearer " + vera);
    // Long enough for the test; a server that queues the watch fails it instead of hanging.
    w->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (i % 3 == 0) {
      w->centers = center_stub->WatchCenters(&w->ctx, v1::WatchCentersRequest());
      w->centers->WaitForInitialMetadata();
    } else {
      v1::WatchTrainJobsRequest req;
      req.set_heartbeat_seconds(60);
      w->jobs = job_stub->WatchTrainJobs(&w->ctx, req);
      w->jobs->WaitForInitialMetadata();
    }
    INFO("watch " << i);
    REQUIRE(w->ctx.GetServerInitialMetadata().count("jc-watch") == 1);
    watches.push_back(std::move(w));
  }
  REQUIRE(jc::testing::WaitUntil([&] { return OpenStreams(s) == kLimit; }));

  // Everyone else is served at once: the admin over REST and gRPC, another viewer's calls
  // and watch.
  for (int i = 0; i < 20; ++i) {
    auto r = s.rest->Get("/openapi/v1/centers");
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + s.admin_token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListCentersResponse listed;
    grpc::Status st = center_stub->ListCenters(&ctx, v1::ListCentersRequest(), &listed);
    INFO(st.error_message());
    CHECK(st.ok());
  }
  CHECK(viewer_rest->Get("/openapi/v1/trainjob").http_status == 200);  // the viewer's own calls too

  // Past its limit the viewer is refused, over gRPC and REST, saying why; bob is not.
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + vera);
    auto extra = job_stub->WatchTrainJobs(&ctx, v1::WatchTrainJobsRequest());
    v1::TrainJobEvent ignored;
    while (extra->Read(&ignored)) {
    }
    grpc::Status st = extra->Finish();
    CHECK(st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK_THAT(st.error_message(), Catch::Contains("vera already has 100 watch streams open"));
  }
  {
    httplib::Client http("127.0.0.1", s.app->rest_port());
    http.set_default_headers({{"Authorization", "Bearer " + vera}});
    auto res = http.Get("/openapi/v1/trainjobs/events");
    REQUIRE(res);
    CHECK(res->status == 429);
    CHECK(json::parse(res->body, nullptr, false).value("code", "") == "RESOURCE_EXHAUSTED");
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + bob);
    v1::WatchTrainJobsRequest req;
    req.set_heartbeat_seconds(1);
    auto other = job_stub->WatchTrainJobs(&ctx, req);
    v1::TrainJobEvent event;
    bool beat = false;
    while (!beat && other->Read(&event)) beat = event.type() == v1::TrainJobEvent::HEARTBEAT;
    CHECK(beat);
    ctx.TryCancel();
    other->Finish();
  }

  // The viewer's watches end when it cancels them, and its seats come back.
  for (auto& w : watches) w->ctx.TryCancel();
  for (auto& w : watches) {
    if (w->jobs) w->jobs->Finish();
    if (w->centers) w->centers->Finish();
  }
  watches.clear();
  REQUIRE(jc::testing::WaitUntil([&] { return OpenStreams(s) == 0; }));

  // A REST client that reads a stream's first bytes and closes the connection: the
  // stream ends within seconds (the gateway writes each quiet second), though it asked
  // for no heartbeat: before, it stayed until the next event.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.app->rest_port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  std::string request = absl::StrCat("GET /openapi/v1/trainjobs/events?heartbeatSeconds=0 HTTP/1.1\r\nHost: x\r\n",
                                     "Authorization: Bearer ", vera, "\r\n\r\n");
  REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  char head[512];
  REQUIRE(read(fd, head, sizeof(head)) > 0);
  CHECK_THAT(std::string(head, 12), Catch::StartsWith("HTTP/1.1 200"));
  REQUIRE(jc::testing::WaitUntil([&] { return OpenStreams(s) == 1; }));
  close(fd);
  CHECK(jc::testing::WaitUntil([&] { return OpenStreams(s) == 0; }, std::chrono::seconds(10)));
}
