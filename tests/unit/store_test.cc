#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/store/group_commit.h"
#include "common/store/leadership.h"
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

TEST_CASE("migration 20 keys images by (project, id) and keeps every image (issue 44, hole 13)", "[C2][C6][store]") {
  auto store = jc::testing::MakeTestStore();
  INFO("backend " << store->backend());
  // The images table as version 19 had it, with a federation image and a project's.
  for (const char* sql : {"DROP TABLE images",
                          "CREATE TABLE images (id TEXT PRIMARY KEY, center_id TEXT NOT NULL, framework TEXT NOT NULL, "
                          "doc TEXT NOT NULL, project TEXT NOT NULL DEFAULT '')",
                          "CREATE INDEX images_center ON images (center_id)",
                          "CREATE INDEX images_project ON images (project)",
                          "INSERT INTO images (id, center_id, framework, doc) VALUES ('torch', 'c1', 'PyTorch', 'f')",
                          "INSERT INTO images (id, center_id, framework, doc, project) VALUES ('tf', 'c2', 'TF', 'a', "
                          "'alpha')",
                          "DROP INDEX datasets_name",  // migration 21's, run again below
                          "DROP TABLE job_durations",  // migration 22's, likewise
                          "DROP TABLE endpoint_passes",  // migration 23's, likewise
                          "ALTER TABLE leases DROP COLUMN term",  // migration 25's, likewise
                          "DROP INDEX jobs_created", "ALTER TABLE jobs DROP COLUMN created_us",  // 26's
                          "ALTER TABLE jobs DROP COLUMN centers", "DROP TABLE job_placements",
                          "ALTER TABLE spec_prices DROP COLUMN price_micros",  // 27's
                          "ALTER TABLE spec_centers DROP COLUMN price_micros", "DROP TABLE center_capacity",
                          "DROP TABLE adapter_forgotten", "ALTER TABLE adapter_replicas DROP COLUMN ended_us",  // 28's
                          "DELETE FROM schema_migrations WHERE version >= 20"}) {
    INFO(sql);
    REQUIRE(store->Exec(sql).ok());
  }
  REQUIRE(jc::store::Migrate(*store).ok());
  CHECK(*jc::store::SchemaVersion(*store) == jc::store::Migrations().back().version);
  auto rows = store->Query("SELECT project, id, center_id, framework, doc FROM images ORDER BY id");
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 2);
  CHECK(*(*rows)[0][0] == "alpha");
  CHECK(*(*rows)[0][1] == "tf");
  CHECK(*(*rows)[0][4] == "a");
  CHECK(*(*rows)[1][0] == "");
  CHECK(*(*rows)[1][1] == "torch");
  // The same id in another project is another image; twice in one project is refused.
  CHECK(store->Exec("INSERT INTO images (project, id, center_id, framework, doc) VALUES ('beta', 'tf', 'c1', '', '')")
            .ok());
  CHECK(store->Exec("INSERT INTO images (project, id, center_id, framework, doc) VALUES ('', 'tf', 'c1', '', '')")
            .ok());
  CHECK(absl::IsAlreadyExists(
      store->Exec("INSERT INTO images (project, id, center_id, framework, doc) VALUES ('beta', 'tf', 'c1', '', '')")
          .status()));
}

