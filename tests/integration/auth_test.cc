// SPEC C6: identities at the edges. Every REST route and every gRPC method refuses
// callers who prove no one (no token, a malformed header, a bad signature, an expired or
// not-yet-valid token, another issuer or audience, alg none, HMAC keyed with the public
// key, a revoked or expired API token) and changes nothing; another project's job is
// "not found"; roles too weak are refused. The route table and the services' descriptors
// drive the tables, so a new route or method cannot be missed. Runs on both stores.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/empty.pb.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <future>
#include <regex>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/audit/audit_log.h"
#include "common/auth/jwt_verifier.h"
#include "jointcloud/v1/accounting.pb.h"
#include "jointcloud/v1/jobs.grpc.pb.h"
#include "jointcloud/v1/registry.grpc.pb.h"
#include "services/server/access_policy.h"
#include "tests/testing/jwt_issuer.h"
#include "tests/testing/process.h"
#include "tests/testing/sse_client.h"
#include "tests/testing/test_system.h"

namespace {

using json = nlohmann::json;
namespace v1 = ::jointcloud::v1;

constexpr char kIssuer[] = "https://idp.example.test";
constexpr char kAudience[] = "jointcloud";

const jc::testing::JwtIssuer& Issuer() {
  static const auto* issuer = new jc::testing::JwtIssuer();
  return *issuer;
}

// Constructed before the system, which reads the clock.
struct ClockHolder {
  jc::FakeClock clock{absl::Now()};
};

// The control plane with OIDC on (the test issuer's keys) and a clock the test moves.
struct AuthSystem : ClockHolder, jc::testing::TestSystem {
  explicit AuthSystem(const std::function<void(jc::server::AppOptions&)>& more = {})
      : TestSystem([this, &more](jc::server::AppOptions& o) {
          o.clock = &clock;
          if (more) more(o);
          jc::auth::JwtOptions jwt;
          jwt.issuer = kIssuer;
          jwt.audience = kAudience;
          auto verifier = jc::auth::JwtVerifier::FromJwks(Issuer().Jwks(), jwt, &clock);
          REQUIRE(verifier.ok());
          o.auth.oidc = std::move(verifier).value();
        }) {}

  json Claims(const std::string& user) const {
    int64_t now = absl::ToUnixSeconds(clock.Now());
    return {{"iss", kIssuer}, {"aud", kAudience}, {"sub", user}, {"iat", now}, {"exp", now + 600}};
  }
  jc::testing::RestClient As(const std::string& header) {
    jc::testing::RestClient client(app->rest_port());
    if (!header.empty()) client.http().set_default_headers({{"Authorization", header}});
    return client;
  }
  std::string NewToken(const std::string& user, int ttl_seconds = 0) {
    auto r = rest->Post("/openapi/v1/tokens", {{"user_name", user}, {"ttl_seconds", ttl_seconds}});
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
    return r.body["data"]["secret"];
  }
};

struct BadCredential {
  std::string name;
  std::string header;  // the Authorization header; empty: none
};

// Every way of proving no one. The JWTs all claim the admin role, so a check that let one
// through would hand out everything.
std::vector<BadCredential> BadCredentials(AuthSystem& s) {
  std::string revoked = s.NewToken("admin");
  std::string revoked_id = revoked.substr(3, 16);
  REQUIRE(s.rest->Post("/openapi/v1/tokens/" + revoked_id + "/revoke", json::object()).http_status == 200);
  std::string expiring = s.NewToken("admin", 60);
  s.clock.Advance(absl::Seconds(61));
  std::string wrong_secret = s.admin_token.substr(0, 20) + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

  json claims = s.Claims("mallory");
  claims["roles"] = {"jointcloud-admin"};
  int64_t now = absl::ToUnixSeconds(s.clock.Now());
  auto with = [&](const char* key, json value) {
    json c = claims;
    c[key] = std::move(value);
    return c;
  };
  const auto& issuer = Issuer();
  json rs = {{"alg", "RS256"}, {"typ", "JWT"}, {"kid", "rsa-1"}};
  auto bearer = [](const std::string& t) { return "Bearer " + t; };
  return {
      {"no token", ""},
      {"a malformed header (Basic)", "Basic YWRtaW46YWRtaW4="},
      {"an empty bearer", "Bearer "},
      {"a bearer that is neither an API token nor a JWT", "Bearer opensesame"},
      {"an unknown API token", "Bearer jc_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
      {"an API token with a wrong secret", bearer(wrong_secret)},
      {"a revoked API token", bearer(revoked)},
      {"an expired API token", bearer(expiring)},
      {"a JWT with a bad signature", bearer(issuer.SignRaw(rs, claims, "foreign"))},
      {"an expired JWT", bearer(issuer.Sign(with("exp", now - 3600)))},
      {"a JWT not valid yet", bearer(issuer.Sign(with("nbf", now + 3600)))},
      {"a JWT of another issuer", bearer(issuer.Sign(with("iss", "https://evil.example.test")))},
      {"a JWT for another audience", bearer(issuer.Sign(with("aud", "someone-else")))},
      {"a JWT with alg none", bearer(issuer.SignRaw({{"alg", "none"}, {"typ", "JWT"}}, claims, "none"))},
      {"a JWT signed HS256 with the public key",
       bearer(issuer.SignRaw({{"alg", "HS256"}, {"typ", "JWT"}, {"kid", "rsa-1"}}, claims, "HS256-public"))},
  };
}

// What an admin sees of everything a call could change (token last-use times aside).
std::string Snapshot(AuthSystem& s) {
  std::string all;
  for (const char* path : {"/openapi/v1/centers", "/openapi/v1/resourcespecs", "/openapi/v1/images",
                           "/openapi/v1/datasets", "/openapi/v1/trainjob", "/openapi/v1/users", "/openapi/v1/projects",
                           "/openapi/v1/tokens", "/openapi/v1/resourcespecs/x1/centers"}) {
    auto r = s.rest->Get(path);
    REQUIRE(r.http_status == 200);
    json data = r.body["data"];
    if (data.contains("tokens")) {
      for (auto& t : data["tokens"]) t.erase("last_used_at");
    }
    all += data.dump() + "\n";
  }
  return all;
}

// One of each thing, all named x1, so a refused call that acted anyway would show.
void Seed(AuthSystem& s) {
  auto must = [](const jc::testing::RestReply& r) {
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
  };
  must(s.rest->Post("/openapi/v1/centers",
                    {{"ai_center_id", "x1"}, {"name", "x1"}, {"region", "r"}, {"data_roots", {"/data"}}}));
  must(s.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "x1"},
                                                  {"resource_spec_name", "x1"},
                                                  {"resource_quantity", {{"cpu", "1"}}},
                                                  {"service_type", "batch"},
                                                  {"computing_center_list", "x1"}}));
  must(s.rest->Post("/openapi/v1/images", {{"image_id", "x1"}, {"name", "x1"}, {"ai_center_id", "x1"},
                                          {"framework", "PyTorch"}, {"resource_spec", "x1"}}));
  must(s.rest->Post("/openapi/v1/datasets",
                    {{"data_name", "x1"}, {"data_version", "x1"}, {"created_user", "admin"},
                     {"location", {{{"ai_center_id", "x1"}, {"dataset_url", "file:///data/x1"}, {"access", "r"}}}}}));
  must(s.rest->Post("/openapi/v1/projects", {{"name", "x1"}}));
  must(s.rest->Post("/openapi/v1/users", {{"name", "x1"}}));
}

// A route's path with every parameter filled: indexes with 0, the rest with x1.
std::string Fill(const std::string& path) {
  static const std::regex kIndex(R"(\{[A-Za-z]*Index\})");
  static const std::regex kParam(R"(\{[^}]+\})");
  return std::regex_replace(std::regex_replace(path, kIndex, "0"), kParam, "x1");
}

// A body each route's gateway side takes, so the call reaches the server's check.
std::string BodyFor(const std::string& path) {
  if (path.find("/projects/{project}") != std::string::npos) return R"({"role": "MEMBER"})";
  return "{}";
}

std::string MethodName(const google::protobuf::MethodDescriptor* m) {
  return "/" + m->service()->full_name() + "/" + m->name();
}

