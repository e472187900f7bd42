// SPEC C6, transport security: REST over HTTPS and gRPC over TLS with the development CA
// scripts/dev-ca.sh makes; a client certificate from another CA is refused; Jointcloud's
// own channels authenticate both ways (mutual TLS) and carry the service secret.

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "common/auth/service_credentials.h"
#include "common/auth/tls.h"
#include "services/southbound/adapter_client.h"
#include "tests/testing/local_adapter.h"
#include "tests/testing/process.h"
#include "jointcloud/adapter/v1/adapter.grpc.pb.h"
#include "jointcloud/v1/identity.grpc.pb.h"
#include "tests/testing/test_system.h"

namespace {

namespace v1 = ::jointcloud::v1;
using json = nlohmann::json;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Two CAs: "ca" signs the control plane's and a client's certificates; "rogue" signs one
// of its own.
struct Certificates {
  std::string dir = (std::filesystem::temp_directory_path() / ("jc-tls-" + std::to_string(getpid()))).string();
  Certificates() {
    std::filesystem::remove_all(dir);
    std::string script = std::string(JC_SOURCE_DIR) + "/scripts/dev-ca.sh";
    REQUIRE(std::system((script + " " + dir + "/ca jointcloud client alpha beta >/dev/null").c_str()) == 0);
    REQUIRE(std::system((script + " " + dir + "/rogue intruder >/dev/null").c_str()) == 0);
  }
  ~Certificates() { std::filesystem::remove_all(dir); }
  std::string Path(const std::string& ca, const std::string& file) const { return dir + "/" + ca + "/" + file; }
  jc::auth::TlsFiles Files(const std::string& ca, const std::string& name) const {
    return {Path(ca, name + ".crt"), Path(ca, name + ".key"), Path(ca, "ca.crt")};
  }
};

absl::Status WhoAmI(std::shared_ptr<grpc::Channel> channel, const std::string& token, v1::Caller* out) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  grpc::Status s = v1::IdentityService::NewStub(channel)->WhoAmI(&ctx, google::protobuf::Empty(), out);
  return s.ok() ? absl::OkStatus() : absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// A TLS client that writes its records into memory, so the test sends their bytes when and
// how it likes: one byte at a time, slowly (a slowloris).
class TricklingTlsClient {
 public:
  explicit TricklingTlsClient(int port) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL, 0) | O_NONBLOCK);
    ssl_ = SSL_new(ctx_);
    out_ = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl_, BIO_new_socket(fd_, BIO_NOCLOSE), out_);
    int rc;
    while ((rc = SSL_connect(ssl_)) != 1) {  // the handshake, sent as it comes
      SendAll();
      REQUIRE(SSL_get_error(ssl_, rc) == SSL_ERROR_WANT_READ);
      pollfd p{fd_, POLLIN, 0};
      REQUIRE(::poll(&p, 1, 5000) == 1);
    }
    SendAll();
  }
  ~TricklingTlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  // Encrypts `text` as one record (kept in memory).
  void Record(const std::string& text) { REQUIRE(SSL_write(ssl_, text.data(), static_cast<int>(text.size())) > 0); }
  // Sends one byte of what is kept; false when the server has closed the connection.
  bool SendByte() {
    char c;
    if (BIO_read(out_, &c, 1) != 1) return true;
    return ::send(fd_, &c, 1, MSG_NOSIGNAL) == 1 && !Closed();
  }
  bool Pending() const { return BIO_ctrl_pending(out_) > 0; }
  // Sends everything kept, in one write.
  void SendKept() {
    std::string all(BIO_ctrl_pending(out_), '\0');
    REQUIRE(BIO_read(out_, all.data(), static_cast<int>(all.size())) == static_cast<int>(all.size()));
    REQUIRE(::send(fd_, all.data(), all.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(all.size()));
  }
  // What the server sent, decrypted, until `done` holds of it or `deadline` passes.
  std::string ReadUntil(const std::function<bool(const std::string&)>& done,
                        std::chrono::steady_clock::time_point deadline) {
    std::string got;
    char buf[4096];
    while (!done(got) && std::chrono::steady_clock::now() < deadline) {
      int n = SSL_read(ssl_, buf, sizeof(buf));
      if (n > 0) {
        got.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (SSL_get_error(ssl_, n) != SSL_ERROR_WANT_READ) break;  // closed
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, 100);
    }
    return got;
  }
  // Whether the server closed the connection (what it sent, if anything, is ignored).
  bool Closed() {
    char buf[256];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

 private:
  void SendAll() {
    char buf[4096];
    int n;
    while ((n = BIO_read(out_, buf, sizeof(buf))) > 0) REQUIRE(::send(fd_, buf, static_cast<size_t>(n), MSG_NOSIGNAL) == n);
  }
  SSL_CTX* ctx_;
  SSL* ssl_;
  BIO* out_;
  int fd_;
};

// A control plane serving REST over HTTPS with the test CA's certificate, each request
// bounded by `read_timeout_s`.
std::unique_ptr<jc::testing::TestSystem> HttpsSystem(const Certificates& certs, int read_timeout_s) {
  return std::make_unique<jc::testing::TestSystem>([&](jc::server::AppOptions& o) {
    o.auth.tls = certs.Files("ca", "jointcloud");
    o.gateway.read_timeout_seconds = read_timeout_s;
  });
}

}  // namespace

