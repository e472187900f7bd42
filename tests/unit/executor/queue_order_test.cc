// Queue orders behind one interface (SPEC B5, issue 32 item 2): each order seen alone,
// through QueueOrder and nothing of the scheduler, and the scheduler keeping an order's
// state across a reload of the queue's configuration.

#include <catch2/catch.hpp>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "executor/policy/queue_order.h"
#include "executor/policy/scheduler.h"
#include "tests/unit/executor/scheduler_cycle.h"

using namespace jc::nexec;

namespace {

// A queue's pending jobs and what its users run, as an order reads them.
struct Queued {
  std::deque<int64_t> pending;
  std::map<int64_t, JobRequest> jobs;
  std::map<std::string, int> used;
  std::map<std::string, DrfVector> held;
  std::vector<double> capacity_held;
  std::map<int64_t, size_t> cluster;
  const std::string none;

  void Add(QueueOrder& order, int64_t id, const std::string& user, int slots, double gpus = 0) {
    JobRequest r;
    r.id = id;
    r.user = user;
    r.slots = slots;
    r.gpus_per_slot = static_cast<int>(gpus);
    jobs[id] = r;
    pending.push_back(id);
    order.Added(r);
  }
  void Dispatch(QueueOrder& order, int64_t id) {
    pending.erase(std::find(pending.begin(), pending.end(), id));
    order.Dispatched(jobs.at(id));
  }
  OrderInputs Inputs() const {
    OrderInputs in;
    in.pending = &pending;
    in.used_by_user = &used;
    in.held_by_user = &held;
    in.request = [this](int64_t id) -> const JobRequest& { return jobs.at(id); };
    in.demand = [](const JobRequest& r) {
      DrfVector d;
      d.slots = r.slots;
      d.gpus = static_cast<double>(r.gpus_per_slot) * r.slots;
      return d;
    };
    in.group_of = [](const std::string& user) -> const std::string& { return user; };
    in.cluster_total = [] {
      DrfVector t;
      t.slots = 16;
      t.gpus = 4;
      return t;
    };
    in.cluster_of = [this](int64_t id) {
      auto it = cluster.find(id);
      return it == cluster.end() ? kNoCluster : it->second;
    };
    in.capacity_held = &capacity_held;
    return in;
  }
};

std::vector<int64_t> Drain(const QueueOrder& order, const Queued& q) {
  OrderInputs in = q.Inputs();
  auto seq = order.Start(in);
  std::vector<int64_t> out;
  for (int64_t id = 0; seq->Next(&id);) out.push_back(id);
  return out;
}

}  // namespace

