// The control plane's registry client against lying registries (issue 44 holes 6, 7, 13):
// each test performs the attack with a FakeRegistry on loopback and checks the refusal.

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/oci/registry_client.h"
#include "tests/testing/fake_registry.h"
#include "tests/testing/process.h"

namespace {

using jc::oci::ImageReference;
using jc::oci::RegistryClient;
using jc::oci::RegistryOptions;
using jc::testing::FakeRegistry;

// One directory (one CA) for every fake registry of this test binary, removed when it exits.
std::string CertDir() {
  static const struct Dir {
    std::string path;
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } dir{[] {
    auto d = std::filesystem::temp_directory_path() / ("jc-fake-registry-" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    return d.string();
  }()};
  return dir.path;
}

std::unique_ptr<FakeRegistry> StartRegistry(bool tls = true) {
  auto r = FakeRegistry::Start(CertDir(), JC_SOURCE_DIR, tls);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return std::move(r).value();
}

RegistryClient Client(const FakeRegistry& r, const std::function<void(RegistryOptions&)>& customize = {}) {
  RegistryOptions o;
  o.ca_file = r.ca_file();
  o.auth_file = r.WriteAuthFile("puller", "pull-secret");
  if (customize) customize(o);
  auto c = RegistryClient::Create(o);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return std::move(c).value();
}

ImageReference Ref(const std::string& text) { return ImageReference::Parse(text).value(); }

// Whether any request `r` saw carried an Authorization header.
bool SawCredentials(const FakeRegistry& r) {
  for (const auto& s : r.seen()) {
    if (!s.authorization.empty()) return true;
  }
  return false;
}

using Resolved = absl::StatusOr<jc::oci::ResolvedImage>;

// Runs `resolve` on a thread of its own (detached: a client that never returns must fail
// the test, not hang it).
std::future<Resolved> Launch(std::function<Resolved()> resolve) {
  auto result = std::make_shared<std::promise<Resolved>>();
  auto future = result->get_future();
  std::thread([result, resolve] { result->set_value(resolve()); }).detach();
  return future;
}

// What `f` gave, waiting for it a bounded time.
Resolved Await(std::future<Resolved>& f, std::chrono::seconds bound = std::chrono::seconds(60)) {
  if (f.wait_for(bound) != std::future_status::ready) {
    FAIL("the registry client did not return within " << bound.count() << " s");
  }
  return f.get();
}

Resolved Bounded(std::function<Resolved()> resolve) {
  auto f = Launch(std::move(resolve));
  return Await(f);
}

// The peak of this process's resident memory, in bytes (VmHWM).
int64_t PeakRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// A handler that drips `bytes` one byte at a time, forever, until the registry stops.
httplib::Server::Handler Drip(FakeRegistry* r) {
  return [r](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [r](size_t, httplib::DataSink& sink) {
      if (r->stopping()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the attack: a byte at a time
      return sink.write("{", 1);
    });
  };
}

}  // namespace

TEST_CASE("credentials never follow a redirect to another origin, and a redirect to plain http:// is refused "
          "[C6]",
          "[C6]") {
  auto registry = StartRegistry();
  auto elsewhere = StartRegistry();  // another origin: another port, and (as localhost) another host name
  auto plain = StartRegistry(/*tls=*/false);
  const std::string digest = elsewhere->AddImage("moved/app", "v1");
  // Everything of moved/ lives elsewhere: a 302 to localhost:<its port>, then one to
  // 127.0.0.1:<its port> (same host, another port: still another origin).
  registry->server().Get("/v2/moved/(.*)", [&](const httplib::Request& req, httplib::Response& res) {
    const bool by_name = req.path.find("/manifests/") != std::string::npos;
    res.set_redirect(absl::StrCat("https://", by_name ? "localhost" : "127.0.0.1", ":", elsewhere->port(), req.path), 302);
  });
  registry->server().Get("/v2/clear/(.*)", [&](const httplib::Request& req, httplib::Response& res) {
    res.set_redirect(absl::StrCat("http://127.0.0.1:", plain->port(), req.path), 302);
  });
  // Same origin (an absolute path): the credentials still go with it.
  registry->server().Get("/v2/here/(.*)", [](const httplib::Request& req, httplib::Response& res) {
    res.set_redirect(absl::StrReplaceAll(req.path, {{"/here/", "/home/"}}), 307);
  });
  registry->AddImage("home/app", "v1");
  auto client = Client(*registry);

  auto moved = client.Resolve(Ref(registry->host() + "/moved/app:v1"));
  INFO(moved.status().ToString());
  REQUIRE(moved.ok());
  CHECK(moved->digest == digest);
  CHECK(elsewhere->seen().size() >= 2);  // the manifest and the config, both followed there
  CHECK_FALSE(SawCredentials(*elsewhere));
  CHECK(SawCredentials(*registry));

  auto clear = client.Resolve(Ref(registry->host() + "/clear/app:v1"));
  INFO(clear.status().ToString());
  CHECK(absl::IsPermissionDenied(clear.status()));
  CHECK_THAT(std::string(clear.status().message()), Catch::Contains("redirected the manifest of clear/app v1 to plain http://"));
  CHECK(plain->seen().empty());  // not one byte in clear

  auto here = client.Resolve(Ref(registry->host() + "/here/app:v1"));
  INFO(here.status().ToString());
  REQUIRE(here.ok());
  bool home_with_credentials = false;
  for (const auto& s : registry->seen()) {
    if (s.path == "/v2/home/app/manifests/v1") home_with_credentials = !s.authorization.empty();
  }
  CHECK(home_with_credentials);

  // A registry that redirects in circles ends after a few hops.
  registry->server().Get("/v2/loop/app/manifests/v1", [](const httplib::Request& req, httplib::Response& res) {
    res.set_redirect(req.path, 302);
  });
  auto loop = client.Resolve(Ref(registry->host() + "/loop/app:v1"));
  CHECK(absl::IsDataLoss(loop.status()));
  CHECK_THAT(std::string(loop.status().message()), Catch::Contains("more than 5 times"));
}

TEST_CASE("a token service on another host than the registry's, as a lying registry names, gets no credentials [C6]",
          "[C6]") {
  auto registry = StartRegistry();
  auto tokens = StartRegistry();  // the token service, at 127.0.0.1 (the registry's host) and localhost (another)
  // Anyone gets a token for a public repository; a private one needs credentials.
  tokens->server().Get("/token", [](const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("scope").find("private") != std::string::npos && !req.has_header("Authorization")) {
      res.status = 401;
      return;
    }
    res.set_content(R"({"token":"pull-token"})", "application/json");
  });
  const std::string digest = registry->AddImage("demo/app", "v1");
  // Every request without the token is asked for one: the realm host depends on the path.
  const int token_port = tokens->port();
  registry->set_gate([token_port](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") == "Bearer pull-token") return false;
    const bool lying = req.path.find("/demo/") != std::string::npos || req.path.find("/private/") != std::string::npos;
    res.status = 401;
    res.set_header("WWW-Authenticate", absl::StrCat(R"(Bearer realm="https://)", lying ? "localhost" : "127.0.0.1", ":",
                                                    token_port, R"(/token",service="fake")"));
    return true;
  });
  auto client = Client(*registry);

  auto resolved = client.Resolve(Ref(registry->host() + "/demo/app:v1"));
  INFO(resolved.status().ToString());
  REQUIRE(resolved.ok());
  CHECK(resolved->digest == digest);
  REQUIRE_FALSE(tokens->seen().empty());
  CHECK_FALSE(SawCredentials(*tokens));  // localhost is not 127.0.0.1: asked without them

  // The same token service named on the registry's own host gets them (a registry and its
  // token service often share a host on another port).
  auto own = client.Resolve(Ref(registry->host() + "/own/app:v1"));  // unknown there: 404 after the token
  INFO(own.status().ToString());
  CHECK(absl::IsInvalidArgument(own.status()));
  CHECK(tokens->seen().back().authorization.rfind("Basic ", 0) == 0);

  // A private repository behind the lying realm: refused, and the refusal says why.
  auto private_repo = client.Resolve(Ref(registry->host() + "/private/app:v1"));
  INFO(private_repo.status().ToString());
  CHECK(absl::IsPermissionDenied(private_repo.status()));
  CHECK_THAT(std::string(private_repo.status().message()),
             Catch::Contains(absl::StrCat("its token service is on another host (localhost:", token_port, ")")));
  CHECK_FALSE(tokens->seen().back().authorization.rfind("Basic ", 0) == 0);

  // An operator whose token service is elsewhere names that host in the credentials file:
  // its own entry is what is sent there.
  const std::string auth_file = CertDir() + "/auth-realm.json";
  std::ofstream(auth_file) << "{\"auths\": {\"" << registry->host() << "\": {\"auth\": \"cmVnOnNlY3JldA==\"}, \"localhost:"
                           << token_port << "\": {\"auth\": \"dG9rZW5zOnNlY3JldA==\"}}}";
  RegistryOptions o;
  o.ca_file = registry->ca_file();
  o.auth_file = auth_file;
  auto operator_client = RegistryClient::Create(o).value();
  auto with_entry = operator_client.Resolve(Ref(registry->host() + "/private/app:v1"));
  INFO(with_entry.status().ToString());
  CHECK(absl::IsInvalidArgument(with_entry.status()));  // a token, then 404: no such image there
  CHECK(tokens->seen().back().authorization == "Basic dG9rZW5zOnNlY3JldA==");
}

TEST_CASE("a registry dripping its answer holds a Resolve no longer than its one deadline, and a caller who gives up "
          "stops it [C7]",
          "[C7]") {
  auto registry = StartRegistry();
  registry->server().Get("/v2/slow/app/manifests/v1", Drip(registry.get()));
  auto client = Client(*registry, [](RegistryOptions& o) { o.timeout = absl::Seconds(2); });

  // Each read gets a byte well within any per-read timeout: only a deadline for the whole
  // call ends it.
  auto slow = Bounded([&] { return client.Resolve(Ref(registry->host() + "/slow/app:v1")); });
  INFO(slow.status().ToString());
  CHECK(absl::IsDeadlineExceeded(slow.status()));
  CHECK_THAT(std::string(slow.status().message()), Catch::Contains("did not answer within 2s"));

  static auto patient = Client(*registry, [](RegistryOptions& o) { o.timeout = absl::Hours(1); });
  static std::atomic<bool> gave_up{false};
  const std::string slow_ref = registry->host() + "/slow/app:v1";
  auto cancelled = Launch([slow_ref] { return patient.Resolve(Ref(slow_ref), [] { return gave_up.load(); }); });
  REQUIRE(jc::testing::WaitUntil([&] { return registry->seen().size() >= 2; }));
  gave_up = true;
  auto result = Await(cancelled);
  INFO(result.status().ToString());
  CHECK(absl::IsCancelled(result.status()));
}

TEST_CASE("a gibibyte manifest is refused at the size limit, and reading it costs the limit, not a gibibyte [C7]",
          "[C7]") {
  auto registry = StartRegistry();
  constexpr size_t kGiB = size_t{1} << 30;
  auto gibibyte = [&](bool with_length) {
    return [&, with_length](const httplib::Request&, httplib::Response& res) {
      auto provider = [&](size_t offset, httplib::DataSink& sink) {
        static const std::string chunk(1 << 16, ' ');
        if (registry->stopping() || offset >= kGiB) return false;
        return sink.write(chunk.data(), chunk.size());
      };
      if (with_length) {
        res.set_content_provider(kGiB, "application/json", [&](size_t offset, size_t, httplib::DataSink& sink) {
          static const std::string chunk(1 << 16, ' ');
          return !registry->stopping() && sink.write(chunk.data(), std::min(chunk.size(), kGiB - offset));
        });
      } else {
        res.set_chunked_content_provider("application/json", provider);
      }
    };
  };
  registry->server().Get("/v2/huge/app/manifests/v1", gibibyte(true));
  registry->server().Get("/v2/chunked/app/manifests/v1", gibibyte(false));
  auto client = Client(*registry, [](RegistryOptions& o) { o.timeout = absl::Seconds(60); });

  const int64_t before = PeakRss();
  for (const char* repo : {"huge", "chunked"}) {
    auto huge = Bounded([&] { return client.Resolve(Ref(absl::StrCat(registry->host(), "/", repo, "/app:v1"))); });
    INFO(repo << ": " << huge.status().ToString());
    CHECK(absl::IsFailedPrecondition(huge.status()));
    CHECK_THAT(std::string(huge.status().message()),
               Catch::Contains("answered more than 4194304 bytes for the manifest of " + std::string(repo) +
                               "/app v1 (--registry_max_manifest_bytes)"));
  }
  // The limit and a margin for the TLS buffers and the test's own threads.
  CHECK(PeakRss() - before < (4 << 20) + (32 << 20));
}

TEST_CASE("malformed manifests from a registry are clear errors naming the field, never a library exception [A4][C6]",
          "[A4][C6]") {
  auto registry = StartRegistry();
  auto serve = [&](const std::string& repo, const std::string& body) {
    registry->server().Get("/v2/" + repo + "/app/manifests/v1", [body](const httplib::Request&, httplib::Response& res) {
      res.set_content(body, "application/vnd.oci.image.manifest.v1+json");
    });
  };
  const std::string digest = "sha256:" + std::string(64, 'c');
  serve("index-number", R"({"manifests": 5})");
  serve("size-string", R"({"config":{"digest":")" + digest + R"(","size":"x"}})");
  serve("layers-object", R"({"config":{"digest":")" + digest + R"(","size":1},"layers":{}})");
  serve("media-number", R"({"mediaType":5,"config":{}})");
  auto client = Client(*registry);
  const struct {
    const char* repo;
    const char* says;
  } wrong[] = {
      {"index-number", "\"manifests\" of an index is not a list"},
      {"size-string", "config.size is not a whole number"},
      {"layers-object", "\"layers\" is not a list"},
      {"media-number", "mediaType is not a string"},
  };
  for (const auto& w : wrong) {
    absl::StatusOr<jc::oci::ResolvedImage> r = absl::UnknownError("threw");
    CHECK_NOTHROW(r = client.Resolve(Ref(absl::StrCat(registry->host(), "/", w.repo, "/app:v1"))));
    INFO(w.repo << ": " << r.status().ToString());
    CHECK(absl::IsDataLoss(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("served a malformed manifest of"));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains(w.says));
  }
}

TEST_CASE("a registry that cannot be reached is one error whatever the reason: the client is no port scanner [C6]",
          "[C6]") {
  auto plain = StartRegistry(/*tls=*/false);             // HTTP, not TLS
  auto untrusted = StartRegistry();                      // TLS with a certificate the client does not trust
  untrusted->AddImage("demo/app", "v1");
  // A port that accepts connections and never says a word (a filtered port looks alike by
  // the end of the deadline), and a port nobody listens at.
  int silent = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(silent, 16) == 0);
  socklen_t len = sizeof(addr);
  getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len);
  const int silent_port = ntohs(addr.sin_port);
  int closed = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in caddr{};
  caddr.sin_family = AF_INET;
  caddr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(closed, reinterpret_cast<sockaddr*>(&caddr), sizeof(caddr)) == 0);
  len = sizeof(caddr);
  getsockname(closed, reinterpret_cast<sockaddr*>(&caddr), &len);
  const int closed_port = ntohs(caddr.sin_port);
  close(closed);  // bound once, now nobody's

  RegistryOptions o;  // no CA: the untrusted one's certificate is not trusted
  o.timeout = absl::Seconds(2);
  auto client = RegistryClient::Create(o).value();
  std::string first;
  for (int port : {plain->port(), untrusted->port(), silent_port, closed_port}) {
    const std::string host = absl::StrCat("127.0.0.1:", port);
    auto r = Bounded([&] { return client.Resolve(Ref(host + "/demo/app:v1")); });
    INFO(host << ": " << r.status().ToString());
    CHECK(absl::IsUnavailable(r.status()));
    const std::string said = absl::StrReplaceAll(r.status().message(), {{std::to_string(port), "PORT"}});
    CHECK_THAT(said, Catch::StartsWith("cannot reach registry 127.0.0.1:PORT over HTTPS"));
    if (first.empty()) first = said;
    CHECK(said == first);
  }
  close(silent);
}

