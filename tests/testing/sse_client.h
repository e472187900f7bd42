#pragma once

// Reads a Server-Sent Events stream over real HTTP, for tests of the job event streams.

#include <httplib.h>

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
  std::string buffer, body;
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
        buffer.append(data, n);
        for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
          std::string frame = buffer.substr(0, end);
          buffer.erase(0, end + 2);
          SseEvent event;
          bool is_event = false;
          size_t at = 0;
          while (at <= frame.size()) {
            size_t nl = frame.find('\n', at);
            std::string line = frame.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
            at = nl == std::string::npos ? frame.size() + 1 : nl + 1;
            if (line.rfind(":", 0) == 0) {
              ++reply.comments;
              if (connected != nullptr) *connected = true;
            } else if (line.rfind("id: ", 0) == 0) {
              event.id = line.substr(4);
            } else if (line.rfind("event: ", 0) == 0) {
              event.type = line.substr(7);
            } else if (line.rfind("data: ", 0) == 0) {
              event.data = nlohmann::json::parse(line.substr(6), nullptr, false);
              is_event = true;
            }
          }
          if (is_event) reply.events.push_back(std::move(event));
        }
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
