// The per-destination outbox shared by the job manager's dispatch (one per center) and
// the nexec master's launches (one per agent): batching, how many senders a destination
// gets, and that every queued item reaches exactly one batch (SPEC A11, B12, C7).

#include <atomic>
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "common/outbox.h"

TEST_CASE("an outbox starts a sender for a lone item and batches what queues while it is busy [A11][B12]",
          "[A11][B12]") {
  jc::Outboxes<int> boxes(/*max_batch=*/3, /*max_senders=*/4);
  CHECK(boxes.Add("alpha", 1));   // nothing runs for alpha: start a sender
  CHECK(boxes.Add("alpha", 2));   // one item waits: a second sender, so it does not wait behind the first
  CHECK_FALSE(boxes.Add("alpha", 3));  // two senders for less than a full batch waiting: enough
  CHECK(boxes.Add("beta", 9));    // destinations are independent
  CHECK(boxes.Take("alpha") == std::vector<int>{1, 2, 3});  // oldest first, up to max_batch
  CHECK(boxes.Take("alpha").empty());  // nothing left: this sender ends
  CHECK(boxes.Take("alpha").empty());  // and so does the other
  CHECK(boxes.Add("alpha", 4));        // both ended: the next item starts one again
  CHECK(boxes.Take("beta") == std::vector<int>{9});
}

TEST_CASE("a burst gets a sender per full batch plus one, up to the limit, and one sender keeps order [A11][B12]",
          "[A11][B12]") {
  jc::Outboxes<int> boxes(2, 3);
  std::vector<std::pair<std::string, int>> burst;
  for (int i = 0; i < 9; ++i) burst.emplace_back("alpha", i);
  auto start = boxes.AddAll(burst);
  CHECK(start == std::vector<std::string>{"alpha"});  // one AddAll starts one sender per destination...
  CHECK(boxes.Add("alpha", 9));                        // ...and later adds start more while full batches wait
  CHECK(boxes.Add("alpha", 10));
  CHECK_FALSE(boxes.Add("alpha", 11));  // at most three
  jc::Outboxes<int> ordered(0, 1);  // no batch limit, one sender: the nexec master's launches
  CHECK(ordered.Add("node1", 1));
  CHECK_FALSE(ordered.Add("node1", 2));
  CHECK(ordered.Take("node1") == std::vector<int>{1, 2});
  ordered.Clear();
  CHECK(ordered.Take("node1").empty());
}

TEST_CASE("a batch stays within its weight: the items past it wait for the next batch, and an item heavier than "
          "the whole weight still goes, alone [C7][B6]",
          "[C7][B6]") {
  // As the nexec master's launches: no count limit, one sender, at most 10 units a batch.
  jc::Outboxes<int> weighed(0, 1, 10, [](const int& weight) { return static_cast<size_t>(weight); });
  for (int w : {4, 4, 4, 25, 1, 9, 1}) weighed.Add("node1", w);
  CHECK(weighed.Take("node1") == std::vector<int>{4, 4});
  CHECK(weighed.Take("node1") == std::vector<int>{4});
  CHECK(weighed.Take("node1") == std::vector<int>{25});  // alone: never held back for good
  CHECK(weighed.Take("node1") == std::vector<int>{1, 9});
  CHECK(weighed.Take("node1") == std::vector<int>{1});
  CHECK(weighed.Take("node1").empty());
}

TEST_CASE("every item queued by many threads reaches exactly one sender's batch [C7]", "[C7]") {
  jc::Outboxes<int> boxes(16, 4);
  std::atomic<int> senders_started{0};
  std::mutex mu;
  std::multiset<int> sent;
  std::vector<std::thread> senders;
  std::mutex senders_mu;
  auto sender = [&] {
    for (auto batch = boxes.Take("c"); !batch.empty(); batch = boxes.Take("c")) {
      std::lock_guard<std::mutex> lock(mu);
      sent.insert(batch.begin(), batch.end());
    }
  };
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < 1000; ++i) {
        if (boxes.Add("c", p * 1000 + i)) {
          ++senders_started;
          std::lock_guard<std::mutex> lock(senders_mu);
          senders.emplace_back(sender);
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  {
    std::lock_guard<std::mutex> lock(senders_mu);
    for (auto& t : senders) t.join();
  }
  // A sender that found the box empty ended; anything added after it started another.
  CHECK(sent.size() == 4000);
  CHECK(std::set<int>(sent.begin(), sent.end()).size() == 4000);
  CHECK(boxes.Pending("c") == 0);
  CHECK(senders_started >= 1);
}
