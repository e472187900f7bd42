// The agent's task table (executor/agent/task_book.h): launches repeated for a task that
// runs or ran are known, log reads find the last attempt, exits and notes stay until
// acknowledged, and the finished attempts kept are bounded.

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "executor/agent/task_book.h"

using namespace jc::nexec;

namespace {

TaskBook::Task TaskOf(int64_t job, int32_t index, int32_t attempt, const std::string& out) {
  TaskBook::Task t{job, index, attempt, out, out + ".err"};
  return t;
}

::nexec::v1::TaskReport ExitOf(int64_t job) {
  ::nexec::v1::TaskReport r;
  r.set_job_id(job);
  r.set_state(::nexec::v1::TASK_EXITED);
  return r;
}

}  // namespace

TEST_CASE("the task book knows running and finished attempts, keeps the last attempt's log, and holds exits and "
          "notes until acknowledged [B1]",
          "[B1]") {
  TaskBook book;
  CHECK_FALSE(book.Knows("1.0.0"));
  CHECK(book.LogOf(1, 0) == nullptr);
  book.Add("1.0.0", TaskOf(1, 0, 0, "a.out"));
  book.Add("1.0.1", TaskOf(1, 0, 1, "b.out"));
  CHECK(book.Knows("1.0.0"));
  CHECK(book.running().size() == 2);
  REQUIRE(book.LogOf(1, 0) != nullptr);
  CHECK(book.LogOf(1, 0)->stdout_path == "b.out");  // the last attempt

  book.Drop("1.0.1");  // never started: not known, its log stays
  CHECK_FALSE(book.Knows("1.0.1"));
  CHECK(book.LogOf(1, 0)->stdout_path == "b.out");

  book.AddExit(ExitOf(1));
  book.Finish("1.0.0");
  CHECK(book.running().empty());
  CHECK(book.Knows("1.0.0"));  // a repeated launch does not run it again

  book.Inherit("2.0.0", ExitOf(2));
  CHECK(book.Knows("2.0.0"));
  ::nexec::v1::TaskNote note;
  note.set_message("post-exec exited 1");
  book.AddNote(note);
  REQUIRE(book.exits().size() == 2);
  book.AddExit(ExitOf(3));  // after the heartbeat was sent: stays
  book.Acknowledge(2, 1);
  REQUIRE(book.exits().size() == 1);
  CHECK(book.exits()[0].job_id() == 3);
  CHECK(book.notes().empty());
}

TEST_CASE("the task book remembers the last 100,000 finished attempts [B1]", "[B1]") {
  TaskBook book;
  for (size_t i = 0; i <= TaskBook::kFinishedKept; ++i) {
    const std::string key = absl::StrCat(i, ".0.0");
    book.Add(key, TaskOf(static_cast<int64_t>(i), 0, 0, "out"));
    book.Finish(key);
  }
  CHECK_FALSE(book.Knows("0.0.0"));  // the oldest is forgotten
  CHECK(book.Knows("1.0.0"));
  CHECK(book.Knows(absl::StrCat(TaskBook::kFinishedKept, ".0.0")));
}

TEST_CASE("an agent moving to another master's store forgets the old store's attempts, exits, notes and logs: its "
          "job 1 is not the new store's [B6]",
          "[B6]") {
  TaskBook book;
  book.Add("1.0.0", TaskOf(1, 0, 0, "old.out"));
  book.AddExit(ExitOf(1));
  book.Finish("1.0.0");
  book.Inherit("2.0.0", ExitOf(2));
  ::nexec::v1::TaskNote note;
  note.set_message("GPU misuse");
  book.AddNote(note);
  book.ForgetStore();
  CHECK_FALSE(book.Knows("1.0.0"));  // the new store's job 1 runs
  CHECK_FALSE(book.Knows("2.0.0"));
  CHECK(book.exits().empty());       // never reported to the new store
  CHECK(book.notes().empty());
  CHECK(book.LogOf(1, 0) == nullptr);  // nor the old job's output read for the new one
}

TEST_CASE("a heartbeat's acknowledgement never reaches past what the book holds (a store change dropped its exits "
          "while it was under way: an attacker helper crashed a root agent so) [B6]",
          "[B6]") {
  TaskBook book;
  book.AddExit(ExitOf(1));
  book.ForgetStore();
  book.AddExit(ExitOf(2));
  book.Acknowledge(3, 2);
  CHECK(book.exits().empty());
  CHECK(book.notes().empty());
}