TEST_CASE("migration 21 keys a project's datasets by project, name and version, locations with them (issue 44)",
          "[C2][C6][store]") {
  auto store = jc::testing::MakeTestStore();
  INFO("backend " << store->backend());
  // Rows as version 20 had them: a federation dataset and a project's, each with a location.
  for (const char* sql :
       {"DELETE FROM datasets", "DELETE FROM dataset_locations", "DROP INDEX datasets_name", "DROP TABLE job_durations",
        "DROP TABLE endpoint_passes", "ALTER TABLE leases DROP COLUMN term", "DROP INDEX jobs_created",
        "ALTER TABLE jobs DROP COLUMN created_us", "ALTER TABLE jobs DROP COLUMN centers", "DROP TABLE job_placements",
        "ALTER TABLE spec_prices DROP COLUMN price_micros", "ALTER TABLE spec_centers DROP COLUMN price_micros",
        "DROP TABLE center_capacity", "DROP TABLE adapter_forgotten", "ALTER TABLE adapter_replicas DROP COLUMN ended_us",
        "INSERT INTO datasets (id, data_name, created_user, project, doc) VALUES ('corpus/v1', 'corpus', 'u', '', 'f')",
        "INSERT INTO datasets (id, data_name, created_user, project, doc) VALUES ('notes/v2', 'notes', 'u', 'alpha', "
        "'a')",
        "INSERT INTO dataset_locations (dataset_id, center_id) VALUES ('corpus/v1', 'c1')",
        "INSERT INTO dataset_locations (dataset_id, center_id) VALUES ('notes/v2', 'c2')",
        "DELETE FROM schema_migrations WHERE version >= 21"}) {
    INFO(sql);
    REQUIRE(store->Exec(sql).ok());
  }
  REQUIRE(jc::store::Migrate(*store).ok());
  CHECK(*jc::store::SchemaVersion(*store) == jc::store::Migrations().back().version);
  auto rows = store->Query("SELECT id, project, doc FROM datasets ORDER BY id");
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 2);
  CHECK(*(*rows)[0][0] == "alpha/notes/v2");
  CHECK(*(*rows)[0][2] == "a");
  CHECK(*(*rows)[1][0] == "corpus/v1");
  auto locations = store->Query("SELECT dataset_id, center_id FROM dataset_locations ORDER BY dataset_id");
  REQUIRE(locations.ok());
  REQUIRE(locations->size() == 2);
  CHECK(*(*locations)[0][0] == "alpha/notes/v2");
  CHECK(*(*locations)[0][1] == "c2");
  CHECK(*(*locations)[1][0] == "corpus/v1");
  // The same name and version in another project is another dataset.
  CHECK(store
            ->Exec("INSERT INTO datasets (id, data_name, created_user, project, doc) VALUES ('beta/notes/v2', "
                   "'notes', 'u', 'beta', '')")
            .ok());
  CHECK(store
            ->Exec("INSERT INTO datasets (id, data_name, created_user, project, doc) VALUES ('notes/v2', 'notes', "
                   "'u', '', '')")
            .ok());
}

TEST_CASE("migration 27 keeps every price, now in millionths, and starts the capacity history (issue 49)",
          "[A2][store]") {
  auto store = jc::testing::MakeTestStore();
  INFO("backend " << store->backend());
  // Prices as version 26 kept them: whole units, one of them past what 32 bits hold in
  // millionths (2148 x 10^6 > 2^31).
  for (const char* sql :
       {"ALTER TABLE spec_prices DROP COLUMN price_micros", "ALTER TABLE spec_centers DROP COLUMN price_micros",
        "DROP TABLE center_capacity", "DROP TABLE adapter_forgotten", "ALTER TABLE adapter_replicas DROP COLUMN ended_us",
        "INSERT INTO spec_prices (spec_id, center_id, effective_from, price) VALUES ('gpu1', '', 5, 12)",
        "INSERT INTO spec_prices (spec_id, center_id, effective_from, price) VALUES ('gpu1', 'c1', 9, 2148)",
        "INSERT INTO spec_centers (spec_id, center_id, price) VALUES ('gpu1', 'c1', 2148)",
        "INSERT INTO spec_centers (spec_id, center_id) VALUES ('gpu1', 'c2')",
        "DELETE FROM schema_migrations WHERE version >= 27"}) {
    INFO(sql);
    REQUIRE(store->Exec(sql).ok());
  }
  REQUIRE(jc::store::Migrate(*store).ok());
  auto prices = store->Query("SELECT center_id, price_micros FROM spec_prices ORDER BY center_id");
  REQUIRE(prices.ok());
  REQUIRE(prices->size() == 2);
  CHECK(*(*prices)[0][1] == "12000000");
  CHECK(*(*prices)[1][1] == "2148000000");
  auto offered = store->Query("SELECT center_id, price_micros FROM spec_centers ORDER BY center_id");
  REQUIRE(offered.ok());
  CHECK(*(*offered)[0][1] == "2148000000");
  CHECK_FALSE((*offered)[1][1].has_value());  // no price of its own: still none
  CHECK(store->Exec("INSERT INTO center_capacity (center_id, effective_us, cpu, gpu, memory_mb) VALUES ('c1', 1, 2, 0, 4)")
            .ok());
}