// Every service of the control plane's API, from the generated descriptors.
std::vector<const google::protobuf::ServiceDescriptor*> ControlPlaneServices() {
  std::vector<const google::protobuf::ServiceDescriptor*> out;
  // Linked in (a static library's file that nothing names would not be in the pool).
  (void)jointcloud::v1::UsageRecord::descriptor();
  for (const char* file : {"jointcloud/v1/registry.proto", "jointcloud/v1/catalog.proto", "jointcloud/v1/datamon.proto",
                           "jointcloud/v1/monitor.proto", "jointcloud/v1/scheduler.proto", "jointcloud/v1/jobs.proto",
                           "jointcloud/v1/identity.proto", "jointcloud/v1/accounting.proto"}) {
    const auto* fd = google::protobuf::DescriptorPool::generated_pool()->FindFileByName(file);
    REQUIRE(fd != nullptr);
    for (int i = 0; i < fd->service_count(); ++i) out.push_back(fd->service(i));
  }
  return out;
}

}  // namespace

TEST_CASE("every gRPC method of the control plane has an access level, and the table names no other [C6]", "[C6]") {
  auto table = jc::server::ControlPlaneAccess();
  std::set<std::string> methods;
  for (const auto* service : ControlPlaneServices()) {
    for (int i = 0; i < service->method_count(); ++i) {
      std::string name = MethodName(service->method(i));
      methods.insert(name);
      INFO(name);
      CHECK(table->count(name) == 1);
    }
  }
  for (const auto& [name, access] : *table) {
    // gRPC's own services (health checks, server reflection) are not among ours.
    if (name.rfind("/grpc.health.", 0) == 0 || name.rfind("/grpc.reflection.", 0) == 0) continue;
    INFO(name);
    CHECK(methods.count(name) == 1);
  }
}

TEST_CASE("every REST route answers 401 to callers who prove no one, and nothing changes [C6][C5]", "[C6][C5]") {
  AuthSystem s;
  Seed(s);
  auto bad = BadCredentials(s);
  std::string before = Snapshot(s);
  REQUIRE(s.app->gateway() != nullptr);
  int checked = 0;
  for (const auto& route : s.app->gateway()->routes()) {
    std::string path = Fill(route.path);
    for (const auto& credential : bad) {
      auto client = s.As(credential.header);
      auto r = client.Send(route.method, path, BodyFor(route.path));
      INFO(route.method << " " << path << " with " << credential.name << ": " << r.body.dump());
      CHECK(r.http_status == 401);
      CHECK(r.body.value("code", "") == "UNAUTHENTICATED");
      CHECK_FALSE(r.body.value("errorMsg", "").empty());
      ++checked;
    }
  }
  CHECK(checked >= 50 * static_cast<int>(bad.size()));
  CHECK(Snapshot(s) == before);
  // The public ends stay public: health, metrics, the API's description.
  auto anonymous = s.As("");
  CHECK(anonymous.Get("/healthz").http_status == 200);
  CHECK(anonymous.Raw("/openapi/v1/openapi.json").find("\"openapi\"") != std::string::npos);
}

TEST_CASE("every gRPC method answers UNAUTHENTICATED to callers who prove no one, and nothing changes [C6][C5]",
          "[C6][C5]") {
  AuthSystem s;
  Seed(s);
  auto bad = BadCredentials(s);
  std::string before = Snapshot(s);
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(s.app->grpc_port()), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  int checked = 0;
  for (const auto* service : ControlPlaneServices()) {
    for (int i = 0; i < service->method_count(); ++i) {
      const auto* method = service->method(i);
      for (const auto& credential : bad) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        if (!credential.header.empty()) ctx.AddMetadata("authorization", credential.header);
        grpc::Status status;
        if (method->server_streaming()) {
          // The streams, through their typed stubs.
          if (method->name() == "WatchCenters") {
            auto stub = v1::RegistryService::NewStub(channel);
            auto reader = stub->WatchCenters(&ctx, v1::WatchCentersRequest());
            v1::CenterEvent event;
            CHECK_FALSE(reader->Read(&event));
            status = reader->Finish();
          } else if (method->name() == "WatchTrainJobs") {
            auto stub = v1::JobService::NewStub(channel);
            auto reader = stub->WatchTrainJobs(&ctx, v1::WatchTrainJobsRequest());
            v1::TrainJobEvent event;
            CHECK_FALSE(reader->Read(&event));
            status = reader->Finish();
          } else {
            REQUIRE(method->name() == "ReadReplicaLog");
            auto stub = v1::JobService::NewStub(channel);
            v1::ReadReplicaLogRequest req;
            req.set_job_id("x1");
            auto reader = stub->ReadReplicaLog(&ctx, req);
            v1::LogChunk chunk;
            CHECK_FALSE(reader->Read(&chunk));
            status = reader->Finish();
          }
        } else {
          // An empty message is a valid request of every type.
          grpc::ByteBuffer request, response;
          grpc::Slice empty("");
          request = grpc::ByteBuffer(&empty, 1);
          std::promise<grpc::Status> done;
          generic.UnaryCall(&ctx, MethodName(method), grpc::StubOptions(), &request, &response,
                            [&done](grpc::Status st) { done.set_value(st); });
          status = done.get_future().get();
        }
        INFO(MethodName(method) << " with " << credential.name << ": " << status.error_message());
        CHECK(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
        ++checked;
      }
    }
  }
  CHECK(checked >= 50 * static_cast<int>(bad.size()));
  CHECK(Snapshot(s) == before);
}

TEST_CASE("a role too weak is refused with 403, and nothing changes [C6][C5]", "[C6][C5]") {
  AuthSystem s;
  Seed(s);
  auto member = s.UserClient("mia", "ml", "MEMBER");
  std::string before = Snapshot(s);
  // Federation-level changes need an admin (or the center's operator).
  const std::vector<std::tuple<std::string, std::string, std::string>> refused = {
      {"POST", "/openapi/v1/centers", R"({"ai_center_id": "mine", "name": "mine"})"},
      {"DELETE", "/openapi/v1/centers/x1", ""},
      {"PATCH", "/openapi/v1/centers/x1", R"({"adapter_address": "evil.example.test:1"})"},
      {"POST", "/openapi/v1/centers/x1/heartbeat", "{}"},
      {"POST", "/openapi/v1/resourcespecs",
       R"({"resource_spec_id": "s2", "resource_spec_name": "s2", "resource_quantity": {"cpu": "1"}, "service_type": "batch"})"},
      {"PUT", "/openapi/v1/resourcespecs/x1/centers/x1/price", R"({"price": 1})"},
      {"DELETE", "/openapi/v1/images/x1", ""},
      {"DELETE", "/openapi/v1/datasets/x1/x1", ""},
      {"POST", "/openapi/v1/users", R"({"name": "eve", "federation_admin": true})"},
      {"PUT", "/openapi/v1/users/mia/projects/x1", R"({"role": "OWNER"})"},
      {"POST", "/openapi/v1/tokens", R"({"user_name": "admin"})"},
      {"GET", "/openapi/v1/tokens?user_name=admin", ""},
      {"GET", "/openapi/v1/users", ""},
  };
  for (const auto& [method, path, body] : refused) {
    auto r = member->Send(method, path, body);
    INFO(method << " " << path << ": " << r.body.dump());
    CHECK(r.http_status == 403);
    CHECK(r.body.value("code", "") == "PERMISSION_DENIED");
  }
  CHECK(Snapshot(s) == before);
  // Reads of the federation's catalogs are open to any caller.
  CHECK(member->Get("/openapi/v1/centers/x1").http_status == 200);
  CHECK(member->Get("/openapi/v1/resourcespecs").http_status == 200);
}

