#include "services/identity/identity_store.h"

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/auth/api_token.h"
#include "common/paging.h"
#include "common/status_macros.h"
#include "common/store/doc_table.h"
#include "common/timestamp.h"
#include "common/validate.h"

namespace jc::identity {
namespace {

constexpr size_t kMaxCachedEntries = 100000;

absl::Time FromTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

absl::Status CheckRole(v1::ProjectRole role) {
  if (role < v1::VIEWER || role > v1::OWNER) {
    return absl::InvalidArgumentError("role must be VIEWER, MEMBER or OWNER");
  }
  return absl::OkStatus();
}

absl::Status ValidateUser(const v1::User& user) {
  JC_RETURN_IF_ERROR(CheckId("name", user.name()));
  JC_RETURN_IF_ERROR(CheckOptionalText("display_name", user.display_name(), 255));
  for (const auto& m : user.memberships()) {
    JC_RETURN_IF_ERROR(CheckId("memberships.project", m.project()));
    JC_RETURN_IF_ERROR(CheckRole(m.role()));
  }
  for (const auto& center : user.operator_of()) JC_RETURN_IF_ERROR(CheckId("operator_of", center));
  return absl::OkStatus();
}

absl::Status SaveUser(store::Transaction& txn, const v1::User& user) {
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(user));
  JC_ASSIGN_OR_RETURN(int64_t n, txn.Exec("UPDATE users SET doc = $2 WHERE id = $1", {user.name(), doc}));
  if (n == 0) return absl::NotFoundError(absl::StrCat("user \"", user.name(), "\" not found"));
  return absl::OkStatus();
}

absl::Status ProjectsExist(store::Transaction& txn, const v1::User& user) {
  for (const auto& m : user.memberships()) {
    JC_ASSIGN_OR_RETURN(store::Rows rows, txn.Query("SELECT id FROM projects WHERE id = $1", {m.project()}));
    if (rows.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("project \"", m.project(), "\" does not exist; create it first"));
    }
  }
  return absl::OkStatus();
}

// Takes `name` for `by` ("user" or "oidc") unless someone took it first; who holds it now.
// The primary key decides a race: on PostgreSQL the second insert waits for the first to
// commit and then does nothing.
absl::StatusOr<std::string> ClaimName(store::Transaction& txn, const std::string& name, absl::string_view by,
                                      absl::Time now) {
  JC_RETURN_IF_ERROR(txn.Exec("INSERT INTO user_names (name, claimed_by, claimed_at) VALUES ($1, $2, $3) "
                              "ON CONFLICT (name) DO NOTHING",
                              {name, std::string(by), absl::StrCat(absl::ToUnixMicros(now))})
                         .status());
  JC_ASSIGN_OR_RETURN(store::Rows rows, txn.Query("SELECT claimed_by FROM user_names WHERE name = $1", {name}));
  if (rows.empty()) return absl::InternalError(absl::StrCat("user name \"", name, "\" was not recorded"));
  return rows[0][0].value_or("");
}

absl::StatusOr<v1::User> InsertUser(store::Transaction& txn, v1::User user, absl::Time now) {
  JC_RETURN_IF_ERROR(ValidateUser(user));
  JC_RETURN_IF_ERROR(ProjectsExist(txn, user));
  // An identity provider's user took the name first: its jobs and everything else kept by
  // name are that identity's, so a stored user gets the name only as that identity, linked
  // on purpose (accepts_oidc).
  JC_ASSIGN_OR_RETURN(std::string holder, ClaimName(txn, user.name(), "user", now));
  if (holder == "oidc" && !user.accepts_oidc()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "user name \"", user.name(),
        "\" was taken first by an identity provider's user, whose jobs carry it: choose another name (only if that "
        "identity is this very person, create the user with accepts_oidc: it then gets this user's grants)"));
  }
  *user.mutable_created_at() = ToTimestamp(now);
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(user));
  auto inserted = txn.Exec("INSERT INTO users (id, doc) VALUES ($1, $2)", {user.name(), doc});
  if (absl::IsAlreadyExists(inserted.status())) {
    return absl::AlreadyExistsError(absl::StrCat("user \"", user.name(), "\" already exists"));
  }
  if (!inserted.ok()) return inserted.status();
  return user;
}