TEST_CASE("a statement's parameters of every kind arrive as given, each in its place: text, integers, fractions "
          "and NULL mixed",
          "[C2][store]") {
  auto store = jc::testing::MakeTestStore();
  INFO("backend " << store->backend());
  const std::string doc(3000, 'd');  // a document's size: sent from where it lies
  auto rows = store->Query(
      "SELECT CAST($1 AS TEXT), CAST($2 AS BIGINT), CAST($3 AS TEXT), CAST($4 AS TEXT), CAST($5 AS DOUBLE PRECISION), "
      "CAST($6 AS BIGINT), CAST($7 AS TEXT)",
      {std::string("first"), int64_t{-42}, nullptr, doc, 0.25, int64_t{9'000'000'000}, std::string("")});
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 1);
  const auto& row = (*rows)[0];
  REQUIRE(row.size() == 7);
  CHECK(row[0] == std::optional<std::string>("first"));
  CHECK(row[1] == std::optional<std::string>("-42"));
  CHECK_FALSE(row[2].has_value());
  CHECK(row[3] == std::optional<std::string>(doc));
  CHECK(row[4] == std::optional<std::string>("0.25"));
  CHECK(row[5] == std::optional<std::string>("9000000000"));
  CHECK(row[6] == std::optional<std::string>(""));
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

TEST_CASE("a group commit's rows for several tables all land, and a writer whose row in its last table is a duplicate "
          "fails alone with none of its rows written",
          "[C2][store]") {
  // On PostgreSQL the batch's INSERTs into three tables go out as one statement (WITH ...
  // INSERT); on SQLite one a table. Either way: every row, or none of a writer's.
  auto store = jc::testing::MakeTestStore();
  jc::store::GroupCommitter committer(store.get());
  constexpr int kWriters = 8, kRounds = 20;
  auto write = [&](const std::string& id, int64_t revision) {
    return committer.Commit([&](jc::store::Transaction& txn) -> absl::Status {
      JC_RETURN_IF_ERROR(txn.InsertRow("INSERT INTO centers (id, region, status, doc)",
                                       {id, std::string("r"), int64_t{1}, std::string("{}")}));
      JC_RETURN_IF_ERROR(txn.InsertRow("INSERT INTO leases (name, holder, expires_at)", {id, std::string("h"), revision}));
      return txn.InsertRow("INSERT INTO job_events (revision, job_id, doc)", {revision, id, std::string("{\"x\":1}")});
    });
  };
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kRounds; ++i) {
        if (!write("t" + std::to_string(w) + "-" + std::to_string(i), 1 + w * kRounds + i).ok()) ++failures;
      }
    });
  }
  for (auto& t : writers) t.join();
  CHECK(failures == 0);
  for (const char* table : {"centers", "leases", "job_events"}) {
    INFO(table);
    CHECK(store->Query(absl::StrCat("SELECT 1 FROM ", table))->size() == kWriters * kRounds);
  }
  CHECK((*store->Query("SELECT job_id FROM job_events WHERE revision = 27"))[0][0] == "t1-6");

  // Writer 5 reuses an event's revision: it fails, alone, and leaves no center or lease row.
  std::vector<absl::Status> results(kWriters);
  writers.clear();
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] { results[w] = write("late-" + std::to_string(w), w == 5 ? 27 : 1000 + w); });
  }
  for (auto& t : writers) t.join();
  for (int w = 0; w < kWriters; ++w) {
    INFO("writer " << w << ": " << results[w].ToString());
    CHECK(absl::IsAlreadyExists(results[w]) == (w == 5));
  }
  CHECK(store->Query("SELECT 1 FROM centers WHERE id = 'late-5'")->empty());
  CHECK(store->Query("SELECT 1 FROM leases WHERE name = 'late-5'")->empty());
  CHECK(store->Query("SELECT 1 FROM centers WHERE id LIKE 'late-%'")->size() == kWriters - 1);
  CHECK(store->Query("SELECT 1 FROM job_events WHERE revision >= 1000")->size() == kWriters - 1);
}

