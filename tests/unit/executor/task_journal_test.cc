// The agent's task journal (B6): what one agent records, the next one on the host reads.
#include "executor/agent/task_journal.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace jc::nexec {
namespace {

struct Dir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("jc-task-journal-" + std::to_string(getpid()));
  Dir() {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string journal() const { return (path / "tasks.journal").string(); }
  std::string legacy() const { return (path / "tasks").string(); }
};

TEST_CASE("task journal: a successor inherits every task that started and did not end, with its group [B6]") {
  Dir dir;
  {
    auto journal = TaskJournal::Open(dir.journal(), dir.legacy());
    REQUIRE(journal.ok());
    CHECK((*journal)->Inherited().empty());
    REQUIRE((*journal)->Starting("1.0.0").ok());
    REQUIRE((*journal)->Started("1.0.0", 4242, 777).ok());
    REQUIRE((*journal)->Starting("2.0.0").ok());  // the agent dies before its group is known
    REQUIRE((*journal)->Starting("3.0.0").ok());
    REQUIRE((*journal)->Started("3.0.0", 4343, 778).ok());
    REQUIRE((*journal)->Ended("3.0.0").ok());
  }
  auto next = TaskJournal::Open(dir.journal(), dir.legacy());
  REQUIRE(next.ok());
  const auto& inherited = (*next)->Inherited();
  REQUIRE(inherited.size() == 2);
  CHECK(inherited.at("1.0.0").pgid == 4242);
  CHECK(inherited.at("1.0.0").start_time == 777);
  CHECK(inherited.at("2.0.0").pgid == 0);
  // Until the successor marks them ended they stay: a second crash loses none.
  CHECK(TaskJournal::Read(dir.journal()).size() == 2);
  REQUIRE((*next)->Ended("1.0.0").ok());
  REQUIRE((*next)->Ended("2.0.0").ok());
  CHECK(TaskJournal::Read(dir.journal()).empty());
}

TEST_CASE("task journal: a task that ended but whose exit the master has not taken is a successor's to report, "
          "with its exit code, until it is taken (issue 47) [B6]") {
  Dir dir;
  {
    auto journal = TaskJournal::Open(dir.journal(), dir.legacy());
    REQUIRE(journal.ok());
    REQUIRE((*journal)->Starting("5.0.0").ok());
    REQUIRE((*journal)->Started("5.0.0", 4545, 779).ok());
    REQUIRE((*journal)->Starting("6.0.0").ok());
    REQUIRE((*journal)->Exited({{"5.0.0", 0}, {"6.0.0", 3}}).ok());
    REQUIRE((*journal)->Ended("6.0.0").ok());  // its exit was taken
  }
  auto next = TaskJournal::Open(dir.journal(), dir.legacy());
  REQUIRE(next.ok());
  const auto& inherited = (*next)->Inherited();
  REQUIRE(inherited.size() == 1);
  REQUIRE(inherited.at("5.0.0").exit_code.has_value());
  CHECK(*inherited.at("5.0.0").exit_code == 0);
  CHECK(inherited.at("5.0.0").pgid == 4545);
  // Rewritten at the start, it still says so; taken, it is gone.
  CHECK(TaskJournal::Read(dir.journal()).at("5.0.0").exit_code == 0);
  REQUIRE((*next)->Ended("5.0.0").ok());
  CHECK(TaskJournal::Read(dir.journal()).empty());
}

TEST_CASE("task journal: tasks ended together (one round's exits) are all ended for the successor, the others "
          "kept [B6]") {
  Dir dir;
  {
    auto journal = TaskJournal::Open(dir.journal(), dir.legacy());
    REQUIRE(journal.ok());
    for (const char* key : {"1.0.0", "2.0.0", "3.0.0", "4.0.0"}) REQUIRE((*journal)->Starting(key).ok());
    REQUIRE((*journal)->Ended(std::vector<std::string>{"1.0.0", "3.0.0", "4.0.0"}).ok());
    REQUIRE((*journal)->Ended(std::vector<std::string>{}).ok());  // a round without exits
  }
  auto next = TaskJournal::Open(dir.journal(), dir.legacy());
  REQUIRE(next.ok());
  REQUIRE((*next)->Inherited().size() == 1);
  CHECK((*next)->Inherited().count("2.0.0") == 1);
}

TEST_CASE("task journal: a launch batch's tasks are marked started in one line each, all inherited by a "
          "successor [B6]") {
  Dir dir;
  {
    auto journal = TaskJournal::Open(dir.journal(), dir.legacy());
    REQUIRE(journal.ok());
    REQUIRE((*journal)->Starting(std::vector<std::string>{"7.0.0", "8.0.0", "9.0.0"}).ok());
    REQUIRE((*journal)->Starting(std::vector<std::string>{}).ok());  // a batch whose launches were all refused
    REQUIRE((*journal)->Ended("8.0.0").ok());
  }
  std::ifstream in(dir.journal());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "S 7.0.0\nS 8.0.0\nS 9.0.0\nE 8.0.0\n");
  auto next = TaskJournal::Open(dir.journal(), dir.legacy());
  REQUIRE(next.ok());
  REQUIRE((*next)->Inherited().size() == 2);
  CHECK((*next)->Inherited().count("7.0.0") == 1);
  CHECK((*next)->Inherited().at("9.0.0").pgid == 0);
}

