// The embedded store's WAL checkpoints on a thread of its own (common/store/sqlite_checkpointer.h):
// commits no longer copy the WAL into the database file themselves, and the WAL stays bounded.
#include "common/store/sqlite_checkpointer.h"

#include <sqlite3.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "common/store/store.h"

namespace {

std::string FreshPath(const char* name) {
  std::string dir = "/tmp/jc-ckpt-test-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string path = dir + "/" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

uintmax_t SizeOf(const std::string& path) {
  std::error_code ec;
  uintmax_t n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

// One transaction writing `bytes` of payload (about bytes / 4096 pages of WAL).
void WriteBlob(sqlite3* db, int id, size_t bytes) {
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "INSERT INTO blobs (id, body) VALUES (?1, zeroblob(?2))", -1, &stmt, nullptr) ==
          SQLITE_OK);
  sqlite3_bind_int(stmt, 1, id);
  sqlite3_bind_int64(stmt, 2, static_cast<sqlite3_int64>(bytes));
  REQUIRE(sqlite3_step(stmt) == SQLITE_DONE);
  sqlite3_finalize(stmt);
}

}  // namespace

TEST_CASE("a commit that takes the WAL past 1,000 pages wakes the checkpointer's thread and returns without "
          "checkpointing itself",
          "[C2][store]") {
  const std::string path = FreshPath("direct.db");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                          nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB)", nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  {
    auto checkpointer = jc::store::WalCheckpointer::Start(path);
    REQUIRE(checkpointer.ok());
    (*checkpointer)->Attach(db);
    // 3,000 pages in 30 commits: three times past the wake mark, below the in-line one.
    for (int i = 0; i < 30; ++i) WriteBlob(db, i, 400 * 1024);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((*checkpointer)->background_checkpoints() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK((*checkpointer)->background_checkpoints() > 0);
    CHECK((*checkpointer)->inline_checkpoints() == 0);
    sqlite3_wal_hook(db, nullptr, nullptr);
  }
  // What was committed is all there, read through the database after the checkpoints.
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT count(*), sum(length(body)) FROM blobs", -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  CHECK(sqlite3_column_int(stmt, 0) == 30);
  CHECK(sqlite3_column_int64(stmt, 1) == int64_t{30} * 400 * 1024);
  sqlite3_finalize(stmt);
  sqlite3_close_v2(db);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST_CASE("the embedded store's WAL stays bounded while commits go on, and every row is there after a reopen",
          "[C2][store]") {
  const std::string path = FreshPath("store.db");
  constexpr int kRows = 200;
  constexpr size_t kRowBytes = 400 * 1024;  // 80 MB in all, five times the in-line mark
  uintmax_t largest_wal = 0;
  {
    auto store = jc::store::OpenStore("sqlite://" + path);
    REQUIRE(store.ok());
    const std::string doc(kRowBytes, 'x');
    for (int i = 0; i < kRows; ++i) {
      REQUIRE((*store)->Exec("INSERT INTO centers (id, region, status, doc) VALUES ($1, $2, $3, $4)",
                             {std::to_string(i), std::string("r"), int64_t{1}, doc})
                  .ok());
      largest_wal = std::max(largest_wal, SizeOf(path + "-wal"));
    }
  }
  INFO("largest WAL " << largest_wal << " bytes");
  // Written without a pause, the WAL starts again only from the writer's own checkpoint at
  // the in-line mark (4,000 pages of 4 KiB, each with its 24-byte frame header), which the
  // thread has mostly done already: never much past 16 MB, where nothing checkpointing
  // would have let it grow to all 80.
  CHECK(largest_wal < uintmax_t{24} * 1024 * 1024);
  auto reopened = jc::store::OpenStore("sqlite://" + path);
  REQUIRE(reopened.ok());
  auto rows = (*reopened)->Query("SELECT count(*), sum(length(doc)) FROM centers");
  REQUIRE(rows.ok());
  CHECK((*rows)[0][0].value_or("") == std::to_string(kRows));
  CHECK((*rows)[0][1].value_or("") == std::to_string(int64_t{kRows} * kRowBytes));
  reopened->reset();
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}
