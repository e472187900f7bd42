#include "services/scheduler/snapshot.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "absl/hash/hash.h"
#include "absl/strings/str_split.h"

namespace jc::scheduler {

uint64_t SnapshotStamp::Next() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

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
  indexed_ = false;
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
  indexed_ = false;
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
  if (i < 0) return nullptr;
  indexed_ = false;
  return &centers_[i];
}

void Snapshot::Reindex() {
  offering_.clear();
  gates_ = nullptr;
  gates_ = gates();
  load_sum_ = 0;
  load_sum_squares_ = 0;
  for (size_t i = 0; i < centers_.size(); ++i) {
    for (const auto& [spec, offer] : centers_[i].specs) offering_[spec].push_back(static_cast<int>(i));
    const int64_t load = centers_[i].JobLoad();
    load_sum_ += load;
    load_sum_squares_ += static_cast<__int128>(load * load);
  }
  indexed_ = true;
}

const std::vector<int>* Snapshot::CentersOffering(const CenterView::Key& spec) const {
  static const std::vector<int> kNone;
  if (!indexed_) return nullptr;
  auto it = offering_.find(*spec.key, spec.hash);
  return it == offering_.end() ? &kNone : &it->second;
}

std::shared_ptr<const std::vector<CenterGate>> Snapshot::gates() const {
  if (indexed_ && gates_ != nullptr) return gates_;
  auto gates = std::make_shared<std::vector<CenterGate>>();
  gates->reserve(centers_.size());
  for (const CenterView& c : centers_) {
    gates->push_back({c.id, c.available, c.security_grade, c.runs_any_project, c.run_as_projects, c.run_as_users});
  }
  return gates;
}

void Snapshot::LoadChanged(int before, int after) {
  if (!indexed_) return;
  // Loads are integers, summed exactly (a double drifts once a sum of squares passes
  // 2^53): the kept sums are what a fresh sum gives, however large.
  load_sum_ += static_cast<int64_t>(after) - before;
  load_sum_squares_ += static_cast<__int128>(static_cast<int64_t>(after) * after) -
                       static_cast<__int128>(static_cast<int64_t>(before) * before);
}

int Snapshot::IndexOf(absl::string_view id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

void Snapshot::Reserve(int index, const Resources& quantity) {
  CenterView& c = centers_[index];
  const int before = c.JobLoad();
  c.free -= quantity;
  ++c.assumed_replicas;
  LoadChanged(before, c.JobLoad());
}

void Snapshot::Release(int index, const Resources& quantity) {
  CenterView& c = centers_[index];
  const int before = c.JobLoad();
  c.free += quantity;
  c.assumed_replicas = std::max(0, c.assumed_replicas - 1);
  LoadChanged(before, c.JobLoad());
}

double Snapshot::load_sum() const {
  if (indexed_) return static_cast<double>(load_sum_);
  int64_t s = 0;
  for (const auto& c : centers_) s += c.JobLoad();
  return static_cast<double>(s);
}

double Snapshot::load_sum_squares() const {
  if (indexed_) return static_cast<double>(load_sum_squares_);
  __int128 s = 0;
  for (const auto& c : centers_) s += static_cast<__int128>(static_cast<int64_t>(c.JobLoad()) * c.JobLoad());
  return static_cast<double>(s);
}

}  // namespace jc::scheduler
