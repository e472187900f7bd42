#include "services/endpoints/endpoint_passes.h"

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/auth/api_token.h"
#include "common/status_macros.h"

namespace jc::endpoints {
namespace {

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

int64_t Int(const std::optional<std::string>& text) {
  int64_t v = 0;
  if (text.has_value()) absl::SimpleAtoi(*text, &v);
  return v;
}

constexpr char kPassColumns[] =
    "job_id, task_index, replica_index, port_name, landing_path, project, user_name, auth_method, token_id, role, "
    "expires_us, exec_command";

std::string ExecText(const std::optional<ExecSpec>& exec) {
  if (!exec.has_value()) return "";
  return nlohmann::json{{"command", exec->command}, {"tty", exec->tty}}.dump();
}

std::optional<ExecSpec> ExecOf(const std::string& text) {
  if (text.empty()) return std::nullopt;
  auto j = nlohmann::json::parse(text, nullptr, false);
  ExecSpec out;
  if (!j.is_object() || !j.contains("command") || !j["command"].is_array()) return ExecSpec{};  // runs nothing
  for (const auto& arg : j["command"]) {
    if (arg.is_string()) out.command.push_back(arg.get<std::string>());
  }
  out.tty = j.value("tty", false);
  return out;
}

EndpointPass PassOfRow(const store::Row& row) {
  EndpointPass p;
  p.key.job_id = row[0].value_or("");
  p.key.task_index = static_cast<int>(Int(row[1]));
  p.key.replica_index = static_cast<int>(Int(row[2]));
  p.key.port_name = row[3].value_or("");
  p.landing_path = row[4].value_or("/");
  p.project = row[5].value_or("");
  p.user_name = row[6].value_or("");
  p.auth_method = row[7].value_or("");
  p.token_id = row[8].value_or("");
  int64_t role = Int(row[9]);
  p.role = role >= 0 && role <= static_cast<int64_t>(auth::ProjectRole::kOwner) ? static_cast<auth::ProjectRole>(role)
                                                                                 : auth::ProjectRole::kNone;
  p.expires = absl::FromUnixMicros(Int(row[10]));
  p.exec = ExecOf(row[11].value_or(""));
  return p;
}

}  // namespace

EndpointPasses::EndpointPasses(store::Store* store, const Clock* clock, PassOptions options)
    : store_(store), clock_(clock), options_(options) {}

absl::StatusOr<IssuedTicket> EndpointPasses::Issue(const auth::Principal& caller, const std::string& project,
                                                   const EndpointKey& key, const std::string& landing_path,
                                                   const std::optional<ExecSpec>& exec) {
  absl::Time now = clock_->Now();
  JC_ASSIGN_OR_RETURN(std::string secret, auth::RandomSecret(32));
  IssuedTicket out{secret, now + options_.ticket_ttl};
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_RETURN_IF_ERROR(txn->Exec("DELETE FROM endpoint_passes WHERE expires_us < $1", {Micros(now)}).status());
  JC_RETURN_IF_ERROR(
      txn->Exec("INSERT INTO endpoint_passes (ticket_sha256, session_sha256, job_id, task_index, replica_index, "
                "port_name, landing_path, project, user_name, auth_method, token_id, role, ticket_expires_us, "
                "expires_us, exec_command) VALUES ($1, NULL, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                {auth::Sha256Hex(secret), key.job_id, int64_t{key.task_index}, int64_t{key.replica_index},
                 key.port_name, landing_path, project, caller.name, caller.auth_method, caller.token_id,
                 static_cast<int64_t>(caller.RoleIn(project)), Micros(out.expires), Micros(out.expires),
                 ExecText(exec)})
          .status());
  JC_RETURN_IF_ERROR(txn->Commit());
  return out;
}

