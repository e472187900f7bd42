// Job events over the real `jointcloud` binary and a real adapter process (SPEC C8):
// Server-Sent Events and the WatchTrainJobs gRPC stream, resumed from their cursor after
// a SIGKILL of the control plane, and refused with a clear error for a cursor that is
// unknown or no longer kept.

#include <signal.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "jointcloud/v1/jobs.grpc.pb.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/server_processes.h"
#include "tests/testing/sse_client.h"

using nlohmann::json;
using jc::testing::Process;
using jc::testing::SseEvent;
namespace v1 = ::jointcloud::v1;

namespace {

std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("jc-e2e-events-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

using Server = jc::testing::ServerProcess;

Server StartServer(const std::string& dir, const std::string& schema, const std::string& log,
                   std::vector<std::string> extra = {}) {
  return jc::testing::StartServerProcess(JC_SERVER_BINARY, dir, schema, log, extra);
}

std::vector<SseEvent> Of(const std::vector<SseEvent>& events, const std::string& job_id) {
  std::vector<SseEvent> out;
  for (const auto& e : events) {
    if (e.data.value("jobId", "") == job_id) out.push_back(e);
  }
  return out;
}

bool HasEnded(const std::vector<SseEvent>& events, const std::string& job_id) {
  for (const auto& e : events) {
    if (e.type == "ended" && e.data.value("jobId", "") == job_id) return true;
  }
  return false;
}

std::string Submit(jc::testing::RestClient& rest, const std::string& name, const std::string& command) {
  json job = {{"name", name},
              {"tasks", {{{"name", "t"}, {"command", command}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 1}}}}};
  auto r = rest.Post("/openapi/v1/trainjob", job);
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
  return r.body["data"]["jobId"];
}

}  // namespace