TEST_CASE("a transaction's last statement goes with its commit: all of it or none of it, with the statements before "
          "it and the request's audit row",
          "[C2][store]") {
  // On PostgreSQL a transaction that sent nothing yet sends its last statement alone, as a
  // transaction of its own (one round trip, no BEGIN or COMMIT): it must stay atomic.
  auto store = jc::testing::MakeTestStore();
  const std::string insert = "INSERT INTO centers (id, region, status, doc) VALUES ($1, 'r', 1, '{}')";
  const std::string insert_two = "INSERT INTO centers (id, region, status, doc) VALUES ($1, 'r', 1, '{}'), ($2, 'r', 1, '{}')";
  auto has = [&](const std::string& id) {
    return store->Query("SELECT 1 FROM centers WHERE id = $1", {id})->size() == 1;
  };
  REQUIRE(store->Exec(insert, {std::string("c1")}).ok());

  {  // Alone, two rows, the second a duplicate: neither lands.
    auto txn = store->Begin();
    REQUIRE(txn.ok());
    CHECK(absl::IsAlreadyExists((*txn)->ExecAndCommit(insert_two, {std::string("c2"), std::string("c1")})));
  }
  CHECK_FALSE(has("c2"));
  {  // Alone and good: it lands, and the transaction is over.
    auto txn = store->Begin();
    REQUIRE((*txn)->ExecAndCommit(insert_two, {std::string("c2"), std::string("c3")}).ok());
    CHECK(has("c2"));
    CHECK(has("c3"));
    CHECK(absl::IsFailedPrecondition((*txn)->Commit()));
    CHECK(absl::IsFailedPrecondition((*txn)->Exec(insert, {std::string("c9")}).status()));
  }
  CHECK_FALSE(has("c9"));
  {  // After a statement: a failing last one takes it back with it.
    auto txn = store->Begin();
    REQUIRE((*txn)->Exec("DELETE FROM centers WHERE id = $1", {std::string("c1")}).ok());
    CHECK(absl::IsAlreadyExists((*txn)->ExecAndCommit(insert, {std::string("c2")})));
  }
  CHECK(has("c1"));
  {  // After a statement, both land.
    auto txn = store->Begin();
    REQUIRE((*txn)->Exec("DELETE FROM centers WHERE id = $1", {std::string("c1")}).ok());
    REQUIRE((*txn)->ExecAndCommit(insert, {std::string("c4")}).ok());
  }
  CHECK_FALSE(has("c1"));
  CHECK(has("c4"));

  // The request's audit row (a rider) is written with the statement, or not at all.
  auto rider = [](const std::string& name) {
    return jc::store::RiderRow{"INSERT INTO leases (name, holder, expires_at)",
                               [name] { return Params{name, std::string("h"), int64_t{1}}; }};
  };
  jc::store::RiderRow kept = rider("kept");
  {
    jc::store::RiderScope scope(&kept);
    auto txn = store->Begin();
    REQUIRE((*txn)->ExecAndCommit(insert, {std::string("c5")}).ok());
  }
  CHECK(kept.committed);
  CHECK(store->Query("SELECT 1 FROM leases WHERE name = 'kept'")->size() == 1);
  jc::store::RiderRow dropped = rider("dropped");
  {
    jc::store::RiderScope scope(&dropped);
    auto txn = store->Begin();
    CHECK(absl::IsAlreadyExists((*txn)->ExecAndCommit(insert, {std::string("c5")})));
  }
  CHECK_FALSE(dropped.committed);
  CHECK(store->Query("SELECT 1 FROM leases WHERE name = 'dropped'")->empty());

  {  // A transaction that sent nothing commits nothing, without error.
    auto txn = store->Begin();
    CHECK((*txn)->Commit().ok());
  }
  CHECK(store->Query("SELECT 1 FROM centers")->size() == 4);  // c2, c3, c4, c5
}

