#include "executor/master/host_book.h"

namespace jc::nexec {

HostBook::Host* HostBook::Find(const std::string& name) {
  auto it = hosts_.find(name);
  return it == hosts_.end() ? nullptr : &it->second;
}

const HostBook::Host* HostBook::Find(const std::string& name) const {
  auto it = hosts_.find(name);
  return it == hosts_.end() ? nullptr : &it->second;
}

bool HostBook::Available(const std::string& name) const {
  const Host* h = Find(name);
  return h != nullptr && h->available;
}

std::string HostBook::AddressOf(const std::string& name) const {
  const Host* h = Find(name);
  return h == nullptr ? "" : h->info.address();
}

HostBook::Host& HostBook::Add(const ::nexec::v1::AgentInfo& info, absl::Time seen) {
  Host& h = hosts_[info.host()];
  h = Host{info, seen, true};
  return h;
}

std::vector<std::string> HostBook::Silent(absl::Time now, absl::Duration timeout) const {
  std::vector<std::string> out;
  for (const auto& [name, h] : hosts_) {
    if (h.available && now - h.last_seen >= timeout) out.push_back(name);
  }
  return out;
}

bool HostBook::Refuse(const ::nexec::v1::AgentInfo& info, const std::string& reason, absl::Time now) {
  auto [it, fresh] = refusals_.try_emplace(info.host());
  const bool news = fresh || it->second.reason != reason;
  it->second = Refusal{info, reason, now};
  return news;
}

void HostBook::ForgetRefusals(absl::Time now, absl::Duration timeout) {
  for (auto it = refusals_.begin(); it != refusals_.end();) {
    it = now - it->second.at >= timeout ? refusals_.erase(it) : std::next(it);
  }
}

const HostBook::Refusal* HostBook::RefusalOf(const std::string& name) const {
  auto it = refusals_.find(name);
  return it == refusals_.end() ? nullptr : &it->second;
}

}  // namespace jc::nexec