// for_update locks the user's row until the token is written: a DeleteUser committing in between
// would otherwise delete the user and its tokens before this one lands, leaving a token that a
// later user of the same name inherits (PostgreSQL, READ COMMITTED).
absl::StatusOr<v1::CreateTokenResponse> InsertToken(store::Transaction& txn, const v1::CreateTokenRequest& req,
                                                    absl::Time now, absl::string_view for_update) {
  JC_RETURN_IF_ERROR(CheckId("user_name", req.user_name()));
  JC_RETURN_IF_ERROR(CheckOptionalText("description", req.description(), 255));
  if (req.ttl_seconds() < 0) return absl::InvalidArgumentError("ttl_seconds must not be negative");
  JC_ASSIGN_OR_RETURN(store::Rows users,
                      txn.Query(absl::StrCat("SELECT id FROM users WHERE id = $1", for_update), {req.user_name()}));
  if (users.empty()) return absl::NotFoundError(absl::StrCat("user \"", req.user_name(), "\" not found"));
  JC_ASSIGN_OR_RETURN(auth::NewApiToken made, auth::GenerateApiToken());
  v1::CreateTokenResponse resp;
  v1::ApiToken& token = *resp.mutable_token();
  token.set_token_id(made.id);
  token.set_user_name(req.user_name());
  token.set_description(req.description());
  *token.mutable_created_at() = ToTimestamp(now);
  if (req.ttl_seconds() > 0) *token.mutable_expires_at() = ToTimestamp(now + absl::Seconds(req.ttl_seconds()));
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(token));
  JC_RETURN_IF_ERROR(txn.Exec("INSERT INTO api_tokens (id, user_name, secret_sha256, doc) VALUES ($1, $2, $3, $4)",
                              {made.id, req.user_name(), made.secret_sha256, doc})
                         .status());
  resp.set_secret(made.token);
  return resp;
}

}  // namespace

auth::Principal PrincipalOf(const v1::User& user) {
  auth::Principal p;
  p.name = user.name();
  p.stored_user = true;
  p.federation_admin = user.federation_admin();
  for (const auto& m : user.memberships()) p.projects[m.project()] = static_cast<auth::ProjectRole>(m.role());
  p.operator_of.assign(user.operator_of().begin(), user.operator_of().end());
  return p;
}

IdentityStore::IdentityStore(store::Store* store, const Clock* clock, IdentityOptions options)
    : store_(store), clock_(clock), options_(options) {
  flusher_.Start(options_.last_used_flush, [this] {
    if (absl::Status s = FlushLastUsed(); !s.ok()) {
      spdlog::warn("identity: token last-use times not written yet, retried at the next flush: {}", s.ToString());
    }
  }, "jc-token-uses");
}

IdentityStore::~IdentityStore() {
  flusher_.Stop();
  (void)FlushLastUsed();  // best effort: last-use times are advisory
}

void IdentityStore::Invalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_.clear();
  users_.clear();
}

absl::StatusOr<v1::User> IdentityStore::CreateUser(v1::User user) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::User created, InsertUser(*txn, std::move(user), clock_->Now()));
  JC_RETURN_IF_ERROR(txn->Commit());
  Invalidate();
  return created;
}

absl::StatusOr<v1::User> IdentityStore::GetUser(const std::string& name) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  return store::LoadDoc<v1::User>(*txn, "users", "user", name);
}

absl::StatusOr<v1::ListUsersResponse> IdentityStore::ListUsers(const v1::ListUsersRequest& req) {
  JC_ASSIGN_OR_RETURN(store::DocPage page, store::ListDocs(*store_, "users", {}, req.page_token(), req.page_size()));
  v1::ListUsersResponse resp;
  for (const auto& doc : page.docs) {
    JC_ASSIGN_OR_RETURN(*resp.add_users(), store::DecodeDoc<v1::User>(doc));
  }
  resp.set_next_page_token(page.next_page_token);
  return resp;
}

absl::Status IdentityStore::DeleteUser(const std::string& name) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(int64_t n, txn->Exec("DELETE FROM users WHERE id = $1", {name}));
  if (n == 0) return absl::NotFoundError(absl::StrCat("user \"", name, "\" not found"));
  // A token without its user authenticates no one (PrincipalOfToken checks), and deleting
  // the rows keeps the table from holding secrets of people who left.
  JC_RETURN_IF_ERROR(txn->Exec("DELETE FROM api_tokens WHERE user_name = $1", {name}).status());
  JC_RETURN_IF_ERROR(txn->Commit());
  Invalidate();
  return absl::OkStatus();
}

