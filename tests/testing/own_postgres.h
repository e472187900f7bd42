#pragma once

// A PostgreSQL of a test's own (scripts/pg.sh), so that stopping and restarting it in a
// fault test disturbs no other test. Header-only: the including test target defines
// JC_SOURCE_DIR.

#include <cstdio>
#include <cstdlib>
#include <string>

namespace jc::testing {

class OwnPostgres {
 public:
  // Starts it in `dir`; uri() is empty when it did not start.
  explicit OwnPostgres(std::string dir) : dir_(std::move(dir)) { uri_ = Output(Script("start")); }
  ~OwnPostgres() { (void)std::system(Script("stop").c_str()); }
  OwnPostgres(const OwnPostgres&) = delete;
  OwnPostgres& operator=(const OwnPostgres&) = delete;

  const std::string& uri() const { return uri_; }
  // `restart` (immediate), `kill` (down at once), `resume` (up again on its port).
  bool Run(const std::string& what) const { return std::system(Script(what).c_str()) == 0; }
  bool Restart() const { return Run("restart"); }

 private:
  std::string Script(const std::string& what) const {
    return std::string(JC_SOURCE_DIR) + "/scripts/pg.sh " + what + " " + dir_;
  }
  static std::string Output(const std::string& command) {
    std::string out;
    FILE* p = popen(command.c_str(), "r");
    if (p == nullptr) return out;
    char buf[512];
    while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
    if (pclose(p) != 0) return "";
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }
  std::string dir_;
  std::string uri_;
};

}  // namespace jc::testing
