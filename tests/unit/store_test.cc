#include <catch2/catch.hpp>

#include <thread>

#include "common/store/group_commit.h"
#include "common/store/lease.h"
#include "common/store/schema.h"
#include "tests/testing/test_store.h"

using jc::store::Params;

TEST_CASE("the store migrates, inserts, queries and rolls back", "[C2][store]") {
  auto store = jc::testing::MakeTestStore();
  INFO("backend " << store->backend());
  CHECK(store->backend() == jc::testing::TestStoreBackend());

  auto version = jc::store::SchemaVersion(*store);
  REQUIRE(version.ok());
  CHECK(*version == jc::store::Migrations().back().version);
  // Migrating again is a no-op.
  REQUIRE(jc::store::Migrate(*store).ok());

  REQUIRE(store->Exec("INSERT INTO centers (id, region, status, doc) VALUES ($1, $2, $3, $4)",
                      {std::string("c1"), std::string("north"), int64_t{1}, std::string("{}")})
              .ok());
  auto dup = store->Exec("INSERT INTO centers (id, region, status, doc) VALUES ($1, $2, $3, $4)",
                         {std::string("c1"), std::string("x"), int64_t{1}, std::string("{}")});
  CHECK(absl::IsAlreadyExists(dup.status()));

  auto rows = store->Query("SELECT id, region, status FROM centers WHERE status = $1",
                           {int64_t{1}});
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 1);
  CHECK(*(*rows)[0][0] == "c1");
  CHECK(*(*rows)[0][2] == "1");

  {
    auto txn = store->Begin();
    REQUIRE(txn.ok());
    REQUIRE((*txn)->Exec("DELETE FROM centers").ok());
    // Dropped without Commit(): rolled back.
  }
  CHECK(store->Query("SELECT id FROM centers")->size() == 1);

  auto null_row = store->Query("SELECT NULL");
  REQUIRE(null_row.ok());
  CHECK_FALSE((*null_row)[0][0].has_value());
}

TEST_CASE("bad store URIs are refused with a clear message", "[C2][C5][store]") {
  auto bad = jc::store::OpenStore("mysql://nope");
  REQUIRE_FALSE(bad.ok());
  CHECK(absl::IsInvalidArgument(bad.status()));
  auto unreachable = jc::store::OpenStore("sqlite:///nonexistent-dir/x/y.db");
  CHECK_FALSE(unreachable.ok());
}

TEST_CASE("the embedded store keeps data across reopen", "[C2][store]") {
  std::string path = "/tmp/jc-store-test-" + std::to_string(::getpid()) + ".db";
  std::remove(path.c_str());
  {
    auto store = jc::store::OpenStore("sqlite://" + path);
    REQUIRE(store.ok());
    REQUIRE((*store)->Exec("INSERT INTO centers (id, region, status, doc) VALUES ($1,$2,$3,$4)",
                           {std::string("kept"), std::string(""), int64_t{2}, std::string("{}")})
                .ok());
  }
  auto reopened = jc::store::OpenStore("sqlite://" + path);
  REQUIRE(reopened.ok());
  CHECK((*reopened)->Query("SELECT id FROM centers")->size() == 1);
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

TEST_CASE("group-committed rows from many writers all land, and a duplicate fails only its own writer",
          "[C2][store]") {
  auto store = jc::testing::MakeTestStore();
  jc::store::GroupCommitter committer(store.get());
  constexpr int kWriters = 8, kRows = 40;
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kRows; ++i) {
        std::string id = "c" + std::to_string(w) + "-" + std::to_string(i);
        auto s = committer.Commit([&](jc::store::Transaction& txn) {
          return txn.InsertRow("INSERT INTO centers (id, region, status, doc)",
                               {id, std::string("r"), int64_t{1}, std::string("{}")});
        });
        if (!s.ok()) ++failures;
      }
    });
  }
  for (auto& t : writers) t.join();
  CHECK(failures == 0);
  CHECK(store->Query("SELECT id FROM centers")->size() == kWriters * kRows);

  // A duplicate among concurrent inserts: only its writer hears of it.
  std::vector<absl::Status> results(kWriters);
  writers.clear();
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::string id = w == 3 ? "c0-0" : "new-" + std::to_string(w);
      results[w] = committer.Commit([&](jc::store::Transaction& txn) {
        return txn.InsertRow("INSERT INTO centers (id, region, status, doc)",
                             {id, std::string("r"), int64_t{1}, std::string("{}")});
      });
    });
  }
  for (auto& t : writers) t.join();
  for (int w = 0; w < kWriters; ++w) {
    INFO("writer " << w << ": " << results[w].ToString());
    CHECK(absl::IsAlreadyExists(results[w]) == (w == 3));
  }
  CHECK(store->Query("SELECT id FROM centers")->size() == kWriters * kRows + kWriters - 1);
}

TEST_CASE("a VALUES list numbers its placeholders row after row", "[C2][store]") {
  CHECK(jc::store::ValuesList(1, 2) == "($1, $2)");
  CHECK(jc::store::ValuesList(2, 3) == "($1, $2, $3), ($4, $5, $6)");
}

TEST_CASE("a lease has one holder, and another takes it only once it expired or was released", "[A7][store]") {
  auto store = jc::testing::MakeTestStore();
  jc::store::Lease a(store.get(), "jobs", "host-a", absl::Seconds(10));
  jc::store::Lease b(store.get(), "jobs", "host-b", absl::Seconds(10));
  absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  REQUIRE(*a.TryAcquire(t0));
  CHECK_FALSE(*b.TryAcquire(t0 + absl::Seconds(1)));
  CHECK(a.Current()->first == "host-a");
  // Renewed by its holder, it lasts from the renewal.
  REQUIRE(*a.TryAcquire(t0 + absl::Seconds(8)));
  CHECK_FALSE(*b.TryAcquire(t0 + absl::Seconds(12)));
  // Not renewed, it expires and the other takes it; the first cannot renew any more.
  CHECK(*b.TryAcquire(t0 + absl::Seconds(19)));
  CHECK_FALSE(*a.TryAcquire(t0 + absl::Seconds(20)));
  CHECK(b.Current()->first == "host-b");
  // Released, it is free at once.
  REQUIRE(b.Release().ok());
  CHECK(a.Current()->first.empty());
  CHECK(*a.TryAcquire(t0 + absl::Seconds(21)));
  // A lease of another name is another lease.
  jc::store::Lease other(store.get(), "other", "host-b", absl::Seconds(10));
  CHECK(*other.TryAcquire(t0 + absl::Seconds(21)));
}
