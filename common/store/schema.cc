#include "absl/strings/string_view.h"
#include "common/store/schema.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace jc::store {

// The sums every usage rollup keeps (usage_daily, usage_monthly, usage_billing), as
// services/accounting/usage_book.cc adds to them.
#define JC_USAGE_SUM_COLUMNS                  \
  "  records BIGINT NOT NULL,"                \
  "  wall_seconds DOUBLE PRECISION NOT NULL," \
  "  cpu_seconds DOUBLE PRECISION NOT NULL,"  \
  "  gpu_seconds DOUBLE PRECISION NOT NULL,"  \
  "  read_bytes BIGINT NOT NULL,"             \
  "  write_bytes BIGINT NOT NULL,"            \
  "  energy_kwh DOUBLE PRECISION NOT NULL,"   \
  "  cost DOUBLE PRECISION NOT NULL,"         \
  "  max_memory_peak_mb BIGINT NOT NULL,"

// Each resource is stored as its protobuf JSON document (`doc`) next to the columns that
// lists filter and page on. See docs/adr/0002-store-documents.md for why.
const std::vector<Migration>& Migrations() {
  static const auto* migrations = new std::vector<Migration>{
      {1,
       "centers, resource specs, images, datasets",
       {
           "CREATE TABLE centers ("
           "  id TEXT PRIMARY KEY,"
           "  region TEXT NOT NULL,"
           "  status INTEGER NOT NULL,"
           "  doc TEXT NOT NULL)",
           "CREATE INDEX centers_region ON centers (region)",
           "CREATE TABLE resource_specs ("
           "  id TEXT PRIMARY KEY,"
           "  service_type TEXT NOT NULL,"
           "  doc TEXT NOT NULL)",
           // The spec x center mapping of 6.1.2: which centers offer a spec and at
           // what price there (NULL = the spec's own price).
           "CREATE TABLE spec_centers ("
           "  spec_id TEXT NOT NULL,"
           "  center_id TEXT NOT NULL,"
           "  price INTEGER,"
           "  PRIMARY KEY (spec_id, center_id))",
           "CREATE INDEX spec_centers_center ON spec_centers (center_id)",
           "CREATE TABLE images ("
           "  id TEXT PRIMARY KEY,"
           "  center_id TEXT NOT NULL,"
           "  framework TEXT NOT NULL,"
           "  doc TEXT NOT NULL)",
           "CREATE INDEX images_center ON images (center_id)",
           "CREATE TABLE datasets ("
           "  id TEXT PRIMARY KEY,"
           "  data_name TEXT NOT NULL,"
           "  created_user TEXT NOT NULL,"
           "  doc TEXT NOT NULL)",
           "CREATE TABLE dataset_locations ("
           "  dataset_id TEXT NOT NULL,"
           "  center_id TEXT NOT NULL,"
           "  PRIMARY KEY (dataset_id, center_id))",
           "CREATE INDEX dataset_locations_center ON dataset_locations (center_id)",
       }},
      {2,
       "nexec executor: jobs and hosts",
       {
           "CREATE TABLE nexec_jobs ("
           "  id BIGINT PRIMARY KEY,"
           "  state INTEGER NOT NULL,"
           "  doc TEXT NOT NULL)",
           "CREATE INDEX nexec_jobs_state ON nexec_jobs (state)",
           "CREATE TABLE nexec_hosts ("
           "  id TEXT PRIMARY KEY,"
           "  doc TEXT NOT NULL)",
       }},
      {3,
       "adapter SDK: replicas by external name, and the replica event log",
       {
           "CREATE TABLE adapter_replicas ("
           "  name TEXT PRIMARY KEY,"
           "  state INTEGER NOT NULL,"
           "  doc TEXT NOT NULL)",
           "CREATE TABLE adapter_events ("
           "  seq BIGINT PRIMARY KEY,"
           "  doc TEXT NOT NULL)",
       }},
      {4,
       "job manager: jobs (their replicas inside the document) and adapter watch cursors",
       {
           // version: a write only lands when it is newer than the stored one, so two
           // updates of one job committed out of order cannot go back in time.
           "CREATE TABLE jobs ("
           "  id TEXT PRIMARY KEY,"
           "  seq BIGINT NOT NULL,"
           "  user_name TEXT NOT NULL,"
           "  status TEXT NOT NULL,"
           "  idempotency_key TEXT UNIQUE,"
           "  version BIGINT NOT NULL,"
           "  doc TEXT NOT NULL)",
           "CREATE INDEX jobs_status ON jobs (status)",
           "CREATE INDEX jobs_user ON jobs (user_name)",
           "CREATE TABLE job_watch_cursors ("
           "  center_id TEXT PRIMARY KEY,"
           "  cursor BIGINT NOT NULL)",
       }},
      {5,
       "leases: one active instance of a service (the job manager) among several sharing the store",
       {
           "CREATE TABLE leases ("
           "  name TEXT PRIMARY KEY,"
           "  holder TEXT NOT NULL,"
           "  expires_at BIGINT NOT NULL)",
       }},
      {6,
       "store identity: created once with the data, it makes replica keys unique across control planes",
       {
           "CREATE TABLE store_identity ("
           "  name TEXT PRIMARY KEY,"
           "  value TEXT NOT NULL)",
       }},
      {7,
       "identities: users, projects, API tokens (hashed); jobs belong to a project",
       {
           "CREATE TABLE users ("
           "  id TEXT PRIMARY KEY,"
           "  doc TEXT NOT NULL)",
           "CREATE TABLE projects ("
           "  id TEXT PRIMARY KEY,"
           "  doc TEXT NOT NULL)",
           // Only the secret's SHA-256 is kept; last_used_at is written in batches.
           "CREATE TABLE api_tokens ("
           "  id TEXT PRIMARY KEY,"
           "  user_name TEXT NOT NULL,"
           "  secret_sha256 TEXT NOT NULL,"
           "  last_used_at BIGINT,"
           "  doc TEXT NOT NULL)",
           "CREATE INDEX api_tokens_user ON api_tokens (user_name)",
           "ALTER TABLE jobs ADD COLUMN project TEXT NOT NULL DEFAULT ''",
           "CREATE INDEX jobs_project ON jobs (project)",
       }},
      {8,
       "audit log: one row per mutation, written in the change's transaction, and per refused attempt",
       {
           // Columns, no document: a row goes with every mutation, so it is as cheap to
           // write as it can be; ids are time-ordered, so the primary key pages by time.
           // Filters scan (audit reads are rare, writes are not).
           "CREATE TABLE audit_log ("
           "  id TEXT PRIMARY KEY,"
           "  at TEXT NOT NULL,"
           "  actor TEXT NOT NULL,"
           "  auth_method TEXT NOT NULL,"
           "  project TEXT NOT NULL,"
           "  action TEXT NOT NULL,"
           "  object TEXT NOT NULL,"
           "  outcome TEXT NOT NULL,"
           "  message TEXT NOT NULL,"
           "  request_id TEXT NOT NULL,"
           "  source TEXT NOT NULL)",
       }},
      {9,
       "images and datasets belong to a project ('': the federation's)",
       {
           "ALTER TABLE images ADD COLUMN project TEXT NOT NULL DEFAULT ''",
           "CREATE INDEX images_project ON images (project)",
           "ALTER TABLE datasets ADD COLUMN project TEXT NOT NULL DEFAULT ''",
           "CREATE INDEX datasets_project ON datasets (project)",
       }},
      {10,
       "nexec executor: timed jobs",
       {
           "CREATE TABLE nexec_timed_jobs ("
           "  id BIGINT PRIMARY KEY,"
           "  doc TEXT NOT NULL)",
       }},
      {11,
       "job events: what the job manager committed about each job, by revision (watches resume from one)",
       {
           "CREATE TABLE job_events ("
           "  revision BIGINT PRIMARY KEY,"
           "  job_id TEXT NOT NULL,"
           "  doc TEXT NOT NULL)",
       }},
      {12,
       "metering: usage records (one per replica attempt that ran), their daily rollup, and ended jobs "
       "whose attempts have not all reported their end",
       {
           // Append-only; written in the job manager's transaction that closes the attempt.
           "CREATE TABLE usage_records ("
           "  id TEXT PRIMARY KEY,"
           "  job_id TEXT NOT NULL,"
           "  project TEXT NOT NULL,"
           "  user_name TEXT NOT NULL,"
           "  center_id TEXT NOT NULL,"
           "  spec_id TEXT NOT NULL,"
           "  ended_at BIGINT NOT NULL,"
           "  day TEXT NOT NULL,"
           "  billing_month TEXT NOT NULL,"
           "  doc TEXT NOT NULL)",
           "CREATE INDEX usage_records_ended ON usage_records (ended_at)",
           "CREATE INDEX usage_records_job ON usage_records (job_id)",
           "CREATE INDEX usage_records_month ON usage_records (billing_month, center_id)",
           // What reports read: sums per day and (project, user, center, spec), kept in the
           // transaction of the records they sum.
           "CREATE TABLE usage_daily ("
           "  day TEXT NOT NULL,"
           "  project TEXT NOT NULL,"
           "  user_name TEXT NOT NULL,"
           "  center_id TEXT NOT NULL,"
           "  spec_id TEXT NOT NULL,"
           JC_USAGE_SUM_COLUMNS
           "  PRIMARY KEY (day, project, user_name, center_id, spec_id))",
           // An ended job stays loaded while attempts it placed have not reported their end.
           "ALTER TABLE jobs ADD COLUMN open_attempts INTEGER NOT NULL DEFAULT 0",
           "CREATE INDEX jobs_open_attempts ON jobs (open_attempts)",
       }},
      {13,
       "prices with a history: each spec's price and each spec x center price from the instant it takes effect",
       {
           // center_id '' is the spec's own price (Table 3), the others the centers' (6.1.2).
           "CREATE TABLE spec_prices ("
           "  spec_id TEXT NOT NULL,"
           "  center_id TEXT NOT NULL,"
           "  effective_from BIGINT NOT NULL,"
           "  price INTEGER NOT NULL,"
           "  PRIMARY KEY (spec_id, center_id, effective_from))",
       }},
      {14,
       "settlement: months closed with their frozen statements, and the lock row records and closes take turns on",
       {
           // One row: the last month closed ('' none). Every transaction that appends usage
           // records updates it first, and so does a close: they never interleave, so a
           // record lands in a month still open or waits for the close to commit.
           "CREATE TABLE accounting_state ("
           "  name TEXT PRIMARY KEY,"
           "  closed_through TEXT NOT NULL,"
           "  records BIGINT NOT NULL)",
           "INSERT INTO accounting_state (name, closed_through, records) VALUES ('federation', '', 0)",
           "CREATE TABLE settlements ("
           "  month TEXT PRIMARY KEY,"
           "  closed_at BIGINT NOT NULL,"
           "  doc TEXT NOT NULL)",
           // What statements sum: per billing month, center and project, kept in the
           // records' transaction.
           "CREATE TABLE usage_billing ("
           "  billing_month TEXT NOT NULL,"
           "  center_id TEXT NOT NULL,"
           "  project TEXT NOT NULL,"
           JC_USAGE_SUM_COLUMNS
           "  PRIMARY KEY (billing_month, center_id, project))",
       }},
      {15,
       "metering: a monthly rollup beside the daily one (a month's report reads one row per group)",
       {
           "CREATE TABLE usage_monthly ("
           "  month TEXT NOT NULL,"
           "  project TEXT NOT NULL,"
           "  user_name TEXT NOT NULL,"
           "  center_id TEXT NOT NULL,"
           "  spec_id TEXT NOT NULL,"
           JC_USAGE_SUM_COLUMNS
           "  PRIMARY KEY (month, project, user_name, center_id, spec_id))",
       }},
      {16,
       "job events by job: a job's story read back for a watch with history",
       {
           "CREATE INDEX job_events_job ON job_events (job_id, revision)",
       }},
      {17,
       "nexec executor: ended jobs past the master's clean period, out of its memory and its live table",
       {
           // What `nexec show` and the native adapter read of a job the master no longer
           // holds; submit_key (the master's key index) and user_name so a keyed
           // submission is still answered with its job after a restart, and only for its
           // user; ended_at for fair share's past usage.
           "CREATE TABLE nexec_job_history ("
           "  id BIGINT PRIMARY KEY,"
           "  ended_at BIGINT NOT NULL,"
           "  submit_key TEXT NOT NULL,"
           "  user_name TEXT NOT NULL,"
           "  doc TEXT NOT NULL)",
           "CREATE INDEX nexec_job_history_ended ON nexec_job_history (ended_at)",
       }},
      {18,
       "adapter keys: what each center's adapter proves itself with (issue 44, hole 5)",
       {
           // Apart from the centers' documents, so no center read or listed ever carries a
           // key. The previous key stays valid until previous_until (unix microseconds).
           "CREATE TABLE adapter_keys ("
           "  center_id TEXT PRIMARY KEY,"
           "  current_key TEXT NOT NULL,"
           "  previous_key TEXT NOT NULL,"
           "  previous_until BIGINT NOT NULL,"
           "  issued_at BIGINT NOT NULL)",
       }},
      {19,
       "user names: who first took each name, a stored user or an identity provider's user (issue 44)",
       {
           // Jobs, idempotency keys, rate limits and a center's account for a user are kept
           // by name. The first to take a name keeps it: a stored user created later under
           // an OIDC identity's name would inherit that identity's jobs, and an OIDC identity
           // named like a deleted user that user's. claimed_by: "user" or "oidc".
           "CREATE TABLE user_names ("
           "  name TEXT PRIMARY KEY,"
           "  claimed_by TEXT NOT NULL,"
           "  claimed_at BIGINT NOT NULL)",
           "INSERT INTO user_names (name, claimed_by, claimed_at) SELECT id, 'user', 0 FROM users",
       }},
      {20,
       "image ids are unique within a project: images keyed by (project, id) (issue 44, hole 13)",
       {
           // A rebuild, the one way both SQLite and PostgreSQL change a primary key: a new
           // table, the rows copied, the old one dropped (its indexes with it), renamed.
           "CREATE TABLE images_by_project ("
           "  project TEXT NOT NULL,"
           "  id TEXT NOT NULL,"
           "  center_id TEXT NOT NULL,"
           "  framework TEXT NOT NULL,"
           "  doc TEXT NOT NULL,"
           "  PRIMARY KEY (project, id))",
           "INSERT INTO images_by_project (project, id, center_id, framework, doc) "
           "SELECT project, id, center_id, framework, doc FROM images",
           "DROP TABLE images",
           "ALTER TABLE images_by_project RENAME TO images",
           "CREATE INDEX images_center ON images (center_id)",
           // Lists page by (id, project); a job's image is looked up by id.
           "CREATE INDEX images_id ON images (id, project)",
       }},
      {21,
       "dataset names and versions are unique within a project (issue 44)",
       {
           // A project's dataset row is "<project>/<name>/<version>", the federation's
           // stays "<name>/<version>" (project names, data names and versions never hold
           // '/'), so two projects may hold the same name and version; locations follow.
           "UPDATE dataset_locations SET dataset_id = (SELECT d.project || '/' || d.id FROM datasets d "
           "WHERE d.id = dataset_locations.dataset_id) "
           "WHERE dataset_id IN (SELECT id FROM datasets WHERE project <> '')",
           "UPDATE datasets SET id = project || '/' || id WHERE project <> ''",
           "CREATE INDEX datasets_name ON datasets (data_name)",
       }},
      {22,
       "jobs' run times learned from history (issue 45, SPEC A16)",
       {
           // One row per estimator key (services/estimator): its sketch of run times, written
           // in the transaction of the burst that closed the attempt it learned from. Read
           // at leadership only, most recent first, at most the estimator's bound.
           "CREATE TABLE job_durations ("
           "  key TEXT PRIMARY KEY,"
           "  sketch TEXT NOT NULL,"
           "  updated_at BIGINT NOT NULL)",
           "CREATE INDEX job_durations_updated ON job_durations (updated_at)",
       }},
      {23,
       "links and sessions of the endpoint listener (issue 46, SPEC A17)",
       {
           // One row per link JobService.OpenEndpoint issued: only the SHA-256 of its secret
           // is kept. Redeeming it (once, before ticket_expires_us) sets session_sha256, the
           // cookie the browser then presents, good until expires_us for that endpoint alone.
           // Who it was issued to is kept to check them again on every connection.
           "CREATE TABLE endpoint_passes ("
           "  ticket_sha256 TEXT PRIMARY KEY,"
           "  session_sha256 TEXT UNIQUE,"
           "  job_id TEXT NOT NULL,"
           "  task_index INTEGER NOT NULL,"
           "  replica_index INTEGER NOT NULL,"
           "  port_name TEXT NOT NULL,"
           "  landing_path TEXT NOT NULL,"
           "  project TEXT NOT NULL,"
           "  user_name TEXT NOT NULL,"
           "  auth_method TEXT NOT NULL,"
           "  token_id TEXT NOT NULL,"
           "  role INTEGER NOT NULL,"
           "  ticket_expires_us BIGINT NOT NULL,"
           "  expires_us BIGINT NOT NULL)",
           "CREATE INDEX endpoint_passes_expiry ON endpoint_passes (expires_us)",
       }},
      {24,
       "commands run in replicas through the endpoint listener (issue 46, SPEC A17)",
       {
           // A link issued for `jcctl job exec` runs one command, kept here as JSON
           // ({"command": [...], "tty": bool}); empty for a port's link.
           "ALTER TABLE endpoint_passes ADD COLUMN exec_command TEXT NOT NULL DEFAULT ''",
       }},
      {25,
       "leases count their terms: each time one changes hands (or is taken again after it ended), its term "
       "goes up, and the nexec master's calls to agents carry it (issue 47)",
       {
           "ALTER TABLE leases ADD COLUMN term BIGINT NOT NULL DEFAULT 0",
       }},
      {26,
       "jobs listed by center and creation time; every job's placement explanation kept, bounded (issue 49)",
       {
           // When the job was received (unix microseconds) and every center a replica of it
           // was placed at, at any attempt (",east,west,": a center is found as ",east,").
           // Rows written before have 0 and '': the job manager fills them from their
           // documents when it starts leading (JobStore::BackfillListColumns).
           "ALTER TABLE jobs ADD COLUMN created_us BIGINT NOT NULL DEFAULT 0",
           "ALTER TABLE jobs ADD COLUMN centers TEXT NOT NULL DEFAULT ''",
           "CREATE INDEX jobs_created ON jobs (created_us)",
           // The scheduler's explanation of a job's latest placement (a Placement in JSON,
           // trimmed: services/scheduler/placement_journal.h), written off the decision path
           // by a batcher and pruned to the newest jobs' (--placement_history).
           "CREATE TABLE job_placements ("
           "  job_id TEXT PRIMARY KEY,"
           "  decided_us BIGINT NOT NULL,"
           "  doc TEXT NOT NULL)",
           "CREATE INDEX job_placements_decided ON job_placements (decided_us)",
       }},
      {27,
       "prices are exact decimals (millionths of the catalog's unit); each center's offered capacity keeps a "
       "history, for utilisation (issue 49)",
       {
           // The price, in millionths (common/price.h); `price` stays, whole units truncated,
           // for a reader of the old schema.
           "ALTER TABLE spec_prices ADD COLUMN price_micros BIGINT NOT NULL DEFAULT 0",
           "UPDATE spec_prices SET price_micros = CAST(price AS BIGINT) * 1000000",
           "ALTER TABLE spec_centers ADD COLUMN price_micros BIGINT",
           "UPDATE spec_centers SET price_micros = CAST(price AS BIGINT) * 1000000 WHERE price IS NOT NULL",
           // A center's registered capacity (Table 2) from an instant on (unix microseconds),
           // written with every registration, capacity change and removal (all zero: offers
           // nothing from then). Centers registered before have theirs written from their
           // documents when the registry starts (Registry::BackfillCapacityHistory).
           "CREATE TABLE center_capacity ("
           "  center_id TEXT NOT NULL,"
           "  effective_us BIGINT NOT NULL,"
           "  cpu BIGINT NOT NULL,"
           "  gpu BIGINT NOT NULL,"
           "  memory_mb BIGINT NOT NULL,"
           "  PRIMARY KEY (center_id, effective_us))",
       }},
      {28,
       "adapter SDK: ended replicas are forgotten after the center's replica_retention; what was forgotten is "
       "remembered as a bound",
       {
           // One row (id 1): every replica the adapter forgot ended at or before
           // ended_through_us (unix microseconds), and how many it forgot in all. Kept in the
           // store of the book it bounds: a book lost with its store loses this too, and a
           // replica missing from a book that forgot nothing was never had.
           "CREATE TABLE adapter_forgotten ("
           "  id INTEGER PRIMARY KEY,"
           "  ended_through_us BIGINT NOT NULL,"
           "  replicas BIGINT NOT NULL)",
           // When the adapter learned that the replica ended (unix microseconds, its own
           // clock; 0: not ended, or ended before this column): what its retention counts
           // from, whatever time the center's scheduler gave the end.
           "ALTER TABLE adapter_replicas ADD COLUMN ended_us BIGINT NOT NULL DEFAULT 0",
       }},
  };
  return *migrations;
}