TEST_CASE("a user creates, lists and revokes its own API tokens, and no other user's [C6]", "[C6]") {
  AuthSystem s;
  Seed(s);
  auto mia = s.UserClient("mia", "ml", "MEMBER");
  auto made = mia->Post("/openapi/v1/tokens", {{"user_name", "mia"}, {"description", "laptop"}});
  INFO(made.body.dump());
  REQUIRE(made.http_status == 200);
  const std::string secret = made.body["data"]["secret"];
  const std::string id = made.body["data"]["token"]["token_id"];
  auto laptop = s.As("Bearer " + secret);
  CHECK(laptop.Get("/openapi/v1/whoami").body["data"].value("name", "") == "mia");
  // A user's listing is of its own tokens, whatever else exists.
  auto listed = mia->Get("/openapi/v1/tokens");
  REQUIRE(listed.http_status == 200);
  bool found = false;
  for (const auto& t : listed.body["data"]["tokens"]) {
    CHECK(t.value("user_name", "") == "mia");
    found |= t.value("token_id", "") == id;
  }
  CHECK(found);
  // Another user's tokens: not listed, not made, not revoked.
  CHECK(mia->Get("/openapi/v1/tokens?user_name=admin").http_status == 403);
  CHECK(mia->Post("/openapi/v1/tokens", {{"user_name", "admin"}}).http_status == 403);
  auto admins = s.rest->Get("/openapi/v1/tokens?user_name=admin");
  REQUIRE(!admins.body["data"]["tokens"].empty());
  const std::string admin_token_id = admins.body["data"]["tokens"][0]["token_id"];
  auto refused = mia->Post("/openapi/v1/tokens/" + admin_token_id + "/revoke", json::object());
  CHECK(refused.http_status == 403);
  CHECK(s.rest->Get("/openapi/v1/whoami").http_status == 200);  // the admin's token still works
  // Its own: revoked at once.
  CHECK(mia->Post("/openapi/v1/tokens/" + id + "/revoke", json::object()).http_status == 200);
  CHECK(laptop.Get("/openapi/v1/whoami").http_status == 401);
}

TEST_CASE("a center operator changes its own center and no other [C6]", "[C6]") {
  AuthSystem s;
  Seed(s);
  REQUIRE(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "x2"}, {"name", "x2"}}).http_status == 200);
  REQUIRE(s.rest->Post("/openapi/v1/users", {{"name", "olga"}, {"operator_of", {"x1"}}}).http_status == 200);
  auto olga = jc::testing::RestClient(s.app->rest_port(), s.NewToken("olga"));
  CHECK(olga.Post("/openapi/v1/centers/x1/heartbeat", json::object()).http_status == 200);
  CHECK(olga.Send("PATCH", "/openapi/v1/centers/x1", R"({"region": "east"})").http_status == 200);
  CHECK(s.rest->Get("/openapi/v1/centers/x1").body["data"]["region"] == "east");
  auto other = olga.Send("PATCH", "/openapi/v1/centers/x2", R"({"adapter_address": "evil.example.test:1"})");
  INFO(other.body.dump());
  CHECK(other.http_status == 403);
  CHECK(s.rest->Get("/openapi/v1/centers/x2").body["data"].value("adapter_address", "") == "");
  CHECK(olga.Post("/openapi/v1/centers/x2/heartbeat", json::object()).http_status == 403);
}

// Spec cpu-1, offered only at a center whose adapter never answers, and a job of it: the
// job waits (it could run there, were the center up; one no center could ever run is
// refused at submit), which is all the tests of who may see and stop it need.
json WaitingJob(AuthSystem& s) {
  auto center = s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "parked"},
                                                     {"name", "parked"},
                                                     {"region", "cn"},
                                                     {"adapter_address", "127.0.0.1:1"},
                                                     {"capacity", {{"cpu", 4}, {"memory", 4096}}}});
  INFO(center.body.dump());
  REQUIRE(center.http_status == 200);
  auto spec = s.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                        {"resource_spec_name", "1 CPU"},
                                                        {"resource_quantity", {{"cpu", "1"}}},
                                                        {"service_type", "batch"},
                                                        {"computing_center_list", "parked"}});
  INFO(spec.body.dump());
  REQUIRE(spec.http_status == 200);
  return {{"name", "j"},
          {"tasks", {{{"name", "t"}, {"command", "true"}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 1}}}}};
}

TEST_CASE("jobs belong to a project: another project's job is 404, lists show only the caller's projects [C6]",
          "[C6]") {
  AuthSystem s;
  auto alice = s.UserClient("alice", "vision", "MEMBER");
  auto bob = s.UserClient("bob", "speech", "MEMBER");
  auto vera = s.UserClient("vera", "vision", "VIEWER");
  json job = WaitingJob(s);
  jc::testing::RestReply created;
  bool scheduler_knows = jc::testing::WaitUntil([&] {
    created = alice->Post("/openapi/v1/trainjob", job);
    return created.http_status == 200;
  });
  INFO(created.body.dump());
  REQUIRE(scheduler_knows);
  std::string id = created.body["data"]["jobId"];

  auto mine = alice->Get("/openapi/v1/trainjob/" + id);
  REQUIRE(mine.http_status == 200);
  CHECK(mine.body["data"]["userName"] == "alice");
  CHECK(mine.body["data"]["project"] == "vision");

  // Bob, of another project: not found, exactly as a job that does not exist.
  auto theirs = bob->Get("/openapi/v1/trainjob/" + id);
  auto missing = bob->Get("/openapi/v1/trainjob/job-99999999");
  CHECK(theirs.http_status == 404);
  CHECK(theirs.body["code"] == "NOT_FOUND");
  CHECK(missing.http_status == 404);
  CHECK(bob->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 404);
  CHECK(bob->Get("/openapi/v1/trainjob/" + id + "/task/0/replica/0/log").http_status == 404);
  CHECK(bob->Get("/openapi/v1/trainjob/" + id + "/task/0/replica/0/log/content").http_status == 404);
  CHECK(bob->Get("/openapi/v1/trainjob/" + id + "/placement").http_status == 404);
  CHECK(bob->Get("/openapi/v1/trainjob").body["data"].value("jobs", json::array()).empty());
  // Submitting to a project he is not in, or as someone else, is refused.
  json into_vision = job;
  into_vision["project"] = "vision";
  CHECK(bob->Post("/openapi/v1/trainjob", into_vision).http_status == 403);
  json as_alice = job;
  as_alice["userName"] = "alice";
  auto spoofed = bob->Post("/openapi/v1/trainjob", as_alice);
  CHECK(spoofed.http_status == 400);
  CHECK(spoofed.body.value("errorMsg", "").find("userName") != std::string::npos);

  // Vera views vision: she reads the job but may not stop it.
  CHECK(vera->Get("/openapi/v1/trainjob/" + id).http_status == 200);
  // A viewer sees the job's placement as an admin does (the record, or why there is none).
  CHECK(vera->Get("/openapi/v1/trainjob/" + id + "/placement").http_status ==
        s.rest->Get("/openapi/v1/trainjob/" + id + "/placement").http_status);
  CHECK(vera->Get("/openapi/v1/trainjob").body["data"]["jobs"].size() == 1);
  CHECK(vera->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 403);
  // Scaling is a member's, checked before anything about the job is told (SPEC A17).
  CHECK(vera->Post("/openapi/v1/trainjob/" + id + "/scale", {{"replicaNumber", 2}}).http_status == 403);
  CHECK(bob->Post("/openapi/v1/trainjob/" + id + "/scale", {{"replicaNumber", 2}}).http_status == 404);
  CHECK(alice->Post("/openapi/v1/trainjob/" + id + "/scale", {{"replicaNumber", 2}}).http_status == 409);  // a batch job
  CHECK(vera->Post("/openapi/v1/trainjob", job).http_status == 403);
  CHECK(alice->Get("/openapi/v1/trainjob/" + id).body["data"]["status"] == "pending");

  // Alice stops her own job.
  CHECK(alice->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 200);
  // The admin sees every project's jobs.
  CHECK(s.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size() == 1);
  // Idempotency keys are the caller's own: Bob's equal key is not Alice's job.
  httplib::Headers key = {{"Idempotency-Key", "same-key"}};
  auto a = alice->http().Post("/openapi/v1/trainjob", key, job.dump(), "application/json");
  json bob_job = job;
  auto b = bob->http().Post("/openapi/v1/trainjob", key, bob_job.dump(), "application/json");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->status == 200);
  CHECK(b->status == 200);
  CHECK(json::parse(a->body)["data"]["jobId"] != json::parse(b->body)["data"]["jobId"]);
}