TEST_CASE("job events stream over SSE and gRPC and resume from their cursor after the server is SIGKILLed",
          "[C8][A12]") {
  std::string dir = TempDir("stream");
  int adapter_port_number = 0;
  auto adapter = jc::testing::StartLocalAdapterProcess(JC_ADAPTER_LOCAL, dir, "local", 4, &adapter_port_number);
  const std::string adapter_address = "127.0.0.1:" + std::to_string(adapter_port_number);

  Server server = StartServer(dir, "e2e_events", "server1.log");
  std::string token = jc::testing::AdminToken(dir + "/admin.token");
  jc::testing::RestClient rest(server.rest_port, token);
  REQUIRE(jc::testing::AddCenterWithSpec(rest, "local", adapter_address, 4, 4096, "256Mi"));

  // The feed of every job: connected (its first heartbeat came) before the job exists.
  std::atomic<bool> connected{false};
  std::string first_job;
  std::atomic<bool> submitted{false};  // first_job is set
  jc::testing::SseReply feed;
  std::thread reader([&] {
    feed = jc::testing::ReadSse(
        server.rest_port, token, "/openapi/v1/trainjobs/events?heartbeatSeconds=1", "",
        [&](const std::vector<SseEvent>& events) { return submitted && HasEnded(events, first_job); },
        std::chrono::seconds(60), &connected);
  });
  REQUIRE(jc::testing::WaitUntil([&] { return connected.load(); }));
  first_job = Submit(rest, "first", "sleep 1");
  submitted = true;
  reader.join();
  REQUIRE(feed.http_status == 200);
  auto mine = Of(feed.events, first_job);
  REQUIRE(mine.size() >= 3);
  CHECK(mine.front().type == "created");
  CHECK(mine.front().data["status"] == "pending");
  CHECK(mine.back().type == "ended");
  CHECK(mine.back().data["status"] == "completed");
  bool ran_at_local = false;
  for (size_t i = 0; i < mine.size(); ++i) {
    INFO(mine[i].data.dump());
    CHECK(mine[i].id == mine[i].data["revision"].get<std::string>());  // uint64 is a string in JSON
    if (i > 0) CHECK(std::stoull(mine[i].id) > std::stoull(mine[i - 1].id));
    for (const auto& r : mine[i].data.value("replicas", json::array())) {
      if (r.value("phase", "") == "running" && r.value("centerID", "") == "local") ran_at_local = true;
    }
  }
  CHECK(ran_at_local);

  // A job that ended: its stream is a snapshot, and then the server ends it.
  auto ended = jc::testing::ReadSse(server.rest_port, token, "/openapi/v1/trainjob/" + first_job + "/events", "",
                                    nullptr, std::chrono::seconds(20));
  REQUIRE(ended.http_status == 200);
  CHECK(ended.ended_by_server);
  REQUIRE(ended.events.size() == 1);
  CHECK(ended.events[0].type == "snapshot");
  CHECK(ended.events[0].data["job"]["status"] == "completed");
  CHECK(ended.events[0].data["job"]["taskInfos"][0]["centerIDs"][0] == "local");

  // With ?history=true the same ended job tells its whole story (A7): the events the feed
  // above saw of it, CREATED to ENDED, with their revisions; then the server ends it.
  auto story = jc::testing::ReadSse(server.rest_port, token, "/openapi/v1/trainjob/" + first_job + "/events?history=true",
                                    "", nullptr, std::chrono::seconds(20));
  REQUIRE(story.http_status == 200);
  CHECK(story.ended_by_server);
  REQUIRE(story.events.size() == mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    CHECK(story.events[i].id == mine[i].id);
    CHECK(story.events[i].type == mine[i].type);
    CHECK(story.events[i].data["status"] == mine[i].data["status"]);
  }
  auto bad = rest.Get("/openapi/v1/trainjob/" + first_job + "/events?history=yes");
  CHECK(bad.http_status == 400);
  CHECK_THAT(bad.body.dump(), Catch::Contains("history"));

  // Followed until it runs; then the control plane dies.
  std::string second = Submit(rest, "second", "sleep 4");
  auto before = jc::testing::ReadSse(
      server.rest_port, token, "/openapi/v1/trainjob/" + second + "/events", "",
      [](const std::vector<SseEvent>& events) { return !events.empty() && events.back().data["status"] == "running"; },
      std::chrono::seconds(30));
  REQUIRE(before.http_status == 200);
  REQUIRE(!before.events.empty());
  REQUIRE(before.events.back().data["status"] == "running");
  std::string cursor = before.events.back().id;
  server.process->Signal(SIGKILL);
  REQUIRE(server.process->Wait().has_value());
  server = StartServer(dir, "e2e_events", "server2.log");

  // Resumed with Last-Event-ID: what came after the cursor, up to the end, nothing twice.
  auto after = jc::testing::ReadSse(server.rest_port, token, "/openapi/v1/trainjob/" + second + "/events", cursor,
                                    nullptr, std::chrono::seconds(60));
  INFO(server.process->Log());
  REQUIRE(after.http_status == 200);
  CHECK(after.ended_by_server);
  REQUIRE(!after.events.empty());
  for (const auto& e : after.events) CHECK(std::stoull(e.id) > std::stoull(cursor));
  CHECK(after.events.back().type == "ended");
  CHECK(after.events.back().data["status"] == "completed");

  // The same from gRPC: WatchTrainJobs from the cursor ends with ENDED at the same revision.
  {
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server.grpc_port),
                                       grpc::InsecureChannelCredentials());
    auto stub = v1::JobService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchTrainJobsRequest req;
    req.set_job_id(second);
    req.set_since_revision(std::stoull(cursor));
    auto stream = stub->WatchTrainJobs(&ctx, req);
    std::vector<v1::TrainJobEvent> got;
    for (v1::TrainJobEvent e; stream->Read(&e);) got.push_back(e);
    grpc::Status status = stream->Finish();
    INFO(status.error_message());
    CHECK(status.ok());
    REQUIRE(!got.empty());
    CHECK(got.back().type() == v1::TrainJobEvent::ENDED);
    CHECK(std::to_string(got.back().revision()) == after.events.back().id);
    CHECK(got.size() == after.events.size());

    // Quiet streams carry heartbeats when asked for.
    grpc::ClientContext quiet_ctx;
    quiet_ctx.AddMetadata("authorization", "Bearer " + token);
    quiet_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::WatchTrainJobsRequest quiet;
    quiet.set_since_revision(got.back().revision());
    quiet.set_heartbeat_seconds(1);
    auto beats = stub->WatchTrainJobs(&quiet_ctx, quiet);
    v1::TrainJobEvent beat;
    REQUIRE(beats->Read(&beat));
    CHECK(beat.type() == v1::TrainJobEvent::HEARTBEAT);
    CHECK(beat.revision() == got.back().revision());
    quiet_ctx.TryCancel();
    beats->Finish();

    // A cursor from the future is refused on gRPC as on REST.
    grpc::ClientContext bad_ctx;
    bad_ctx.AddMetadata("authorization", "Bearer " + token);
    v1::WatchTrainJobsRequest bad;
    bad.set_since_revision(got.back().revision() + 1000000);
    auto refused = stub->WatchTrainJobs(&bad_ctx, bad);
    while (refused->Read(&beat)) {
    }
    grpc::Status why = refused->Finish();
    CHECK(why.error_code() == grpc::StatusCode::OUT_OF_RANGE);
    CHECK_THAT(why.error_message(), Catch::Contains("re-read the job"));
  }

  // Bad input: one clear answer, no stream.
  auto ahead = jc::testing::ReadSse(server.rest_port, token, "/openapi/v1/trainjob/" + second + "/events",
                                    "99999999", nullptr, std::chrono::seconds(10));
  CHECK(ahead.http_status == 400);
  CHECK(ahead.error["code"] == "OUT_OF_RANGE");
  CHECK_THAT(ahead.error["errorMsg"].get<std::string>(), Catch::Contains("re-read the job"));
  auto garbled = jc::testing::ReadSse(server.rest_port, token, "/openapi/v1/trainjobs/events?since=abc", "", nullptr,
                                      std::chrono::seconds(10));
  CHECK(garbled.http_status == 400);
  CHECK(garbled.error["code"] == "INVALID_ARGUMENT");
  auto unknown = jc::testing::ReadSse(server.rest_port, token, "/openapi/v1/trainjob/no-such-job/events", "",
                                      nullptr, std::chrono::seconds(10));
  CHECK(unknown.http_status == 404);
  auto anonymous = jc::testing::ReadSse(server.rest_port, "", "/openapi/v1/trainjobs/events", "", nullptr,
                                        std::chrono::seconds(10));
  CHECK(anonymous.http_status == 401);

  server.process->Signal(SIGTERM);
  auto code = server.process->Wait();
  REQUIRE(code.has_value());
  CHECK(*code == 0);  // an open stream does not hold up a clean stop
  std::filesystem::remove_all(dir);
}

