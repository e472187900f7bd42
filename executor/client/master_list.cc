#include "executor/client/master_list.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

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
  // Each channel its own connections: a channel dropped after a failure (Failed) must take
  // its connection with it, not leave it in gRPC's global pool for the next channel to the
  // same address to share (whoever squatted the port keeps the connections it accepted).
  with_backoff.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return std::unique_ptr<MasterList>(new MasterList(std::move(addresses), std::move(with_backoff)));
}

absl::StatusOr<std::vector<uid_t>> MasterList::MasterAccounts(absl::string_view accounts) {
  std::string named(accounts);
  if (named.empty()) {
    if (const char* env = std::getenv("NEXEC_MASTER_UID"); env != nullptr) named = env;
  }
  std::vector<uid_t> uids;
  auto lookup = [](const std::string& name) -> std::optional<uid_t> {
    passwd pw;
    passwd* out = nullptr;
    std::vector<char> buf(16384);
    if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &out) == 0 && out != nullptr) return out->pw_uid;
    return std::nullopt;
  };
  if (named.empty()) {
    uids.push_back(geteuid());
    if (auto nexec = lookup("nexec")) uids.push_back(*nexec);
    return uids;
  }
  for (absl::string_view part : absl::StrSplit(named, ',', absl::SkipWhitespace())) {
    std::string account(absl::StripAsciiWhitespace(part));
    uint32_t uid = 0;
    if (absl::SimpleAtoi(account, &uid)) {
      uids.push_back(static_cast<uid_t>(uid));
    } else if (auto found = lookup(account)) {
      uids.push_back(*found);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("the master's account \"", account,
                                                     "\" (NEXEC_MASTER_UID) is neither a uid nor an account here"));
    }
  }
  return uids;
}

void MasterList::Prove(MungeAuth auth, std::vector<uid_t> uids) {
  auth_ = std::move(auth);
  uids_ = std::move(uids);
}

std::string MasterList::Joined() const { return absl::StrJoin(addresses_, ","); }

std::string MasterList::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return addresses_[current_];
}

std::shared_ptr<pb::Master::Stub> MasterList::Stub(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& stub = stubs_[address];
  if (stub == nullptr) {
    grpc::ChannelArguments args = args_;
    stub = pb::Master::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  return stub;
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
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
      status.error_code() != grpc::StatusCode::UNAUTHENTICATED) {
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (auto stub = stubs_.find(address); stub != stubs_.end()) {
    absl::Time& last = reset_at_[address];
    const absl::Time now = absl::Now();
    if (now - last >= kResetEvery) {
      last = now;
      stubs_.erase(stub);  // a call or stream holding it keeps it until done
    }
  }
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
  pb::LeadershipInfo info;
  const pb::LeadershipRequest request;
  auto ask = [&](grpc::ClientContext* ctx) { return Stub(address)->Leadership(ctx, request, &info); };
  grpc::Status s;
  if (auth_) {
    MungeAuth::AnswerFrom from;
    from.response = &info;
    from.uids = uids_;
    s = auth_->Call(address, "Leadership", request, absl::ToChronoMilliseconds(timeout), ask, &from);
  } else {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    s = ask(&ctx);
  }
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
      // Proven, it is still the leader's own word only when it speaks for this address:
      // a squatter may relay a real master's signed answer (attacker helper-41). Masters
      // are listed by their --advertise addresses, as standbys name the leader.
      if (info.ok() && info->leading() && auth_ && info->address() != address) {
        said.push_back(absl::StrCat(address, ": answers for ", info->address(),
                                    " (relayed, or the list does not name masters by their --advertise address)"));
        continue;
      }
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
    // Unproven (UNAUTHENTICATED): someone else listens where a master is down, or a master
    // whose account is not the one expected; each answer is refused, saying which, and
    // the agent's start is not held up by whoever took a down master's port.
    // CANCELLED: a master in the instant between binding its port and serving (the demo
    // center's agent, started beside its master, was told so once and gave up for good).
    const bool silent = (code == absl::StatusCode::kUnavailable &&
                         !absl::StrContains(absl::AsciiStrToLower(info.status().message()), "http")) ||
                        code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kUnauthenticated ||
                        code == absl::StatusCode::kCancelled;
    if (silent) continue;
    return absl::InvalidArgumentError(absl::StrCat("the master list names ", address,
                                                   ", which answers but is not a nexec master (",
                                                   info.status().message(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace jc::nexec
