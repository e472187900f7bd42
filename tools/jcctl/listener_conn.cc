#include "tools/jcctl/listener_conn.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <thread>

#include "common/send_all.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace jc::jcctl {
namespace {

constexpr size_t kMaxHead = 64 << 10;


absl::Status StatusOfAnswer(int code, const std::string& body) {
  std::string message(absl::StripAsciiWhitespace(body));
  if (message.empty()) message = absl::StrCat("the endpoint listener answered ", code);
  switch (code) {
    case 400: return absl::InvalidArgumentError(message);
    case 401: return absl::UnauthenticatedError(message);
    case 403: return absl::PermissionDeniedError(message);
    case 404: return absl::NotFoundError(message);
    case 409: return absl::FailedPreconditionError(message);
    case 429: return absl::ResourceExhaustedError(message);
    case 501: return absl::UnimplementedError(message);
    default: return absl::UnavailableError(message);
  }
}

// Reads an answer's head (and what came after it) from `fd`.
struct Answer {
  int code = 0;
  std::string head;  // status line and fields
  std::string rest;  // bytes after the head
};
absl::StatusOr<Answer> ReadAnswer(int fd) {
  std::string buffer;
  char chunk[4096];
  while (true) {
    if (size_t end = buffer.find("\r\n\r\n"); end != std::string::npos) {
      Answer out;
      out.head = buffer.substr(0, end);
      out.rest = buffer.substr(end + 4);
      std::vector<std::string> status = absl::StrSplit(out.head.substr(0, out.head.find("\r\n")), ' ');
      if (status.size() < 2 || !absl::StartsWith(status[0], "HTTP/1.") || !absl::SimpleAtoi(status[1], &out.code)) {
        return absl::UnavailableError("the endpoint listener's answer is not HTTP");
      }
      return out;
    }
    if (buffer.size() > kMaxHead) return absl::UnavailableError("the endpoint listener's answer head is too long");
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError("the endpoint listener closed the connection without an answer");
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

// The body of a refusal (the listener closes after it).
std::string ReadRest(int fd, std::string rest) {
  char chunk[4096];
  while (rest.size() < kMaxHead) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    rest.append(chunk, static_cast<size_t>(n));
  }
  return rest;
}

std::string Request(const ListenerLink& link, const std::string& target, const std::string& upgrade,
                    const std::string& cookie) {
  std::string out = absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: ", link.host_header, "\r\n");
  if (!upgrade.empty()) absl::StrAppend(&out, "Connection: Upgrade\r\nUpgrade: ", upgrade, "\r\n");
  if (!cookie.empty()) absl::StrAppend(&out, "Cookie: ", cookie, "\r\n");
  absl::StrAppend(&out, "User-Agent: jcctl\r\n\r\n");
  return out;
}

}  // namespace

absl::StatusOr<ListenerLink> ParseLink(const std::string& url) {
  static const std::regex kUrl(R"(^(https?)://([A-Za-z0-9.\-]+)(:(\d{1,5}))?(/.*)$)");
  std::smatch m;
  if (!std::regex_match(url, m, kUrl)) {
    return absl::InvalidArgumentError(absl::StrCat("the server gave a link jcctl cannot follow: ", url.substr(0, 120)));
  }
  if (m[1] == "https") {
    return absl::UnimplementedError(
        "the endpoint listener is reached over https (a TLS proxy in front of it): jcctl exec and port-forward "
        "speak plain http to it for now; run them where the listener's own port is reachable");
  }
  ListenerLink link;
  std::string host = absl::AsciiStrToLower(m[2].str());
  link.port = 80;
  if (m[4].matched && !absl::SimpleAtoi(m[4].str(), &link.port)) return absl::InvalidArgumentError("a bad port");
  link.host_header = m[3].matched ? absl::StrCat(host, ":", link.port) : host;
  // Names under "localhost" are this machine (RFC 6761), resolver or not.
  link.connect_host = host == "localhost" || absl::EndsWith(host, ".localhost") ? "127.0.0.1" : host;
  link.target = m[5].str();
  return link;
}

absl::StatusOr<int> Dial(const ListenerLink& link) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(link.connect_host.c_str(), std::to_string(link.port).c_str(), &hints, &found);
      rc != 0 || found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve the endpoint listener ", link.connect_host, ": ",
                                               ::gai_strerror(rc)));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the endpoint listener at ", link.connect_host, ":", link.port));
  }
  return fd;
}

namespace {

// `request` on a new connection to the listener: the socket and the answer's head when it
// answered `expected`, else its refusal as a status (the socket closed).
absl::StatusOr<std::pair<int, Answer>> Ask(const ListenerLink& link, const std::string& request, int expected) {
  auto fd = Dial(link);
  if (!fd.ok()) return fd.status();
  if (!SendAll(*fd, request)) {
    ::close(*fd);
    return absl::UnavailableError("the endpoint listener closed the connection");
  }
  auto answer = ReadAnswer(*fd);
  if (answer.ok() && answer->code == expected) return std::make_pair(*fd, std::move(*answer));
  absl::Status refused = answer.ok() ? StatusOfAnswer(answer->code, ReadRest(*fd, answer->rest)) : answer.status();
  ::close(*fd);
  return refused;
}

}  // namespace

absl::StatusOr<std::string> OpenSession(const ListenerLink& link) {
  auto asked = Ask(link, Request(link, link.target, "", ""), 303);
  if (!asked.ok()) return asked.status();
  ::close(asked->first);
  for (absl::string_view line : absl::StrSplit(asked->second.head, "\r\n")) {
    if (!absl::StartsWithIgnoreCase(line, "Set-Cookie:")) continue;
    line.remove_prefix(11);
    absl::string_view pair = absl::StripAsciiWhitespace(line.substr(0, line.find(';')));
    if (pair.find('=') != absl::string_view::npos) return std::string(pair);
  }
  return absl::UnavailableError("the endpoint listener opened the link but set no session");
}

absl::StatusOr<int> Switch(const ListenerLink& link, const std::string& target, const std::string& upgrade,
                           const std::string& cookie, std::string* early) {
  auto asked = Ask(link, Request(link, target, upgrade, cookie), 101);
  if (!asked.ok()) return asked.status();
  if (early != nullptr) *early = std::move(asked->second.rest);
  return asked->first;
}

void Splice(int a, int b) {
  // One direction on another thread, one here: each ends with its source and half-closes
  // its destination.
  auto pump = [](int from, int to) {
    char chunk[64 << 10];
    while (true) {
      ssize_t n = ::recv(from, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!SendAll(to, absl::string_view(chunk, static_cast<size_t>(n)))) {
        ::shutdown(to, SHUT_RDWR);  // it is gone: the other direction ends too
        return;
      }
    }
    ::shutdown(to, SHUT_WR);
  };
  std::thread other(pump, b, a);
  pump(a, b);
  other.join();
}

}  // namespace jc::jcctl
