// The endpoint listener end to end (SPEC A17, issue 46 item 2): a service's named port
// reached from a browser's point of view — a link from OpenEndpoint, its own origin, a
// session cookie — through the center's adapter, and every refusal as the attacker: a
// viewer, another project's member, a stolen or forged cookie, another endpoint's page, a
// member removed while the session is open. A real control plane over REST, a real local
// center, a real HTTP server in the replica, raw sockets as the browser.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testing/browser.h"
#include "tests/testing/local_adapter.h"
#include "tests/testing/process.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

// The replica: answers a request with what it received (its request line and fields, as
// JSON, without "Connection: close", which the listener must add). Upgraded to a WebSocket
// at /raw it echoes every byte as it comes; elsewhere it speaks WebSocket (RFC 6455) and
// answers each message with "echo: " and the message.
constexpr char kEchoServer[] = R"PY(
import base64, hashlib, json, os, socket, struct, sys, threading
def websocket(c, key, buf):
    accept = base64.b64encode(hashlib.sha1((key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').encode()).digest())
    c.sendall(b'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
              b'Sec-WebSocket-Accept: ' + accept + b'\r\n\r\n')
    def take(n):
        nonlocal buf
        while len(buf) < n:
            d = c.recv(65536)
            if not d:
                raise EOFError
            buf += d
        out, buf = buf[:n], buf[n:]
        return out
    try:
        while True:
            b0, b1 = take(2)
            op, n = b0 & 0x0f, b1 & 0x7f
            if n == 126:
                n = struct.unpack('>H', take(2))[0]
            elif n == 127:
                n = struct.unpack('>Q', take(8))[0]
            mask = take(4) if b1 & 0x80 else b'\0\0\0\0'
            data = bytes(x ^ mask[i % 4] for i, x in enumerate(take(n)))
            if op == 8:
                c.sendall(b'\x88\x00')
                return
            if op in (1, 2):
                reply = b'echo: ' + data
                if len(reply) < 126:
                    size = bytes([len(reply)])
                elif len(reply) < 65536:
                    size = b'\x7e' + struct.pack('>H', len(reply))
                else:
                    size = b'\x7f' + struct.pack('>Q', len(reply))
                c.sendall(bytes([0x80 | op]) + size + reply)
    except EOFError:
        pass
def serve(c):
    data = b''
    while b'\r\n\r\n' not in data:
        d = c.recv(65536)
        if not d:
            c.close(); return
        data += d
    head, rest = data.split(b'\r\n\r\n', 1)
    lines = head.decode('latin-1').split('\r\n')
    fields = {}
    for l in lines[1:]:
        k, v = l.split(':', 1)
        fields.setdefault(k.strip().lower(), []).append(v.strip())
    if fields.get('upgrade', [''])[0].lower() == 'websocket':
        if lines[0].split(' ')[1] == '/ws-cookie':
            # A 101 that would set a cookie for every endpoint, saying what Connection it got.
            c.sendall(b'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
                      b'Set-Cookie: jc_endpoint=tossed; Domain=endpoints.localhost\r\nSet-Cookie: mine=1\r\n'
                      b'X-Seen-Connection: ' + ','.join(fields.get('connection', [])).encode() + b'\r\n\r\n')
            c.close()
            return
        if lines[0].split(' ')[1] == '/raw':
            c.sendall(b'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n' + rest)
            while True:
                d = c.recv(65536)
                if not d: break
                c.sendall(d)
        else:
            websocket(c, fields['sec-websocket-key'][0], rest)
    else:
        path = lines[0].split(' ')[1]
        body = json.dumps({'line': lines[0], 'fields': fields, 'port': PORT,
                           'token': os.environ.get('JC_ENDPOINT_TOKEN', '')}).encode()
        status = b'200 OK'
        if path == '/ready' and os.path.exists('/tmp/jc-echo-down-%d' % PORT):
            status = b'503 Service Unavailable'  # the test took this replica out
        if path == '/status':
            # Its own use, as Jupyter's /api/status says it: when the test last wrote it, and
            # only to whoever brings the job's endpoint token.
            if fields.get('authorization', [''])[0] != 'token ' + os.environ.get('JC_ENDPOINT_TOKEN', '-'):
                status, body = b'403 Forbidden', b'{}'
            else:
                try:
                    at = open('/tmp/jc-echo-activity-%d' % PORT).read().strip()
                except OSError:
                    at = '2000-01-01T00:00:00Z'
                body = json.dumps({'last_activity': at}).encode()
                if at == 'down':
                    status, body = b'503 Service Unavailable', b'{}'  # it stopped answering
        head = b'HTTP/1.1 ' + status + b'\r\nContent-Type: application/json\r\nContent-Length: %d\r\n' % len(body)
        if path == '/stream':
            # An answer that goes on until its reader leaves (a log, a feed).
            try:
                c.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n')
                while True:
                    c.sendall(b'5\r\ntick\n\r\n')
                    threading.Event().wait(0.1)
            except OSError:
                c.close()
                return
        if path == '/early':
            c.sendall(b'HTTP/1.1 100 Continue\r\n\r\n')
        if path == '/cookies':
            head += (b'Set-Cookie: wide=1; Domain=endpoints.localhost; Path=/\r\n'
                     b'Set-Cookie: jc_endpoint=planted; Path=/\r\nSet-Cookie: own=2; Path=/\r\n')
        if path in ('/keep', '/early'):
            # Keeps the connection for more requests, whatever it was asked: a replica that
            # would take a second request on it.
            c.sendall(head + b'Connection: keep-alive\r\n\r\n' + body)
            serve(c)
            return
        c.sendall(head + b'\r\n' + body)
    c.close()
PORT = int(sys.argv[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', PORT))
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
)PY";

std::string CenterConfig() {
  const int first = 29700 + static_cast<int>(getpid() % 115) * 20;  // below the ephemeral ports (conformance.cc)
  return "security_grade: 3\nspecs:\n  - {id: svc-1, cpu: 1, memory: 256Mi}\n  - {id: nb-1, cpu: 1, memory: 256Mi}\n"
         "ports: {first: " + std::to_string(first) +
         ", last: " + std::to_string(first + 19) + "}\n";
}

// A connection to the listener, as a browser's.
struct Socket {
  int fd = -1;
  explicit Socket(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~Socket() { ::close(fd); }
  void Send(const std::string& bytes) { REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())); }
  // Whether the peer has closed (a wait on it reads at most 100 ms).
  bool ClosedByPeer() {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) return false;
    char c;
    return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
  }
  // Reads until `done` holds of what came, the peer closes, or 10 s pass.
  std::string Read(const std::function<bool(const std::string&)>& done = {}) {
    std::string got;
    char chunk[65536];
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline && !(done && done(got))) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      got.append(chunk, static_cast<size_t>(n));
    }
    return got;
  }
};

