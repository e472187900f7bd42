#pragma once

// jcctl's way to the control plane: the REST API of its gateway, with a bearer token. Every
// failure comes back as a Status whose code says which exit code it gets (ExitCode).

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace httplib {
class Client;
}

namespace jc::jcctl {

struct ServerConfig {
  std::string url = "http://127.0.0.1:8080";
  std::string token;
  std::string ca_file;
};

// 0 for OK; see Help() for the table.
int ExitCode(const absl::Status& status);

class Client {
 public:
  // InvalidArgument for a URL that is not http(s)://host[:port].
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ServerConfig& config);
  ~Client();

  // The envelope's data of a JSON call; the envelope's error otherwise, or Unavailable
  // when the server cannot be reached.
  absl::StatusOr<nlohmann::json> Call(const std::string& method, const std::string& path,
                                      const nlohmann::json* body = nullptr,
                                      const std::vector<std::pair<std::string, std::string>>& headers = {});
  // A plain-text answer (a log).
  absl::StatusOr<std::string> Text(const std::string& path);
  // Follows a Server-Sent Events stream: `on_event(id, type, data)` for each event until it
  // returns false or the server ends the stream. `last_event_id` resumes after an event.
  absl::Status Stream(const std::string& path, const std::string& last_event_id,
                      const std::function<bool(const std::string& id, const std::string& type,
                                               const nlohmann::json& data)>& on_event);

  const std::string& url() const { return url_; }
  // The CAs server certificates are checked against (--cacert); empty: the system's.
  const std::string& ca_file() const { return ca_file_; }

 private:
  Client(std::string url, std::unique_ptr<httplib::Client> http, std::string ca_file);
  absl::Status Unreachable(int error) const;

  std::string url_;
  std::string ca_file_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace jc::jcctl
