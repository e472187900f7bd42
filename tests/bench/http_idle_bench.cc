// Benchmark of the REST server under idle and slow connections (issue 12, HTTP hardening):
// does a real client still get its answer within a second while 900 connections sit idle,
// 100 send their headers a byte at a time, and 32 keep-alive clients (more than the kept
// threads) are connected? It runs the gateway twice in one process: with a fixed pool of
// 8 threads (how it was) and with the elastic pool (8 kept, up to 2,048), and prints both.
// The fixed run takes about two minutes to wind down (its queued connections time out).
//   build/tests/bench/http_idle_bench [idle=900] [slow=100] [keepalive=32]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "services/gateway/gateway.h"

namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void Run(const char* name, int max_threads, int idle, int slow, int keepalive) {
  jc::gateway::GatewayOptions options;
  options.worker_threads = 8;
  options.max_worker_threads = max_threads;
  jc::gateway::Gateway gateway({}, options, std::make_shared<prometheus::Registry>(),
                               [] { return absl::OkStatus(); });
  auto port = gateway.Bind("127.0.0.1", 0);
  if (!port.ok()) {
    std::fprintf(stderr, "bind: %s\n", port.status().ToString().c_str());
    std::exit(1);
  }
  gateway.Start();

  // The crowd: idle connections that never send a byte, and slow ones that send their
  // headers a byte every half second.
  std::vector<int> fds;
  for (int i = 0; i < idle; ++i) {
    if (int fd = Connect(*port); fd >= 0) fds.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread slowloris([&] {
    std::vector<int> slow_fds;
    for (int i = 0; i < slow; ++i) {
      if (int fd = Connect(*port); fd >= 0) slow_fds.push_back(fd);
    }
    const std::string header = "GET /healthz HTTP/1.1\r\nHost: bench\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for (size_t at = 0; !stop && at < header.size(); ++at) {
      for (int fd : slow_fds) (void)!send(fd, &header[at], 1, MSG_NOSIGNAL);
      for (int i = 0; i < 5 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (int fd : slow_fds) close(fd);
  });

  // More keep-alive clients than kept threads, each asking in a loop: how long until
  // each one's first answer?
  std::vector<double> first_answer_ms(static_cast<size_t>(keepalive), -1);
  std::vector<std::thread> clients;
  for (int c = 0; c < keepalive; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", *port);
      client.set_keep_alive(true);
      client.set_read_timeout(5, 0);
      client.set_connection_timeout(5, 0);
      auto start = Clock::now();
      while (!stop) {
        auto res = client.Get("/healthz");
        if (res && res->status == 200 && first_answer_ms[static_cast<size_t>(c)] < 0) {
          first_answer_ms[static_cast<size_t>(c)] = Ms(Clock::now() - start);
        }
        if (!res && Clock::now() - start > std::chrono::seconds(5)) break;
      }
    });
  }

  // The real client: a fresh connection every 100 ms for 3 s, timing out at 5 s.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<double> probe_ms;
  int timeouts = 0;
  for (int i = 0; i < 30; ++i) {
    httplib::Client probe("127.0.0.1", *port);
    probe.set_read_timeout(5, 0);
    probe.set_connection_timeout(5, 0);
    auto start = Clock::now();
    auto res = probe.Get("/healthz");
    if (res && res->status == 200) {
      probe_ms.push_back(Ms(Clock::now() - start));
    } else {
      ++timeouts;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop = true;
  for (auto& t : clients) t.join();
  slowloris.join();
  for (int fd : fds) close(fd);
  gateway.Stop();

  std::sort(probe_ms.begin(), probe_ms.end());
  int unanswered = static_cast<int>(std::count(first_answer_ms.begin(), first_answer_ms.end(), -1.0));
  double slowest_first = *std::max_element(first_answer_ms.begin(), first_answer_ms.end());
  std::printf("%s: %zu idle + %d slow connections, %d keep-alive clients: real client %zu/30 answered, "
              "p50 %.1f ms, max %.1f ms%s; keep-alive clients' slowest first answer %.1f ms, %d never answered\n",
              name, fds.size(), slow, keepalive, probe_ms.size(),
              probe_ms.empty() ? 0.0 : probe_ms[probe_ms.size() / 2], probe_ms.empty() ? 0.0 : probe_ms.back(),
              timeouts > 0 ? (" (" + std::to_string(timeouts) + " waited more than 5 s)").c_str() : "",
              slowest_first, unanswered);
}

}  // namespace

int main(int argc, char** argv) {
  int idle = argc > 1 ? std::atoi(argv[1]) : 900;
  int slow = argc > 2 ? std::atoi(argv[2]) : 100;
  int keepalive = argc > 3 ? std::atoi(argv[3]) : 32;
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;  // two ends of every connection live in this process
  setrlimit(RLIMIT_NOFILE, &files);
  Run("fixed pool of 8 threads (before)", 8, idle, slow, keepalive);
  Run("elastic pool, 8 kept, up to 2048 (now)", 2048, idle, slow, keepalive);
}
