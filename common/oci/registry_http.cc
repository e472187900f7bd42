#include "common/oci/registry_http.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace jc::oci {
namespace {

// How often the watchdog asks whether the caller has given up.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);

bool IsRedirect(int status) { return status == 301 || status == 302 || status == 303 || status == 307 || status == 308; }

// `d` as httplib's (seconds, microseconds), at least a millisecond.
std::pair<time_t, time_t> SecUsec(absl::Duration d) {
  int64_t us = std::max<int64_t>(absl::ToInt64Microseconds(d), 1000);
  return {static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000)};
}

}  // namespace

RegistryCall::RegistryCall(absl::Duration timeout, Cancelled cancelled)
    : timeout_(timeout), deadline_(absl::Now() + timeout), cancelled_(std::move(cancelled)) {
  watchdog_ = std::thread([this] { Watch(); });
}

RegistryCall::~RegistryCall() {
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  watchdog_.join();
  if (fd_ >= 0) close(fd_);
}

void RegistryCall::Watch() {
  absl::MutexLock lock(&mu_);
  while (!done_) {
    if (absl::Now() >= deadline_) {
      stopped_ = absl::DeadlineExceededError(absl::StrCat("did not answer within ", absl::FormatDuration(timeout_)));
    } else if (cancelled_ && cancelled_()) {
      stopped_ = absl::CancelledError("the call was cancelled");
    }
    if (!stopped_.ok()) {
      // shutdown(2), not Client::stop(): stop() waits for the client's socket mutex, which
      // the client holds while it connects and does the TLS handshake — a registry dripping
      // its handshake would hold the watchdog too. shutdown wakes every wait on the socket.
      if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
      break;
    }
    absl::Duration wait = deadline_ - absl::Now();
    if (cancelled_) wait = std::min(wait, kCancelPoll);
    mu_.AwaitWithTimeout(absl::Condition(&done_), wait);
  }
}

absl::Status RegistryCall::Stopped() {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

void RegistryCall::Attach(int fd) {
  absl::MutexLock lock(&mu_);
  if (fd_ >= 0) close(fd_);
  fd_ = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (!stopped_.ok() && fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

void RegistryCall::Detach() {
  absl::MutexLock lock(&mu_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

std::string HttpAnswer::Header(absl::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

namespace {

// One GET, no redirect followed.
absl::StatusOr<HttpAnswer> GetOnce(RegistryCall& call, const FetchOptions& options, const Origin& origin,
                                   const std::string& path, const httplib::Headers& headers, absl::string_view registry,
                                   absl::string_view what) {
  if (absl::Status s = call.Stopped(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("registry ", registry, ": ", s.message()));
  }
  httplib::SSLClient client(origin.host, origin.port);
  client.enable_server_certificate_verification(true);
  if (!options.ca_file.empty()) client.set_ca_cert_path(options.ca_file.c_str());
  client.set_follow_location(false);
  // The per-read timeouts are the call's remaining time; the watchdog bounds the total.
  auto [sec, usec] = SecUsec(call.Remaining());
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  client.set_socket_options([&call](socket_t fd) { call.Attach(fd); });

  HttpAnswer answer;
  bool answered = false, too_big = false;
  auto res = client.Get(
      path, headers,
      [&](const httplib::Response& r) {
        answered = true;
        answer.status = r.status;
        for (const auto& [k, v] : r.headers) answer.headers.emplace_back(absl::AsciiStrToLower(k), v);
        // A length past the limit is refused before a byte of the body is read.
        uint64_t length = 0;
        if (absl::SimpleAtoi(r.get_header_value("Content-Length"), &length) && length > options.max_body) {
          too_big = true;
          return false;
        }
        return true;
      },
      [&](const char* data, size_t n) {
        if (n > options.max_body - answer.body.size()) {
          too_big = true;
          return false;
        }
        answer.body.append(data, n);
        return true;
      });
  call.Detach();
  if (too_big) {
    return absl::FailedPreconditionError(absl::StrCat("registry ", registry, " answered more than ", options.max_body,
                                                      " bytes for ", what, " (--registry_max_manifest_bytes)"));
  }
  if (!res) {
    // A registry that began to answer and then dripped past the deadline "did not answer
    // within"; one that never got as far as an answer (no connection, no TLS, silence) is
    // "cannot reach", whatever the reason, below.
    absl::Status stopped = call.Stopped();
    if (absl::IsCancelled(stopped) || (!stopped.ok() && answered)) {
      return absl::Status(stopped.code(), absl::StrCat("registry ", registry, ": ", stopped.message()));
    }
    // One answer for every way of not reaching it: which one is for the operator's log.
    spdlog::warn("registry {}: {} at {}: {}", std::string(registry), std::string(what), origin.ToString(),
                 stopped.ok() ? httplib::to_string(res.error()) : std::string(stopped.message()));
    auto named = ParseHostPort(registry);
    const bool elsewhere = !named.ok() || !(*named == origin);
    return absl::UnavailableError(absl::StrCat(
        "cannot reach registry ", registry, elsewhere ? absl::StrCat(" at ", origin.ToString()) : "",
        " over HTTPS: not listening, not answering, not speaking TLS, or its certificate is not trusted "
        "(--registry_ca_file)"));
  }
  return answer;
}

}  // namespace

absl::StatusOr<HttpAnswer> Fetch(RegistryCall& call, const FetchOptions& options, const Origin& origin,
                                 const std::string& path, const std::vector<std::pair<std::string, std::string>>& headers,
                                 const std::string& authorization, absl::string_view registry, absl::string_view what) {
  Origin at = origin;
  std::string at_path = path;
  for (int hop = 0;; ++hop) {
    httplib::Headers h(headers.begin(), headers.end());
    // Credentials go to the origin they are for, never where it redirects.
    if (!authorization.empty() && at == origin) h.emplace("Authorization", authorization);
    auto answer = GetOnce(call, options, at, at_path, h, registry, what);
    if (!answer.ok() || !IsRedirect(answer->status)) return answer;
    if (hop == options.max_redirects) {
      return absl::DataLossError(absl::StrCat("registry ", registry, " redirected ", what, " more than ",
                                              options.max_redirects, " times"));
    }
    std::string location = answer->Header("location");
    auto next = ParseLocation(location, at);
    if (!next.ok()) {
      return absl::DataLossError(absl::StrCat("registry ", registry, " redirected ", what, " to \"",
                                              location.substr(0, 200), "\": ", next.status().message()));
    }
    if (!next->https) {
      return absl::PermissionDeniedError(absl::StrCat(
          "registry ", registry, " redirected ", what, " to plain http:// (", next->origin.ToString(),
          "); refused: the control plane speaks only HTTPS to registries, and never sends anything in clear"));
    }
    at = next->origin;
    at_path = next->path;
  }
}

}  // namespace jc::oci
