// The placement journal (issue 49 item 4): every explanation kept in the store, bounded per
// job and in rows, read back as kept; a store that does not take a flush loses nothing that
// fits the bound.

#include <catch2/catch.hpp>

#include "services/scheduler/placement_journal.h"
#include "services/scheduler/scoring/builtin_scorers.h"
#include "tests/testing/test_store.h"

namespace jc::scheduler {
namespace {

namespace v1 = jointcloud::v1;

// A placement of `replicas` replicas over `feasible` scored centers (totals 0, 1, 2, ...)
// and `filtered` filtered ones, each with a long reason; the chosen center is "c0", the
// lowest total (the profile's pick need not be the best total).
v1::Placement Made(int replicas, int feasible, int filtered) {
  v1::Placement p;
  p.set_job_id("job-1");
  p.set_placed(true);
  for (int r = 0; r < replicas; ++r) {
    auto* rep = p.add_replicas();
    rep->set_replica_index(r);
    rep->set_center_id("c0");
    for (int i = 0; i < feasible; ++i) {
      auto* c = rep->add_centers();
      c->set_center_id("c" + std::to_string(i));
      c->set_feasible(true);
      c->set_total(i);
    }
    for (int i = 0; i < filtered; ++i) {
      auto* c = rep->add_centers();
      c->set_center_id("f" + std::to_string(i));
      c->set_filtered_by("free_capacity");
      c->set_reason(std::string(1000, 'x') + "é");
    }
  }
  return p;
}

TEST_CASE("a kept placement holds per replica the chosen center, the best scored and the first filtered ones, its "
          "reasons cut, and counts what it left out [A16]",
          "[A16]") {
  PlacementJournalOptions o;
  v1::Placement p = Made(20, 30, 40);
  PlacementJournal::Trim(o, &p);
  CHECK(p.replicas_size() == 16);
  CHECK(p.replicas_left_out() == 4);
  const auto& r = p.replicas(0);
  std::vector<std::string> kept;
  for (const auto& c : r.centers()) kept.push_back(c.center_id());
  // c0 (chosen), the five best totals (c25..c29), then the first 8 filtered.
  REQUIRE(kept.size() == 14);
  CHECK(kept[0] == "c0");
  CHECK(kept[1] == "c25");
  CHECK(kept[5] == "c29");
  CHECK(kept[6] == "f0");
  CHECK(kept[13] == "f7");
  CHECK(r.centers_left_out() == (30 + 40) - 14);
  CHECK(r.centers(6).reason().size() <= o.max_reason_bytes + 3);
  CHECK(p.ByteSizeLong() < 64 * 1024);
  // A placement within the bounds is kept whole.
  v1::Placement small = Made(2, 3, 2);
  v1::Placement before = small;
  small.mutable_replicas(0)->mutable_centers(3)->set_reason("short");
  before.mutable_replicas(0)->mutable_centers(3)->set_reason("short");
  for (auto* p2 : {&small, &before}) {
    for (auto& rep : *p2->mutable_replicas()) {
      for (auto& c : *rep.mutable_centers()) c.set_reason("short");
    }
  }
  PlacementJournal::Trim(o, &small);
  CHECK(small.replicas_size() == 2);
  CHECK(small.replicas(0).centers_size() == 5);
  CHECK(small.replicas(0).centers_left_out() == 0);
}

TEST_CASE("the journal writes every placement it is given, reads each back from the store as kept, and prunes to "
          "the newest jobs [A16][C2]",
          "[A16][C2]") {
  auto store = jc::testing::MakeTestStore();
  INFO("backend " << store->backend());
  ScorerRegistry scorers;
  RegisterBuiltinScorers(scorers);
  PlacementJournalOptions o;
  o.keep_jobs = 30;
  PlacementJournal journal(store.get(), &scorers, o);
  CHECK(absl::IsNotFound(journal.Read("job-7").status()));
  const absl::Time t0 = absl::FromUnixSeconds(1800000000);
  for (int i = 0; i < 40; ++i) {
    auto record = std::make_shared<PlacementRecord>();
    record->job_id = "job-" + std::to_string(i);
    record->placed = true;
    record->reason = "placed " + std::to_string(i);
    journal.Add(record, t0 + absl::Seconds(i));
    if (i % 10 == 9) REQUIRE(journal.Flush().ok());
  }
  auto kept = journal.Read("job-39");
  REQUIRE(kept.ok());
  CHECK(kept->from_history());
  CHECK(kept->job_id() == "job-39");
  CHECK(kept->reason() == "placed 39");
  CHECK(kept->decided_at().seconds() == 1800000039);
  // Pruned (a tenth of the bound written since the last prune): the oldest jobs' went.
  CHECK(absl::IsNotFound(journal.Read("job-0").status()));
  auto rows = store->Query("SELECT COUNT(*) FROM job_placements");
  REQUIRE(rows.ok());
  CHECK(std::stoi(*(*rows)[0][0]) <= 30);
  // A job placed again: its newer explanation replaces the older.
  auto again = std::make_shared<PlacementRecord>();
  again->job_id = "job-39";
  again->reason = "again";
  journal.Add(again, t0 + absl::Seconds(100));
  REQUIRE(journal.Flush().ok());
  CHECK(journal.Read("job-39")->reason() == "again");
  // The store refuses a flush (its table gone): what was queued waits for the next one.
  REQUIRE(store->Exec("ALTER TABLE job_placements RENAME TO job_placements_away").ok());
  auto late = std::make_shared<PlacementRecord>();
  late->job_id = "job-late";
  journal.Add(late, t0 + absl::Seconds(200));
  CHECK_FALSE(journal.Flush().ok());
  REQUIRE(store->Exec("ALTER TABLE job_placements_away RENAME TO job_placements").ok());
  REQUIRE(journal.Flush().ok());
  CHECK(journal.Read("job-late").ok());
}

}  // namespace
}  // namespace jc::scheduler
