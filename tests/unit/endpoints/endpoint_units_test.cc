// The endpoint listener's parts (SPEC A17): how endpoints are named as hosts, how request
// heads are read and changed, and links that open once.

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "common/auth/api_token.h"
#include "common/exec/exec_stream.h"
#include "services/endpoints/endpoint_name.h"
#include "services/endpoints/endpoint_passes.h"
#include "services/endpoints/http_head.h"
#include "tests/testing/test_store.h"

using jc::endpoints::EndpointKey;

TEST_CASE("an endpoint's host names it, reads back as the same endpoint, and nothing else reads as one [A17]", "[A17]") {
  EndpointKey key{"job-00000042", 0, 1, "jupyter"};
  CHECK(jc::endpoints::HostLabel(key) == "job-00000042-0-1-jupyter");
  CHECK(jc::endpoints::ParseHostLabel("job-00000042-0-1-jupyter") == key);
  // Port names with '-' and digits read back whole.
  EndpointKey dashed{"job-7", 3, 12, "http-2-x"};
  CHECK(jc::endpoints::ParseHostLabel(jc::endpoints::HostLabel(dashed)) == dashed);
  // The Host header, any case, with or without its port, under the domain only.
  CHECK(jc::endpoints::EndpointOfHost("Job-00000042-0-1-Jupyter.Endpoints.LOCALHOST:8081", "endpoints.localhost") == key);
  CHECK(jc::endpoints::EndpointOfHost("job-00000042-0-1-jupyter.endpoints.localhost", "endpoints.localhost") == key);
  for (const char* host : {"job-00000042-0-1-jupyter.localhost", "endpoints.localhost",
                           "a.job-00000042-0-1-jupyter.endpoints.localhost", "job-00000042-0-1-jupyter.endpoints.localhost:x",
                           "job-00000042-0-1-jupyter.endpoints.localhost.evil.com", "job-00000042-00-1-jupyter.endpoints.localhost",
                           "job-42-0-1-.endpoints.localhost", "job-42-0-1-9x.endpoints.localhost", "job--0-1-x.endpoints.localhost",
                           "task-42-0-1-x.endpoints.localhost", "job-42-0-1-UPPER_.endpoints.localhost", ""}) {
    INFO(host);
    CHECK_FALSE(jc::endpoints::EndpointOfHost(host, "endpoints.localhost").has_value());
  }
  // The task's endpoint: no replica index; a port name never starts with a digit, so the
  // two read apart.
  EndpointKey task{"job-00000042", 0, jc::endpoints::kTaskEndpoint, "http-2"};
  CHECK(jc::endpoints::HostLabel(task) == "job-00000042-0-http-2");
  CHECK(jc::endpoints::ParseHostLabel("job-00000042-0-http-2") == task);
  CHECK(jc::endpoints::ParseHostLabel("job-00000042-0-1-http-2") == EndpointKey{"job-00000042", 0, 1, "http-2"});
  CHECK(jc::endpoints::Describe(task) == "job-00000042, task 0, every ready replica, port \"http-2\"");
  CHECK(jc::endpoints::HostLabel({"job-1", 0, -2, "http"}).empty());
  // Commands in a replica (jcctl job exec): the replica's own name, no port; never the
  // task's (a command runs in one replica).
  EndpointKey replica{"job-00000042", 0, 1, ""};
  CHECK(jc::endpoints::HostLabel(replica) == "job-00000042-0-1");
  CHECK(jc::endpoints::ParseHostLabel("job-00000042-0-1") == replica);
  CHECK(jc::endpoints::EndpointOfHost("job-00000042-0-1.endpoints.localhost:8081", "endpoints.localhost") == replica);
  CHECK(jc::endpoints::Describe(replica) == "job-00000042, task 0, replica 1 (a command in it)");
  CHECK(jc::endpoints::HostLabel({"job-1", 0, jc::endpoints::kTaskEndpoint, ""}).empty());
  CHECK_FALSE(jc::endpoints::ParseHostLabel("job-00000042-0-01").has_value());
  CHECK_FALSE(jc::endpoints::ParseHostLabel("job-00000042-0-12345").has_value());
  // What cannot be named is not.
  CHECK(jc::endpoints::HostLabel({"../etc", 0, 0, "http"}).empty());
  CHECK(jc::endpoints::HostLabel({"job-1", 0, 0, "Http"}).empty());
  CHECK(jc::endpoints::HostLabel({"job-1", -1, 0, "http"}).empty());
}