absl::StatusOr<RedeemedTicket> EndpointPasses::Redeem(absl::string_view ticket_secret, const EndpointKey& key) {
  absl::Time now = clock_->Now();
  const std::string ticket_sha = auth::Sha256Hex(ticket_secret);
  const std::string select = absl::StrCat("SELECT session_sha256, ticket_expires_us, auth_method, ", kPassColumns,
                                          " FROM endpoint_passes WHERE ticket_sha256 = $1");
  // The link as it stands: the pass it opens, or why it opens nothing.
  auto check = [&](const store::Rows& rows) -> absl::StatusOr<EndpointPass> {
    if (rows.empty()) {
      return absl::PermissionDeniedError("this link is not one the gateway issued, or it expired long ago");
    }
    const store::Row& row = rows[0];
    if (row[0].has_value()) return absl::PermissionDeniedError("this link was opened already: a link opens once");
    if (absl::FromUnixMicros(Int(row[1])) < now) return absl::PermissionDeniedError("this link expired");
    EndpointPass pass = PassOfRow(store::Row(row.begin() + 3, row.end()));
    if (!(pass.key == key)) {
      return absl::PermissionDeniedError(absl::StrCat("this link is for another endpoint (", Describe(pass.key), ")"));
    }
    return pass;
  };
  // First a plain read: a link made up (anyone's, without a session) opens no write
  // transaction, which on the embedded store would hold every other writer up (an attacker
  // helper's flood of made-up links slowed OpenEndpoint sixfold).
  {
    auto read = store_->Query(select, {ticket_sha});
    if (!read.ok()) return absl::UnavailableError(absl::StrCat("the store: ", read.status().message()));
    if (auto first = check(*read); !first.ok()) return first.status();
  }
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(store::Rows rows, txn->Query(absl::StrCat(select, store_->for_update()), {ticket_sha}));
  JC_ASSIGN_OR_RETURN(EndpointPass pass, check(rows));  // again, under the lock: another may have opened it
  JC_ASSIGN_OR_RETURN(std::string session, auth::RandomSecret(32));
  absl::Duration ttl = pass.auth_method == "oidc" ? options_.provider_session_ttl : options_.session_ttl;
  RedeemedTicket out{session, pass.landing_path, now + ttl};
  JC_ASSIGN_OR_RETURN(int64_t changed,
                      txn->Exec("UPDATE endpoint_passes SET session_sha256 = $2, expires_us = $3 "
                                "WHERE ticket_sha256 = $1 AND session_sha256 IS NULL",
                                {ticket_sha, auth::Sha256Hex(session), Micros(out.expires)}));
  if (changed != 1) return absl::PermissionDeniedError("this link was opened already: a link opens once");
  JC_RETURN_IF_ERROR(txn->Commit());
  return out;
}

absl::StatusOr<EndpointPass> EndpointPasses::PassOf(absl::string_view session_secret) {
  absl::Time now = clock_->Now();
  const std::string sha = auth::Sha256Hex(session_secret);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(sha);
    if (it != cache_.end() && now - it->second.fetched < options_.cache_ttl) {
      if (it->second.pass.ok() && it->second.pass->expires <= now) {
        return absl::UnauthenticatedError("this endpoint session expired: open the endpoint again");
      }
      return it->second.pass;
    }
  }
  absl::StatusOr<EndpointPass> pass = Load(sha);
  if (!pass.ok() && !absl::IsUnauthenticated(pass.status())) return pass.status();  // the store: not cached
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_.size() >= options_.max_cached) {
    absl::erase_if(cache_, [&](const auto& e) { return now - e.second.fetched >= options_.cache_ttl; });
    // Then the secrets that are nobody's: a flood of made-up cookies must not push the
    // sessions in use out (an attacker helper's finding).
    if (cache_.size() >= options_.max_cached) absl::erase_if(cache_, [](const auto& e) { return !e.second.pass.ok(); });
    if (cache_.size() >= options_.max_cached) cache_.clear();
  }
  cache_[sha] = Cached{pass, now};
  if (pass.ok() && pass->expires <= now) {
    return absl::UnauthenticatedError("this endpoint session expired: open the endpoint again");
  }
  return pass;
}

absl::StatusOr<EndpointPass> EndpointPasses::Load(const std::string& session_sha256) {
  auto rows = store_->Query(absl::StrCat("SELECT ", kPassColumns, " FROM endpoint_passes WHERE session_sha256 = $1"),
                            {session_sha256});
  if (!rows.ok()) return absl::UnavailableError(absl::StrCat("the store: ", rows.status().message()));
  if (rows->empty()) return absl::UnauthenticatedError("no such endpoint session (it may have expired)");
  return PassOfRow((*rows)[0]);
}

}  // namespace jc::endpoints