struct Answer {
  int status = 0;
  std::string head;
  std::string body;
  std::string Field(const std::string& name) const {
    for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
      if (absl::StartsWithIgnoreCase(line, name + ":")) return std::string(absl::StripAsciiWhitespace(line.substr(name.size() + 1)));
    }
    return "";
  }
};

Answer Parse(const std::string& raw) {
  Answer a;
  size_t end = raw.find("\r\n\r\n");
  a.head = raw.substr(0, end);
  a.body = end == std::string::npos ? "" : raw.substr(end + 4);
  if (raw.size() > 12) a.status = std::atoi(raw.substr(9, 3).c_str());
  return a;
}

struct Endpoints : jc::testing::TestSystem {
  std::unique_ptr<jc::testing::LocalAdapter> own;
  jc::testing::LocalAdapter* center;
  std::filesystem::path script = std::filesystem::temp_directory_path() / ("jc-echo-" + std::to_string(getpid()) + ".py");

  // `outliving`: a center that outlives this control plane (a restart); none: a center of
  // its own. `registers`: registered here (else in the store this one shares already).
  explicit Endpoints(const std::function<void(jc::server::AppOptions&)>& more = {},
                     jc::testing::LocalAdapter* outliving = nullptr, bool registers = true)
      : TestSystem([&](jc::server::AppOptions& o) {
          jc::testing::FastIntervals(o);
          o.endpoint_host = "127.0.0.1";
          o.endpoint_port = 0;
          if (more) more(o);
        }),
        own(outliving ? nullptr : std::make_unique<jc::testing::LocalAdapter>("solo", 8, CenterConfig())),
        center(outliving ? outliving : own.get()) {
    std::ofstream(script) << kEchoServer;
    if (!registers) return;
    REQUIRE(jc::testing::AddServiceCenter(*rest, "solo", center->address()));
  }
  ~Endpoints() {
    if (own != nullptr) std::filesystem::remove(script);
  }
  int port() const { return app->endpoint_port(); }

  // A service of `replicas` in project "lab" that alice submits, running and ready.
  std::string StartService(jc::testing::RestClient& as, int replicas = 1, const std::string& readiness = "/") {
    json task = {{"name", "web"},
                 {"command", "exec /usr/bin/python3 " + script.string() + " $JC_PORT_HTTP"},
                 {"resourceSpecId", "svc-1"},
                 {"kind", "service"},
                 {"replicaNumber", replicas},
                 {"ports", json::array({{{"name", "http"}, {"readinessPath", readiness}}})}};
    auto r = as.Post("/openapi/v1/trainjob", {{"name", "web"}, {"project", "lab"}, {"tasks", json::array({task})}});
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
    std::string id = r.body["data"]["jobId"];
    json job;
    bool ready = jc::testing::WaitUntil([&] {
      job = rest->Get("/openapi/v1/trainjob/" + id).body["data"];
      return job["taskInfos"][0].value("readyReplicas", 0) == replicas;
    });
    INFO(job.dump());
    REQUIRE(ready);
    return id;
  }
  // Stops the job and waits until it ended: its replicas are killed at the center (a replica
  // left running would outlive the test, holding what it inherited, ctest's pipe included).
  void StopAndWait(const std::string& id) {
    REQUIRE(rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()).http_status == 200);
    bool ended = jc::testing::WaitUntil([&] {
      std::string status = rest->Get("/openapi/v1/trainjob/" + id).body["data"].value("status", "");
      return status == "completed" || status == "failed";
    });
    REQUIRE(ended);
  }
  // A browser's session on an endpoint of job `id`, opened through a link as `as`.
  struct Session {
    std::string host, cookie, origin;
  };
  Session OpenSession(jc::testing::RestClient& as, const std::string& id, json body = json::object());
  // OpenEndpoint as `as`.
  jc::testing::RestReply Open(jc::testing::RestClient& as, const std::string& id, json body = json::object()) {
    if (!body.contains("portName")) body["portName"] = "http";
    return as.Post("/openapi/v1/trainjob/" + id + "/open", body);
  }
  // One request on a connection of its own, as a browser sends it to `host`.
  Answer Request(const std::string& host, const std::string& target, const std::string& fields = "",
                 const std::string& method = "GET") {
    Socket s(port());
    s.Send(absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: ", host, "\r\n", fields, "\r\n"));
    return Parse(s.Read());
  }
};

// "http://job-…-0-0-http.endpoints.localhost:PORT/…" -> host, target.
std::pair<std::string, std::string> Split(const std::string& url) {
  std::string rest = url.substr(url.find("://") + 3);
  size_t slash = rest.find('/');
  return {rest.substr(0, slash), rest.substr(slash)};
}

// The session cookie a link's redemption sets.
std::string CookieOf(const Answer& a) {
  std::string set = a.Field("Set-Cookie");
  return set.substr(0, set.find(';'));
}

Endpoints::Session Endpoints::OpenSession(jc::testing::RestClient& as, const std::string& id, json body) {
  auto link = Open(as, id, std::move(body));
  INFO(link.body.dump());
  REQUIRE(link.http_status == 200);
  auto [host, enter] = Split(link.body["data"]["url"]);
  Answer redeemed = Request(host, enter);
  INFO(redeemed.head);
  Session out{host, CookieOf(redeemed), link.body["data"]["origin"]};
  REQUIRE(!out.cookie.empty());
  return out;
}

}  // namespace