absl::StatusOr<v1::User> IdentityStore::SetMembership(const v1::SetMembershipRequest& req) {
  JC_RETURN_IF_ERROR(CheckId("user_name", req.user_name()));
  JC_RETURN_IF_ERROR(CheckId("project", req.project()));
  if (req.role() != v1::PROJECT_ROLE_UNSPECIFIED) JC_RETURN_IF_ERROR(CheckRole(req.role()));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::User user,
                      store::LoadDoc<v1::User>(*txn, "users", "user", req.user_name(), store_->for_update()));
  auto* memberships = user.mutable_memberships();
  for (int i = memberships->size() - 1; i >= 0; --i) {
    if (memberships->Get(i).project() == req.project()) memberships->DeleteSubrange(i, 1);
  }
  if (req.role() != v1::PROJECT_ROLE_UNSPECIFIED) {
    v1::Membership* m = memberships->Add();
    m->set_project(req.project());
    m->set_role(req.role());
    JC_RETURN_IF_ERROR(ProjectsExist(*txn, user));
  }
  JC_RETURN_IF_ERROR(SaveUser(*txn, user));
  JC_RETURN_IF_ERROR(txn->Commit());
  Invalidate();
  return user;
}

namespace {

// A project's quota and budget, checked on every write that sets them (a create may carry
// them too: helper-69).
absl::Status CheckQuota(const v1::ProjectQuota& q) {
  if (q.max_running_gpus() < 0 || q.max_running_cpus() < 0 || q.max_queued_jobs() < 0) {
    return absl::InvalidArgumentError("quota: limits must be 0 (none) or positive");
  }
  // As scheduling.priority's own range (validate_create.h kMaxPriority).
  constexpr int32_t kMaxPriority = 1000000;
  if (q.max_priority() < 0 || q.max_priority() > kMaxPriority) {
    return absl::InvalidArgumentError(absl::StrCat("quota: max_priority must be 0 to ", kMaxPriority, ", got ",
                                                   q.max_priority()));
  }
  return absl::OkStatus();
}

absl::Status CheckBudget(const v1::ProjectBudget& b) {
  if (!(b.monthly() >= 0) || b.monthly() > 1e15) {  // NaN fails too
    return absl::InvalidArgumentError(
        absl::StrCat("budget: monthly must be 0 (none) or a positive amount (got ", b.monthly(), ")"));
  }
  if (b.stop_running() && !b.hard()) {
    return absl::InvalidArgumentError("budget: stop_running applies to a hard budget only; set hard too");
  }
  if (!(b.reservation_hours() >= 0) || b.reservation_hours() > 8784) {
    return absl::InvalidArgumentError(absl::StrCat(
        "budget: reservation_hours must be 0 (one hour) to 8784 (a year) (got ", b.reservation_hours(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Project> IdentityStore::CreateProject(v1::Project project) {
  JC_RETURN_IF_ERROR(CheckId("name", project.name()));
  // "-" names the federation's images and datasets in requests, and adapters keep a
  // project's staged images under .projects/<name>: neither may be a project's name.
  if (project.name() == "-" || project.name().front() == '.') {
    return absl::InvalidArgumentError(absl::StrCat("project name \"", project.name(),
                                                   "\" is reserved (\"-\" names the federation's; no leading '.')"));
  }
  JC_RETURN_IF_ERROR(CheckOptionalText("description", project.description(), 1024));
  JC_RETURN_IF_ERROR(CheckQuota(project.quota()));
  JC_RETURN_IF_ERROR(CheckBudget(project.budget()));
  *project.mutable_created_at() = ToTimestamp(clock_->Now());
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(project));
  auto inserted = store_->Exec("INSERT INTO projects (id, doc) VALUES ($1, $2)", {project.name(), doc});
  if (absl::IsAlreadyExists(inserted.status())) {
    return absl::AlreadyExistsError(absl::StrCat("project \"", project.name(), "\" already exists"));
  }
  if (!inserted.ok()) return inserted.status();
  return project;
}

absl::StatusOr<v1::Project> IdentityStore::GetProject(const std::string& name) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  return store::LoadDoc<v1::Project>(*txn, "projects", "project", name);
}

absl::StatusOr<v1::ListProjectsResponse> IdentityStore::ListProjects(const v1::ListProjectsRequest& req) {
  JC_ASSIGN_OR_RETURN(store::DocPage page,
                      store::ListDocs(*store_, "projects", {}, req.page_token(), req.page_size()));
  v1::ListProjectsResponse resp;
  for (const auto& doc : page.docs) {
    JC_ASSIGN_OR_RETURN(*resp.add_projects(), store::DecodeDoc<v1::Project>(doc));
  }
  resp.set_next_page_token(page.next_page_token);
  return resp;
}

absl::Status IdentityStore::DeleteProject(const std::string& name) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(store::Rows users, txn->Query("SELECT id, doc FROM users"));
  for (const auto& row : users) {
    JC_ASSIGN_OR_RETURN(v1::User user, store::DecodeDoc<v1::User>(row[1]));
    for (const auto& m : user.memberships()) {
      if (m.project() == name) {
        return absl::FailedPreconditionError(absl::StrCat("project \"", name, "\" still has member \"", user.name(),
                                                          "\"; remove its members first"));
      }
    }
  }
  JC_ASSIGN_OR_RETURN(int64_t n, txn->Exec("DELETE FROM projects WHERE id = $1", {name}));
  if (n == 0) return absl::NotFoundError(absl::StrCat("project \"", name, "\" not found"));
  return txn->Commit();
}

absl::StatusOr<v1::Project> IdentityStore::SetProjectQuota(const v1::SetProjectQuotaRequest& req) {
  const v1::ProjectQuota& q = req.quota();
  JC_RETURN_IF_ERROR(CheckQuota(q));
  return UpdateProject(req.name(), [&](v1::Project& project) { *project.mutable_quota() = q; });
}

absl::StatusOr<v1::Project> IdentityStore::SetProjectBudget(const v1::SetProjectBudgetRequest& req) {
  const v1::ProjectBudget& b = req.budget();
  JC_RETURN_IF_ERROR(CheckBudget(b));
  return UpdateProject(req.name(), [&](v1::Project& project) { *project.mutable_budget() = b; });
}

absl::StatusOr<v1::Project> IdentityStore::UpdateProject(const std::string& name,
                                                         const std::function<void(v1::Project&)>& change) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::Project project,
                      store::LoadDoc<v1::Project>(*txn, "projects", "project", name, store_->for_update()));
  change(project);
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(project));
  JC_RETURN_IF_ERROR(txn->Exec("UPDATE projects SET doc = $2 WHERE id = $1", {name, doc}).status());
  JC_RETURN_IF_ERROR(txn->Commit());
  return project;
}