TEST_CASE("each queue order through the one interface: FCFS, round robin that carries its turn, fair share, DRF and "
          "capacity",
          "[B5]") {
  SECTION("FCFS: oldest first") {
    auto order = MakeFcfsOrder();
    Queued q;
    for (int64_t id : {3, 1, 2}) q.Add(*order, id, "u", 1);
    CHECK(Drain(*order, q) == std::vector<int64_t>{3, 1, 2});
    CHECK(std::string(order->name()) == "fcfs");
  }
  SECTION("round robin: one job per user in turn, starting after the user dispatched last") {
    auto order = MakeRoundRobinOrder();
    Queued q;
    q.Add(*order, 1, "ann", 1);
    q.Add(*order, 2, "ann", 1);
    q.Add(*order, 3, "bob", 1);
    q.Add(*order, 4, "cat", 1);
    CHECK(Drain(*order, q) == std::vector<int64_t>{1, 3, 4, 2});
    q.Dispatch(*order, 1);  // ann's turn was taken: bob's next
    CHECK(Drain(*order, q) == std::vector<int64_t>{3, 4, 2});
    // Made anew (a reload), it goes on from the same turn.
    auto reloaded = MakeRoundRobinOrder();
    reloaded->Continue(*order);
    CHECK(Drain(*reloaded, q) == std::vector<int64_t>{3, 4, 2});
    auto fresh = MakeRoundRobinOrder();
    CHECK(Drain(*fresh, q) == std::vector<int64_t>{2, 3, 4});  // without it: ann first again
  }
  SECTION("fair share: the user furthest under its share first; a dispatched or removed job leaves the tree") {
    FairshareConfig config;
    config.tree = {{"ann", 1, {}}, {"bob", 1, {}}};
    auto tree = std::make_shared<FairshareTree>(config);
    auto order = MakeFairshareOrder(tree);
    Queued q;
    q.Add(*order, 1, "ann", 1);
    q.Add(*order, 2, "ann", 1);
    q.Add(*order, 3, "bob", 1);
    q.used["ann"] = 4;  // ann runs four slots now: bob is further under his share
    std::vector<int64_t> first = Drain(*order, q);
    REQUIRE(first.size() == 3);
    CHECK(first[0] == 3);
    CHECK(tree->pending() == 3);  // given, not placed: still pending
    {
      // As the scheduler does: the sequence is told what it gave was placed, and the
      // tree forgets it when the sequence ends.
      OrderInputs in = q.Inputs();
      auto seq = order->Start(in);
      int64_t id = 0;
      REQUIRE(seq->Next(&id));
      REQUIRE(id == 3);
      seq->Taken();
      CHECK(tree->pending() == 3);  // the tree does not change while the sequence is used
    }
    q.Dispatch(*order, 3);
    CHECK(tree->pending() == 2);
    order->Removed(q.jobs.at(2));
    q.pending.erase(std::find(q.pending.begin(), q.pending.end(), 2));
    CHECK(Drain(*order, q) == std::vector<int64_t>{1});
    CHECK(std::string(order->name()) == "fairshare");
  }
  SECTION("fair share: of one user's jobs given in a cycle, those placed leave the tree and those that did not fit "
          "stay in their order") {
    FairshareConfig config;
    config.tree = {{"ann", 1, {}}, {"bob", 1, {}}};
    auto tree = std::make_shared<FairshareTree>(config);
    auto order = MakeFairshareOrder(tree);
    Queued q;
    for (int64_t id = 1; id <= 5; ++id) q.Add(*order, id, "ann", 1);
    q.Add(*order, 6, "bob", 1);
    q.used["bob"] = 100;  // ann first, all five of hers
    {
      OrderInputs in = q.Inputs();
      auto seq = order->Start(in);
      std::vector<int64_t> given;
      for (int64_t id = 0; given.size() < 4 && seq->Next(&id);) {
        given.push_back(id);
        if (id != 2) seq->Taken();  // 2 did not fit; 5 was not reached
        if (id == 3) seq->Taken();  // told twice: still once
      }
      CHECK(given == std::vector<int64_t>{1, 2, 3, 4});
    }
    for (int64_t id : {1, 3, 4}) q.Dispatch(*order, id);
    CHECK(tree->pending() == 3);
    CHECK(Drain(*order, q) == std::vector<int64_t>{2, 5, 6});
    // A cancelled job still leaves it.
    order->Removed(q.jobs.at(5));
    q.pending.erase(std::find(q.pending.begin(), q.pending.end(), 5));
    CHECK(tree->pending() == 2);
    CHECK(Drain(*order, q) == std::vector<int64_t>{2, 6});
  }
  SECTION("DRF per job: the smallest dominant share first") {
    auto order = MakeDrfOrder(DrfBy::kJob);
    Queued q;
    q.Add(*order, 1, "ann", 2, 1);  // 2 of 16 slots, 2 of 4 GPUs: dominant 0.5
    q.Add(*order, 2, "bob", 4);     // 4 of 16 slots: 0.25
    CHECK(Drain(*order, q) == std::vector<int64_t>{2, 1});
  }
  SECTION("capacity: within a guarantee first, users in no cluster last") {
    CapacityConfig capacity;
    capacity.clusters = {{"ann", 2, 8}, {"bob", 2, 8}};
    auto order = MakeCapacityOrder(capacity, nullptr);
    Queued q;
    q.capacity_held = {4, 0};  // ann holds past her guarantee, bob holds nothing
    q.Add(*order, 1, "ann", 1);
    q.Add(*order, 2, "zed", 1);  // in no cluster
    q.Add(*order, 3, "bob", 1);
    q.cluster = {{1, 0}, {3, 1}};
    CHECK(Drain(*order, q) == std::vector<int64_t>{3, 1, 2});
  }
}

TEST_CASE("a reload of a round robin queue's configuration keeps whose turn it is", "[B5]") {
  QueueConfig config;
  config.name = "normal";
  config.user_round_robin = true;
  Scheduler s = testing::OneHost(1, config);
  using testing::MakeJob;
  REQUIRE(s.Submit(MakeJob(1, "ann", 1, "normal", "")).ok());
  REQUIRE(s.Submit(MakeJob(2, "ann", 1, "normal", "")).ok());
  REQUIRE(s.Submit(MakeJob(3, "bob", 1, "normal", "")).ok());
  auto first = s.Cycle();
  REQUIRE(first.size() == 1);
  CHECK(first[0].job_id == 1);  // ann's turn
  REQUIRE(s.UpdateQueue(config).ok());  // SIGHUP: the same queue read again
  REQUIRE(s.Release(1).ok());
  auto second = s.Cycle();
  REQUIRE(second.size() == 1);
  CHECK(second[0].job_id == 3);  // bob's turn, not ann's again
}