TEST_CASE("a member opens a service's endpoint with a link, on the endpoint's own origin, and talks HTTP and WebSocket "
          "to the replica through its adapter, and the replica never sees the session [A17][C6]",
          "[A17][C6]") {
  Endpoints e;
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  const std::string id = e.StartService(*alice);

  auto link = e.Open(*alice, id, {{"path", "/lab?x=1"}});
  INFO(link.body.dump());
  REQUIRE(link.http_status == 200);
  const std::string origin = link.body["data"]["origin"];
  CHECK(origin == absl::StrCat("http://", id, "-0-0-http.endpoints.localhost:", e.port()));
  auto [host, enter] = Split(link.body["data"]["url"]);
  CHECK(absl::StartsWith(enter, "/.jointcloud/enter?ticket="));

  // Without a session: refused, saying how to get one; nothing reaches the replica.
  Answer none = e.Request(host, "/");
  CHECK(none.status == 401);
  CHECK(absl::StrContains(none.body, "jcctl job open " + id));

  // The link: a host-only, HttpOnly cookie, and on to the path asked for.
  Answer entered = e.Request(host, enter);
  INFO(entered.head);
  REQUIRE(entered.status == 303);
  CHECK(entered.Field("Location") == "/lab?x=1");
  const std::string set_cookie = entered.Field("Set-Cookie");
  CHECK(absl::StrContains(set_cookie, "HttpOnly"));
  CHECK(absl::StrContains(set_cookie, "SameSite=Lax"));
  CHECK_FALSE(absl::StrContains(set_cookie, "Domain"));
  const std::string cookie = CookieOf(entered);
  CHECK(absl::StartsWith(cookie, "jc_endpoint="));
  // Once only.
  Answer twice = e.Request(host, enter);
  CHECK(twice.status == 403);
  CHECK(absl::StrContains(twice.body, "opened already"));

  // With it: the replica answers. It sees its own cookies and who calls, not the session;
  // the connection carries this one request.
  Answer got = e.Request(host, "/lab?x=1", absl::StrCat("Cookie: theme=dark; ", cookie, "\r\nConnection: keep-alive\r\n",
                                                        "X-Forwarded-User: mallory\r\n"));
  INFO(got.body);
  REQUIRE(got.status == 200);
  CHECK(got.Field("Connection") == "close");
  json seen = json::parse(got.body);
  CHECK(seen["line"] == "GET /lab?x=1 HTTP/1.1");
  CHECK(seen["fields"]["cookie"] == json::array({"theme=dark"}));
  CHECK(seen["fields"]["x-forwarded-user"] == json::array({"alice"}));
  CHECK(seen["fields"]["connection"] == json::array({"close"}));
  CHECK(seen["fields"]["host"] == json::array({host}));
  // The listener proves itself with the job's endpoint token, which the replica has in its
  // environment (JC_ENDPOINT_TOKEN) and nobody sees in the job; a caller's own credential
  // passes instead, untouched.
  const std::string endpoint_token = seen["token"];
  CHECK(endpoint_token.size() >= 40);
  CHECK(seen["fields"]["authorization"] == json::array({"token " + endpoint_token}));
  for (const std::string& view : {"/openapi/v1/trainjob/" + id, std::string("/openapi/v1/trainjob")}) {
    CHECK_FALSE(absl::StrContains(alice->Get(view).body.dump(), endpoint_token));
  }
  Answer own = e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\nAuthorization: Basic YWxpY2U6eA==\r\n"));
  REQUIRE(own.status == 200);
  CHECK(json::parse(own.body)["fields"]["authorization"] == json::array({"Basic YWxpY2U6eA=="}));
  // A page of its own origin may post; another origin's (another endpoint's) may not.
  Answer same = e.Request(host, "/api", absl::StrCat("Cookie: ", cookie, "\r\nOrigin: ", origin,
                                                     "\r\nContent-Length: 2\r\n\r\nhi"), "POST");
  CHECK(same.status == 200);
  const std::string other_origin = absl::StrCat("http://", id, "-0-0-admin.endpoints.localhost:", e.port());
  Answer cross = e.Request(host, "/api", absl::StrCat("Cookie: ", cookie, "\r\nOrigin: ", other_origin, "\r\n"), "POST");
  CHECK(cross.status == 403);
  CHECK(absl::StrContains(cross.body, "another origin"));
  // The session is this endpoint's alone: on another endpoint's host it is no session.
  const std::string other_host = absl::StrCat(id, "-0-1-http.endpoints.localhost:", e.port());
  CHECK(e.Request(other_host, "/", absl::StrCat("Cookie: ", cookie, "\r\n")).status == 401);

  // A WebSocket: upgraded, then bytes both ways as they come.
  {
    Socket ws(e.port());
    ws.Send(absl::StrCat("GET /raw HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie,
                         "\r\nOrigin: ", origin,
                         "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"));
    std::string switched = ws.Read([](const std::string& g) { return g.find("\r\n\r\n") != std::string::npos; });
    INFO(switched);
    REQUIRE(absl::StartsWith(switched, "HTTP/1.1 101"));
    for (const std::string& message : {std::string("frame-one"), std::string(200000, 'x')}) {
      ws.Send(message);
      std::string echoed = ws.Read([&](const std::string& g) { return g.size() >= message.size(); });
      CHECK(echoed == message);
    }
  }
  CHECK(jc::testing::WaitUntil([&] { return e.app->endpoints()->open_connections() == 0; }));

  // The job's replica stops: its endpoint answers no more.
  e.StopAndWait(id);
  Answer stopped;
  CHECK(jc::testing::WaitUntil([&] {
    stopped = e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n"));
    return stopped.status == 503;
  }));
  INFO(stopped.body);
  CHECK((absl::StrContains(stopped.body, "stopping") || absl::StrContains(stopped.body, "ended")));
  // Nor does a link open for it.
  CHECK(e.Open(*alice, id).http_status == 409);
}