absl::StatusOr<v1::CreateTokenResponse> IdentityStore::CreateToken(const v1::CreateTokenRequest& req) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::CreateTokenResponse resp, InsertToken(*txn, req, clock_->Now(), store_->for_update()));
  JC_RETURN_IF_ERROR(txn->Commit());
  return resp;
}

absl::StatusOr<v1::ListTokensResponse> IdentityStore::ListTokens(const v1::ListTokensRequest& req) {
  if (!req.user_name().empty()) JC_RETURN_IF_ERROR(CheckId("user_name", req.user_name()));
  JC_ASSIGN_OR_RETURN(int page_size, NormalizePageSize(req.page_size()));
  JC_ASSIGN_OR_RETURN(std::string after, DecodePageToken(req.page_token()));
  std::string sql = "SELECT id, last_used_at, doc FROM api_tokens WHERE id > $1";
  store::Params params{after};
  if (!req.user_name().empty()) {
    params.push_back(req.user_name());
    sql += " AND user_name = $2";
  }
  params.push_back(int64_t{page_size + 1});
  absl::StrAppend(&sql, " ORDER BY id LIMIT $", params.size());
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query(sql, params));
  v1::ListTokensResponse resp;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < page_size; ++i) {
    JC_ASSIGN_OR_RETURN(v1::ApiToken token, store::DecodeDoc<v1::ApiToken>(rows[i][2]));
    absl::Time last = absl::InfinitePast();
    int64_t stored = 0;
    if (rows[i][1].has_value() && absl::SimpleAtoi(*rows[i][1], &stored)) last = absl::FromUnixSeconds(stored);
    if (auto it = last_used_.find(token.token_id()); it != last_used_.end()) last = std::max(last, it->second);
    if (last != absl::InfinitePast()) *token.mutable_last_used_at() = ToTimestamp(last);
    *resp.add_tokens() = std::move(token);
  }
  if (static_cast<int>(rows.size()) > page_size) resp.set_next_page_token(EncodePageToken(*rows[page_size - 1][0]));
  return resp;
}