TEST_CASE("job event streams carry only the jobs of the caller's projects [C6][C8]", "[C6][C8]") {
  AuthSystem s;
  auto alice = s.UserClient("alice", "vision", "MEMBER");
  auto bob = s.UserClient("bob", "speech", "MEMBER");
  std::string alice_token = s.NewToken("alice");
  json job = WaitingJob(s);
  auto submit = [&](jc::testing::RestClient& as) {
    jc::testing::RestReply created;
    REQUIRE(jc::testing::WaitUntil([&] {
      created = as.Post("/openapi/v1/trainjob", job);
      return created.http_status == 200;
    }));
    return created.body["data"]["jobId"].get<std::string>();
  };
  std::string admins = submit(*s.rest);  // no project: an admin's own
  std::string vision = submit(*alice);
  std::string speech = submit(*bob);

  // Alice's feed: the snapshot of what is not ended, then what happens (a stop), for
  // vision only. Heartbeats each second end the read at its deadline.
  std::atomic<bool> connected{false};
  jc::testing::SseReply feed;
  std::thread reader([&] {
    feed = jc::testing::ReadSse(
        s.app->rest_port(), alice_token, "/openapi/v1/trainjobs/events?heartbeatSeconds=1", "",
        [&](const std::vector<jc::testing::SseEvent>& events) {
          return std::any_of(events.begin(), events.end(), [](const auto& e) { return e.type == "ended"; });
        },
        std::chrono::seconds(20), &connected);
  });
  REQUIRE(jc::testing::WaitUntil([&] { return connected.load(); }));
  REQUIRE(s.rest->Post("/openapi/v1/trainjob/" + admins + "/stop", json::object()).http_status == 200);
  REQUIRE(bob->Post("/openapi/v1/trainjob/" + speech + "/stop", json::object()).http_status == 200);
  REQUIRE(alice->Post("/openapi/v1/trainjob/" + vision + "/stop", json::object()).http_status == 200);
  reader.join();
  REQUIRE(feed.http_status == 200);
  std::set<std::string> seen;
  for (const auto& e : feed.events) seen.insert(e.data.value("jobId", ""));
  CHECK(seen == std::set<std::string>{vision});
  CHECK(feed.events.front().type == "snapshot");
  CHECK(feed.events.back().type == "ended");

  // Another project's job, or the admin's, is not found to her, as in a read.
  auto theirs = jc::testing::ReadSse(s.app->rest_port(), alice_token, "/openapi/v1/trainjob/" + speech + "/events",
                                     "", nullptr, std::chrono::seconds(10));
  CHECK(theirs.http_status == 404);
  auto admin_job = jc::testing::ReadSse(s.app->rest_port(), alice_token, "/openapi/v1/trainjob/" + admins + "/events",
                                        "", nullptr, std::chrono::seconds(10));
  CHECK(admin_job.http_status == 404);
}

TEST_CASE("a project's owners manage its members, and no other project's [C6]", "[C6]") {
  AuthSystem s;
  auto olivia = s.UserClient("olivia", "vision", "OWNER");
  auto nick = s.UserClient("nick", "nlp", "MEMBER");
  // An owner adds an existing user to the project, and the user can then work in it.
  auto added = olivia->Send("PUT", "/openapi/v1/users/nick/projects/vision", R"({"role": "VIEWER"})");
  INFO(added.body.dump());
  REQUIRE(added.http_status == 200);
  auto me = nick->Get("/openapi/v1/whoami");
  INFO(me.body.dump());
  CHECK(me.body["data"].dump().find("vision") != std::string::npos);
  // Not another project's, and a member is no owner.
  CHECK(olivia->Send("PUT", "/openapi/v1/users/olivia/projects/nlp", R"({"role": "OWNER"})").http_status == 403);
  CHECK(nick->Send("PUT", "/openapi/v1/users/nick/projects/vision", R"({"role": "OWNER"})").http_status == 403);
  CHECK(nick->Send("DELETE", "/openapi/v1/users/olivia/projects/vision").http_status == 403);
  // Creating users stays with admins.
  CHECK(olivia->Post("/openapi/v1/users", {{"name", "newbie"}}).http_status == 403);
  // The owner takes the member out again.
  CHECK(olivia->Send("DELETE", "/openapi/v1/users/nick/projects/vision").http_status == 200);
  CHECK(nick->Get("/openapi/v1/whoami").body["data"].dump().find("vision") == std::string::npos);
}

TEST_CASE("OIDC tokens (RS256 and ES256) name the user, and configured claims give projects and roles [C6]",
          "[C6]") {
  AuthSystem s;
  const auto& issuer = Issuer();
  json claims = s.Claims("oidc-olive");
  claims["projects"] = {"vision:member", "speech:viewer"};
  for (const char* alg : {"RS256", "ES256"}) {
    auto client = s.As("Bearer " + issuer.Sign(claims, alg));
    auto me = client.Get("/openapi/v1/whoami");
    INFO(alg << ": " << me.body.dump());
    REQUIRE(me.http_status == 200);
    CHECK(me.body["data"]["name"] == "oidc-olive");
    CHECK(me.body["data"]["auth_method"] == "oidc");
    CHECK(me.body["data"]["federation_admin"] == false);
    CHECK(me.body["data"]["memberships"].size() == 2);
    // Not an admin: admin routes are refused.
    CHECK(client.Get("/openapi/v1/users").http_status == 403);
  }
  claims["roles"] = {"jointcloud-admin"};
  auto admin = s.As("Bearer " + issuer.Sign(claims));
  CHECK(admin.Get("/openapi/v1/users").http_status == 200);
  // The token's claims are read fresh each call: a token past its exp stops working.
  s.clock.Advance(absl::Seconds(600 + 61));
  CHECK(admin.Get("/openapi/v1/users").http_status == 401);
}

TEST_CASE("an OIDC token naming a stored user gets that user's grants only when the user accepts OIDC: a token "
          "for the bootstrap admin's name is no admin [C6]",
          "[C6]") {
  AuthSystem s;
  const auto& issuer = Issuer();
  // The identity provider hands out a token whose user claim is "admin" (the bootstrap
  // admin's name here): it is an ordinary caller.
  auto impostor = s.As("Bearer " + issuer.Sign(s.Claims("admin")));
  auto me = impostor.Get("/openapi/v1/whoami");
  INFO(me.body.dump());
  REQUIRE(me.http_status == 200);
  CHECK(me.body["data"]["federation_admin"] == false);
  CHECK(impostor.Get("/openapi/v1/users").http_status == 403);

  // A user the admins create linked to OIDC, with a membership: a token naming it has it.
  REQUIRE(s.rest->Post("/openapi/v1/projects", {{"name", "vision"}}).http_status == 200);
  REQUIRE(s.rest->Post("/openapi/v1/users", {{"name", "linked"}, {"accepts_oidc", true}}).http_status == 200);
  REQUIRE(s.rest->Send("PUT", "/openapi/v1/users/linked/projects/vision", R"({"role": "MEMBER"})").http_status == 200);
  auto linked = s.As("Bearer " + issuer.Sign(s.Claims("linked"))).Get("/openapi/v1/whoami");
  INFO(linked.body.dump());
  REQUIRE(linked.http_status == 200);
  CHECK(linked.body["data"]["memberships"].size() == 1);
  // The same without the link: nothing stored reaches the token.
  REQUIRE(s.rest->Post("/openapi/v1/users", {{"name", "unlinked"}}).http_status == 200);
  REQUIRE(s.rest->Send("PUT", "/openapi/v1/users/unlinked/projects/vision", R"({"role": "MEMBER"})").http_status ==
          200);
  auto unlinked = s.As("Bearer " + issuer.Sign(s.Claims("unlinked"))).Get("/openapi/v1/whoami");
  INFO(unlinked.body.dump());
  REQUIRE(unlinked.http_status == 200);
  CHECK(unlinked.body["data"]["memberships"].empty());
}