TEST_CASE("a group commit's epilogue sees each committed transaction's writes, in commit order, and never a failed "
          "one's (the adapter publishes its events so)",
          "[C2][store]") {
  auto store = jc::testing::MakeTestStore();
  jc::store::GroupCommitter committer(store.get());
  std::vector<std::string> gathered, published;  // the committing thread's alone
  committer.SetPrologue([&](jc::store::Transaction&) {
    gathered.clear();
    return absl::OkStatus();
  });
  committer.SetEpilogue([&] { published.insert(published.end(), gathered.begin(), gathered.end()); });
  auto insert = [&](const std::string& id) {
    return committer.Commit([&, id](jc::store::Transaction& txn) {
      gathered.push_back(id);
      return txn.InsertRow("INSERT INTO centers (id, region, status, doc)",
                           {id, std::string("r"), int64_t{1}, std::string("{}")});
    });
  };
  constexpr int kWriters = 8;
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) writers.emplace_back([&, w] { REQUIRE(insert("e" + std::to_string(w)).ok()); });
  for (auto& t : writers) t.join();
  CHECK(published.size() == kWriters);
  CHECK(store->Query("SELECT id FROM centers")->size() == kWriters);
  // A write that fails (a duplicate) publishes nothing; the next one publishes its own only.
  CHECK(absl::IsAlreadyExists(insert("e0")));
  CHECK(published.size() == kWriters);
  REQUIRE(insert("after").ok());
  CHECK(published.back() == "after");
  CHECK(published.size() == kWriters + 1);
}

namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

