#include "adapters/sdk/port_book.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace jc::adapter {

absl::StatusOr<std::vector<int>> PortBook::Hold(const std::string& holder, const std::vector<int>& wanted) {
  if (wanted.empty()) return std::vector<int>{};
  if (!offers()) {
    return absl::FailedPreconditionError("this center offers no ports to its replicas (its configuration has no ports:)");
  }
  std::set<int> taken;  // this call's own
  // A port the holder holds already is its own again: a replica asked for once more (its
  // record failed after the scheduler took it) gets the ports its process was given.
  std::vector<int> own;
  if (auto it = given_.find(holder); it != given_.end()) own = it->second;
  // Its named ports are its own already; the others are given from its own in order.
  for (int port : wanted) {
    if (port != 0) own.erase(std::remove(own.begin(), own.end(), port), own.end());
  }
  auto free = [&](int port) {
    auto it = held_.find(port);
    return (it == held_.end() || it->second == holder) && !taken.count(port);
  };
  std::vector<int> out;
  // Named ports first, so a free search never takes one the replica names.
  for (int port : wanted) {
    if (port == 0) continue;
    if (port < first_ || port > last_) {
      return absl::FailedPreconditionError(absl::StrCat("port ", port, " is outside this center's port range ", first_,
                                                        "-", last_));
    }
    if (!free(port)) {
      return absl::FailedPreconditionError(absl::StrCat("port ", port, " is held by another replica at this center"));
    }
    taken.insert(port);
  }
  const int size = last_ - first_ + 1;
  // std::hash differs between builds; the start must not (the same replica asked again
  // after an upgrade is given the same ports): FNV-1a over the name.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : holder) h = (h ^ c) * 1099511628211ull;
  int next = static_cast<int>(h % static_cast<uint64_t>(size));
  for (int port : wanted) {
    if (port != 0) {
      out.push_back(port);
      continue;
    }
    int found = 0;
    for (int mine : own) {  // its own first, in the order they were given
      if (found == 0 && !taken.count(mine)) found = mine;
    }
    for (int k = 0; k < size && found == 0; ++k) {
      const int candidate = first_ + (next + k) % size;
      if (free(candidate)) found = candidate;
    }
    if (found == 0) {
      return absl::FailedPreconditionError(absl::StrCat("every port of this center's range ", first_, "-", last_,
                                                        " is held by its replicas"));
    }
    taken.insert(found);
    out.push_back(found);
    next = found - first_ + 1;
  }
  for (int port : out) held_[port] = holder;
  given_[holder] = out;
  return out;
}

void PortBook::Restore(const std::string& holder, int port) {
  held_[port] = holder;
  given_[holder].push_back(port);
}

void PortBook::Release(const std::string& holder, const std::vector<int>& ports) {
  for (int port : ports) {
    if (auto it = held_.find(port); it != held_.end() && it->second == holder) held_.erase(it);
  }
  if (auto it = given_.find(holder); it != given_.end()) {
    auto& mine = it->second;
    for (int port : ports) mine.erase(std::remove(mine.begin(), mine.end(), port), mine.end());
    if (mine.empty()) given_.erase(it);
  }
}

}  // namespace jc::adapter