TEST_CASE("a client trickling a request over HTTPS, a byte per record or a record byte by byte, loses its "
          "connection at the read timeout while others are served [C6][C5]",
          "[C6][C5]") {
  Certificates certs;
  auto system = HttpsSystem(certs, 2);
  jc::testing::TestSystem& s = *system;
  const std::string head = "GET /openapi/v1/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.admin_token +
                           "\r\nX-Padding: " + std::string(200, 'p') + "\r\n\r\n";
  for (bool one_record : {false, true}) {
    INFO((one_record ? "the request as one record, sent a byte at a time" : "a record per byte"));
    TricklingTlsClient slow(s.app->rest_port());
    if (one_record) slow.Record(head);
    auto start = std::chrono::steady_clock::now();
    bool closed = false;
    // A byte each 300 ms: each wait is far inside the 2 s read timeout; the whole request
    // would take over a minute.
    for (size_t i = 0; i < head.size() && !closed; ++i) {
      if (!one_record) slow.Record(head.substr(i, 1));
      while (slow.Pending() && !closed) {
        closed = !slow.SendByte();
        if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the attacker's pace
      }
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) break;
    }
    double held = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(closed);
    CHECK(held < 8);  // the 2 s request deadline, then the next byte finds it closed
    // Meanwhile and after, others are served.
    httplib::SSLClient https("127.0.0.1", s.app->rest_port());
    https.set_ca_cert_path(certs.Path("ca", "ca.crt").c_str());
    https.enable_server_certificate_verification(true);
    https.set_bearer_token_auth(s.admin_token);
    auto me = https.Get("/openapi/v1/whoami");
    REQUIRE(me);
    CHECK(me->status == 200);
  }
}