TEST_CASE("an OIDC identity named like a stored user neither makes, lists nor revokes that user's API tokens "
          "unless the user accepts OIDC [C6]",
          "[C6]") {
  AuthSystem s;
  const auto& issuer = Issuer();
  auto admins = s.rest->Get("/openapi/v1/tokens?user_name=admin");
  REQUIRE(admins.http_status == 200);
  REQUIRE(!admins.body["data"]["tokens"].empty());
  const std::string admin_token_id = admins.body["data"]["tokens"][0]["token_id"];
  // The attacker: the identity provider's user "admin", no roles (the bootstrap admin does
  // not accept OIDC).
  auto impostor = s.As("Bearer " + issuer.Sign(s.Claims("admin")));
  // Named apart from the stored user, so nothing kept by name (jobs' users, idempotency
  // keys, rate limits, a center's account for a user) takes it for that user.
  CHECK(impostor.Get("/openapi/v1/whoami").body["data"]["name"] == "oidc:admin");
  auto made = impostor.Post("/openapi/v1/tokens", {{"user_name", "admin"}});
  INFO(made.body.dump());
  CHECK(made.http_status == 403);
  CHECK(made.body.dump().find("\"secret\"") == std::string::npos);
  CHECK(impostor.Get("/openapi/v1/tokens?user_name=admin").http_status == 403);
  CHECK(impostor.Get("/openapi/v1/tokens").http_status == 403);
  CHECK(impostor.Post("/openapi/v1/tokens/" + admin_token_id + "/revoke", json::object()).http_status == 403);
  CHECK(s.rest->Get("/openapi/v1/whoami").http_status == 200);  // the admin's token still works
  // Nothing was made: the admin's tokens are as before.
  CHECK(s.rest->Get("/openapi/v1/tokens?user_name=admin").body["data"]["tokens"].size() ==
        admins.body["data"]["tokens"].size());

  // A stored user the admins did not link to OIDC: the same.
  REQUIRE(s.rest->Post("/openapi/v1/users", {{"name", "unlinked"}}).http_status == 200);
  const std::string unlinked_secret = s.NewToken("unlinked");
  auto unlinked = s.As("Bearer " + issuer.Sign(s.Claims("unlinked")));
  CHECK(unlinked.Post("/openapi/v1/tokens", {{"user_name", "unlinked"}}).http_status == 403);
  auto unlinked_tokens = s.rest->Get("/openapi/v1/tokens?user_name=unlinked");
  REQUIRE(unlinked_tokens.body["data"]["tokens"].size() == 1);
  const std::string unlinked_id = unlinked_tokens.body["data"]["tokens"][0]["token_id"];
  CHECK(unlinked.Post("/openapi/v1/tokens/" + unlinked_id + "/revoke", json::object()).http_status == 403);
  CHECK(s.As("Bearer " + unlinked_secret).Get("/openapi/v1/whoami").http_status == 200);

  // A stored user that accepts OIDC is that user through the provider: its own tokens only.
  REQUIRE(s.rest->Post("/openapi/v1/users", {{"name", "linked"}, {"accepts_oidc", true}}).http_status == 200);
  auto linked = s.As("Bearer " + issuer.Sign(s.Claims("linked")));
  CHECK(linked.Get("/openapi/v1/whoami").body["data"]["name"] == "linked");
  auto own = linked.Post("/openapi/v1/tokens", {{"user_name", "linked"}});
  INFO(own.body.dump());
  REQUIRE(own.http_status == 200);
  CHECK(s.As("Bearer " + std::string(own.body["data"]["secret"])).Get("/openapi/v1/whoami").body["data"]["name"] ==
        "linked");
  CHECK(linked.Get("/openapi/v1/tokens").http_status == 200);
  CHECK(linked.Post("/openapi/v1/tokens", {{"user_name", "admin"}}).http_status == 403);
}

TEST_CASE("a name is its first holder's: a stored user is not created under an OIDC identity's name unless linked to "
          "it, and an OIDC identity named like a deleted user is not that user [C6]",
          "[C6]") {
  AuthSystem s;
  const auto& issuer = Issuer();
  // The identity provider's "carol" comes first (no stored user of the name).
  auto carol = s.As("Bearer " + issuer.Sign(s.Claims("carol")));
  REQUIRE(carol.Get("/openapi/v1/whoami").body["data"]["name"] == "carol");
  // Everything kept by name (jobs' users, idempotency keys, rate limits) is carol's now: a
  // stored user created under her name would inherit it. Refused, saying how to link her.
  auto squat = s.rest->Post("/openapi/v1/users", {{"name", "carol"}});
  INFO(squat.body.dump());
  CHECK(squat.http_status == 409);
  CHECK(squat.body.dump().find("accepts_oidc") != std::string::npos);
  CHECK(s.rest->Get("/openapi/v1/users/carol").http_status == 404);  // nothing was made
  CHECK(carol.Get("/openapi/v1/whoami").body["data"]["name"] == "carol");
  // Linked on purpose, the stored user is that identity.
  auto linked = s.rest->Post("/openapi/v1/users", {{"name", "carol"}, {"accepts_oidc", true}});
  INFO(linked.body.dump());
  CHECK(linked.http_status == 200);
  CHECK(carol.Get("/openapi/v1/whoami").body["data"]["name"] == "carol");

  // A stored user "dave" that is deleted keeps the name: an identity provider's "dave"
  // afterwards is named apart, so what dave's name still carries is not its.
  REQUIRE(s.rest->Post("/openapi/v1/users", {{"name", "dave"}}).http_status == 200);
  REQUIRE(s.rest->Send("DELETE", "/openapi/v1/users/dave").http_status == 200);
  auto later = s.As("Bearer " + issuer.Sign(s.Claims("dave")));
  CHECK(later.Get("/openapi/v1/whoami").body["data"]["name"] == "oidc:dave");
  // And dave may be created again as a stored user.
  CHECK(s.rest->Post("/openapi/v1/users", {{"name", "dave"}}).http_status == 200);
  // An identity whose own claim is "oidc:dave" is not taken for the renamed dave.
  auto colon = s.As("Bearer " + issuer.Sign(s.Claims("oidc:dave"))).Get("/openapi/v1/whoami");
  INFO(colon.body.dump());
  CHECK(colon.http_status == 401);
}

TEST_CASE("API tokens: shown once, stored hashed, revoked at once, last use recorded [C6]", "[C6]") {
  AuthSystem s;
  REQUIRE(s.rest->Post("/openapi/v1/users", {{"name", "tom"}}).http_status == 200);
  std::string token = s.NewToken("tom");
  std::string id = token.substr(3, 16);
  auto tom = jc::testing::RestClient(s.app->rest_port(), token);
  auto me = tom.Get("/openapi/v1/whoami");
  REQUIRE(me.http_status == 200);
  CHECK(me.body["data"]["name"] == "tom");
  CHECK(me.body["data"]["token_id"] == id);
  // Lists never show a secret, and the store keeps only a hash of it.
  auto listed = s.rest->Get("/openapi/v1/tokens?user_name=tom");
  REQUIRE(listed.body["data"]["tokens"].size() == 1);
  CHECK(listed.body.dump().find(token.substr(20)) == std::string::npos);
  CHECK(listed.body["data"]["tokens"][0].contains("last_used_at"));
  REQUIRE(s.app->identities()->FlushLastUsed().ok());
  auto stored = s.app->identities()->ListTokens([] {
    v1::ListTokensRequest r;
    r.set_user_name("tom");
    return r;
  }());
  REQUIRE(stored.ok());
  CHECK(stored->tokens(0).has_last_used_at());
  // Revoked: refused from the next call on.
  REQUIRE(s.rest->Post("/openapi/v1/tokens/" + id + "/revoke", json::object()).http_status == 200);
  auto after = tom.Get("/openapi/v1/whoami");
  CHECK(after.http_status == 401);
  CHECK(after.body.value("errorMsg", "").find("revoked") != std::string::npos);
  // Deleting a user ends its tokens too.
  std::string other = s.NewToken("tom");
  REQUIRE(s.rest->Send("DELETE", "/openapi/v1/users/tom").http_status == 200);
  CHECK(jc::testing::RestClient(s.app->rest_port(), other).Get("/openapi/v1/whoami").http_status == 401);
}

TEST_CASE("a user over its request rate gets 429 with Retry-After, while others and admins do not [C6]", "[C6]") {
  AuthSystem s([](jc::server::AppOptions& o) { o.auth.rate_limit = {5, 5}; });
  auto busy = s.UserClient("busy", "p", "MEMBER");
  auto calm = s.UserClient("calm", "p", "MEMBER");
  for (int i = 0; i < 5; ++i) CHECK(busy->Get("/openapi/v1/whoami").http_status == 200);
  auto res = busy->http().Get("/openapi/v1/whoami");
  REQUIRE(res);
  INFO(res->body);
  CHECK(res->status == 429);
  CHECK(res->get_header_value("Retry-After") == "1");
  CHECK(json::parse(res->body)["code"] == "RESOURCE_EXHAUSTED");
  // Another user's budget is its own; admins are not limited.
  CHECK(calm->Get("/openapi/v1/whoami").http_status == 200);
  for (int i = 0; i < 20; ++i) REQUIRE(s.rest->Get("/openapi/v1/whoami").http_status == 200);
  // A second later the bucket holds five requests again.
  s.clock.Advance(absl::Seconds(1));
  CHECK(busy->Get("/openapi/v1/whoami").http_status == 200);
}

