#pragma once

// A TCP proxy for fault-injection tests: it sits between a client and a server on
// loopback and can pass bytes through, hold them (a network partition: connections stay
// open, nothing arrives, as when a link goes dark), or pass them late (a slow link). When
// it passes again, held bytes flow on, as TCP delivers after a partition heals.

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace jc::testing {

class TcpProxy {
 public:
  enum class Mode { kPass, kBlackhole, kDelay };

  // Listens on 127.0.0.1 on a free port and forwards to 127.0.0.1:`upstream_port`.
  explicit TcpProxy(int upstream_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // New connections go here (the server restarted on another port).
  void SetUpstream(int port) { upstream_port_ = port; }
  // kDelay holds each chunk for `delay` before passing it on.
  void SetMode(Mode mode, std::chrono::milliseconds delay = std::chrono::milliseconds(0));

 private:
  void AcceptLoop();
  void Pump(int from, int to);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> upstream_port_;
  std::atomic<Mode> mode_{Mode::kPass};
  std::atomic<int64_t> delay_ms_{0};
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;
};

}  // namespace jc::testing