TEST_CASE("task journal: a line cut short by a crash is not acted on [B6]") {
  Dir dir;
  {
    std::ofstream out(dir.journal());
    out << "S 1.0.0\nP 1.0.0 100 5\nE 1.0";  // the agent died inside the last write
  }
  auto journal = TaskJournal::Open(dir.journal(), dir.legacy());
  REQUIRE(journal.ok());
  REQUIRE((*journal)->Inherited().size() == 1);
  CHECK((*journal)->Inherited().at("1.0.0").pgid == 100);
}

TEST_CASE("task journal: the files of an agent from before the journal are read, then removed [B6]") {
  Dir dir;
  std::filesystem::create_directories(dir.legacy());
  std::ofstream(dir.legacy() + "/7.1.0") << "0 0\n";
  std::ofstream(dir.legacy() + "/8.0.2") << "555 99\n";
  auto journal = TaskJournal::Open(dir.journal(), dir.legacy());
  REQUIRE(journal.ok());
  const auto& inherited = (*journal)->Inherited();
  REQUIRE(inherited.size() == 2);
  CHECK(inherited.at("7.1.0").pgid == 0);
  CHECK(inherited.at("8.0.2").pgid == 555);
  CHECK(inherited.at("8.0.2").start_time == 99);
  CHECK(std::filesystem::is_empty(dir.legacy()));
  CHECK(TaskJournal::Read(dir.journal()).size() == 2);  // now in the journal
}

TEST_CASE("task journal: ended tasks are compacted away and the live ones kept [B6]") {
  Dir dir;
  auto journal = TaskJournal::Open(dir.journal(), dir.legacy());
  REQUIRE(journal.ok());
  REQUIRE((*journal)->Starting("live.0.0").ok());
  REQUIRE((*journal)->Started("live.0.0", 31, 32).ok());
  for (int i = 0; i < 5000; ++i) {
    const std::string key = std::to_string(i) + ".0.0";
    REQUIRE((*journal)->Starting(key).ok());
    REQUIRE((*journal)->Started(key, 1000 + i, i).ok());
    REQUIRE((*journal)->Ended(key).ok());
  }
  const auto size = std::filesystem::file_size(dir.journal());
  CHECK(size < 5000 * 20);  // far less than the 15,000 lines written
  auto live = TaskJournal::Read(dir.journal());
  REQUIRE(live.size() == 1);
  CHECK(live.at("live.0.0").pgid == 31);
  REQUIRE((*journal)->Starting("after.0.0").ok());  // still appended to after a rewrite
  CHECK(TaskJournal::Read(dir.journal()).size() == 2);
}

}  // namespace
}  // namespace jc::nexec