namespace {

json AuditRecords(AuthSystem& s, const std::string& query = "") {
  auto r = s.rest->Get("/openapi/v1/audit?page_size=1000" + query);
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
  return r.body["data"].value("records", json::array());
}

int Count(const json& records, const std::string& action, const std::string& actor, const std::string& outcome) {
  int n = 0;
  for (const auto& r : records) {
    n += r.value("action", "") == action && r.value("actor", "") == actor && r.value("outcome", "") == outcome;
  }
  return n;
}

}  // namespace

TEST_CASE("every mutation leaves one audit row with who, what, outcome and source, and refusals are audited [C6]",
          "[C6]") {
  AuthSystem s;
  Seed(s);
  auto alice = s.UserClient("alice", "vision", "MEMBER");
  auto bob = s.UserClient("bob", "speech", "MEMBER");
  json job = WaitingJob(s);
  httplib::Headers traced = {{"X-Request-Id", "trace-42"}};
  std::string id;
  REQUIRE(jc::testing::WaitUntil([&] {
    auto r = alice->http().Post("/openapi/v1/trainjob", traced, job.dump(), "application/json");
    if (!r || r->status != 200) return false;
    CHECK(r->get_header_value("X-Request-Id") == "trace-42");
    id = json::parse(r->body)["data"]["jobId"];
    return true;
  }));
  REQUIRE(alice->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 200);
  CHECK(bob->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 404);
  CHECK(alice->Post("/openapi/v1/trainjob/" + id + "/scale", {{"replicaNumber", 2}}).http_status == 409);
  CHECK(bob->Post("/openapi/v1/trainjob/" + id + "/scale", {{"replicaNumber", 2}}).http_status == 404);
  CHECK(s.As("").Post("/openapi/v1/centers", {{"ai_center_id", "nope"}, {"name", "nope"}}).http_status == 401);
  CHECK(alice->Send("PATCH", "/openapi/v1/centers/x1", R"({"region": "east"})").http_status == 403);
  CHECK(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "x1"}, {"name", "again"}}).http_status == 409);

  json all = AuditRecords(s);
  INFO(all.dump(1));
  // The seed: one row per change, by the admin, naming the object.
  CHECK(Count(all, "RegistryService.CreateCenter", "admin", "OK") == 2);  // x1, and the waiting job's center
  CHECK(Count(all, "CatalogService.CreateResourceSpec", "admin", "OK") == 2);
  CHECK(Count(all, "CatalogService.CreateImage", "admin", "OK") == 1);
  CHECK(Count(all, "DatamonService.CreateDataset", "admin", "OK") == 1);
  CHECK(Count(all, "IdentityService.CreateProject", "admin", "OK") >= 3);
  CHECK(Count(all, "IdentityService.CreateToken", "admin", "OK") == 2);
  // The job's create and stop, written with the job's own writes.
  CHECK(Count(all, "JobService.CreateTrainJob", "alice", "OK") == 1);
  CHECK(Count(all, "JobService.StopTrainJob", "alice", "OK") == 1);
  // Refused and failed attempts, with their outcome; none counted as done.
  CHECK(Count(all, "JobService.StopTrainJob", "bob", "NOT_FOUND") == 1);
  CHECK(Count(all, "JobService.ScaleTrainJob", "alice", "FAILED_PRECONDITION") == 1);  // the job ended
  CHECK(Count(all, "JobService.ScaleTrainJob", "bob", "NOT_FOUND") == 1);
  // A caller that proved no one is recorded with what it claimed, never an empty actor.
  CHECK(Count(all, "RegistryService.CreateCenter", "(no credential)", "UNAUTHENTICATED") == 1);
  CHECK(Count(all, "RegistryService.UpdateCenter", "alice", "PERMISSION_DENIED") == 1);
  CHECK(Count(all, "RegistryService.CreateCenter", "admin", "ALREADY_EXISTS") == 1);
  // Jointcloud's own calls (the monitor's heartbeats, the scheduler's reads) are not rows.
  for (const auto& r : all) CHECK(r.value("actor", "") != "jointcloud");

  json created = AuditRecords(s, "&action=JobService.CreateTrainJob");
  REQUIRE(created.size() == 1);
  CHECK(created[0]["actor"] == "alice");
  CHECK(created[0]["project"] == "vision");
  CHECK(created[0]["object"] == "job_id=" + id);
  CHECK(created[0]["request_id"] == "trace-42");
  CHECK(created[0]["auth_method"] == "token");
  CHECK(created[0]["source"].get<std::string>().find("127.0.0.1") != std::string::npos);
  json center = AuditRecords(s, "&actor=admin&action=RegistryService.CreateCenter&outcome=OK");
  REQUIRE(center.size() == 2);
  CHECK(center[0]["object"] == "ai_center_id=x1");
  CHECK(center[1]["object"] == "ai_center_id=parked");
  // Oldest first.
  for (size_t i = 1; i < all.size(); ++i) CHECK(all[i - 1]["id"] < all[i]["id"]);
  // The log is for admins.
  CHECK(alice->Get("/openapi/v1/audit").http_status == 403);
}