absl::StatusOr<v1::ApiToken> IdentityStore::RevokeToken(const std::string& token_id) {
  JC_RETURN_IF_ERROR(CheckId("token_id", token_id));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::ApiToken token,
                      store::LoadDoc<v1::ApiToken>(*txn, "api_tokens", "API token", token_id, store_->for_update()));
  if (!token.has_revoked_at()) {
    *token.mutable_revoked_at() = ToTimestamp(clock_->Now());
    JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(token));
    JC_RETURN_IF_ERROR(txn->Exec("UPDATE api_tokens SET doc = $2 WHERE id = $1", {token_id, doc}).status());
    JC_RETURN_IF_ERROR(txn->Commit());
  }
  Invalidate();
  return token;
}

absl::StatusOr<IdentityStore::CachedToken> IdentityStore::LoadToken(const std::string& id) {
  CachedToken entry{absl::UnauthenticatedError("invalid API token"), "", clock_->Now()};
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      store_->Query("SELECT user_name, secret_sha256, doc FROM api_tokens WHERE id = $1", {id}));
  if (rows.empty()) return entry;  // unknown: remembered too, so guessing ids costs no queries
  entry.secret_sha256 = rows[0][1].value_or("");
  JC_ASSIGN_OR_RETURN(v1::ApiToken token, store::DecodeDoc<v1::ApiToken>(rows[0][2]));
  if (token.has_revoked_at()) {
    entry.principal = absl::UnauthenticatedError(absl::StrCat("API token ", id, " was revoked"));
    return entry;
  }
  JC_ASSIGN_OR_RETURN(store::Rows users, store_->Query("SELECT doc FROM users WHERE id = $1", {token.user_name()}));
  if (users.empty()) {
    entry.principal = absl::UnauthenticatedError(
        absl::StrCat("API token ", id, " belongs to user \"", token.user_name(), "\", who no longer exists"));
    return entry;
  }
  JC_ASSIGN_OR_RETURN(v1::User user, store::DecodeDoc<v1::User>(users[0][0]));
  auto principal = std::make_shared<auth::Principal>(PrincipalOf(user));
  principal->auth_method = "token";
  principal->token_id = id;
  if (token.has_expires_at()) {
    absl::Time expires = FromTimestamp(token.expires_at());
    if (clock_->Now() >= expires) {
      entry.principal = absl::UnauthenticatedError(
          absl::StrCat("API token ", id, " expired at ", absl::FormatTime(expires, absl::UTCTimeZone())));
      return entry;
    }
    entry.expires = expires;  // checked again at each use: the entry may outlive it
  }
  entry.principal = std::shared_ptr<const auth::Principal>(std::move(principal));
  return entry;
}

absl::StatusOr<auth::Principal> IdentityStore::PrincipalOfToken(absl::string_view token) {
  JC_ASSIGN_OR_RETURN(auth::ApiTokenParts parts, auth::ParseApiToken(token));
  return PrincipalOfTokenWith(parts.id, &parts.secret);
}

absl::StatusOr<auth::Principal> IdentityStore::PrincipalOfTokenId(const std::string& token_id) {
  return PrincipalOfTokenWith(token_id, nullptr);
}

absl::StatusOr<auth::Principal> IdentityStore::PrincipalOfTokenWith(const std::string& id, const std::string* secret) {
  absl::Time now = clock_->Now();
  std::optional<CachedToken> entry, stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tokens_.find(id);
    if (it != tokens_.end()) {
      (now - it->second.fetched < options_.cache_ttl ? entry : stale) = it->second;
    }
  }
  if (!entry.has_value()) {
    auto loaded = LoadToken(id);
    if (loaded.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (tokens_.size() >= kMaxCachedEntries) tokens_.clear();
      tokens_.insert_or_assign(id, *loaded);
      entry = std::move(*loaded);
    } else if (stale.has_value() && now - stale->fetched < options_.stale_ttl) {
      entry = std::move(stale);  // the store is out of reach: the last verdict stands a while
    } else {
      return absl::UnavailableError(absl::StrCat("cannot check the API token now: ", loaded.status().message()));
    }
  }
  if (secret != nullptr && !auth::ConstantTimeEquals(auth::Sha256Hex(*secret), entry->secret_sha256)) {
    return absl::UnauthenticatedError("invalid API token");
  }
  if (!entry->principal.ok()) return entry->principal.status();
  if (now >= entry->expires) {
    return absl::UnauthenticatedError(
        absl::StrCat("API token ", id, " expired at ", absl::FormatTime(entry->expires, absl::UTCTimeZone())));
  }
  if (secret == nullptr) return **entry->principal;  // asked again about a token seen before: not a use
  std::lock_guard<std::mutex> lock(mu_);
  last_used_[id] = now;
  return **entry->principal;
}