TEST_CASE("REST over HTTPS and gRPC over mutual TLS, while another CA's certificate and plaintext are refused [C6]",
          "[C6]") {
  Certificates certs;
  const std::string secret = "a-service-secret-shared-by-the-control-plane-0123456789";
  jc::testing::TestSystem s([&](jc::server::AppOptions& o) {
    o.auth.tls = certs.Files("ca", "jointcloud");
    o.auth.service_secret = secret;
  });
  std::string target = "127.0.0.1:" + std::to_string(s.app->grpc_port());

  // REST: HTTPS, verified against the CA.
  httplib::SSLClient https("127.0.0.1", s.app->rest_port());
  https.set_ca_cert_path(certs.Path("ca", "ca.crt").c_str());
  https.enable_server_certificate_verification(true);
  https.set_bearer_token_auth(s.admin_token);
  auto me = https.Get("/openapi/v1/whoami");
  REQUIRE(me);
  CHECK(me->status == 200);
  CHECK(json::parse(me->body)["data"]["name"] == "admin");
  // Plain HTTP to the TLS port gets no answer; a client trusting another CA refuses the server.
  httplib::Client plain("127.0.0.1", s.app->rest_port());
  plain.set_read_timeout(5, 0);
  auto refused = plain.Get("/openapi/v1/whoami");
  CHECK((!refused || refused->status == 400));
  httplib::SSLClient doubting("127.0.0.1", s.app->rest_port());
  doubting.set_ca_cert_path(certs.Path("rogue", "ca.crt").c_str());
  doubting.enable_server_certificate_verification(true);
  CHECK_FALSE(doubting.Get("/healthz"));

  // gRPC: a client with the CA's client certificate, or with none, is served.
  v1::Caller caller;
  auto material = jc::auth::LoadTls(certs.Files("ca", "client"));
  REQUIRE(material.ok());
  auto mutual = grpc::CreateChannel(target, jc::auth::ChannelCredentials(material->get()));
  CHECK(WhoAmI(mutual, s.admin_token, &caller).ok());
  grpc::SslCredentialsOptions server_only;
  server_only.pem_root_certs = Read(certs.Path("ca", "ca.crt"));
  CHECK(WhoAmI(grpc::CreateChannel(target, grpc::SslCredentials(server_only)), s.admin_token, &caller).ok());
  // A client certificate another CA signed is refused in the handshake, and so is plaintext.
  auto rogue = jc::auth::LoadTls({certs.Path("rogue", "intruder.crt"), certs.Path("rogue", "intruder.key"),
                                  certs.Path("ca", "ca.crt")});
  REQUIRE(rogue.ok());
  auto status = WhoAmI(grpc::CreateChannel(target, jc::auth::ChannelCredentials(rogue->get())), s.admin_token, &caller);
  INFO(status.ToString());
  CHECK(absl::IsUnavailable(status));
  CHECK(absl::IsUnavailable(
      WhoAmI(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()), s.admin_token, &caller)));

  // Jointcloud's own channel: mutual TLS, and the service secret names it.
  auto service = jc::auth::ServiceChannel(target, jc::auth::ChannelCredentials(material->get()), secret);
  REQUIRE(WhoAmI(service, "", &caller).ok());
  CHECK(caller.kind() == "service");
  // The secret over TLS without a client certificate does not count.
  auto stolen = WhoAmI(grpc::CreateChannel(target, grpc::SslCredentials(server_only)), secret, &caller);
  INFO(stolen.ToString());
  CHECK(absl::IsUnauthenticated(stolen));
  CHECK(absl::StrContains(stolen.message(), "only over mutual TLS"));
  // Nor over HTTPS REST, which takes no client certificate: someone holding a copy of the
  // secret is not Jointcloud.
  httplib::SSLClient thief("127.0.0.1", s.app->rest_port());
  thief.set_ca_cert_path(certs.Path("ca", "ca.crt").c_str());
  thief.enable_server_certificate_verification(true);
  thief.set_bearer_token_auth(secret);
  auto as_service = thief.Get("/openapi/v1/whoami");
  REQUIRE(as_service);
  INFO(as_service->body);
  CHECK(as_service->status == 401);
  CHECK(as_service->body.find("not accepted over REST") != std::string::npos);
  CHECK(thief.Get("/openapi/v1/users")->status == 401);
  // The job service's routes, which the gateway calls directly (ADR 0014), refuse it too.
  auto submitted = thief.Post("/openapi/v1/trainjob", R"({"name": "j", "tasks": []})", "application/json");
  REQUIRE(submitted);
  CHECK(submitted->status == 401);
  CHECK(submitted->body.find("not accepted over REST") != std::string::npos);
  CHECK(thief.Get("/openapi/v1/trainjob")->status == 401);
}

