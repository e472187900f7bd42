#pragma once

// A REST client for tests: sends JSON over real HTTP and parses the envelope.

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace jc::testing {

struct RestReply {
  int http_status = 0;
  nlohmann::json body;  // the envelope
};

class RestClient {
 public:
  // Requests carry "Authorization: Bearer <token>" unless the token is empty.
  explicit RestClient(int port, const std::string& token = "") : client_("127.0.0.1", port) {
    client_.set_tcp_nodelay(true);
    client_.set_read_timeout(30, 0);
    if (!token.empty()) client_.set_bearer_token_auth(token);
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

// The admin token a jointcloud started with --admin_token_file=`path` wrote there on its
// first start (empty when it did not, within 30 s).
inline std::string AdminToken(const std::string& path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    std::string token;
    if (in >> token && !token.empty()) return token;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

// Registers center `center` at `adapter_address` with `cpu` CPUs and `memory_mb` MB, and
// spec "cpu-1" (one CPU and `spec_memory`, e.g. "256Mi") offered there; true once the
// scheduler can place on it and the server is ready (its job manager leads).
// Center `center` at `adapter_address` (8 CPUs, 8 GiB) with spec svc-1 (1 CPU, 256Mi) for
// batch jobs and services: the endpoint suites' center.
inline bool AddServiceCenter(RestClient& rest, const std::string& center, const std::string& adapter_address) {
  auto c = rest.Post("/openapi/v1/centers", {{"ai_center_id", center}, {"name", center}, {"region", "cn"},
                                             {"network_topology", "cn/" + center}, {"adapter_address", adapter_address},
                                             {"capacity", {{"cpu", 8}, {"memory", 8192}}}});
  auto s = rest.Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "svc-1"},
                                                   {"resource_spec_name", "svc-1"},
                                                   {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                   {"service_type", "batch,streaming"},
                                                   {"price", 1},
                                                   {"computing_center_list", center}});
  return c.http_status == 200 && s.http_status == 200;
}

inline bool AddCenterWithSpec(RestClient& rest, const std::string& center, const std::string& adapter_address,
                              int cpu, int memory_mb, const std::string& spec_memory) {
  auto c = rest.Post("/openapi/v1/centers", {{"ai_center_id", center},
                                             {"name", center},
                                             {"region", "cn"},
                                             {"adapter_address", adapter_address},
                                             {"capacity", {{"cpu", cpu}, {"memory", memory_mb}}}});
  auto s = rest.Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                   {"resource_spec_name", "1 CPU"},
                                                   {"resource_quantity", {{"cpu", "1"}, {"memory", spec_memory}}},
                                                   {"service_type", "batch"},
                                                   {"price", 1},
                                                   {"computing_center_list", center}});
  if (c.http_status != 200 || s.http_status != 200) return false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string probe = "/scheduler/algorithm/least_load/score/" + center + "?resourceSpecId=cpu-1";
  while (std::chrono::steady_clock::now() < deadline) {
    // Ready too: a server that has just started answers creates 503 until its job
    // manager leads, which can come after the center is placeable.
    if (rest.Get(probe).http_status == 200 && rest.Get("/readyz").http_status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace jc::testing
