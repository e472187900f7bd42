#include "services/scheduler/snapshot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/hash/hash.h"
#include "absl/strings/str_split.h"

namespace jc::scheduler {

TopologyPath TopologyPath::Parse(absl::string_view path) {
  TopologyPath t;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    t.parts.push_back(absl::HashOf(part));
  }
  return t;
}

double TopologyAffinity(const TopologyPath& a, const TopologyPath& b) {
  size_t depth = std::max(a.parts.size(), b.parts.size());
  if (a.parts.empty() || b.parts.empty()) return 0;
  size_t shared = 0;
  while (shared < a.parts.size() && shared < b.parts.size() && a.parts[shared] == b.parts[shared]) ++shared;
  return static_cast<double>(shared) / depth;
}

Resources& Resources::operator+=(const Resources& o) {
  cpu += o.cpu;
  gpu += o.gpu;
  npu += o.npu;
  mlu += o.mlu;
  memory_mb += o.memory_mb;
  storage_gb += o.storage_gb;
  return *this;
}

Resources& Resources::operator-=(const Resources& o) {
  cpu -= o.cpu;
  gpu -= o.gpu;
  npu -= o.npu;
  mlu -= o.mlu;
  memory_mb -= o.memory_mb;
  storage_gb -= o.storage_gb;
  return *this;
}

bool Resources::Covers(const Resources& need) const {
  return cpu >= need.cpu && gpu >= need.gpu && npu >= need.npu && mlu >= need.mlu &&
         memory_mb >= need.memory_mb && storage_gb >= need.storage_gb;
}

double Resources::CopiesOf(const Resources& unit) const {
  double copies = std::numeric_limits<double>::max();
  auto limit = [&](double have, double need) {
    if (need > 0) copies = std::min(copies, std::floor(std::max(0.0, have) / need));
  };
  limit(cpu, unit.cpu);
  limit(gpu, unit.gpu);
  limit(npu, unit.npu);
  limit(mlu, unit.mlu);
  limit(memory_mb, unit.memory_mb);
  limit(storage_gb, unit.storage_gb);
  return copies;
}

int Snapshot::Upsert(CenterView center) {
  center.topology_path = TopologyPath::Parse(center.topology);
  auto it = index_.find(center.id);
  if (it != index_.end()) {
    centers_[it->second] = std::move(center);
    return it->second;
  }
  int index = static_cast<int>(centers_.size());
  index_[center.id] = index;
  centers_.push_back(std::move(center));
  return index;
}

void Snapshot::Remove(absl::string_view id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  int index = it->second;
  index_.erase(it);
  // Keep indices dense: the last center takes the removed one's place.
  if (index != static_cast<int>(centers_.size()) - 1) {
    centers_[index] = std::move(centers_.back());
    index_[centers_[index].id] = index;
  }
  centers_.pop_back();
}

const CenterView* Snapshot::Find(absl::string_view id) const {
  int i = IndexOf(id);
  return i < 0 ? nullptr : &centers_[i];
}

CenterView* Snapshot::FindMutable(absl::string_view id) {
  int i = IndexOf(id);
  return i < 0 ? nullptr : &centers_[i];
}

int Snapshot::IndexOf(absl::string_view id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

void Snapshot::Reserve(int index, const Resources& quantity) {
  CenterView& c = centers_[index];
  c.free -= quantity;
  ++c.assumed_replicas;
}

void Snapshot::Release(int index, const Resources& quantity) {
  CenterView& c = centers_[index];
  c.free += quantity;
  c.assumed_replicas = std::max(0, c.assumed_replicas - 1);
}

double Snapshot::load_sum() const {
  double s = 0;
  for (const auto& c : centers_) s += c.JobLoad();
  return s;
}

double Snapshot::load_sum_squares() const {
  double s = 0;
  for (const auto& c : centers_) s += static_cast<double>(c.JobLoad()) * c.JobLoad();
  return s;
}

}  // namespace jc::scheduler