TEST_CASE("a request whose head stalls after its first line over HTTPS loses its connection at the read "
          "timeout, not only its request [C6][C5]",
          "[C6][C5]") {
  // httplib answers a head that timed out with 400 and would read the next request on the
  // same connection: header lines each just inside a read's timeout held the thread a read
  // timeout at a time, for as many requests as keep-alive allows (attacker helper-71).
  Certificates certs;
  auto system = HttpsSystem(certs, 2);
  jc::testing::TestSystem& s = *system;
  TricklingTlsClient slow(s.app->rest_port());
  auto start = std::chrono::steady_clock::now();
  bool closed = false;
  slow.Record("GET /openapi/v1/whoami HTTP/1.1\r\n");
  while (!closed && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    while (slow.Pending() && !closed) closed = !slow.SendByte();
    if (closed) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the attacker's pace
    closed = slow.Closed();
    if (!closed) slow.Record("X-A: b\r\n");  // one more header line, never the blank one
  }
  double held = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(closed);
  CHECK(held < 8);  // the 2 s request deadline, then its 400 and the end of the connection
}

TEST_CASE("a stop over HTTPS lets go of a client holding half a request at once, not at its read timeout "
          "[C6][C5]",
          "[C6][C5]") {
  // Attacker helper-71, finding 3: a stop waited out the read timeout of every connection
  // whose request had begun.
  Certificates certs;
  auto system = HttpsSystem(certs, 60);
  jc::testing::TestSystem& s = *system;
  TricklingTlsClient half(s.app->rest_port());
  half.Record("GET /openapi/v1/whoami HTTP/1.1\r\nHost: x\r\n");  // no blank line: the head goes on
  while (half.Pending()) REQUIRE(half.SendByte());
  // Served meanwhile: the server is up and the half request is in its thread's read.
  httplib::SSLClient https("127.0.0.1", s.app->rest_port());
  https.set_ca_cert_path(certs.Path("ca", "ca.crt").c_str());
  https.enable_server_certificate_verification(true);
  https.set_bearer_token_auth(s.admin_token);
  auto me = https.Get("/openapi/v1/whoami");
  REQUIRE(me);
  CHECK(me->status == 200);
  const auto start = std::chrono::steady_clock::now();
  s.app.reset();  // stops the gateway, and joins its threads
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));  // the read timeout is 60 s
}

TEST_CASE("requests pipelined over HTTPS, several records in one write, are each answered at once [C6][C3]",
          "[C6][C3]") {
  // The server reads ahead (a record's header and body in one read): a next request's
  // record it read with the first is no longer in the socket, and must still be served
  // then, not after the keep-alive wait.
  Certificates certs;
  jc::testing::TestSystem s([&](jc::server::AppOptions& o) {
    o.auth.tls = certs.Files("ca", "jointcloud");
    o.gateway.keep_alive_timeout_seconds = 60;  // what a stalled request would wait out
  });
  TricklingTlsClient client(s.app->rest_port());
  const std::string get = "GET /openapi/v1/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.admin_token + "\r\n\r\n";
  for (int i = 0; i < 3; ++i) client.Record(get);  // three records
  client.SendKept();                                 // in one segment
  auto answers = [](const std::string& got) {
    int n = 0;
    for (size_t at = got.find("HTTP/1.1 200"); at != std::string::npos; at = got.find("HTTP/1.1 200", at + 1)) ++n;
    return n;
  };
  std::string got =
      client.ReadUntil([&](const std::string& g) { return answers(g) == 3 && absl::EndsWith(g, "}"); },
                       std::chrono::steady_clock::now() + std::chrono::seconds(30));
  INFO(got.substr(0, 400));
  CHECK(answers(got) == 3);
}

