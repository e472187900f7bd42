#pragma once

// The hosts a nexec master knows: each agent's last report, when it was heard, whether work
// goes there; and the agents that refuse this master (they serve another store's master),
// with why. The master's table of hosts as a unit of its own, so that what a new leader
// reloads and what a host check scans are this small piece (issue 47). Owned by the
// master's loop: not thread-safe. What a host's loss does to its jobs is the master's.

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

class HostBook {
 public:
  struct Host {
    ::nexec::v1::AgentInfo info;
    absl::Time last_seen;
    bool available = false;
  };
  struct Refusal {
    ::nexec::v1::AgentInfo info;
    std::string reason;
    absl::Time at;
  };

  Host* Find(const std::string& name);
  const Host* Find(const std::string& name) const;
  bool Knows(const std::string& name) const { return hosts_.count(name) > 0; }
  // Known and taking work.
  bool Available(const std::string& name) const;
  // Where its agent listens ("" for a host not known).
  std::string AddressOf(const std::string& name) const;
  // A host joined (or was read back from the store), heard from at `seen`, available.
  Host& Add(const ::nexec::v1::AgentInfo& info, absl::Time seen);
  // The available hosts not heard from for `timeout` at `now`, by name.
  std::vector<std::string> Silent(absl::Time now, absl::Duration timeout) const;
  size_t size() const { return hosts_.size(); }
  std::map<std::string, Host>& hosts() { return hosts_; }
  const std::map<std::string, Host>& hosts() const { return hosts_; }

  // The host's agent refuses this master, for `reason` (it said so at `now`): true when
  // that is news (a new refusal, or another reason), worth a line in the log.
  bool Refuse(const ::nexec::v1::AgentInfo& info, const std::string& reason, absl::Time now);
  // Its agent reports as this store's again.
  void Accepted(const std::string& name) { refusals_.erase(name); }
  // Refusals not heard again within `timeout` are forgotten (the agent went away, or
  // serves this master now).
  void ForgetRefusals(absl::Time now, absl::Duration timeout);
  const Refusal* RefusalOf(const std::string& name) const;
  const std::map<std::string, Refusal>& refusals() const { return refusals_; }

 private:
  std::map<std::string, Host> hosts_;
  std::map<std::string, Refusal> refusals_;
};

}  // namespace jc::nexec
