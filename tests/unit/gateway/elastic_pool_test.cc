// The REST server's elastic pool (services/gateway/elastic_pool.h): a connection that
// arrives while every thread is held gets a thread of its own, up to the cap; threads
// above the minimum leave when idle; shutdown runs what was queued.

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>

#include "services/gateway/elastic_pool.h"
#include "tests/testing/process.h"

namespace {

// Tasks that hold their thread until released, as a keep-alive connection does.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> running{0}, done{0};
  std::function<void()> Task() {
    return [this] {
      ++running;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return open; });
      --running;
      ++done;
    };
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

}  // namespace

TEST_CASE("a connection that finds every REST thread held gets a thread of its own, up to the cap [C6]", "[C6]") {
  Gate gate;
  jc::gateway::ElasticPool pool(2, 8, std::chrono::milliseconds(50));
  CHECK(pool.threads() == 2);
  for (int i = 0; i < 10; ++i) pool.enqueue(gate.Task());
  // Eight run at once (the cap); the other two wait for a thread, they are not dropped.
  REQUIRE(jc::testing::WaitUntil([&] { return gate.running == 8; }));
  CHECK(pool.threads() == 8);
  gate.Open();
  REQUIRE(jc::testing::WaitUntil([&] { return gate.done == 10; }));
  // Idle, the pool shrinks back to its minimum.
  REQUIRE(jc::testing::WaitUntil([&] { return pool.threads() == 2; }));
  CHECK(pool.busy() == 0);
}

TEST_CASE("shutting the REST pool down runs what was queued and waits for its threads [C6]", "[C6]") {
  std::atomic<int> ran{0};
  {
    jc::gateway::ElasticPool pool(1, 1);
    for (int i = 0; i < 5; ++i) pool.enqueue([&] { ++ran; });
    pool.shutdown();
    CHECK(ran == 5);
    CHECK(pool.threads() == 0);
  }
}
