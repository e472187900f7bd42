#pragma once

// Which ports of a center's range its replicas hold (SPEC A17). Replicas share their hosts'
// network namespace, and a center's scheduler may run any replica on any host, so a port is
// held center-wide: no two replicas of the center are given the same one, whichever hosts
// they run on. Not thread-safe: the adapter core uses it under its own lock.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::adapter {

class PortBook {
 public:
  // [first, last]; 0 and 0: the center offers no ports.
  PortBook(int first, int last) : first_(first), last_(last) {}

  bool offers() const { return first_ > 0; }

  // Holds a port for each of `wanted` for replica `holder`: the one it names (non-zero; in
  // the range and free), else a free one. Free ones are searched from a start derived from
  // the holder's name, so that a replica asked for again with the same ports held (an
  // adapter that crashed between the scheduler's accept and its record) is given the same;
  // ports the holder holds already (a repeat after a record that failed) are its own again.
  // Nothing is held on error: FailedPrecondition naming the port or the range.
  absl::StatusOr<std::vector<int>> Hold(const std::string& holder, const std::vector<int>& wanted);
  // Marks `port` held by `holder` (a replica restored from the adapter's store).
  void Restore(const std::string& holder, int port);
  // Frees the ports `holder` holds of `ports` (another's are left alone).
  void Release(const std::string& holder, const std::vector<int>& ports);
  size_t held() const { return held_.size(); }

 private:
  int first_, last_;
  std::map<int, std::string> held_;                 // port -> the replica holding it
  std::map<std::string, std::vector<int>> given_;   // replica -> its ports, in the order given
};

}  // namespace jc::adapter
