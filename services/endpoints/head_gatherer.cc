#include "services/endpoints/head_gatherer.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "services/endpoints/http_head.h"

namespace jc::endpoints {

HeadGatherer::HeadGatherer(size_t capacity, absl::Duration timeout, int watch_fd, Done done)
    : capacity_(std::max<size_t>(1, capacity)),
      timeout_(absl::ToChronoNanoseconds(timeout)),
      watch_fd_(watch_fd),
      done_(std::move(done)) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (watch_fd_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, watch_fd_, &ev);
  }
}

HeadGatherer::~HeadGatherer() {
  for (auto& [id, w] : waiting_) ::close(w.fd);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void HeadGatherer::Add(int fd, std::string address) {
  while (waiting_.size() >= capacity_ && EvictOldest()) {
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  uint64_t id = next_id_++;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    done_(fd, address, "", Outcome::kGone);
    return;
  }
  waiting_.emplace(id, Waiting{fd, std::move(address), "", std::chrono::steady_clock::now() + timeout_});
  by_age_.push_back(id);
  // Bytes that came with the connection are read at once.
  Read(id);
}

bool HeadGatherer::EvictOldest() {
  while (!by_age_.empty()) {
    uint64_t oldest = by_age_.front();
    by_age_.pop_front();
    if (waiting_.count(oldest) > 0) {
      Finish(oldest, Outcome::kEvicted);
      return true;
    }
  }
  return false;
}

void HeadGatherer::Finish(uint64_t id, Outcome outcome) {
  auto it = waiting_.find(id);
  if (it == waiting_.end()) return;
  Waiting w = std::move(it->second);
  waiting_.erase(it);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w.fd, nullptr);
  if (outcome == Outcome::kComplete) {
    // Handed on to a thread that reads and writes blocking, with its own timeouts.
    ::fcntl(w.fd, F_SETFL, ::fcntl(w.fd, F_GETFL) & ~O_NONBLOCK);
  }
  done_(w.fd, w.address, std::move(w.bytes), outcome);
}

void HeadGatherer::Read(uint64_t id) {
  auto it = waiting_.find(id);
  if (it == waiting_.end()) return;
  Waiting& w = it->second;
  char chunk[4096];
  for (;;) {
    // Never more than one byte past the limit: a head that long is refused, whatever followed.
    size_t room = std::min(sizeof chunk, kMaxHeadBytes + 1 - std::min(kMaxHeadBytes + 1, w.bytes.size()));
    if (room == 0) return Finish(id, Outcome::kTooLarge);
    ssize_t n = ::recv(w.fd, chunk, room, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return Finish(id, Outcome::kGone);
    // Only where the end can be new is searched: a byte a packet costs no more than a head at once.
    size_t from = w.bytes.size() >= 3 ? w.bytes.size() - 3 : 0;
    w.bytes.append(chunk, static_cast<size_t>(n));
    if (auto end = HeadEnd(absl::string_view(w.bytes).substr(from)); end.has_value()) {
      return Finish(id, from + *end > kMaxHeadBytes ? Outcome::kTooLarge : Outcome::kComplete);
    }
  }
}

bool HeadGatherer::Poll(absl::Duration wait) {
  epoll_event events[256];
  int timeout_ms = static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(wait), 0, 1000));
  // Never past the next deadline.
  while (!by_age_.empty() && waiting_.count(by_age_.front()) == 0) by_age_.pop_front();
  if (!by_age_.empty()) {
    int64_t until = std::chrono::duration_cast<std::chrono::milliseconds>(waiting_.at(by_age_.front()).deadline -
                                                                          std::chrono::steady_clock::now())
                        .count() +
                    1;
    timeout_ms = static_cast<int>(std::clamp<int64_t>(until, 0, timeout_ms));
  }
  int n = ::epoll_wait(epoll_fd_, events, 256, timeout_ms);
  bool watched = false;
  for (int i = 0; i < n; ++i) {
    if (events[i].data.u64 == 0) {
      watched = true;
    } else {
      Read(events[i].data.u64);
    }
  }
  // All wait the same time, so the oldest run out first.
  const auto now = std::chrono::steady_clock::now();
  while (!by_age_.empty()) {
    uint64_t oldest = by_age_.front();
    auto it = waiting_.find(oldest);
    if (it != waiting_.end() && it->second.deadline > now) break;
    by_age_.pop_front();
    if (it != waiting_.end()) Finish(oldest, Outcome::kTimedOut);
  }
  return watched;
}

}  // namespace jc::endpoints
