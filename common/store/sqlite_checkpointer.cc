#include "common/store/sqlite_checkpointer.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"

namespace jc::store {

absl::StatusOr<std::unique_ptr<WalCheckpointer>> WalCheckpointer::Start(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  // A checkpoint syncs as its own connection's setting says: FULL, as the writer's, so a
  // WAL is reset only after the pages copied from it are on disk.
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
  // A first read, so that the connection has found the database in WAL mode and opened its
  // WAL before it is asked to checkpoint it.
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(absl::StrCat("cannot open a checkpointing connection to SQLite database \"",
                                                         path, "\": ", db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close_v2(db);
    return s;
  }
  std::unique_ptr<WalCheckpointer> c(new WalCheckpointer(db));
  c->thread_ = std::thread([p = c.get()] { p->Run(); });
  return c;
}

WalCheckpointer::WalCheckpointer(sqlite3* db) : db_(db) {}

WalCheckpointer::~WalCheckpointer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  sqlite3_close_v2(db_);
}

void WalCheckpointer::Attach(sqlite3* writer) { sqlite3_wal_hook(writer, &WalCheckpointer::OnCommit, this); }

int WalCheckpointer::OnCommit(void* self, sqlite3* writer, const char* schema, int frames) {
  auto* c = static_cast<WalCheckpointer*>(self);
  if (frames >= kInlineFrames) {
    // The thread fell far behind: as SQLite's own hook does, here and now.
    sqlite3_wal_checkpoint_v2(writer, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    c->inline_.fetch_add(1, std::memory_order_relaxed);
  } else if (frames >= kWakeFrames) {
    c->Wake();
  }
  return SQLITE_OK;
}

void WalCheckpointer::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (wanted_) return;
    wanted_ = true;
  }
  cv_.notify_one();
}

void WalCheckpointer::Run() {
  pthread_setname_np(pthread_self(), "jc-sqlite-ckpt");
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return wanted_ || stopping_; });
    if (stopping_) return;
    wanted_ = false;
    lock.unlock();
    // PASSIVE: copies what no reader still needs, never waits for a lock, and lets the
    // writer append meanwhile. One that could not finish (SQLITE_BUSY, or frames a reader
    // holds) is simply tried again at the next commit past kWakeFrames.
    if (sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr) == SQLITE_OK) {
      background_.fetch_add(1, std::memory_order_relaxed);
    }
    lock.lock();
  }
}

}  // namespace jc::store
