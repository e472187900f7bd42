#include "services/gateway/gateway.h"

#include "services/gateway/tls_server.h"

#include <httplib.h>

#include <algorithm>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>

#include "absl/time/clock.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/admin_server.h"
#include "common/listen_backlog.h"
#include "common/rest_envelope.h"
#include "common/utf8.h"
#include "services/gateway/elastic_pool.h"
#include "services/gateway/openapi.h"
#include "services/gateway/route_order.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/ui_assets.h"

namespace jc::gateway {
namespace {

constexpr char kJson[] = "application/json";

std::string NewRequestId() {
  static std::atomic<uint64_t> next{0};
  static const uint64_t boot = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  return absl::StrCat(absl::Hex(boot), "-", next.fetch_add(1));
}

// The headers a handler forwards (as gRPC metadata, or into a request's fields) hold only
// printable ASCII: any other byte would abort the process in gRPC's metadata checks, or be
// stored in a string field no later parse accepts.
absl::Status ForwardedHeadersStatus(const httplib::Request& req) {
  if (const std::string* authorization = FindHeader(req, "Authorization");
      authorization != nullptr && !IsForwardableHeaderValue(*authorization)) {
    return absl::UnauthenticatedError(
        "the Authorization header holds a byte that is not printable ASCII (0x20-0x7E): it proves no one");
  }
  for (const char* name : {"X-Request-Id", "Idempotency-Key", "Last-Event-ID"}) {
    if (const std::string* value = FindHeader(req, name); value != nullptr && !IsForwardableHeaderValue(*value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", name, " header holds a byte that is not printable ASCII (0x20-0x7E)"));
    }
  }
  return absl::OkStatus();
}

// Path parameters and query values go into string fields, which hold UTF-8 only: what a
// client percent-encoded otherwise (%FF) is refused here, the same for every route and
// whichever way the gateway reaches the service.
absl::Status TextStatus(const httplib::Request& req, const std::vector<std::string>& path_params) {
  for (const std::string& p : path_params) {
    if (!IsUtf8(p)) return absl::InvalidArgumentError("a path parameter is not UTF-8 text");
  }
  for (const auto& [name, value] : req.params) {
    if (!IsUtf8(name) || !IsUtf8(value)) {
      return absl::InvalidArgumentError("a query parameter is not UTF-8 text");
    }
  }
  return absl::OkStatus();
}

}  // namespace

Gateway::Gateway(std::vector<Route> routes, GatewayOptions options,
                 std::shared_ptr<prometheus::Registry> metrics,
                 std::function<absl::Status()> readiness)
    : routes_(std::move(routes)),
      options_(options),
      metrics_(std::move(metrics)),
      readiness_(std::move(readiness)),
      server_(options_.tls_cert_file.empty()
                  ? std::make_unique<httplib::Server>()
                  : std::make_unique<TlsServer>(options_.tls_cert_file, options_.tls_key_file)) {
  openapi_ = BuildOpenApi(routes_, options_.version);
  Install();
}

Gateway::~Gateway() { Stop(); }

int Gateway::MaxEventStreams() const {
  return std::max(1, std::min(options_.max_event_streams, options_.max_worker_threads - 1));
}

void Gateway::Install() {
  httplib::Server& s = *server_;
  // cpp-httplib's defaults manage about 16 requests/s on loopback (Nagle + delayed ACK
  // and 5 requests per connection); these settings are what make it fast.
  s.set_tcp_nodelay(true);
  s.set_keep_alive_max_count(options_.keep_alive_max_requests);
  s.set_keep_alive_timeout(options_.keep_alive_timeout_seconds);
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(options_.read_timeout_seconds, 0);
  s.set_write_timeout(30, 0);
  int min = options_.worker_threads, max = options_.max_worker_threads;
  s.new_task_queue = [min, max] { return new ElasticPool(min, max); };

  auto& requests = prometheus::BuildCounter()
                       .Name("jc_http_requests_total")
                       .Help("REST requests served, by route and HTTP status")
                       .Register(*metrics_);
  auto& latency = prometheus::BuildHistogram()
                      .Name("jc_http_request_duration_seconds")
                      .Help("REST request latency, by route")
                      .Register(*metrics_);

  for (const Route* installed : InstallOrder(routes_)) {
    const Route& route = *installed;
    auto* histogram = &latency.Add({{"method", route.method}, {"route", route.path}},
                                   prometheus::Histogram::BucketBoundaries{
                                       0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                       0.25, 0.5, 1, 2.5});
    // The route's counter of 200 answers, found once (prometheus-cpp's Family::Add builds
    // and hashes the labels on every call): the others are found per answer.
    auto ok_counter = std::make_shared<std::atomic<prometheus::Counter*>>(nullptr);
    auto handler = [this, &route, histogram, &requests, ok_counter](const httplib::Request& req,
                                                              httplib::Response& res) {
      auto start = std::chrono::steady_clock::now();
      std::vector<std::string> params;
      for (size_t i = 1; i < req.matches.size(); ++i) params.push_back(req.matches[i].str());
      // Every answer names its request, for logs and the audit log.
      const std::string* given_id = FindHeader(req, "X-Request-Id");
      std::string request_id = given_id == nullptr ? std::string() : given_id->substr(0, 128);
      absl::Status headers = ForwardedHeadersStatus(req);
      if (headers.ok()) headers = TextStatus(req, params);
      if (request_id.empty() || !IsForwardableHeaderValue(request_id)) request_id = NewRequestId();
      res.set_header("X-Request-Id", request_id);
      RestResult result;
      if (!headers.ok()) {
        result = {headers, ""};
      } else {
        std::vector<uint64_t> pending;  // what this request registered to be cancelled on a stop
        ServingRequest serving(req, request_id, [this, &pending](std::function<void()> cancel) {
          std::lock_guard<std::mutex> lock(streams_mu_);
          if (stopping_) {
            cancel();
            return;
          }
          pending.push_back(++next_stream_);
          pending_[pending.back()] = std::move(cancel);
        });
        result = route.handler(req, params);
        if (!pending.empty()) {
          std::lock_guard<std::mutex> lock(streams_mu_);
          for (uint64_t id : pending) pending_.erase(id);
        }
      }
      res.status = HttpStatusFor(result.status.code());
      // Unavailable passes (the store restarting, a standby instance): say when to retry.
      // 503: the store restarting, a standby instance; 429: the caller's rate limit (its
      // bucket refills at least one request a second).
      if (res.status == 503 || res.status == 429) res.set_header("Retry-After", "1");
      if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
      if (result.status.ok() && result.stream) {
        bool full = false;
        {
          std::lock_guard<std::mutex> lock(streams_mu_);
          full = static_cast<int>(streams_.size()) >= MaxEventStreams();
        }
        if (full) {
          result.cancel();
          result.stream = nullptr;
          result.status = absl::UnavailableError(absl::StrCat(
              "this server has ", MaxEventStreams(), " event streams open, the most it serves at once; retry shortly"));
          res.status = HttpStatusFor(result.status.code());
          res.set_header("Retry-After", "1");
        }
      }
      if (result.status.ok() && result.stream) {
        // Written on this worker as events come; the worker is the stream's until it ends.
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");  // proxies pass each event at once
        uint64_t id = 0;
        {
          std::lock_guard<std::mutex> lock(streams_mu_);
          id = ++next_stream_;
          streams_[id] = result.cancel;
          if (stopping_) result.cancel();
        }
        res.set_chunked_content_provider(
            result.raw_content_type,
            [stream = result.stream](size_t, httplib::DataSink& sink) {
              stream(sink);
              sink.done();
              return true;
            },
            [this, id, cancel = result.cancel](bool) {
              cancel();
              std::lock_guard<std::mutex> lock(streams_mu_);
              streams_.erase(id);
            });
      } else if (result.status.ok() && !result.raw_content_type.empty()) {
        res.set_content(result.data_json, result.raw_content_type.c_str());
      } else {
        res.set_content(MakeEnvelope(result.status, result.data_json), kJson);
      }
      histogram->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      prometheus::Counter* counter = res.status == 200 ? ok_counter->load(std::memory_order_acquire) : nullptr;
      if (counter == nullptr) {
        counter = &requests.Add({{"method", route.method}, {"route", route.path}, {"code", std::to_string(res.status)}});
        if (res.status == 200) ok_counter->store(counter, std::memory_order_release);
      }
      counter->Increment();
      if (!result.status.ok() && res.status >= 500) {
        spdlog::warn("rest {} {} -> {}: {}", req.method, req.path, res.status,
                     result.status.ToString());
      }
    };
    std::string pattern = PathRegex(route.path);
    // Bodies are read here, whatever their Content-Type: Debian's compiled cpp-httplib
    // caps form-urlencoded bodies (what `curl -d` sends) at 8 KiB when it reads them
    // itself, while the API's limit is max_body_bytes (larger bodies still get 413 from
    // the library, which counts the bytes as they come).
    auto with_body = [handler](const httplib::Request& req, httplib::Response& res,
                               const httplib::ContentReader& content) {
      if (const std::string* type = FindHeader(req, "Content-Type");
          type != nullptr && absl::StartsWith(*type, "multipart/form-data")) {  // httplib's is_multipart_form_data
        res.status = 400;
        res.set_content(MakeEnvelope(absl::InvalidArgumentError(
                                         "multipart/form-data is not taken: send the body as JSON"),
                                     "null"),
                        kJson);
        return;
      }
      // Read into the request itself: httplib's own object, const only in this handler's
      // signature (as in the pre-routing hook below); a copy of it cost every POST its
      // headers' allocations.
      auto& with = const_cast<httplib::Request&>(req);
      if (!content([&](const char* data, size_t n) {
            with.body.append(data, n);
            return true;
          })) {
        return;  // the library answered (413, or the connection went away)
      }
      handler(with, res);
    };
    if (route.method == "GET") s.Get(pattern, handler);
    else if (route.method == "POST") s.Post(pattern, with_body);
    else if (route.method == "PUT") s.Put(pattern, with_body);
    else if (route.method == "PATCH") s.Patch(pattern, with_body);
    else if (route.method == "DELETE") s.Delete(pattern, with_body);
  }

  s.Get("/openapi/v1/openapi.json", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(openapi_, kJson);
  });
  // The operator console: static files, public as the OpenAPI document is (they hold no
  // data; the page asks the API with the operator's token).
  s.Get("/ui", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/ui/"); });
  s.Get(R"(/ui/([A-Za-z0-9._-]*))", [](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1].str();
    if (name.empty()) name = "index.html";
    for (const UiAsset& asset : UiAssets()) {
      if (name == asset.path) {
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Content-Type-Options", "nosniff");
        res.set_header("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:");
        // An address the page was opened at (a link's query, whatever it carried) is never
        // sent on as the Referer of the page's files and API calls.
        res.set_header("Referrer-Policy", "no-referrer");
        res.set_content(reinterpret_cast<const char*>(asset.data), asset.size, asset.content_type);
        return;
      }
    }
    res.status = 404;
  });
  // The same /metrics, /healthz and /readyz as every process's admin server.
  InstallAdminEndpoints(s, metrics_, readiness_, options_.sees_tenants);

  // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112
  // 6.3): `curl -X POST …/stop` sends such a request. cpp-httplib 0.11 would read a POST's
  // or DELETE's body until the connection closed, so the client waited for the read
  // timeout and got 400. Saying so in the request lets httplib read the empty body at
  // once (the request is the server's own, const only in this hook's signature); the
  // routes take an empty body as `{}` (ParseBody).
  s.set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    if (FindHeader(req, "Content-Length") == nullptr && FindHeader(req, "Transfer-Encoding") == nullptr) {
      const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Whatever httplib answers on its own (no route, 413 body too large, 400 unparsable
  // request) still gets the envelope, so clients parse one shape of error.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    switch (res.status) {
      case 404: message = absl::StrCat("no route for ", req.method, " ", req.path); break;
      case 413: message = "request body is larger than the limit"; break;
      case 400: message = "malformed HTTP request"; break;
      default: message = absl::StrCat("HTTP ", res.status);
    }
    res.set_content(MakeHttpErrorEnvelope(res.status, message), kJson);
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res,
                             std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("rest {} {} threw: {}", req.method, req.path, what);
    res.status = 500;
    res.set_content(MakeHttpErrorEnvelope(500, "internal error"), kJson);
  });
}

absl::StatusOr<int> Gateway::Bind(const std::string& host, int port) {
  if (!server_->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("REST over TLS: the certificate ", options_.tls_cert_file,
                                                   " and key ", options_.tls_key_file, " do not make a valid pair"));
  }
  int bound = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port,
                                               " (in use, or not a local address)"));
  }
  if (absl::Status s = RaiseListenBacklog(bound, options_.listen_backlog); !s.ok()) {
    spdlog::warn("rest: the listen backlog stays at cpp-httplib's 5: {}", s.ToString());
  }
  return bound;
}

void Gateway::Start() {
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  WaitUntilServing(*server_);  // a Stop right after must reach it
}

void Gateway::Stop() {
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    stopping_ = true;
    for (const auto& [id, cancel] : streams_) cancel();
    for (const auto& [id, cancel] : pending_) cancel();
  }
  // Over HTTPS, clients holding half a request or an idle connection are let go at once
  // rather than at their read timeout (plain HTTP is httplib's own: its reads run out).
  if (auto* tls = dynamic_cast<TlsServer*>(server_.get())) tls->StopReading();
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace jc::gateway
