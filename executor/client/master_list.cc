#include "executor/client/master_list.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

absl::StatusOr<std::unique_ptr<MasterList>> MasterList::Parse(absl::string_view list,
                                                               const grpc::ChannelArguments& args) {
  std::vector<std::string> addresses;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    std::string address(absl::StripAsciiWhitespace(part));
    const size_t colon = address.rfind(':');
    uint32_t port = 0;
    if (address.empty() || colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("\"", address, "\" in the master list \"", list,
                                                     "\" is not host:port (give every master: host:port,host:port)"));
    }
    if (std::find(addresses.begin(), addresses.end(), address) == addresses.end()) addresses.push_back(address);
  }
  // A master that comes back (restarted as a standby, to lead at the next failover) is
  // reached within a second, not after gRPC's reconnect backoff of up to two minutes.
  grpc::ChannelArguments with_backoff = args;
  with_backoff.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 250);
  with_backoff.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  with_backoff.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return std::unique_ptr<MasterList>(new MasterList(std::move(addresses), std::move(with_backoff)));
}

std::string MasterList::Joined() const { return absl::StrJoin(addresses_, ","); }

std::string MasterList::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return addresses_[current_];
}

pb::Master::Stub* MasterList::Stub(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& stub = stubs_[address];
  if (stub == nullptr) {
    grpc::ChannelArguments args = args_;
    stub = pb::Master::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  return stub.get();
}

std::string MasterList::LeaderNamed(const grpc::ClientContext& ctx) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find(kLeaderMetadataKey);
  return it == trailers.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

bool MasterList::Failed(const std::string& address, const grpc::Status& status, const std::string& leader) {
  // UNAVAILABLE: down, stopping or standing by; DEADLINE_EXCEEDED: hung, paused, or its
  // host gone dark (no answer, no refusal) — the next master may lead by now.
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (addresses_.size() < 2) return false;
  if (addresses_[current_] != address) return true;  // another call moved on already
  auto named = std::find(addresses_.begin(), addresses_.end(), leader);
  if (named != addresses_.end() && *named != address) {
    current_ = static_cast<size_t>(named - addresses_.begin());
  } else {
    current_ = (current_ + 1) % addresses_.size();
  }
  return true;
}

absl::StatusOr<pb::LeadershipInfo> MasterList::Ask(const std::string& address, absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  pb::LeadershipInfo info;
  grpc::Status s = Stub(address)->Leadership(&ctx, pb::LeadershipRequest(), &info);
  if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return info;
}

std::vector<std::pair<std::string, absl::StatusOr<pb::LeadershipInfo>>> MasterList::AskAll(absl::Duration timeout) {
  std::vector<std::pair<std::string, absl::StatusOr<pb::LeadershipInfo>>> out;
  for (const std::string& address : addresses_) out.emplace_back(address, Ask(address, timeout));
  return out;
}

absl::StatusOr<std::string> MasterList::FindLeader(absl::Duration wait) {
  const absl::Time until = absl::Now() + wait;
  std::vector<std::string> said;
  while (true) {
    said.clear();
    for (size_t i = 0; i < addresses_.size(); ++i) {
      const std::string& address = addresses_[i];
      auto info = Ask(address, absl::Seconds(2));
      if (info.ok() && info->leading()) {
        std::lock_guard<std::mutex> lock(mu_);
        current_ = i;
        return address;
      }
      said.push_back(absl::StrCat(address, ": ",
                                  info.ok() ? absl::StrCat("stands by (", info->state(), ")")
                                            : std::string(info.status().message())));
    }
    if (absl::Now() >= until) break;
    absl::SleepFor(absl::Milliseconds(250));
  }
  return absl::UnavailableError(absl::StrCat("no nexec master leads (", absl::StrJoin(said, "; "), ")"));
}

absl::Status MasterList::Check(absl::Duration timeout) {
  for (const std::string& address : addresses_) {
    auto info = Ask(address, timeout);
    if (info.ok()) continue;
    const absl::StatusCode code = info.status().code();
    // Down, or not up yet: a standby may be. Anything that answers otherwise is not a master.
    const bool silent = (code == absl::StatusCode::kUnavailable &&
                         !absl::StrContains(absl::AsciiStrToLower(info.status().message()), "http")) ||
                        code == absl::StatusCode::kDeadlineExceeded;
    if (silent) continue;
    return absl::InvalidArgumentError(absl::StrCat("the master list names ", address,
                                                   ", which answers but is not a nexec master (",
                                                   info.status().message(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace jc::nexec