TEST_CASE("a cursor older than the events the store keeps is refused, telling the client to re-read", "[C8]") {
  std::string dir = TempDir("retention");
  Server server = StartServer(dir, "e2e_events_kept", "server.log", {"--job_event_retention=3"});
  std::string token = jc::testing::AdminToken(dir + "/admin.token");
  jc::testing::RestClient rest(server.rest_port, token);
  // No adapter answers there: the jobs wait (or retry, which only makes more events).
  REQUIRE(rest.Post("/openapi/v1/centers", {{"ai_center_id", "nowhere"},
                                            {"name", "nowhere"},
                                            {"region", "cn"},
                                            {"adapter_address", "127.0.0.1:1"},
                                            {"capacity", {{"cpu", 4}, {"memory", 4096}}}})
              .http_status == 200);
  REQUIRE(rest.Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                  {"resource_spec_name", "1 CPU"},
                                                  {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                  {"service_type", "batch"},
                                                  {"price", 1},
                                                  {"computing_center_list", "nowhere"}})
              .http_status == 200);
  for (int i = 0; i < 10; ++i) Submit(rest, "j" + std::to_string(i), "true");

  // The snapshot of the feed is at the newest revision, which includes every create
  // already answered (the job manager publishes a create's event before it answers).
  auto snap = jc::testing::ReadSse(server.rest_port, token, "/openapi/v1/trainjobs/events", "",
                                   [](const std::vector<SseEvent>& e) { return !e.empty(); }, std::chrono::seconds(10));
  REQUIRE(snap.http_status == 200);
  REQUIRE(!snap.events.empty());
  CHECK(snap.events[0].type == "snapshot");
  uint64_t newest = std::stoull(snap.events[0].id);
  REQUIRE(newest >= 10);

  auto old = jc::testing::ReadSse(server.rest_port, token, "/openapi/v1/trainjobs/events?since=1", "", nullptr,
                                  std::chrono::seconds(10));
  CHECK(old.http_status == 400);
  CHECK(old.error["code"] == "OUT_OF_RANGE");
  CHECK_THAT(old.error["errorMsg"].get<std::string>(), Catch::Contains("no longer kept"));
  CHECK_THAT(old.error["errorMsg"].get<std::string>(), Catch::Contains("re-read the job"));

  // A recent cursor still resumes.
  auto recent = jc::testing::ReadSse(server.rest_port, token, "/openapi/v1/trainjobs/events",
                                     std::to_string(newest - 1),
                                     [](const std::vector<SseEvent>& e) { return !e.empty(); }, std::chrono::seconds(10));
  CHECK(recent.http_status == 200);
  REQUIRE(!recent.events.empty());
  CHECK(std::stoull(recent.events[0].id) == newest);
  server.process->Signal(SIGTERM);
  server.process->Wait();
  std::filesystem::remove_all(dir);
}