// ADR 0014: the gateway calls the job service's handlers directly when both run in one
// process. The attacker's view must not change with that: each refusal below holds both
// ways, decided by the one CallAdmission the gRPC interceptor asks too.
TEST_CASE("the gateway's direct calls to the job service refuse, limit and audit as its gRPC calls do [C6][A1]",
          "[C6][A1]") {
  const bool direct = GENERATE(true, false);
  INFO((direct ? "direct calls" : "over the in-process gRPC channel"));
  AuthSystem s([direct](jc::server::AppOptions& o) {
    o.gateway_direct_calls = direct;
    o.auth.rate_limit = {8, 8};
  });
  auto alice = s.UserClient("alice", "vision", "MEMBER");
  auto bob = s.UserClient("bob", "speech", "MEMBER");
  auto vera = s.UserClient("vera", "vision", "VIEWER");
  json job = WaitingJob(s);
  std::string id;
  REQUIRE(jc::testing::WaitUntil([&] {
    auto r = alice->Post("/openapi/v1/trainjob", job);
    if (r.http_status != 200) return false;
    id = r.body["data"]["jobId"];
    return true;
  }));

  // Every way of proving no one: 401 on each job route, and no job is made.
  for (const BadCredential& bad : BadCredentials(s)) {
    INFO(bad.name);
    auto mallory = s.As(bad.header);
    auto created = mallory.Post("/openapi/v1/trainjob", job);
    CHECK(created.http_status == 401);
    CHECK(created.body["code"] == "UNAUTHENTICATED");
    CHECK(mallory.Get("/openapi/v1/trainjob/" + id).http_status == 401);
    CHECK(mallory.Get("/openapi/v1/trainjob").http_status == 401);
    CHECK(mallory.Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 401);
  }
  CHECK(s.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size() == 1);
  s.clock.Advance(absl::Seconds(10));  // past the audit's cap on one source's refusals
  // Another project's job is not found; a viewer may read, not stop; a body's userName
  // is not an identity.
  CHECK(bob->Get("/openapi/v1/trainjob/" + id).http_status == 404);
  CHECK(bob->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 404);
  CHECK(vera->Get("/openapi/v1/trainjob/" + id).http_status == 200);
  CHECK(vera->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 403);
  json as_alice = job;
  as_alice["userName"] = "alice";
  CHECK(bob->Post("/openapi/v1/trainjob", as_alice).http_status == 400);
  CHECK(alice->Get("/openapi/v1/trainjob/" + id).body["data"]["status"] == "pending");

  // The request rate holds on the job routes too: a burst past it gets 429 and makes nothing.
  auto busy = s.UserClient("busy", "vision", "MEMBER");
  s.clock.Advance(absl::Seconds(10));  // every bucket full again
  int made = 0, limited = 0;
  for (int i = 0; i < 12; ++i) {
    auto r = busy->Post("/openapi/v1/trainjob", job);
    made += r.http_status == 200;
    limited += r.http_status == 429;
  }
  CHECK(made == 8);
  CHECK(limited == 4);

  // Bytes a client may send that no string field holds, or that gRPC's metadata checks
  // abort the process on (helper-44, findings 1-3 and 8): refused, nothing made, and the
  // server, the job list and the audit log all still answer.
  for (const auto& [header, value, code] : std::vector<std::tuple<std::string, std::string, int>>{
           {"X-Request-Id", "a\x01b", 400}, {"X-Request-Id", "evil\xff\xfe", 400},
           {"Idempotency-Key", "k\xff" "2", 400}, {"Idempotency-Key", "k\x01", 400},
           {"Authorization", "Bearer\t" + s.admin_token, 401}, {"Authorization", "Bearer \x7f", 401}}) {
    INFO(header << " " << absl::CEscape(value));
    httplib::Headers headers = {{header, value}};
    if (header != "Authorization") headers.emplace("Authorization", "Bearer " + s.admin_token);
    auto client = s.As("");
    auto created = client.http().Post("/openapi/v1/trainjob", headers, job.dump(), "application/json");
    REQUIRE(created);
    CHECK(created->status == code);
    CHECK(absl::StrContains(created->body, "printable ASCII"));
    auto centers = client.http().Get("/openapi/v1/centers", headers);  // a route still on gRPC
    REQUIRE(centers);
    CHECK(centers->status == code);
    CHECK(absl::StrContains(centers->body, "printable ASCII"));
  }
  s.clock.Advance(absl::Seconds(10));
  CHECK(alice->Post("/openapi/v1/trainjob/%FF%FE/stop", json::object()).http_status == 400);
  CHECK(alice->Get("/openapi/v1/trainjob/%C0%AF").http_status == 400);
  CHECK(alice->Get("/openapi/v1/trainjob?userName=%FF").http_status == 400);
  CHECK(s.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size() == 9);  // alice's and busy's
  CHECK(s.rest->Get("/openapi/v1/audit?page_size=1000").http_status == 200);

  // An answer past what the in-process channel carries (4 MiB) is refused both ways with
  // the reason, not built whatever its size (helper-44, finding 6).
  json big = job;
  big["tasks"][0]["command"] = "echo " + std::string(700 << 10, 'x');
  for (int i = 0; i < 7; ++i) REQUIRE(s.rest->Post("/openapi/v1/trainjob", big).http_status == 200);
  auto page = s.rest->Get("/openapi/v1/trainjob?pageSize=1000");
  CHECK(page.http_status == 429);
  CHECK(page.body["code"] == "RESOURCE_EXHAUSTED");
  CHECK(s.rest->Get("/openapi/v1/trainjob?pageSize=2").http_status == 200);

  // Audited as over gRPC: who, what, outcome and the REST client's address.
  json all = AuditRecords(s);
  INFO(all.dump(1));
  CHECK(Count(all, "JobService.CreateTrainJob", "alice", "OK") == 1);
  CHECK(Count(all, "JobService.CreateTrainJob", "busy", "OK") == 8);
  CHECK(Count(all, "JobService.CreateTrainJob", "(no credential)", "UNAUTHENTICATED") == 1);
  CHECK(Count(all, "JobService.StopTrainJob", "bob", "NOT_FOUND") == 1);
  CHECK(Count(all, "JobService.StopTrainJob", "vera", "PERMISSION_DENIED") == 1);
  CHECK(Count(all, "JobService.CreateTrainJob", "bob", "INVALID_ARGUMENT") == 1);
  for (const auto& r : all) {
    if (absl::StartsWith(r.value("action", ""), "JobService.")) {
      CHECK(r.value("source", "").find("127.0.0.1") != std::string::npos);
    }
  }
}

TEST_CASE("a flood of refused calls from one source is capped without hiding another source's refusals, and the "
          "first one recorded after a drop says how many were dropped [C6]",
          "[C6]") {
  AuthSystem s;
  // Past a bad token the refusal names the token's id (not its secret).
  CHECK(s.As("Bearer jc_0123456789abcdef_secretsecret").Post("/openapi/v1/centers", {{"ai_center_id", "c"}, {"name", "c"}})
            .http_status == 401);
  auto claimed = AuditRecords(s, "&outcome=UNAUTHENTICATED");
  REQUIRE_FALSE(claimed.empty());
  CHECK(claimed.back()["actor"] == "(unproven) token 0123456789abcdef");
  CHECK(claimed.dump().find("secretsecret") == std::string::npos);

  jc::audit::AuditLog* log = s.app->audit();
  auto refusal = [&](const std::string& source) {
    jointcloud::v1::AuditRecord r = log->Begin()->record;  // its id and time
    r.set_actor("(no credential)");
    r.set_action("RegistryService.CreateCenter");
    r.set_outcome("UNAUTHENTICATED");
    r.set_message("no credential");
    r.set_source(source);
    return r;
  };
  // 200 from one address (each from a new port, as new connections come), then one from another.
  for (int i = 0; i < 200; ++i) REQUIRE(log->WriteAlone(refusal(absl::StrCat("ipv4:10.9.9.9:", 40000 + i))).ok());
  REQUIRE(log->WriteAlone(refusal("ipv4:10.8.8.8:50000")).ok());
  json rows = AuditRecords(s, "&outcome=UNAUTHENTICATED&actor=%28no%20credential%29");
  int flood = 0, other = 0;
  for (const auto& r : rows) {
    const std::string source = r.value("source", "");
    flood += source.rfind("ipv4:10.9.9.9:", 0) == 0;
    other += source.rfind("ipv4:10.8.8.8:", 0) == 0;
  }
  CHECK(flood > 0);
  CHECK(flood <= 25);  // its burst, not 200
  CHECK(other == 1);
  // A second later the flooding source is recorded again, saying what was dropped.
  s.clock.Advance(absl::Seconds(1));
  REQUIRE(log->WriteAlone(refusal("ipv4:10.9.9.9:60000")).ok());
  json after = AuditRecords(s, "&outcome=UNAUTHENTICATED&actor=%28no%20credential%29");
  bool told = false;
  for (const auto& r : after) {
    if (r.value("source", "") == "ipv4:10.9.9.9:60000") {
      told = r.value("message", "").find(" earlier refusal(s) from this source, not recorded") != std::string::npos;
    }
  }
  CHECK(told);
}

TEST_CASE("a dataset's file:// URL is checked against its center's data roots at registration [C6][A6]",
          "[C6][A6]") {
  AuthSystem s;
  REQUIRE(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "rooted"}, {"name", "r"}, {"data_roots", {"/data/shared"}}})
              .http_status == 200);
  REQUIRE(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "bare"}, {"name", "b"}}).http_status == 200);
  auto dataset = [](const std::string& name, const std::string& center, const std::string& url) {
    return json{{"data_name", name},
                {"data_version", "v1"},
                {"created_user", "admin"},
                {"location", {{{"ai_center_id", center}, {"dataset_url", url}, {"access", "r"}}}}};
  };
  auto inside = s.rest->Post("/openapi/v1/datasets", dataset("ok", "rooted", "file:///data/shared/imagenet"));
  INFO(inside.body.dump());
  CHECK(inside.http_status == 200);
  // Not a file: URL, so not a path at the center: the adapter's mover decides.
  CHECK(s.rest->Post("/openapi/v1/datasets", dataset("remote", "bare", "s3://bucket/imagenet")).http_status == 200);
  for (const auto& [center, url] : std::vector<std::pair<std::string, std::string>>{
           {"rooted", "file:///etc/shadow"},
           {"rooted", "file:///data/shared-not/x"},
           {"rooted", "file:///data/shared/../../etc"},
           {"rooted", "file://relative/path"},
           {"bare", "file:///data/shared/imagenet"}}) {
    auto r = s.rest->Post("/openapi/v1/datasets", dataset("bad", center, url));
    INFO(center << " " << url << ": " << r.body.dump());
    CHECK((r.http_status == 403 || r.http_status == 400));
    CHECK(r.body.value("errorMsg", "").find(url) != std::string::npos);
  }
  CHECK(s.rest->Get("/openapi/v1/datasets/bad/v1").http_status == 404);
  // Roots must be absolute and plain.
  CHECK(s.rest->Send("PATCH", "/openapi/v1/centers/bare", R"({"data_roots": ["data"]})").http_status == 400);
  CHECK(s.rest->Send("PATCH", "/openapi/v1/centers/bare", R"({"data_roots": ["/data/../etc"]})").http_status == 400);
  // Once the center declares the root, the same dataset registers.
  REQUIRE(s.rest->Send("PATCH", "/openapi/v1/centers/bare", R"({"data_roots": ["/data/shared/"]})").http_status == 200);
  CHECK(s.rest->Post("/openapi/v1/datasets", dataset("later", "bare", "file:///data/shared/imagenet")).http_status ==
        200);
}