TEST_CASE("request heads are read strictly, cookies taken out by name, and heads written back [A17]", "[A17]") {
  auto head = jc::endpoints::ParseRequestHead(
      "GET /lab/tree?token=a%20b&ticket=x HTTP/1.1\r\nHost: h.example\r\nCookie: theme=dark; jc_endpoint=s1\r\n"
      "Cookie: jc_endpoint=\"s2\"\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n");
  REQUIRE(head.ok());
  CHECK(head->first == "GET");
  CHECK(jc::endpoints::TargetPath(head->second) == "/lab/tree");
  CHECK(jc::endpoints::QueryParam(head->second, "token") == "a b");
  CHECK(jc::endpoints::QueryParam(head->second, "ticket") == "x");
  CHECK_FALSE(jc::endpoints::QueryParam(head->second, "nope").has_value());
  CHECK(head->Lists("connection", "upgrade"));
  std::string rest;
  CHECK(jc::endpoints::TakeCookies(*head, "jc_endpoint", &rest) == std::vector<std::string>{"s1", "s2"});
  CHECK(rest == "theme=dark");
  // Fields read as the same by CGI and WSGI go together.
  {
    auto spelled = jc::endpoints::ParseRequestHead(
        "GET / HTTP/1.1\r\nHost: h\r\nX_Forwarded_User: root\r\nx-forwarded-user: root\r\nX-Forwarded-Userx: k\r\n\r\n");
    REQUIRE(spelled.ok());
    spelled->RemoveLike("X-Forwarded-User");
    REQUIRE(spelled->fields.size() == 2);
    CHECK(spelled->fields[1].first == "X-Forwarded-Userx");
  }
  head->Remove("cookie");
  CHECK(head->Serialize() ==
        "GET /lab/tree?token=a%20b&ticket=x HTTP/1.1\r\nHost: h.example\r\nConnection: keep-alive, Upgrade\r\n"
        "Upgrade: websocket\r\n\r\n");

  for (const char* bad : {"GET / HTTP/1.1\r\n\r\n",                                    // no Host
                          "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",              // two
                          "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",              // folding
                          "GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n",          // not a token
                          "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",            // control byte
                          "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n",                   // bare LF
                          "GET http://other/ HTTP/1.1\r\nHost: a\r\n\r\n",             // not origin-form
                          "GET / HTTP/2\r\nHost: a\r\n\r\n", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n"}) {
    INFO(bad);
    CHECK_FALSE(jc::endpoints::ParseRequestHead(bad).ok());
  }
  auto answer = jc::endpoints::ParseResponseHead("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n");
  REQUIRE(answer.ok());
  CHECK(answer->second == "101");
  CHECK(jc::endpoints::HeadEnd("GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY") == 27u);
  CHECK_FALSE(jc::endpoints::HeadEnd("GET / HTTP/1.1\r\nHost: a\r\n").has_value());
}

// A member of project "lab" signed in with an API token.
jc::auth::Principal Alice() {
  jc::auth::Principal alice;
  alice.name = "alice";
  alice.auth_method = "token";
  alice.token_id = "0123456789abcdef";
  alice.projects["lab"] = jc::auth::ProjectRole::kMember;
  return alice;
}

TEST_CASE("a link opens once, for its endpoint, before it expires, and its session stands for who it was issued to [A17][C6]",
          "[A17][C6]") {
  auto store = jc::testing::MakeTestStore();
  jc::FakeClock clock(absl::FromUnixSeconds(1'800'000'000));
  jc::endpoints::EndpointPasses passes(store.get(), &clock);
  const jc::auth::Principal alice = Alice();
  EndpointKey key{"job-00000001", 0, 0, "http"};

  auto ticket = passes.Issue(alice, "lab", key, "/lab");
  REQUIRE(ticket.ok());
  CHECK(ticket->expires == clock.Now() + absl::Seconds(60));
  // Only its hash is stored.
  auto stored = store->Query("SELECT ticket_sha256 FROM endpoint_passes");
  REQUIRE(stored.ok());
  REQUIRE(stored->size() == 1);
  CHECK(*(*stored)[0][0] == jc::auth::Sha256Hex(ticket->secret));

  // Another endpoint's host: refused, and the link still opens where it belongs.
  auto elsewhere = passes.Redeem(ticket->secret, {"job-00000001", 0, 1, "http"});
  CHECK(absl::IsPermissionDenied(elsewhere.status()));
  CHECK(absl::StrContains(elsewhere.status().message(), "another endpoint"));
  auto opened = passes.Redeem(ticket->secret, key);
  REQUIRE(opened.ok());
  CHECK(opened->landing_path == "/lab");
  CHECK(opened->expires == clock.Now() + absl::Hours(12));
  // Once.
  auto again = passes.Redeem(ticket->secret, key);
  CHECK(absl::IsPermissionDenied(again.status()));
  CHECK(absl::StrContains(again.status().message(), "opened already"));
  CHECK(absl::IsPermissionDenied(passes.Redeem("made-up", key).status()));

  auto pass = passes.PassOf(opened->session_secret);
  REQUIRE(pass.ok());
  CHECK(pass->key == key);
  CHECK(pass->user_name == "alice");
  CHECK(pass->token_id == "0123456789abcdef");
  CHECK(pass->project == "lab");
  CHECK(pass->role == jc::auth::ProjectRole::kMember);
  CHECK(absl::IsUnauthenticated(passes.PassOf("made-up").status()));
  CHECK(absl::IsUnauthenticated(passes.PassOf(ticket->secret).status()));  // a link is not a session

  // A link not opened within its minute is dead.
  auto late = passes.Issue(alice, "lab", key, "/");
  REQUIRE(late.ok());
  clock.Advance(absl::Seconds(61));
  CHECK(absl::StrContains(passes.Redeem(late->secret, key).status().message(), "expired"));
  // A session past its time is dead, cached or not.
  clock.Advance(absl::Hours(12));
  CHECK(absl::IsUnauthenticated(passes.PassOf(opened->session_secret).status()));

  // An identity provider's caller, whose roles cannot be asked again: an hour.
  jc::auth::Principal olga = alice;
  olga.name = "olga";
  olga.auth_method = "oidc";
  olga.token_id.clear();
  auto provider = passes.Issue(olga, "lab", key, "/");
  REQUIRE(provider.ok());
  auto provider_open = passes.Redeem(provider->secret, key);
  REQUIRE(provider_open.ok());
  CHECK(provider_open->expires == clock.Now() + absl::Hours(1));
}

TEST_CASE("a flood of made-up session cookies does not push a session in use out of the cache [A17][C6]", "[A17][C6]") {
  auto store = jc::testing::MakeTestStore();
  jc::FakeClock clock(absl::FromUnixSeconds(1'800'000'000));
  jc::endpoints::PassOptions options;
  options.max_cached = 10;
  jc::endpoints::EndpointPasses passes(store.get(), &clock, options);
  const jc::auth::Principal alice = Alice();
  EndpointKey key{"job-00000001", 0, 0, "http"};
  auto ticket = passes.Issue(alice, "lab", key, "/");
  REQUIRE(ticket.ok());
  auto opened = passes.Redeem(ticket->secret, key);
  REQUIRE(opened.ok());
  REQUIRE(passes.PassOf(opened->session_secret).ok());  // cached now
  for (int i = 0; i < 50; ++i) {
    CHECK(absl::IsUnauthenticated(passes.PassOf("made-up-" + std::to_string(i)).status()));
  }
  // The session's row gone from the store: only the cache still knows it, within its time.
  REQUIRE(store->Exec("DELETE FROM endpoint_passes").ok());
  CHECK(passes.PassOf(opened->session_secret).ok());
}

TEST_CASE("a request's body ends where its framing says, chunked or by length, and framings read two ways are refused "
          "[A17][C6]",
          "[A17][C6]") {
  auto framing = [](const std::string& fields) {
    auto head = jc::endpoints::ParseRequestHead("POST / HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n");
    REQUIRE(head.ok());
    return jc::endpoints::RequestBodyFraming(*head);
  };
  CHECK(framing("")->length == 0);
  CHECK(framing("Content-Length: 12\r\n")->length == 12);
  CHECK(framing("Transfer-Encoding: Chunked\r\n")->chunked);
  for (const char* bad : {"Content-Length: 1\r\nTransfer-Encoding: chunked\r\n", "Content-Length: 1\r\nContent-Length: 1\r\n",
                          "Content-Length: -1\r\n", "Content-Length: 1, 1\r\n", "Transfer-Encoding: gzip, chunked\r\n",
                          "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"}) {
    INFO(bad);
    CHECK_FALSE(framing(bad).ok());
  }
  // A chunked body, fed in pieces however they come: it ends after its last chunk; what
  // follows is not its.
  const std::string body = "4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n";
  const std::string next = "GET /smuggled HTTP/1.1\r\n\r\n";
  for (size_t piece : {size_t{1}, size_t{3}, size_t{1000}}) {
    jc::endpoints::ChunkedBody chunks;
    const std::string all = body + next;
    size_t taken = 0;
    for (size_t at = 0; at < all.size() && !chunks.done(); at += piece) {
      auto n = chunks.Take(absl::string_view(all).substr(at, piece));
      REQUIRE(n.ok());
      taken += *n;
    }
    INFO(piece);
    CHECK(chunks.done());
    CHECK(taken == body.size());
  }
  // Trailers (a backend might merge them into the head) and endless extensions are refused.
  for (const std::string& bad : {std::string("x\r\n"), std::string("4\r\nWikiXX"), std::string("\r\n"),
                                 std::string("1234567890abcdef0\r\n"), std::string("4\nWiki"),
                                 std::string("0\r\nX-Forwarded-User: root\r\n\r\n"),
                                 "1;" + std::string(2000, 'e') + "\r\n"}) {
    jc::endpoints::ChunkedBody chunks;
    INFO(bad);
    CHECK_FALSE(chunks.Take(bad).ok());
  }
}

TEST_CASE("the exec stream: frames of any size read back whole however the bytes are cut, and a broken stream says "
          "so and keeps nothing more [A17]",
          "[A17]") {
  namespace es = jc::exec_stream;
  std::string big(es::kMaxPayload * 2 + 17, 'b');
  std::string stream = es::Encode(es::Type::kStdin, "hi") + es::EncodeData(es::Type::kStdout, big) +
                       es::EncodeResize(40, 120) + es::Encode(es::Type::kStdinEnd, "") + es::EncodeExit(130);
  // Fed a byte at a time, then at once: the same frames.
  for (size_t piece : {size_t{1}, stream.size()}) {
    es::Decoder d;
    std::vector<es::Frame> frames;
    for (size_t at = 0; at < stream.size(); at += piece) {
      d.Feed(absl::string_view(stream).substr(at, piece));
      while (auto f = d.Next()) frames.push_back(*f);
    }
    REQUIRE(frames.size() == 7);  // the big output is three frames
    CHECK(frames[0].payload == "hi");
    CHECK(frames[1].type == es::Type::kStdout);
    CHECK(frames[1].payload.size() == es::kMaxPayload);
    CHECK(frames[1].payload + frames[2].payload + frames[3].payload == big);
    CHECK(es::ParseResize(frames[4].payload) == std::make_pair(40, 120));
    CHECK(frames[5].type == es::Type::kStdinEnd);
    CHECK(es::ParseExit(frames[6].payload) == 130);
    CHECK(d.buffered() == 0);
    CHECK_FALSE(d.broken());
  }
  // An unknown type, or a frame longer than the most, breaks the stream for good.
  es::Decoder unknown;
  unknown.Feed(std::string("\x09\0\0\0\0", 5));
  CHECK_FALSE(unknown.Next().has_value());
  CHECK(unknown.broken());
  // ... and keeps nothing fed to it after (an attacker helper grew a root agent to 3.7 GB
  // with junk after a bad frame).
  const size_t kept = unknown.buffered();
  for (int i = 0; i < 64; ++i) unknown.Feed(std::string(1 << 20, 'j'));
  CHECK(unknown.buffered() == kept);
  es::Decoder huge;
  huge.Feed(std::string("\x01\x7f\xff\xff\xff", 5));
  CHECK_FALSE(huge.Next().has_value());
  CHECK(absl::StrContains(huge.error().message(), "the most is"));
  CHECK_FALSE(es::ParseResize("abc").has_value());
  CHECK_FALSE(es::ParseResize(std::string(4, '\0')).has_value());
  // Commands: checked the same where they enter and at the adapter.
  CHECK(es::CheckCommand(std::vector<std::string>{"ls", "-l"}).ok());
  CHECK_FALSE(es::CheckCommand(std::vector<std::string>{}).ok());
  CHECK_FALSE(es::CheckCommand(std::vector<std::string>{"", "x"}).ok());
  CHECK_FALSE(es::CheckCommand(std::vector<std::string>{std::string("a\0b", 3)}).ok());
  CHECK_FALSE(es::CheckCommand(std::vector<std::string>(257, "x")).ok());
  CHECK_FALSE(es::CheckCommand(std::vector<std::string>{std::string(es::kMaxCommandBytes + 1, 'x')}).ok());
}