TEST_CASE("at most max_concurrent Resolves run at once: one more is refused at once, not queued behind slow "
          "registries [C7]",
          "[C7]") {
  auto registry = StartRegistry();
  registry->server().Get("/v2/slow/app/manifests/v1", Drip(registry.get()));
  registry->AddImage("fast/app", "v1");
  // Static: threads that outlive a failed test must not point at its stack.
  static auto client = Client(*registry, [](RegistryOptions& o) {
    o.max_concurrent = 2;
    o.timeout = absl::Hours(1);
  });
  static std::atomic<bool> done{false};
  const std::string slow_ref = registry->host() + "/slow/app:v1";
  std::vector<std::future<Resolved>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(Launch([slow_ref] { return client.Resolve(Ref(slow_ref), [] { return done.load(); }); }));
  }
  REQUIRE(jc::testing::WaitUntil([&] { return registry->seen().size() >= 2; }));
  auto refused = client.Resolve(Ref(registry->host() + "/fast/app:v1"));
  INFO(refused.status().ToString());
  CHECK(absl::IsResourceExhausted(refused.status()));
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("(--registry_max_concurrent); try again shortly"));
  done = true;
  for (auto& f : held) CHECK(absl::IsCancelled(Await(f).status()));
  auto later = client.Resolve(Ref(registry->host() + "/fast/app:v1"));
  INFO(later.status().ToString());
  CHECK(later.ok());
}
