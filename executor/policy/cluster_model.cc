#include "executor/policy/cluster_model.h"

namespace jc::nexec {

int ClusterModel::Job::Slots() const {
  int n = 0;
  for (const auto& section : placement.sections) {
    for (const HostAllocation& a : section) n += a.slots;
  }
  return n;
}

void ClusterModel::IndexHost(size_t index, bool insert) {
  const Host& h = hosts[index];
  HostKey pack{h.free_slots(), -h.cpu_factor, index};
  HostKey spread{-h.free_slots(), -h.cpu_factor, index};
  if (insert) {
    pack_index.insert(pack);
    spread_index.insert(spread);
  } else {
    pack_index.erase(pack);
    spread_index.erase(spread);
  }
}

const ClusterModel::Host* ClusterModel::FindHost(const std::string& name) const {
  auto it = host_index.find(name);
  return it == host_index.end() ? nullptr : &hosts[it->second];
}

}  // namespace jc::nexec
