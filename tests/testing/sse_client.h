#pragma once

// Reads a Server-Sent Events stream over real HTTP, for tests of the job event streams.

#include <httplib.h>

#include "common/sse_parser.h"

#include <nlohmann/json.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace jc::testing {

struct SseEvent {
  std::string id;
  std::string type;
  nlohmann::json data;
};

struct SseReply {
  int http_status = 0;
  std::vector<SseEvent> events;
  int comments = 0;           // comment lines (heartbeats)
  bool ended_by_server = false;  // the server closed the stream (not `enough`, not the deadline)
  nlohmann::json error;       // the envelope, when the answer was not a stream
};

// GETs `path` and collects events until `enough(events)` is true, the server ends the
// stream, or `timeout` passes. `last_event_id`, when not empty, is sent as Last-Event-ID.
// `connected` (if given) is set once the first comment line arrived.
inline SseReply ReadSse(int port, const std::string& token, const std::string& path,
                        const std::string& last_event_id,
                        const std::function<bool(const std::vector<SseEvent>&)>& enough,
                        std::chrono::seconds timeout, std::atomic<bool>* connected = nullptr) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(static_cast<time_t>(timeout.count()), 0);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  if (!last_event_id.empty()) headers.emplace("Last-Event-ID", last_event_id);
  SseReply reply;
  std::string body;
  jc::SseParser parser;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool stopped = false;
  auto result = client.Get(
      path.c_str(), headers,
      [&](const httplib::Response& res) {
        reply.http_status = res.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (reply.http_status != 200) {
          body.append(data, n);
          return true;
        }
        parser.Feed(
            std::string_view(data, n),
            [&](const jc::SseEvent& e) {
              reply.events.push_back({e.id, e.event == "message" ? std::string() : e.event,
                                      nlohmann::json::parse(e.data, nullptr, false)});
              return true;
            },
            [&](std::string_view) {
              ++reply.comments;
              if (connected != nullptr) *connected = true;
            });
        if ((enough && enough(reply.events)) || std::chrono::steady_clock::now() > deadline) {
          stopped = true;
          return false;
        }
        return true;
      });
  if (reply.http_status != 200) reply.error = nlohmann::json::parse(body, nullptr, false);
  reply.ended_by_server = result && !stopped;
  return reply;
}

}  // namespace jc::testing