absl::StatusOr<std::string> IdentityStore::ClaimOidcName(const std::string& name, absl::Time now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (oidc_names_.contains(name)) return std::string("oidc");
  }
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(std::string holder, ClaimName(*txn, name, "oidc", now));
  JC_RETURN_IF_ERROR(txn->Commit());
  if (holder == "oidc") {
    std::lock_guard<std::mutex> lock(mu_);
    if (oidc_names_.size() >= kMaxCachedEntries) oidc_names_.clear();
    oidc_names_.insert(name);
  }
  return holder;
}

absl::StatusOr<std::optional<auth::Principal>> IdentityStore::PrincipalOfOidcUser(const std::string& name,
                                                                                   bool* name_taken) {
  bool unused = false;
  if (name_taken == nullptr) name_taken = &unused;
  absl::Time now = clock_->Now();
  std::optional<CachedUser> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = users_.find(name);
    if (it != users_.end() && now - it->second.fetched < options_.cache_ttl) {
      *name_taken = it->second.taken;
      return it->second.principal;
    }
    if (it != users_.end()) stale = it->second;
  }
  CachedUser entry{std::nullopt, now};
  auto rows = store_->Query("SELECT doc FROM users WHERE id = $1", {name});
  if (rows.ok() && rows->empty()) {
    // No stored user: the name is this identity's if no stored user ever took it (one that
    // was deleted keeps it: its jobs still carry it).
    auto holder = ClaimOidcName(name, now);
    if (!holder.ok()) rows = holder.status();
    else if (*holder != "oidc") entry.taken = true;
  }
  if (!rows.ok()) {
    if (stale.has_value() && now - stale->fetched < options_.stale_ttl) {
      *name_taken = stale->taken;
      return stale->principal;
    }
    return absl::UnavailableError(absl::StrCat("cannot look the user up now: ", rows.status().message()));
  }
  if (!rows->empty()) {
    JC_ASSIGN_OR_RETURN(v1::User user, store::DecodeDoc<v1::User>((*rows)[0][0]));
    // Only a user linked to OIDC on purpose lends its grants to a token naming it.
    if (user.accepts_oidc()) entry.principal = PrincipalOf(user);
    else entry.taken = true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (users_.size() >= kMaxCachedEntries) users_.clear();
  users_.insert_or_assign(name, entry);
  *name_taken = entry.taken;
  return entry.principal;
}

absl::StatusOr<std::optional<std::string>> IdentityStore::BootstrapAdmin(const std::string& name) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  if (store_->backend() == "postgres") {
    // Two instances starting together on one empty store: one bootstraps.
    JC_RETURN_IF_ERROR(txn->Query("SELECT pg_advisory_xact_lock(74120002)").status());
  }
  JC_ASSIGN_OR_RETURN(store::Rows rows, txn->Query("SELECT COUNT(*) FROM users"));
  if (!rows.empty() && rows[0][0].value_or("0") != "0") return std::nullopt;
  v1::User admin;
  admin.set_name(name);
  admin.set_display_name("Federation admin (created at first start)");
  admin.set_federation_admin(true);
  JC_RETURN_IF_ERROR(InsertUser(*txn, admin, clock_->Now()).status());
  v1::CreateTokenRequest req;
  req.set_user_name(name);
  req.set_description("bootstrap admin token");
  JC_ASSIGN_OR_RETURN(v1::CreateTokenResponse token, InsertToken(*txn, req, clock_->Now(), store_->for_update()));
  JC_RETURN_IF_ERROR(txn->Commit());
  return token.secret();
}

absl::Status IdentityStore::FlushLastUsed() {
  absl::flat_hash_map<std::string, absl::Time> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(last_used_);
  }
  if (batch.empty()) return absl::OkStatus();
  absl::Status written = [&]() -> absl::Status {
    JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
    for (const auto& [id, at] : batch) {
      JC_RETURN_IF_ERROR(txn->Exec("UPDATE api_tokens SET last_used_at = $2 WHERE id = $1",
                                   {id, absl::ToUnixSeconds(at)})
                             .status());
    }
    return txn->Commit();
  }();
  if (!written.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, at] : batch) {
      auto [it, inserted] = last_used_.try_emplace(id, at);
      if (!inserted) it->second = std::max(it->second, at);
    }
  }
  return written;
}

}  // namespace jc::identity