namespace {

absl::StatusOr<int> ReadVersion(Transaction& txn) {
  JC_RETURN_IF_ERROR(txn.Exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                              "  version INTEGER PRIMARY KEY,"
                              "  description TEXT NOT NULL)")
                         .status());
  JC_ASSIGN_OR_RETURN(Rows rows, txn.Query("SELECT MAX(version) FROM schema_migrations"));
  int version = 0;
  if (!rows.empty() && rows[0][0].has_value() && !absl::SimpleAtoi(*rows[0][0], &version)) {
    return absl::DataLossError("schema_migrations holds a non-numeric version");
  }
  return version;
}

}  // namespace

absl::StatusOr<int> SchemaVersion(Store& store) {
  JC_ASSIGN_OR_RETURN(auto txn, store.Begin());
  JC_ASSIGN_OR_RETURN(int version, ReadVersion(*txn));
  JC_RETURN_IF_ERROR(txn->Commit());
  return version;
}

absl::Status Migrate(Store& store) {
  // One transaction for the whole upgrade. Several processes may start at once against
  // one PostgreSQL (docker-compose starts every service together): the advisory lock
  // makes them take turns, and the later ones find nothing left to do. SQLite's
  // BEGIN IMMEDIATE already serializes writers.
  JC_ASSIGN_OR_RETURN(auto txn, store.Begin());
  if (store.backend() == "postgres") {
    JC_RETURN_IF_ERROR(txn->Query("SELECT pg_advisory_xact_lock(74120001)").status());
  }
  JC_ASSIGN_OR_RETURN(int current, ReadVersion(*txn));
  const auto& all = Migrations();
  int newest = all.empty() ? 0 : all.back().version;
  if (current > newest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the database schema is at version ", current, " but this binary knows only up to ",
        newest, "; run a newer jointcloud"));
  }
  for (const Migration& m : all) {
    if (m.version <= current) continue;
    for (absl::string_view sql : m.statements) {
      auto done = txn->Exec(sql);
      if (!done.ok()) {
        return absl::Status(done.status().code(),
                            absl::StrCat("migration ", m.version, " (", m.description,
                                         "): ", done.status().message()));
      }
    }
    JC_RETURN_IF_ERROR(txn->Exec("INSERT INTO schema_migrations (version, description) "
                                 "VALUES ($1, $2)",
                                 {int64_t{m.version}, std::string(m.description)})
                           .status());
  }
  return txn->Commit();
}

}  // namespace jc::store
