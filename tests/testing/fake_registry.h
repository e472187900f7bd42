#pragma once

// A lying registry for tests (issue 44): an HTTPS (or plain HTTP) server on 127.0.0.1, a
// port of its own, whose answers each test scripts — redirects elsewhere, challenges naming
// another host's token service, answers dripped a byte at a time, a gibibyte manifest,
// manifests of the wrong shape. It records what it was asked, Authorization included, so a
// test sees where credentials went. Its certificate (scripts/dev-ca.sh: 127.0.0.1 and
// localhost) is signed by a CA shared by every FakeRegistry started in the same directory.
// OciRegistry (oci_registry.h) is the real registry; this one is for what a real one never
// does.

#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::testing {

class FakeRegistry {
 public:
  // `dir` holds the CA and certificates (made once); `source_dir` is the project's.
  static absl::StatusOr<std::unique_ptr<FakeRegistry>> Start(const std::string& dir, const std::string& source_dir,
                                                             bool tls = true);
  ~FakeRegistry();  // stops the server; handlers that drip see stopping() and end

  int port() const { return port_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }  // what references name
  const std::string& ca_file() const { return ca_file_; }
  httplib::Server& server() { return *server_; }
  // Runs before the routes on every request (after it is recorded); true: it answered.
  using Gate = std::function<bool(const httplib::Request&, httplib::Response&)>;
  void set_gate(Gate gate) {
    std::lock_guard<std::mutex> lock(mu_);
    gate_ = std::move(gate);
  }
  bool stopping() const { return stopping_; }

  struct Seen {
    std::string path;
    std::string authorization;
  };
  std::vector<Seen> seen() const;  // every request so far, in order

  // A well-formed single-platform image (an OCI manifest and its config) served as
  // repository:tag and by digest; returns the manifest's digest. httplib matches routes in
  // the order registered: a test's own answers for the same paths go first.
  std::string AddImage(const std::string& repository, const std::string& tag, const std::string& platform = "linux/amd64");
  // Docker's config.json granting user:password at host() (a file in the directory).
  std::string WriteAuthFile(const std::string& user, const std::string& password) const;

 private:
  FakeRegistry() = default;
  std::string dir_, ca_file_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
  Gate gate_;
};

}  // namespace jc::testing