TEST_CASE("images and datasets belong to a project: its members register them, other projects neither see nor use "
          "them [C6][A6]",
          "[C6][A6]") {
  AuthSystem s;
  Seed(s);  // image x1 and dataset x1:x1 are the federation's
  REQUIRE(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "c1"},
                                              {"name", "c1"},
                                              {"capacity", {{"cpu", 4}, {"memory", 4096}}},
                                              {"data_roots", {"/data/shared", "/data/projects/{project}"}}})
              .http_status == 200);
  REQUIRE(s.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                    {"resource_spec_name", "1 CPU"},
                                                    {"resource_quantity", {{"cpu", "1"}}},
                                                    {"service_type", "batch"},
                                                    {"computing_center_list", "c1"}})
              .http_status == 200);
  auto alice = s.UserClient("alice", "vision", "MEMBER");
  auto bob = s.UserClient("bob", "speech", "MEMBER");
  auto vera = s.UserClient("vera", "vision", "VIEWER");

  // Alice registers an image: it is her project's.
  auto image = alice->Post("/openapi/v1/images", {{"image_id", "vimg"}, {"name", "vision image"},
                                                 {"ai_center_id", "c1"}, {"resource_spec", "cpu-1"}});
  INFO(image.body.dump());
  REQUIRE(image.http_status == 200);
  CHECK(image.body["data"]["project"] == "vision");
  // Bob, of another project: not found, and absent from his list, where the federation's is.
  CHECK(bob->Get("/openapi/v1/images/vimg").http_status == 404);
  CHECK(bob->Send("DELETE", "/openapi/v1/images/vimg").http_status == 404);
  CHECK(bob->Send("PATCH", "/openapi/v1/images/vimg", R"({"name": "mine"})").http_status == 404);
  auto ids = [](const jc::testing::RestReply& list, const char* field, const char* key) {
    std::set<std::string> out;
    for (const auto& item : list.body["data"].value(field, json::array())) out.insert(item.value(key, ""));
    return out;
  };
  CHECK(ids(bob->Get("/openapi/v1/images"), "images", "image_id") == std::set<std::string>{"x1"});
  CHECK(ids(alice->Get("/openapi/v1/images"), "images", "image_id") == std::set<std::string>{"vimg", "x1"});
  CHECK(ids(alice->Get("/openapi/v1/images?project=-"), "images", "image_id") == std::set<std::string>{"x1"});
  CHECK(ids(s.rest->Get("/openapi/v1/images"), "images", "image_id") == std::set<std::string>{"vimg", "x1"});
  // Registering into a project one is not a member of, or changing the federation's, is refused.
  CHECK(bob->Post("/openapi/v1/images", {{"image_id", "b2"}, {"name", "b2"}, {"ai_center_id", "c1"},
                                         {"project", "vision"}})
            .http_status == 403);
  CHECK(alice->Send("DELETE", "/openapi/v1/images/x1").http_status == 403);
  // A viewer reads it, a member changes it; its project never changes.
  CHECK(vera->Get("/openapi/v1/images/vimg").http_status == 200);
  CHECK(vera->Send("DELETE", "/openapi/v1/images/vimg").http_status == 403);
  CHECK(alice->Send("PATCH", "/openapi/v1/images/vimg", R"({"name": "renamed"})").http_status == 200);
  // The body's project names whose image it is (ids are unique within a project): speech
  // has no vimg; nothing changes.
  CHECK(alice->Send("PATCH", "/openapi/v1/images/vimg", R"({"project": "speech"})").http_status == 404);
  CHECK(s.rest->Get("/openapi/v1/images/vimg").body["data"]["project"] == "vision");

  // Datasets: a member registers under the center's {project} roots only, as the uploader.
  auto dataset = [](const std::string& name, const std::string& url) {
    return json{{"data_name", name},
                {"data_version", "v1"},
                {"location", {{{"ai_center_id", "c1"}, {"dataset_url", url}, {"access", "r"}}}}};
  };
  auto own = alice->Post("/openapi/v1/datasets", dataset("vdata", "file:///data/projects/vision/cifar"));
  INFO(own.body.dump());
  REQUIRE(own.http_status == 200);
  CHECK(own.body["data"]["project"] == "vision");
  CHECK(own.body["data"]["created_user"] == "alice");
  for (const char* url : {"file:///data/projects/speech/secret", "file:///data/shared/corpus"}) {
    auto r = alice->Post("/openapi/v1/datasets", dataset("stolen", url));
    INFO(url << ": " << r.body.dump());
    CHECK(r.http_status == 403);
    CHECK(r.body.value("errorMsg", "").find("{project}") != std::string::npos);
  }
  json spoofed = dataset("spoofed", "file:///data/projects/vision/x");
  spoofed["created_user"] = "bob";
  CHECK(alice->Post("/openapi/v1/datasets", spoofed).http_status == 400);
  CHECK(alice->Get("/openapi/v1/datasets/stolen/v1").http_status == 404);
  // The shared roots stay an admin's to register under.
  CHECK(s.rest->Post("/openapi/v1/datasets", dataset("corpus", "file:///data/shared/corpus")).http_status == 200);
  CHECK(bob->Get("/openapi/v1/datasets/vdata/v1").http_status == 404);
  CHECK(bob->Post("/openapi/v1/datasets/vdata/v1/migration-sources", {{"target_center_id", "c1"}}).http_status == 404);
  CHECK(bob->Send("DELETE", "/openapi/v1/datasets/vdata/v1").http_status == 404);
  CHECK(ids(bob->Get("/openapi/v1/datasets"), "datasets", "data_name") == std::set<std::string>{"x1", "corpus"});
  CHECK(ids(vera->Get("/openapi/v1/datasets"), "datasets", "data_name") ==
        std::set<std::string>{"x1", "corpus", "vdata"});
  CHECK(vera->Send("DELETE", "/openapi/v1/datasets/vdata/v1").http_status == 403);

  // Jobs use their own project's images and datasets and the federation's, not another's.
  json job = {{"name", "j"},
              {"tasks",
               {{{"name", "t"},
                 {"command", "true"},
                 {"resourceSpecId", "cpu-1"},
                 {"imageId", "vimg"},
                 {"datasets", {"vdata:v1", "corpus:v1"}},
                 {"replicaNumber", 1}}}}};
  jc::testing::RestReply created;
  bool scheduler_knows = jc::testing::WaitUntil([&] {
    created = alice->Post("/openapi/v1/trainjob", job);
    return created.http_status == 200;
  });
  INFO(created.body.dump());
  CHECK(scheduler_knows);
  auto with_image = bob->Post("/openapi/v1/trainjob", job);
  CHECK(with_image.http_status == 400);
  CHECK(with_image.body.value("errorMsg", "").find("unknown image \"vimg\"") != std::string::npos);
  json only_data = job;
  only_data["tasks"][0]["imageId"] = "x1";
  auto with_data = bob->Post("/openapi/v1/trainjob", only_data);
  CHECK(with_data.http_status == 400);
  CHECK(with_data.body.value("errorMsg", "").find("unknown dataset \"vdata:v1\"") != std::string::npos);

  // Plans follow the same rule, for the caller's own project, whatever project the body
  // names: naming another project's would tell its images and datasets apart from ones
  // that do not exist.
  auto plan = [&](jc::testing::RestClient& who, const json& body) { return who.Post("/openapi/v1/scheduler/plan", body); };
  CHECK(plan(*alice, job).http_status == 200);
  CHECK(plan(*vera, job).http_status == 200);  // a viewer plans in the project it sees
  auto bob_plan = plan(*bob, job);
  CHECK(bob_plan.http_status == 400);
  CHECK(bob_plan.body.value("errorMsg", "").find("unknown image \"vimg\"") != std::string::npos);
  json named = job;
  named["project"] = "vision";
  auto bob_named = plan(*bob, named);
  INFO(bob_named.body.dump());
  CHECK(bob_named.http_status == 403);
  CHECK(bob_named.body.value("errorMsg", "").find("not in project \"vision\"") != std::string::npos);
  json as_alice = only_data;
  as_alice["userName"] = "alice";
  CHECK(plan(*bob, as_alice).http_status == 400);  // still bob's project: vdata is unknown to it
}
