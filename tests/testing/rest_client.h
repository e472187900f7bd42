#pragma once

// A REST client for tests: sends JSON over real HTTP and parses the envelope.

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

namespace jc::testing {

struct RestReply {
  int http_status = 0;
  nlohmann::json body;  // the envelope
};

class RestClient {
 public:
  explicit RestClient(int port) : client_("127.0.0.1", port) {
    client_.set_tcp_nodelay(true);
    client_.set_read_timeout(30, 0);
  }

  RestReply Send(const std::string& method, const std::string& path, const std::string& body = "") {
    httplib::Result res = method == "GET"      ? client_.Get(path.c_str())
                          : method == "DELETE" ? client_.Delete(path.c_str())
                          : method == "POST"   ? client_.Post(path.c_str(), body, "application/json")
                          : method == "PUT"    ? client_.Put(path.c_str(), body, "application/json")
                                               : client_.Patch(path.c_str(), body, "application/json");
    RestReply reply;
    if (!res) return reply;
    reply.http_status = res->status;
    reply.body = nlohmann::json::parse(res->body, nullptr, false);
    return reply;
  }
  RestReply Get(const std::string& path) { return Send("GET", path); }
  RestReply Post(const std::string& path, const nlohmann::json& body) {
    return Send("POST", path, body.dump());
  }
  std::string Raw(const std::string& path) {
    auto res = client_.Get(path.c_str());
    return res ? res->body : "";
  }
  httplib::Client& http() { return client_; }

 private:
  httplib::Client client_;
};

}  // namespace jc::testing
