#pragma once

// Whoever takes a down server's port and speaks just enough HTTP/2 to hold a gRPC client:
// it answers the connection preface with SETTINGS allowing no stream
// (SETTINGS_MAX_CONCURRENT_STREAMS 0), acknowledges the client's SETTINGS and PINGs, and
// never answers a call. A gRPC client's stream then waits to start, for good unless it
// bounds the wait (attacker helper-60, nexec agents). StopListening lets the port go but
// keeps the connections it accepted, as a squatter that leaves does.

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace jc::testing {

class H2Squatter {
 public:
  // Listens on 127.0.0.1:`port` (SO_REUSEADDR, as a server restarted there binds).
  explicit H2Squatter(int port);
  ~H2Squatter();
  H2Squatter(const H2Squatter&) = delete;
  H2Squatter& operator=(const H2Squatter&) = delete;

  bool listening() const { return listen_fd_ >= 0; }
  // Connections accepted so far.
  int accepted() const { return accepted_; }
  // Closes the listening socket; the connections accepted stay open and served.
  void StopListening();

 private:
  void Serve();

  std::mutex mu_;
  std::condition_variable closed_;
  int listen_fd_ = -1;  // under mu_ once Serve runs
  bool stop_listening_ = false;  // under mu_
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace jc::testing