// Whether the unprivileged account `nobody` can open `path` for reading (run as root).
bool NobodyCanRead(const std::string& path) {
  pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    int fd = open(path.c_str(), O_RDONLY);
    _exit(fd >= 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("the embedded store's files are readable by their owner only, also ones an older build left open",
          "[C6][store]") {
  // The store holds token hashes, audit records and every job's command and environment.
  std::string dir = "/tmp/jc-store-mode-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::all);  // a directory anyone may enter
  std::string path = dir + "/jointcloud.db";
  {
    auto store = jc::store::OpenStore("sqlite://" + path);
    REQUIRE(store.ok());
    REQUIRE((*store)->Exec("INSERT INTO centers (id, region, status, doc) VALUES ($1,$2,$3,$4)",
                           {std::string("secret"), std::string(""), int64_t{2}, std::string("{}")})
                .ok());
    for (const char* suffix : {"", "-wal", "-shm"}) {
      INFO(path << suffix);
      CHECK(ModeOf(path + suffix) == 0600);
    }
    if (geteuid() == 0) CHECK_FALSE(NobodyCanRead(path));
  }
  // A database an older build created with the umask's 0644 is narrowed when opened.
  std::string old_path = dir + "/old.db";
  std::ofstream(old_path).close();
  std::filesystem::permissions(old_path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                             std::filesystem::perms::group_read |
                                             std::filesystem::perms::others_read);
  if (geteuid() == 0) REQUIRE(NobodyCanRead(old_path));
  {
    auto store = jc::store::OpenStore("sqlite://" + old_path);
    REQUIRE(store.ok());
  }
  CHECK(ModeOf(old_path) == 0600);
  if (geteuid() == 0) CHECK_FALSE(NobodyCanRead(old_path));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a VALUES list numbers its placeholders row after row", "[C2][store]") {
  CHECK(jc::store::ValuesList(1, 2) == "($1, $2)");
  CHECK(jc::store::ValuesList(2, 3) == "($1, $2, $3), ($4, $5, $6)");
  // The next table's rows in the same statement go on from where the last one stopped.
  CHECK(jc::store::ValuesList(2, 2, 7) == "($7, $8), ($9, $10)");
  CHECK(jc::store::ValuesList(1, 3, 98) == "($98, $99, $100)");
  CHECK(jc::store::ValuesList(0, 3).empty());
  // A thousand rows of three, as the placement journal's statements: every number once, in order.
  const std::string many = jc::store::ValuesList(1000, 3);
  CHECK(many.substr(0, 16) == "($1, $2, $3), ($");
  CHECK(many.substr(many.size() - 21) == "($2998, $2999, $3000)");
  CHECK(std::count(many.begin(), many.end(), '$') == 3000);
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

TEST_CASE("a lease's term goes up each time it changes hands, is taken again after it ended, or a new holding "
          "begins under the same name, and stays while its holder renews it (issue 47)",
          "[B11][store]") {
  auto store = jc::testing::MakeTestStore();
  jc::store::Lease a(store.get(), "nexec_master", "m1:6800", absl::Seconds(10));
  jc::store::Lease b(store.get(), "nexec_master", "m2:6800", absl::Seconds(10));
  absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  CHECK(*a.CurrentTerm() == 0);
  REQUIRE(*a.TryAcquire(t0, /*new_term=*/true));
  CHECK(a.term() == 1);
  REQUIRE(*a.TryAcquire(t0 + absl::Seconds(2)));  // renewed: the same term
  CHECK(a.term() == 1);
  CHECK_FALSE(*b.TryAcquire(t0 + absl::Seconds(3), true));
  CHECK(*b.CurrentTerm() == 1);
  REQUIRE(*b.TryAcquire(t0 + absl::Seconds(13), true));  // a's hold ended: b's term
  CHECK(b.term() == 2);
  // m2 restarted before its hold ended takes it at once, in a new term: its predecessor's
  // calls are of an older one.
  jc::store::Lease b_again(store.get(), "nexec_master", "m2:6800", absl::Seconds(10));
  REQUIRE(*b_again.TryAcquire(t0 + absl::Seconds(14), true));
  CHECK(b_again.term() == 3);
  // Renewals by the old holding see the term moved on.
  REQUIRE(*b.TryAcquire(t0 + absl::Seconds(15)));
  CHECK(b.term() == 3);
  // Given up (a clean stop), the lease keeps its term: the next holder's is later, never
  // back at 1 below what agents have seen (attacker helper-40: a rolling restart did that).
  REQUIRE(b_again.Release().ok());
  CHECK(a.Current()->first.empty());
  REQUIRE(*a.TryAcquire(t0 + absl::Seconds(16), true));
  CHECK(a.term() == 4);
}

TEST_CASE("leadership: a leader whose lease was taken anew, in a new term, is told to stop acting, and a standby "
          "says who holds it (issue 47)",
          "[B11][store]") {
  auto store = jc::testing::MakeTestStore();
  jc::store::Leadership first(store.get(), "nexec_master", "m1:6800", absl::Seconds(8), absl::Seconds(6));
  std::string why;
  REQUIRE(first.Take(absl::Now(), &why));
  CHECK(first.term() == 1);
  CHECK(first.Keep(absl::Now() + absl::Seconds(3)).ok());
  // The same name taking it anew (a restarted process): the old holding stops.
  jc::store::Leadership again(store.get(), "nexec_master", "m1:6800", absl::Seconds(8), absl::Seconds(6));
  REQUIRE(again.Take(absl::Now() + absl::Seconds(4), &why));
  CHECK(again.term() == 2);
  absl::Status kept = first.Keep(absl::Now() + absl::Seconds(6));
  CHECK(absl::IsUnavailable(kept));
  CHECK(std::string(kept.message()).find("new term") != std::string::npos);
  jc::store::Leadership other(store.get(), "nexec_master", "m2:6800", absl::Seconds(8), absl::Seconds(6));
  CHECK_FALSE(other.Take(absl::Now() + absl::Seconds(5), &why));
  CHECK(why.find("m1:6800 holds the nexec_master lease") != std::string::npos);
}