TEST_CASE("endpoint refusals as the attacker: a viewer and another project get no link, a forged or stale cookie and a "
          "removed member get nothing through, bad requests change nothing [A17][C6]",
          "[A17][C6]") {
  Endpoints e;
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  auto victor = e.UserClient("victor", "lab", "VIEWER");
  auto mallory = e.UserClient("mallory", "other", "MEMBER");
  const std::string id = e.StartService(*alice);

  // Links: a viewer may look, not open; another project does not see the job.
  auto viewer = e.Open(*victor, id);
  CHECK(viewer.http_status == 403);
  CHECK(e.Open(*mallory, id).http_status == 404);
  // Bad asks: 4xx, saying what, and no link written.
  for (const auto& [body, status, says] : std::vector<std::tuple<json, int, std::string>>{
           {{{"portName", "admin"}}, 404, "declares no port \"admin\"; it has \"http\""},
           {{{"replicaIndex", 5}}, 404, "has no replica 5"},
           {{{"taskIndex", 2}}, 404, "has no task 2"},
           {{{"path", "//evil.example/"}}, 400, "path:"},
           {{{"path", "no-slash"}}, 400, "path:"}}) {
    auto r = e.Open(*alice, id, body);
    INFO(r.body.dump());
    CHECK(r.http_status == status);
    CHECK(absl::StrContains(r.body.value("errorMsg", ""), says));
  }

  auto link = e.Open(*alice, id);
  REQUIRE(link.http_status == 200);
  auto [host, enter] = Split(link.body["data"]["url"]);
  // A link tried on another endpoint's host does not open there, and still opens its own.
  const std::string other_host = absl::StrCat(id, "-0-0-admin.endpoints.localhost:", e.port());
  Answer elsewhere = e.Request(other_host, enter);
  CHECK(elsewhere.status == 403);
  CHECK(absl::StrContains(elsewhere.body, "another endpoint"));
  Answer entered = e.Request(host, enter);
  REQUIRE(entered.status == 303);
  const std::string cookie = CookieOf(entered);

  // Forged cookies, a link as a cookie, a cookie in the query: no session.
  for (const std::string& fields :
       {std::string("Cookie: jc_endpoint=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n"),
        absl::StrCat("Cookie: jc_endpoint=", enter.substr(enter.find('=') + 1), "\r\n"),
        std::string("Authorization: Bearer ") + e.admin_token + "\r\n"}) {
    INFO(fields);
    CHECK(e.Request(host, "/", fields).status == 401);
  }
  // A cookie tossed from a sibling endpoint beside the real one: whose is which cannot be
  // told, so neither is taken.
  CHECK(e.Request(host, "/", absl::StrCat("Cookie: jc_endpoint=forged; ", cookie, "\r\n")).status == 400);

  // Hosts and heads that are not an endpoint's request.
  CHECK(e.Request("127.0.0.1", "/", absl::StrCat("Cookie: ", cookie, "\r\n")).status == 404);
  CHECK(e.Request(absl::StrCat(id, "-0-0-http.evil.example"), "/").status == 404);
  {
    Socket s(e.port());
    s.Send(absl::StrCat("GET / HTTP/1.1\r\nHost: ", host, "\r\nHost: ", host, "\r\n\r\n"));
    CHECK(Parse(s.Read()).status == 400);
  }
  {
    Socket s(e.port());
    s.Send(absl::StrCat("GET / HTTP/1.1\r\nHost: ", host, "\r\nX-Big: ", std::string(20000, 'a'), "\r\n\r\n"));
    CHECK(Parse(s.Read()).status == 431);
  }

  // Alice is made a viewer: her open session lets nothing more through (within the
  // authentication cache's 5 s).
  REQUIRE(e.rest->Send("PUT", "/openapi/v1/users/alice/projects/lab", json{{"role", "VIEWER"}}.dump()).http_status == 200);
  Answer demoted;
  CHECK(jc::testing::WaitUntil([&] {
    demoted = e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n"));
    return demoted.status == 403;
  }));
  CHECK(absl::StrContains(demoted.body, "not a member of project \"lab\""));
  // Her token revoked: the same.
  REQUIRE(e.rest->Send("PUT", "/openapi/v1/users/alice/projects/lab", json{{"role", "MEMBER"}}.dump()).http_status == 200);
  CHECK(jc::testing::WaitUntil([&] { return e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n")).status == 200; }));
  auto tokens = e.rest->Get("/openapi/v1/tokens?user_name=alice");
  INFO(tokens.body.dump());
  REQUIRE(!tokens.body["data"]["tokens"].empty());
  for (const auto& t : tokens.body["data"]["tokens"]) {
    REQUIRE(e.rest->Post("/openapi/v1/tokens/" + t["token_id"].get<std::string>() + "/revoke", json::object())
                .http_status == 200);
  }
  CHECK(jc::testing::WaitUntil([&] { return e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n")).status == 401; }));
  e.StopAndWait(id);
}

TEST_CASE("a link not opened within its time opens nothing [A17][C6]", "[A17][C6]") {
  Endpoints e([](jc::server::AppOptions& o) { o.endpoint_passes.ticket_ttl = absl::Seconds(-1); });
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  const std::string id = e.StartService(*alice);
  auto link = e.Open(*alice, id);
  REQUIRE(link.http_status == 200);
  auto [host, enter] = Split(link.body["data"]["url"]);
  Answer late = e.Request(host, enter);
  CHECK(late.status == 403);
  CHECK(absl::StrContains(late.body, "expired"));
  CHECK(late.Field("Set-Cookie").empty());
  e.StopAndWait(id);
}

TEST_CASE("without an endpoint listener, OpenEndpoint says how to get one [A17]", "[A17]") {
  Endpoints e([](jc::server::AppOptions& o) { o.endpoint_host.clear(); });
  auto r = e.rest->Post("/openapi/v1/trainjob/job-00000001/open", {{"portName", "http"}});
  CHECK(r.http_status == 409);
  CHECK(absl::StrContains(r.body.value("errorMsg", ""), "--endpoint_address"));
}

TEST_CASE("in a browser: Open on the console's job page opens the endpoint in a tab on its own origin, where the page "
          "talks WebSocket to the replica and sees neither the session nor the console's token [A17][C6]",
          "[A17][C6][browser]") {
  Endpoints e;
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  const std::string id = e.StartService(*alice);
  auto token = e.rest->Post("/openapi/v1/tokens", {{"user_name", "alice"}});
  REQUIRE(token.http_status == 200);
  const std::string dir = (std::filesystem::temp_directory_path() / ("jc-endpoint-browser-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);

  jc::testing::BrowserStep open_it;
  open_it.hash = "#/jobs/" + id;
  open_it.until = {"Endpoints", "class=\"open-endpoint\""};
  open_it.click = "button.open-endpoint";
  // The replica's answer to the page load: the listener passed who calls, not the session.
  open_it.popup_until = {"x-forwarded-user", "alice"};
  open_it.popup_eval = R"JS(async () => {
    const echoed = await new Promise((resolve, reject) => {
      const ws = new WebSocket(location.origin.replace(/^http/, "ws") + "/socket");
      ws.onopen = () => ws.send("hello from the page");
      ws.onmessage = (m) => { resolve(m.data); ws.close(); };
      ws.onerror = () => reject(new Error("websocket failed"));
    });
    return JSON.stringify({ echoed, origin: location.origin, cookie: document.cookie,
                            token: sessionStorage.getItem("jc-token") });
  })JS";
  const std::string base = "http://127.0.0.1:" + std::to_string(e.app->rest_port()) + "/ui/";
  jc::testing::BrowserRun run =
      jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, dir, base, token.body["data"]["secret"], {open_it});
  REQUIRE(run.signed_in);
  REQUIRE(run.pages.size() == 1);
  INFO(run.pages[0].dom.substr(0, 4000));
  REQUIRE(run.pages[0].reached);
  const auto& tab = run.pages[0].popup;
  INFO(tab.address << "\n" << tab.dom.substr(0, 3000));
  REQUIRE(tab.opened);
  REQUIRE(tab.reached);
  // The tab went through the link to the endpoint's own origin, and landed at "/".
  CHECK(tab.address == absl::StrCat("http://", id, "-0-0-http.endpoints.localhost:", e.port(), "/"));
  CHECK_FALSE(absl::StrContains(tab.dom, "jc_endpoint"));  // the replica never saw the session
  json seen = json::parse(tab.eval);
  CHECK(seen["echoed"] == "echo: hello from the page");
  CHECK(seen["origin"] == absl::StrCat("http://", id, "-0-0-http.endpoints.localhost:", e.port()));
  CHECK(seen["cookie"] == "");       // HttpOnly: the page's script cannot read its session
  CHECK(seen["token"].is_null());    // the console's token is the console origin's alone
  CHECK(run.errors.empty());
  std::filesystem::remove_all(dir);
  e.StopAndWait(id);
}

TEST_CASE("an open endpoint outlives a restart of the control plane: the browser's session works through the new "
          "process, and the replica was never restarted [A17][C6]",
          "[A17][C6]") {
  jc::testing::LocalAdapter center("solo", 8, CenterConfig());
  const std::string store = "jc_endpoint_restart_" + std::to_string(getpid());
  auto shared = [&](jc::server::AppOptions& o) { jc::testing::ShareStore(o, store); };
  std::string id, host, cookie;
  {
    Endpoints e(shared, &center);
    auto alice = e.UserClient("alice", "lab", "MEMBER");
    id = e.StartService(*alice);
    auto link = e.Open(*alice, id);
    REQUIRE(link.http_status == 200);
    auto [h, enter] = Split(link.body["data"]["url"]);
    host = h;
    Answer entered = e.Request(host, enter);
    REQUIRE(entered.status == 303);
    cookie = CookieOf(entered);
    Answer before = e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n"));
    REQUIRE(before.status == 200);
    e.app->Shutdown();  // the center and its replica run on
  }
  Endpoints again(shared, &center, /*registers=*/false);
  // The host as the browser has it (the listener's port may differ after a restart: the
  // host's name is what counts).
  Answer after;
  CHECK(jc::testing::WaitUntil([&] {
    after = again.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n"));
    return after.status == 200;
  }));
  INFO(after.head << after.body);
  CHECK(json::parse(after.body)["fields"]["x-forwarded-user"] == json::array({"alice"}));
  // The replica ran on: still its first attempt.
  json job = again.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
  INFO(job.dump());
  CHECK(job["history"].size() == 1);
  again.StopAndWait(id);
}

// Idle limits (issue 46 item 5): an interactive job's use is what reaches it through the
// listener, or, where its port declares an activityPath, what its replica says of itself.
// nb-1: one CPU for interactive jobs at solo.
static void AddInteractiveSpec(Endpoints& e) {
  REQUIRE(e.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "nb-1"},
                                                     {"resource_spec_name", "nb-1"},
                                                     {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                     {"service_type", "interactive"},
                                                     {"price", 1},
                                                     {"computing_center_list", "solo"}})
              .http_status == 200);
}

TEST_CASE("an interactive job whose endpoint takes longer than its idleTimeout to answer is not stopped before "
          "anyone could use it: its idle time counts from when it is ready [A17]",
          "[A17]") {
  Endpoints e;
  AddInteractiveSpec(e);
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  // Starts answering 4 s after it runs (a notebook unpacking on a busy host), idle after 3 s
  // (the window in which this test sees it ready: 2 s was missed on a loaded CI host).
  json task = {{"name", "nb"},
               {"command", "sleep 4; exec /usr/bin/python3 " + e.script.string() + " $JC_PORT_HTTP"},
               {"resourceSpecId", "nb-1"},
               {"kind", "interactive"},
               {"ports", json::array({{{"name", "http"}, {"readinessPath", "/"}}})}};
  auto r = alice->Post("/openapi/v1/trainjob", {{"name", "nb"}, {"project", "lab"}, {"idleTimeout", "3s"},
                                                {"tasks", json::array({task})}});
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
  const std::string id = r.body["data"]["jobId"];
  json job;
  REQUIRE(jc::testing::WaitUntil([&] {
    job = e.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
    return job["taskInfos"][0].value("readyReplicas", 0) == 1 || job.value("status", "") != "running" &&
                                                                      job.value("status", "") != "pending";
  }));
  INFO(job.dump());
  CHECK(job["status"] == "running");  // before, stopped 3 s into its start: never ready
  CHECK(job["taskInfos"][0].value("readyReplicas", 0) == 1);
  const absl::Time ready = absl::Now();
  // Left alone once ready: stopped idle, about 3 s after it could first be used.
  REQUIRE(jc::testing::WaitUntil([&] {
    job = e.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
    return job.value("status", "") == "completed" || job.value("status", "") == "failed";
  }));
  CHECK(job["status"] == "completed");
  CHECK(absl::StartsWith(job.value("statusReason", ""), "stopped: idle for 3 s"));
  CHECK(absl::Now() - ready >= absl::Seconds(1));
}

TEST_CASE("an interactive job idle past its idleTimeout is stopped and ends completed saying so in its status and "
          "events, while requests through its endpoint, or the use its replica reports, keep it running [A17]",
          "[A17]") {
  Endpoints e([](jc::server::AppOptions& o) {
    o.endpoints.activity_interval = absl::Milliseconds(200);
    o.jobs.walk_slice = 1;  // idle limits are enforced a job a turn of the loop
  });
  AddInteractiveSpec(e);
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  auto start = [&](const std::string& activity_path) {
    json port = {{"name", "http"}, {"readinessPath", "/"}};
    if (!activity_path.empty()) port["activityPath"] = activity_path;
    json task = {{"name", "nb"},
                 {"command", "exec /usr/bin/python3 " + e.script.string() + " $JC_PORT_HTTP"},
                 {"resourceSpecId", "nb-1"},
                 {"kind", "interactive"},
                 {"ports", json::array({port})}};
    auto r = alice->Post("/openapi/v1/trainjob", {{"name", "nb"}, {"project", "lab"}, {"idleTimeout", "3s"},
                                                  {"tasks", json::array({task})}});
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
    const std::string id = r.body["data"]["jobId"];
    json job;
    REQUIRE(jc::testing::WaitUntil([&] {
      job = e.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
      return job["taskInfos"][0].value("readyReplicas", 0) == 1;
    }));
    CHECK(job["idleTimeout"] == "3s");
    return std::make_pair(id, job["taskInfos"][0]["endpoints"][0].value("port", 0));
  };
  auto status_of = [&](const std::string& id) {
    return e.rest->Get("/openapi/v1/trainjob/" + id).body["data"].value("status", "");
  };
  // Waits until the job ends, then says how, and what its events say.
  auto ended = [&](const std::string& id) {
    json job;
    bool done = jc::testing::WaitUntil([&] {
      job = e.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
      return job.value("status", "") == "completed" || job.value("status", "") == "failed";
    });
    REQUIRE(done);
    return std::make_pair(job, e.rest->Raw("/openapi/v1/trainjob/" + id + "/events?history=true&heartbeatSeconds=0"));
  };

  // Used through its endpoint every half second for 6 s (twice its idleTimeout): it runs on.
  {
    auto [id, port] = start("");
    Endpoints::Session s = e.OpenSession(*alice, id);
    const absl::Time until = absl::Now() + absl::Seconds(6);
    absl::Time left;  // when its last request was answered
    while (absl::Now() < until) {
      CHECK(e.Request(s.host, "/", absl::StrCat("Cookie: ", s.cookie, "\r\n")).status == 200);
      left = absl::Now();
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a person's pace, not a wait for a condition
    }
    CHECK(status_of(id) == "running");
    // Left alone: stopped once idle for 3 s, completed (as a notebook its user closed).
    // Counted from the last answer, not from this line: on a loaded CI machine the pause and
    // the status read above took most of the second a check from here allowed.
    auto [job, events] = ended(id);
    INFO(job.dump());
    CHECK(job["status"] == "completed");
    CHECK(absl::StartsWith(job.value("statusReason", ""), "stopped: idle for 3 s (no request through its endpoints"));
    CHECK(absl::Now() - left >= absl::Seconds(2));
    CHECK(absl::StrContains(events, "stopped: idle for 3 s"));
  }
  // Its replica says it is in use (its activity path), though nothing comes through the
  // listener: it runs on; once the replica's word goes stale, it is stopped.
  {
    auto [id, port] = start("/status");
    const std::string file = "/tmp/jc-echo-activity-" + std::to_string(port);
    struct Removed {
      std::string file;
      ~Removed() { std::filesystem::remove(file); }
    } removed{file};
    const absl::Time until = absl::Now() + absl::Seconds(6);
    while (absl::Now() < until) {
      std::ofstream(file) << absl::FormatTime(absl::RFC3339_full, absl::Now(), absl::UTCTimeZone());
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the replica's own use, as it goes on
    }
    CHECK(status_of(id) == "running");
    // Its replica stops answering while its user works through the listener: judged by the
    // requests then, it runs on (an attacker helper's finding: a stale report alone culled it).
    // The session is opened first: its link and redemption, slow on a loaded machine, are
    // not a wait the job's idleTimeout should count.
    Endpoints::Session s = e.OpenSession(*alice, id);
    std::ofstream(file) << "down";
    const absl::Time working = absl::Now() + absl::Seconds(6);
    while (absl::Now() < working) {
      CHECK(e.Request(s.host, "/", absl::StrCat("Cookie: ", s.cookie, "\r\n")).status == 200);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a person's pace
    }
    CHECK(status_of(id) == "running");
    // A replica cannot hold its job open with a time to come: that is no answer, and what it
    // said before ages.
    std::ofstream(file) << "2099-01-01T00:00:00Z";
    auto [job, events] = ended(id);
    INFO(job.dump());
    CHECK(job["status"] == "completed");
    CHECK(absl::StartsWith(job.value("statusReason", ""), "stopped: idle for 3 s"));
  }
  // Bad input, nothing written: an idleTimeout on a job that is not interactive, on one
  // without ports, not positive; an activity path that is not one.
  const size_t before = e.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size();
  json service = {{"name", "s"}, {"project", "lab"}, {"idleTimeout", "60s"},
                  {"tasks", json::array({{{"name", "t"}, {"command", "true"}, {"resourceSpecId", "svc-1"},
                                          {"kind", "service"}, {"ports", json::array({{{"name", "http"}}})}}})}};
  json portless = {{"name", "p"}, {"project", "lab"}, {"idleTimeout", "60s"},
                   {"tasks", json::array({{{"name", "t"}, {"command", "true"}, {"resourceSpecId", "nb-1"},
                                           {"kind", "interactive"}}})}};
  json negative = portless;
  negative["idleTimeout"] = "-5s";
  negative["tasks"][0]["ports"] = json::array({{{"name", "http"}}});
  json path = negative;
  path["idleTimeout"] = "60s";
  path["tasks"][0]["ports"][0]["activityPath"] = "api status";
  for (const auto& [bad, says] : std::vector<std::pair<json, std::string>>{
           {service, "idleTimeout: only an interactive job is stopped when idle; this is a service job"},
           {portless, "idleTimeout: an interactive job's use is counted on its endpoints, and tasks[0] declares no ports"},
           {negative, "idleTimeout: must be a positive duration"},
           {path, "tasks[0].ports[0].activityPath: '/' then printable ASCII without spaces"}}) {
    auto r = alice->Post("/openapi/v1/trainjob", bad);
    INFO(r.body.dump());
    CHECK(r.http_status == 400);
    CHECK(absl::StartsWith(r.body.value("errorMsg", ""), says));
  }
  CHECK(e.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size() == before);
}

// Attacker's review, session 35 (the endpoint listener's first version): a second request
// smuggled behind an "Upgrade" or behind a replica that keeps its connection reached the
// replica with no check (forged X-Forwarded-User, the session cookie itself); a replica set
// cookies for every endpoint; two sessions were taken in order; X_Forwarded_User passed.
TEST_CASE("the endpoint listener passes one request per connection whatever the caller or the replica says, and keeps "
          "each endpoint's cookies and frames its own [A17][C6]",
          "[A17][C6]") {
  Endpoints e;
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  const std::string id = e.StartService(*alice);
  auto [host, cookie, origin] = e.OpenSession(*alice, id);

  // A request and a second one behind it on the same connection, the replica keeping it
  // open: the first is answered with "Connection: close", the second reaches nobody.
  for (const std::string& first : {absl::StrCat("GET /keep HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie, "\r\n\r\n"),
                                   absl::StrCat("GET /keep HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie,
                                                "\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"),
                                   absl::StrCat("GET /early HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie,
                                                "\r\n\r\n")}) {
    INFO(first);
    Socket s(e.port());
    s.Send(first);
    std::string got = s.Read([](const std::string& g) { return g.find("\"port\"") != std::string::npos; });
    size_t final_head = got.find("HTTP/1.1 200");
    REQUIRE(final_head != std::string::npos);
    Answer a = Parse(got.substr(final_head));
    CHECK(a.Field("Connection") == "close");
    json seen = json::parse(a.body.substr(0, a.body.rfind('}') + 1));
    CHECK(seen["fields"]["connection"] == json::array({"close"}));
    CHECK_FALSE(seen["fields"].contains("upgrade"));
    ::send(s.fd, "GET /keep HTTP/1.1\r\nHost: x\r\nX-Forwarded-User: root\r\n\r\n", 55, MSG_NOSIGNAL);
    std::string more = s.Read();
    CHECK(more.find("root") == std::string::npos);
    CHECK(more.find("HTTP/1.1") == std::string::npos);
  }

  // Two requests in one write (pipelined), or a body longer than it says: only the first
  // request, and only its body, reach the replica.
  for (const std::string& pair :
       {absl::StrCat("GET /keep HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie, "\r\n\r\n",
                     "GET /keep HTTP/1.1\r\nHost: x\r\nX-Forwarded-User: root\r\n\r\n"),
        absl::StrCat("POST /keep HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie, "\r\nContent-Length: 2\r\n\r\nhi",
                     "GET /keep HTTP/1.1\r\nHost: x\r\nX-Forwarded-User: root\r\n\r\n"),
        absl::StrCat("POST /keep HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie,
                     "\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
                     "GET /keep HTTP/1.1\r\nHost: x\r\nX-Forwarded-User: root\r\n\r\n")}) {
    INFO(pair);
    Socket s(e.port());
    s.Send(pair);
    std::string got = s.Read();
    CHECK(absl::StrContains(got, "HTTP/1.1 200"));
    CHECK_FALSE(absl::StrContains(got, "root"));
  }
  CHECK(e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n"),
                  "POST").status == 400);

  // Cookies the replica sets: its own host's only, never one in the listener's names; and
  // no other page frames it.
  Answer cookies = e.Request(host, "/cookies", absl::StrCat("Cookie: ", cookie, "\r\n"));
  REQUIRE(cookies.status == 200);
  CHECK(absl::StrContains(cookies.head, "Set-Cookie: own=2"));
  CHECK_FALSE(absl::StrContains(cookies.head, "wide=1"));
  CHECK_FALSE(absl::StrContains(cookies.head, "planted"));
  CHECK(cookies.Field("Content-Security-Policy") == "frame-ancestors 'self'");

  // Two sessions (one tossed in by another endpoint's page): whose is which cannot be told.
  Answer two = e.Request(host, "/", absl::StrCat("Cookie: jc_endpoint=tossed; ", cookie, "\r\n"));
  CHECK(two.status == 400);
  CHECK(absl::StrContains(two.body, "more than one endpoint session"));
  // Forwarding fields in any spelling are the listener's.
  Answer spelled = e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\nX_Forwarded_User: root\r\n"));
  REQUIRE(spelled.status == 200);
  json seen = json::parse(spelled.body);
  CHECK_FALSE(seen["fields"].contains("x_forwarded_user"));
  CHECK(seen["fields"]["x-forwarded-user"] == json::array({"alice"}));
  // Another site's subresource or frame: refused; a page load from a link there: served.
  CHECK(e.Request(host, "/", absl::StrCat("Cookie: ", cookie,
                                          "\r\nSec-Fetch-Site: same-site\r\nSec-Fetch-Mode: no-cors\r\n"
                                          "Sec-Fetch-Dest: image\r\n")).status == 403);
  CHECK(e.Request(host, "/", absl::StrCat("Cookie: ", cookie,
                                          "\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\n"
                                          "Sec-Fetch-Dest: iframe\r\n")).status == 403);
  CHECK(e.Request(host, "/", absl::StrCat("Cookie: ", cookie,
                                          "\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\n"
                                          "Sec-Fetch-Dest: document\r\n")).status == 200);
  CHECK(jc::testing::WaitUntil([&] { return e.app->endpoints()->open_connections() == 0; }));
  e.StopAndWait(id);
}

TEST_CASE("an open WebSocket ends once its holder is no member, silent connections from one address keep no one out, "
          "and two users' many tunnels leave the center's other calls answered [A17][C6]",
          "[A17][C6]") {
  Endpoints e([](jc::server::AppOptions& o) { o.endpoints.max_pending_heads = 300; });
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  auto bob = e.UserClient("bob", "lab", "MEMBER");
  const std::string id = e.StartService(*alice);
  auto session_of = [&](jc::testing::RestClient& as) {
    auto link = e.Open(as, id);
    REQUIRE(link.http_status == 200);
    auto [host, enter] = Split(link.body["data"]["url"]);
    return std::make_pair(host, CookieOf(e.Request(host, enter)));
  };
  auto [host, alice_cookie] = session_of(*alice);
  const std::string bob_cookie = session_of(*bob).second;
  auto raw_socket = [&](const std::string& cookie) {
    auto s = std::make_unique<Socket>(e.port());
    s->Send(absl::StrCat("GET /raw HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie,
                         "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"));
    std::string switched = s->Read([](const std::string& g) { return g.find("\r\n\r\n") != std::string::npos; });
    INFO(switched);
    REQUIRE(absl::StartsWith(switched, "HTTP/1.1 101"));
    return s;
  };

  // Each user at its cap (32): 64 tunnels held at the center. Its other calls still answer:
  // a new job there starts and the center stays available.
  std::vector<std::unique_ptr<Socket>> held;
  for (int i = 0; i < 32; ++i) held.push_back(raw_socket(alice_cookie));
  for (int i = 0; i < 32; ++i) held.push_back(raw_socket(bob_cookie));
  Answer capped = e.Request(host, "/", absl::StrCat("Cookie: ", alice_cookie, "\r\n"));
  CHECK(capped.status == 429);
  auto batch = alice->Post("/openapi/v1/trainjob", {{"name", "b"}, {"project", "lab"},
                                                    {"tasks", json::array({{{"name", "t"}, {"command", "true"},
                                                                            {"resourceSpecId", "svc-1"}}})}});
  REQUIRE(batch.http_status == 200);
  const std::string batch_id = batch.body["data"]["jobId"];
  CHECK(jc::testing::WaitUntil([&] {
    return e.rest->Get("/openapi/v1/trainjob/" + batch_id).body["data"].value("status", "") == "completed";
  }));
  held.clear();
  CHECK(jc::testing::WaitUntil([&] { return e.app->endpoints()->open_connections() == 0; }));

  // Silent connections from one address (behind a TLS proxy that is every caller's): twice
  // as many as may wait for their head. They hold no thread and keep no one out: the oldest
  // are dropped as new ones come, and a request that sends its head is served at once.
  {
    std::vector<std::unique_ptr<Socket>> silent;
    for (int i = 0; i < 600; ++i) silent.push_back(std::make_unique<Socket>(e.port()));
    CHECK(jc::testing::WaitUntil([&] { return e.app->endpoints()->waiting_heads() == 300; }));
    CHECK(e.app->endpoints()->open_connections() == 0);
    CHECK(jc::testing::WaitUntil([&] { return silent.front()->ClosedByPeer(); }));
    CHECK(!silent.back()->ClosedByPeer());
    for (int i = 0; i < 3; ++i) {
      Answer served = e.Request(host, "/", absl::StrCat("Cookie: ", alice_cookie, "\r\n"));
      CHECK(served.status == 200);
    }
    // A head sent a byte at a time, slower than any that follow it, is dropped once 300
    // newer ones came; silent sockets alone never keep a caller out.
    auto slow = std::make_unique<Socket>(e.port());
    slow->Send("GET / HTTP/1.1\r\n");
    for (int i = 0; i < 300; ++i) silent.push_back(std::make_unique<Socket>(e.port()));
    CHECK(jc::testing::WaitUntil([&] { return slow->ClosedByPeer(); }));
  }
  CHECK(jc::testing::WaitUntil([&] { return e.app->endpoints()->waiting_heads() == 0; }));

  // Alice's WebSocket stays open while she is a member, and ends once she is not.
  auto ws = raw_socket(alice_cookie);
  ws->Send("still here");
  CHECK(ws->Read([](const std::string& g) { return g.size() >= 10; }) == "still here");
  REQUIRE(e.rest->Send("PUT", "/openapi/v1/users/alice/projects/lab", json{{"role", "VIEWER"}}.dump()).http_status == 200);
  bool ended = jc::testing::WaitUntil([&] { return ws->ClosedByPeer(); });
  CHECK(ended);
  e.StopAndWait(id);
}

TEST_CASE("a service's task endpoint spreads requests over its ready replicas, and scaled 3 to 5 to 3 while requests "
          "flow not one request fails [A17]",
          "[A17]") {
  Endpoints e;
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  const std::string id = e.StartService(*alice, 3);
  auto link = e.Open(*alice, id, {{"allReplicas", true}});
  INFO(link.body.dump());
  REQUIRE(link.http_status == 200);
  CHECK(link.body["data"]["origin"] == absl::StrCat("http://", id, "-0-http.endpoints.localhost:", e.port()));
  auto [host, enter] = Split(link.body["data"]["url"]);
  const std::string cookie = CookieOf(e.Request(host, enter));
  REQUIRE(!cookie.empty());

  // Requests, one after another on connections of their own, about 20 a second.
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::vector<int> statuses;
  std::map<int, int> by_port;  // which replica (its port) answered, how often
  // Stopped and joined however the test ends (a failed REQUIRE included).
  struct Joined {
    std::mutex& mu;
    std::condition_variable& cv;
    bool& stop;
    std::thread thread;
    ~Joined() {
      {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
      }
      cv.notify_all();
      if (thread.joinable()) thread.join();
    }
  } load{mu, cv, stop, {}};
  load.thread = std::thread([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      lock.unlock();
      Answer a = e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n"));
      int port = a.status == 200 ? json::parse(a.body).value("port", 0) : 0;
      lock.lock();
      statuses.push_back(a.status);
      ++by_port[port];
      cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop; });
    }
  });
  auto seen_ports = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(by_port.size());
  };
  auto ready = [&](int n) {
    return jc::testing::WaitUntil([&] {
      return e.rest->Get("/openapi/v1/trainjob/" + id).body["data"]["taskInfos"][0].value("readyReplicas", 0) == n;
    });
  };
  CHECK(jc::testing::WaitUntil([&] { return seen_ports() == 3; }));  // every replica takes its turn
  REQUIRE(alice->Post("/openapi/v1/trainjob/" + id + "/scale", {{"replicaNumber", 5}}).http_status == 200);
  REQUIRE(ready(5));
  CHECK(jc::testing::WaitUntil([&] { return seen_ports() == 5; }));  // the new ones joined the rotation
  REQUIRE(alice->Post("/openapi/v1/trainjob/" + id + "/scale", {{"replicaNumber", 3}}).http_status == 200);
  // The two scaled away end (after their drain); requests go on meanwhile.
  CHECK(jc::testing::WaitUntil([&] {
    int stopped = 0;
    for (const auto& a : e.rest->Get("/openapi/v1/trainjob/" + id).body["data"].value("history", json::array())) {
      stopped += a.value("outcome", "") == "stopped";
    }
    return stopped == 2;
  }));
  size_t after_scale;
  {
    std::lock_guard<std::mutex> lock(mu);
    after_scale = statuses.size();
  }
  CHECK(jc::testing::WaitUntil([&] {
    std::lock_guard<std::mutex> lock(mu);
    return statuses.size() >= after_scale + 20;
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  load.thread.join();
  std::map<int, int> codes;
  for (int s : statuses) ++codes[s];
  INFO("statuses: " << json(codes).dump() << ", by port: " << json(by_port).dump());
  CHECK(codes.size() == 1);
  CHECK(codes.count(200) == 1);
  e.StopAndWait(id);
}

TEST_CASE("a replica whose readiness fails leaves its task endpoint's rotation, and comes back once it answers again "
          "[A17]",
          "[A17]") {
  Endpoints e;
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  const std::string id = e.StartService(*alice, 3, "/ready");
  auto link = e.Open(*alice, id, {{"allReplicas", true}});
  REQUIRE(link.http_status == 200);
  auto [host, enter] = Split(link.body["data"]["url"]);
  const std::string cookie = CookieOf(e.Request(host, enter));
  REQUIRE(!cookie.empty());
  auto served_by = [&] {
    Answer a = e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n"));
    REQUIRE(a.status == 200);
    return json::parse(a.body).value("port", 0);
  };
  std::set<int> ports;
  CHECK(jc::testing::WaitUntil([&] {
    ports.insert(served_by());
    return ports.size() == 3;
  }));
  // One replica's readiness path starts failing: once its center says so, no request goes to it.
  const int out = *ports.begin();
  const std::string flag = "/tmp/jc-echo-down-" + std::to_string(out);
  std::ofstream(flag) << "down";
  struct Remove {
    std::string path;
    ~Remove() { std::filesystem::remove(path); }
  } remove_flag{flag};
  CHECK(jc::testing::WaitUntil([&] {
    return e.rest->Get("/openapi/v1/trainjob/" + id).body["data"]["taskInfos"][0].value("readyReplicas", 0) == 2;
  }));
  for (int i = 0; i < 12; ++i) CHECK(served_by() != out);
  // Ready again: back in turn.
  std::filesystem::remove(flag);
  CHECK(jc::testing::WaitUntil([&] { return served_by() == out; }));
  e.StopAndWait(id);
}

// Attacker's second review, session 35: a page closed while its answer streamed held its
// user's slot, two threads and a tunnel at the center for good; a 101 set cookies for every
// endpoint; an open WebSocket outlived its session; a WebSocket request's own Connection
// tokens reached the replica.
TEST_CASE("a caller that leaves while its answer streams frees everything at once, a WebSocket's switch sets no cookie "
          "beyond its host, and an open WebSocket ends with its session [A17][C6]",
          "[A17][C6]") {
  Endpoints e([](jc::server::AppOptions& o) { o.endpoint_passes.session_ttl = absl::Seconds(20); });
  auto alice = e.UserClient("alice", "lab", "MEMBER");
  const std::string id = e.StartService(*alice);
  auto [host, cookie, origin] = e.OpenSession(*alice, id);

  // More streams opened and left than the user's cap (32): none is held.
  for (int i = 0; i < 40; ++i) {
    Socket s(e.port());
    s.Send(absl::StrCat("GET /stream HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie, "\r\n\r\n"));
    std::string got = s.Read([](const std::string& g) { return g.find("tick") != std::string::npos; });
    INFO("stream " << i << " got: " << got);  // a refusal says why (a CI flake once failed here, or near)
    REQUIRE(absl::StrContains(got, "tick"));
  }
  CHECK(jc::testing::WaitUntil([&] { return e.app->endpoints()->open_connections() == 0; }));
  CHECK(e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n")).status == 200);

  // The switch to a WebSocket: the replica's cookie for every endpoint is dropped, its own
  // kept; the replica got exactly "Connection: Upgrade", whatever the caller listed.
  {
    Socket ws(e.port());
    ws.Send(absl::StrCat("GET /ws-cookie HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie,
                         "\r\nConnection: Upgrade, X-Forwarded-User\r\nUpgrade: websocket\r\n\r\n"));
    Answer switched = Parse(ws.Read([](const std::string& g) { return g.find("\r\n\r\n") != std::string::npos; }));
    INFO(switched.head);
    CHECK(switched.status == 101);
    CHECK_FALSE(absl::StrContains(switched.head, "tossed"));
    CHECK(absl::StrContains(switched.head, "Set-Cookie: mine=1"));
    CHECK(switched.Field("X-Seen-Connection") == "Upgrade");
  }

  // A WebSocket open when its session runs out (20 s here) ends then.
  Socket ws(e.port());
  ws.Send(absl::StrCat("GET /raw HTTP/1.1\r\nHost: ", host, "\r\nCookie: ", cookie,
                       "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"));
  std::string raw_head = ws.Read([](const std::string& g) { return g.find("\r\n\r\n") != std::string::npos; });
  INFO(raw_head);
  REQUIRE(absl::StartsWith(raw_head, "HTTP/1.1 101"));
  CHECK(jc::testing::WaitUntil([&] { return ws.ClosedByPeer(); }));
  CHECK(e.Request(host, "/", absl::StrCat("Cookie: ", cookie, "\r\n")).status == 401);
  e.StopAndWait(id);
}
