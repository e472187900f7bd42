// The hub that drives open watch streams (common/watch_hub.h): callers held to their limit
// of open streams, seats given back, and which streams a round pumps.

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <thread>

#include "common/watch_hub.h"

namespace {

struct CountingStream : jc::WatchHub::Stream {
  std::atomic<int> pumps{0};
  std::atomic<bool> over{false};
  bool Pump(absl::Time) override {
    ++pumps;
    return !over;
  }
};

bool Eventually(const std::function<bool()>& condition) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return condition();
}

}  // namespace

TEST_CASE("a caller holds at most its limit of open watches, others and Jointcloud's services are not held [C8][C6]",
          "[C8][C6]") {
  jc::WatchHubOptions options;
  options.per_caller = 2;
  jc::WatchHub hub(options);
  auto first = hub.Admit("vera", true, "another job watch");
  auto second = hub.Admit("vera", true, "another job watch");
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  auto third = hub.Admit("vera", true, "another job watch");
  REQUIRE(absl::IsResourceExhausted(third.status()));
  CHECK(third.status().message() ==
        "vera already has 2 watch streams open, the most one caller may hold (--max_watches_per_caller); close one "
        "before opening another job watch");
  CHECK(hub.Admit("bob", true, "x").ok());      // another caller's limit is its own
  for (int i = 0; i < 10; ++i) CHECK(hub.Admit("jointcloud", false, "x").ok());  // services: not counted
  first->reset();                                  // a watch ended: its seat is free again
  CHECK(hub.Admit("vera", true, "x").ok());
}

TEST_CASE("the hub pumps a new stream at once, a ready one alone, and every stream on a new event or a tick [C8]",
          "[C8]") {
  jc::WatchHubOptions options;
  options.tick = absl::Seconds(3600);  // no tick in this test's time
  jc::WatchHub hub(options);
  auto a = std::make_shared<CountingStream>();
  auto b = std::make_shared<CountingStream>();
  hub.Add(a);
  REQUIRE(Eventually([&] { return a->pumps >= 1; }));
  hub.Add(b);
  REQUIRE(Eventually([&] { return b->pumps >= 1; }));
  int a_before = a->pumps;
  hub.Ready(b);  // b's write finished: only b
  REQUIRE(Eventually([&] { return b->pumps >= 2; }));
  CHECK(a->pumps == a_before);
  hub.Wake();  // an event committed: both
  REQUIRE(Eventually([&] { return a->pumps > a_before && b->pumps >= 3; }));
  CHECK(hub.open() == 2);
  a->over = true;  // a stream that is over is forgotten
  hub.Wake();
  REQUIRE(Eventually([&] { return hub.open() == 1; }));
}