TEST_CASE("HTTPS carries what HTTP does: bodies and answers larger than a TLS record, many requests per "
          "connection, and curl's Expect: 100-continue [C6][C3]",
          "[C6][C3]") {
  Certificates certs;
  jc::testing::TestSystem s([&](jc::server::AppOptions& o) { o.auth.tls = certs.Files("ca", "jointcloud"); });
  httplib::SSLClient https("127.0.0.1", s.app->rest_port());
  https.set_ca_cert_path(certs.Path("ca", "ca.crt").c_str());
  https.enable_server_certificate_verification(true);
  https.set_bearer_token_auth(s.admin_token);
  https.set_keep_alive(true);
  // An answer of many records, read whole.
  auto spec = https.Get("/openapi/v1/openapi.json");
  REQUIRE(spec);
  CHECK(spec->status == 200);
  CHECK(spec->body.size() > 64 * 1024);
  CHECK(json::parse(spec->body)["openapi"].is_string());
  // A body of many records (a 200 KB label value) arrives whole.
  std::string big(200 * 1024, 'x');
  json center = {{"ai_center_id", "big"}, {"name", "big"}, {"labels", {{"note", big}}}};
  auto created = https.Post("/openapi/v1/centers", center.dump(), "application/json");
  REQUIRE(created);
  INFO(created->body.substr(0, 300));
  // Label values are short by rule: the refusal counts every byte, so the body was read whole.
  CHECK(created->status == 400);
  CHECK(created->body.find("got 204800") != std::string::npos);
  // Many requests over one connection, each answered.
  int answered = 0;
  for (int i = 0; i < 50; ++i) {
    auto r = https.Get("/openapi/v1/whoami");
    answered += r && r->status == 200 ? 1 : 0;
  }
  CHECK(answered == 50);
  // curl sends large bodies with Expect: 100-continue and waits for "100 Continue" before
  // the body: it must not be held back (curl would wait out its --expect100-timeout).
  std::string body_file = certs.dir + "/job.json";
  {
    std::ofstream out(body_file);
    out << json{{"name", "expect"}, {"tasks", {{{"name", "t"}, {"command", std::string(4000, 'y')}}}}}.dump();
  }
  std::string out_file = certs.dir + "/curl.out";
  std::string curl = "timeout 60 curl -s --expect100-timeout 600 --cacert " + certs.Path("ca", "ca.crt") +
                     " -H 'Authorization: Bearer " + s.admin_token +
                     "' -H 'Content-Type: application/json' -H 'Expect: 100-continue' --data-binary @" + body_file +
                     " -o " + out_file + " -w '%{http_code}' https://127.0.0.1:" + std::to_string(s.app->rest_port()) +
                     "/openapi/v1/trainjob > " + certs.dir + "/curl.code";
  CHECK(std::system(curl.c_str()) == 0);
  // The job names no spec, so the answer is the API's 400 envelope: curl got a full answer.
  CHECK(Read(certs.dir + "/curl.code") == "400");
  CHECK(Read(out_file).find("resourceSpecId") != std::string::npos);
}

TEST_CASE("certificates replaced on disk serve new connections without a restart, REST and gRPC [C6]", "[C6]") {
  Certificates certs;
  // The files the process reads, first the CA "ca"'s; then another CA's replace them.
  std::string live = certs.dir + "/live";
  std::filesystem::create_directories(live);
  auto install = [&](const std::string& ca) {
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"jointcloud.crt", "jointcloud.crt"}, {"jointcloud.key", "jointcloud.key"}, {"ca.crt", "ca.crt"}}) {
      std::filesystem::copy_file(certs.Path(ca, from), live + "/" + to + ".new",
                                 std::filesystem::copy_options::overwrite_existing);
      std::filesystem::rename(live + "/" + to + ".new", live + "/" + to);
    }
  };
  install("ca");
  jc::testing::TestSystem s([&](jc::server::AppOptions& o) {
    o.auth.tls = {live + "/jointcloud.crt", live + "/jointcloud.key", live + "/ca.crt"};
  });
  std::string script = std::string(JC_SOURCE_DIR) + "/scripts/dev-ca.sh";
  REQUIRE(std::system((script + " " + certs.dir + "/next jointcloud client >/dev/null").c_str()) == 0);
  auto rest_ok = [&](const std::string& ca) {
    httplib::SSLClient https("127.0.0.1", s.app->rest_port());
    https.set_ca_cert_path(certs.Path(ca, "ca.crt").c_str());
    https.enable_server_certificate_verification(true);
    https.set_bearer_token_auth(s.admin_token);
    auto r = https.Get("/openapi/v1/whoami");
    return r && r->status == 200;
  };
  std::string target = "127.0.0.1:" + std::to_string(s.app->grpc_port());
  auto grpc_ok = [&](const std::string& ca) {
    auto material = jc::auth::LoadTls(certs.Files(ca, "client"));
    REQUIRE(material.ok());
    v1::Caller caller;
    return WhoAmI(grpc::CreateChannel(target, jc::auth::ChannelCredentials(material->get())), s.admin_token, &caller)
        .ok();
  };
  REQUIRE(rest_ok("ca"));
  REQUIRE(grpc_ok("ca"));
  CHECK_FALSE(rest_ok("next"));

  install("next");
  // Within the reload interval, new connections get the new certificate and trust the new CA.
  CHECK(jc::testing::WaitUntil([&] { return rest_ok("next"); }, std::chrono::seconds(60)));
  CHECK(jc::testing::WaitUntil([&] { return grpc_ok("next"); }, std::chrono::seconds(60)));
  CHECK_FALSE(rest_ok("ca"));
}

