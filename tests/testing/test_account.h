#pragma once

// An unprivileged OS account for one test, created and removed after it (useradd/userdel:
// the test must run as root, as CI does). Its name is `prefix`-<pid>, so that tests running
// at the same time never share (and remove) one account.

#include <pwd.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace jc::testing {

class TestAccount {
 public:
  explicit TestAccount(const std::string& prefix) : name(prefix + "-" + std::to_string(getpid())) {
    if (getpwnam(name.c_str()) == nullptr) {
      // useradd fails while another holds /etc/passwd's lock: try again for a while.
      bool added = false;
      for (int attempt = 0; attempt < 50 && !added; ++attempt) {
        added = std::system(("useradd --system --no-create-home --shell /usr/sbin/nologin " + name +
                             " 2>/dev/null").c_str()) == 0;
        if (!added) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      REQUIRE(added);
      created_ = true;
    }
    passwd* pw = getpwnam(name.c_str());
    REQUIRE(pw != nullptr);
    uid = pw->pw_uid;
    gid = pw->pw_gid;
  }
  ~TestAccount() {
    for (int attempt = 0; created_ && attempt < 50; ++attempt) {
      if (std::system(("userdel " + name + " 2>/dev/null").c_str()) == 0) break;
      // userdel refuses while a process of the account's runs (a job step the test's Slurm
      // had not ended yet: 30 jc-slurm-img-* accounts were left behind on one machine).
      if (attempt >= 10) (void)std::system(("pkill -KILL -u " + name + " 2>/dev/null").c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  TestAccount(const TestAccount&) = delete;
  TestAccount& operator=(const TestAccount&) = delete;

  const std::string name;
  uid_t uid = 0;
  gid_t gid = 0;

 private:
  bool created_ = false;
};

}  // namespace jc::testing
