// The endpoint listener's heads, gathered on one thread (SPEC A17): silent connections cost
// no thread, and a flood of them evicts itself rather than those that send their head.
#include "services/endpoints/head_gatherer.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "services/endpoints/http_head.h"

namespace {

using jc::endpoints::HeadGatherer;
using Outcome = HeadGatherer::Outcome;

struct Told {
  std::string address;
  std::string bytes;
  Outcome outcome;
  int fd;
};

// A client end and a server end; the server end goes to the gatherer.
struct Pair {
  int client = -1;
  int server = -1;
  Pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    client = fds[0];
    server = fds[1];
  }
  void Send(const std::string& s) const { REQUIRE(::send(client, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size())); }
};

struct Fixture {
  std::vector<Told> told;
  HeadGatherer heads;
  Fixture(size_t capacity, absl::Duration timeout)
      : heads(capacity, timeout, -1, [this](int fd, const std::string& address, std::string bytes, Outcome outcome) {
          told.push_back({address, std::move(bytes), outcome, fd});
        }) {}
  ~Fixture() {
    for (auto& t : told) ::close(t.fd);
  }
  // Polls until `n` connections were told of, or a few seconds pass.
  void PollUntil(size_t n) {
    absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (told.size() < n && absl::Now() < deadline) heads.Poll(absl::Milliseconds(50));
  }
};

}  // namespace

TEST_CASE("a head is handed on once it is complete, whole or a byte at a time, with what followed it [A17]", "[A17]") {
  Fixture f(16, absl::Seconds(10));
  Pair whole, bytewise;
  whole.Send("GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY");
  f.heads.Add(whole.server, "10.0.0.1");
  f.heads.Add(bytewise.server, "10.0.0.2");
  f.PollUntil(1);
  REQUIRE(f.told.size() == 1);
  CHECK(f.told[0].address == "10.0.0.1");
  CHECK(f.told[0].outcome == Outcome::kComplete);
  CHECK(f.told[0].bytes == "GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY");
  // Still waiting: nothing is told of a head that has not ended.
  const std::string head = "POST /x HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n";
  for (size_t i = 0; i + 1 < head.size(); ++i) {
    bytewise.Send(head.substr(i, 1));
    f.heads.Poll(absl::Milliseconds(5));
  }
  CHECK(f.told.size() == 1);
  CHECK(f.heads.waiting() == 1);
  bytewise.Send(head.substr(head.size() - 1));
  f.PollUntil(2);
  REQUIRE(f.told.size() == 2);
  CHECK(f.told[1].outcome == Outcome::kComplete);
  CHECK(f.told[1].bytes == head);
  CHECK(f.heads.waiting() == 0);
  // Handed on blocking: the thread that takes it reads with its own timeouts.
  CHECK((::fcntl(f.told[1].fd, F_GETFL) & O_NONBLOCK) == 0);
  ::close(whole.client);
  ::close(bytewise.client);
}

TEST_CASE("a head too long, too slow or cut off is told so, and a full gatherer drops the connection that waited "
          "longest [A17]",
          "[A17]") {
  Fixture f(3, absl::Milliseconds(300));
  Pair big, cut;
  f.heads.Add(big.server, "big");
  f.heads.Add(cut.server, "cut");
  big.Send("GET / HTTP/1.1\r\nX: " + std::string(jc::endpoints::kMaxHeadBytes, 'a') + "\r\n\r\n");
  cut.Send("GET / HTTP/1.1\r\n");
  ::close(cut.client);
  f.PollUntil(2);
  REQUIRE(f.told.size() == 2);
  std::map<std::string, Outcome> by_address;
  for (auto& t : f.told) by_address[t.address] = t.outcome;
  CHECK(by_address["big"] == Outcome::kTooLarge);
  CHECK(by_address["cut"] == Outcome::kGone);

  // Three silent ones fill it; a fourth drops the first; the one that then sends its head
  // is handed on.
  Pair s1, s2, s3, fresh;
  f.heads.Add(s1.server, "s1");
  f.heads.Add(s2.server, "s2");
  f.heads.Add(s3.server, "s3");
  CHECK(f.told.size() == 2);
  f.heads.Add(fresh.server, "fresh");
  REQUIRE(f.told.size() == 3);
  CHECK(f.told[2].address == "s1");
  CHECK(f.told[2].outcome == Outcome::kEvicted);
  CHECK(f.heads.waiting() == 3);
  fresh.Send("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
  f.PollUntil(4);
  REQUIRE(f.told.size() == 4);
  CHECK(f.told[3].address == "fresh");
  CHECK(f.told[3].outcome == Outcome::kComplete);
  // The silent ones run out of time.
  f.PollUntil(6);
  REQUIRE(f.told.size() == 6);
  CHECK(f.told[4].outcome == Outcome::kTimedOut);
  CHECK(f.told[5].outcome == Outcome::kTimedOut);
  CHECK(f.heads.waiting() == 0);
  // Out of descriptors, the acceptor asks for the oldest to be dropped: one at a time, in
  // the order they came, and none once none waits.
  Pair o1, o2;
  f.heads.Add(o1.server, "o1");
  f.heads.Add(o2.server, "o2");
  REQUIRE(f.heads.EvictOldest());
  REQUIRE(f.told.size() == 7);
  CHECK(f.told[6].address == "o1");
  CHECK(f.told[6].outcome == Outcome::kEvicted);
  REQUIRE(f.heads.EvictOldest());
  CHECK(f.told[7].address == "o2");
  CHECK_FALSE(f.heads.EvictOldest());
  CHECK(f.heads.waiting() == 0);
  for (int fd : {big.client, s1.client, s2.client, s3.client, fresh.client, o1.client, o2.client}) ::close(fd);
}