TEST_CASE("a certificate without its key, or files that are not PEM, stop the start with a clear error [C6][C5]",
          "[C6][C5]") {
  Certificates certs;
  jc::auth::TlsFiles wrong_key = certs.Files("ca", "jointcloud");
  wrong_key.key = certs.Path("ca", "client.key");
  auto started = [&](const jc::auth::TlsFiles& files) {
    jc::server::AppOptions o;
    o.services = *jc::server::ParseServices("all");
    o.grpc_address = "127.0.0.1:0";
    o.rest_port = 0;
    o.store = jc::testing::MakeTestStore();
    o.auth.tls = files;
    return jc::server::App::Start(std::move(o)).status();
  };
  absl::Status mismatched = started(wrong_key);
  INFO(mismatched.ToString());
  CHECK_FALSE(mismatched.ok());
  jc::auth::TlsFiles not_pem = certs.Files("ca", "jointcloud");
  not_pem.ca = "/etc/hostname";
  absl::Status bad = started(not_pem);
  CHECK(bad.message().find("not PEM") != std::string::npos);
  jc::auth::TlsFiles half = {certs.Path("ca", "jointcloud.crt"), "", ""};
  CHECK(started(half).message().find("--tls_key") != std::string::npos);
}

TEST_CASE("adapters take calls only from the control plane over mutual TLS, and the control plane checks an "
          "adapter's certificate against the center it registered [C6]",
          "[C6]") {
  Certificates certs;
  // Center alpha's adapter, with alpha's certificate.
  jc::testing::LocalAdapter alpha("alpha", 4, "specs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n",
                                  [&](jc::adapter::AdapterOptions& o) {
                                    o.listen = "127.0.0.1:0";  // TLS is for TCP
                                    o.tls = certs.Files("ca", "alpha");
                                  });
  auto jointcloud = jc::auth::LoadTls(certs.Files("ca", "jointcloud"));
  REQUIRE(jointcloud.ok());
  auto control_plane = jc::southbound::MakeGrpcAdapterClient(*jointcloud);
  auto info = control_plane->GetCenterInfo({"alpha", alpha.address()}, absl::Seconds(10));
  INFO(info.status().ToString());
  REQUIRE(info.ok());
  CHECK(info->ai_center_id() == "alpha");
  // Center beta registered at alpha's adapter: its certificate names alpha, not beta.
  auto misdirected = control_plane->GetCenterInfo({"beta", alpha.address()}, absl::Seconds(10));
  INFO(misdirected.status().ToString());
  CHECK(absl::IsUnavailable(misdirected.status()));
  // Beta's own adapter certificate (the CA signed it) is not the control plane's: refused.
  auto beta = jc::auth::LoadTls(certs.Files("ca", "beta"));
  REQUIRE(beta.ok());
  auto as_beta = jc::southbound::MakeGrpcAdapterClient(*beta)->GetCenterInfo({"alpha", alpha.address()},
                                                                              absl::Seconds(10));
  INFO(as_beta.status().ToString());
  CHECK(absl::IsUnauthenticated(as_beta.status()));
  CHECK(absl::StrContains(as_beta.status().message(), "only from the control plane"));
  // Nor does beta's certificate open alpha's event streams, one event or a batch a message.
  {
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("alpha");
    auto stub = ::jointcloud::adapter::v1::Adapter::NewStub(
        grpc::CreateCustomChannel(alpha.address(), jc::auth::ChannelCredentials(beta->get()), args));
    ::jointcloud::adapter::v1::WatchRequest from_start;
    grpc::ClientContext batches_ctx, events_ctx;
    batches_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    events_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto batches = stub->WatchBatches(&batches_ctx, from_start);
    ::jointcloud::adapter::v1::ReplicaEvents batch;
    CHECK_FALSE(batches->Read(&batch));
    grpc::Status refused = batches->Finish();
    CHECK(refused.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(absl::StrContains(refused.error_message(), "only from the control plane"));
    auto events = stub->Watch(&events_ctx, from_start);
    ::jointcloud::adapter::v1::ReplicaEvent event;
    CHECK_FALSE(events->Read(&event));
    CHECK(events->Finish().error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  // Another CA's certificate, and plaintext, do not get through the handshake.
  auto rogue = jc::auth::LoadTls({certs.Path("rogue", "intruder.crt"), certs.Path("rogue", "intruder.key"),
                                  certs.Path("ca", "ca.crt")});
  REQUIRE(rogue.ok());
  CHECK(absl::IsUnavailable(jc::southbound::MakeGrpcAdapterClient(*rogue)
                                ->GetCenterInfo({"alpha", alpha.address()}, absl::Seconds(10))
                                .status()));
  CHECK(absl::IsUnavailable(
      jc::southbound::MakeGrpcAdapterClient()->GetCenterInfo({"alpha", alpha.address()}, absl::Seconds(10)).status()));

  // End to end: a control plane with TLS reaches alpha's adapter (the monitor finds the center
  // available and the scheduler can place on it); a center registered at alpha's address
  // under another name is never reached.
  jc::testing::TestSystem s([&](jc::server::AppOptions& o) {
    o.auth.tls = certs.Files("ca", "jointcloud");
    o.monitor.interval = absl::Milliseconds(100);
    o.scheduler_refresh = absl::Milliseconds(50);
  });
  httplib::SSLClient https("127.0.0.1", s.app->rest_port());
  https.set_ca_cert_path(certs.Path("ca", "ca.crt").c_str());
  https.enable_server_certificate_verification(true);
  https.set_bearer_token_auth(s.admin_token);
  for (const std::string center : {"alpha", "beta"}) {
    json body = {{"ai_center_id", center}, {"name", center}, {"region", "cn"},
                 {"adapter_address", alpha.address()}, {"capacity", {{"cpu", 4}, {"memory", 4096}}}};
    auto r = https.Post("/openapi/v1/centers", body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
  }
  json spec = {{"resource_spec_id", "cpu-1"}, {"resource_spec_name", "1 CPU"},
               {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}}, {"service_type", "batch"},
               {"price", 1}, {"computing_center_list", "alpha,beta"}};
  auto r = https.Post("/openapi/v1/resourcespecs", spec.dump(), "application/json");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  auto score = [&](const std::string& center) {
    auto res = https.Get(("/scheduler/algorithm/lowest_price/score/" + center + "?resourceSpecId=cpu-1").c_str());
    return res ? res->status : 0;
  };
  REQUIRE(jc::testing::WaitUntil([&] { return score("alpha") == 200; }));
  // By then the monitor has polled beta as often as alpha, and failed every time.
  CHECK(score("beta") != 200);
}
