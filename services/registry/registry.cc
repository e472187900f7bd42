#include "absl/strings/string_view.h"
#include "services/registry/registry.h"


#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/store/doc_table.h"
#include "common/timestamp.h"
#include "common/update_mask.h"
#include "common/path_inside.h"
#include "common/validate.h"

namespace jc::registry {
namespace {

using google::protobuf::FieldMask;

// Fields a client may change after creation.
const std::vector<std::string>& MutableFields() {
  static const auto* fields = new std::vector<std::string>{
      "name", "region", "status", "geometry", "capacity", "security_grade",
      "adapter_address", "network_topology", "labels", "data_roots"};
  return *fields;
}

absl::Status CheckResources(const v1::ComputingResources& r) {
  const std::pair<const char*, int32_t> fields[] = {
      {"cpu", r.cpu()},         {"gpu", r.gpu()},         {"npu", r.npu()},
      {"mlu", r.mlu()},         {"memory", r.memory()},   {"storage", r.storage()},
      {"user_define", r.user_define()}};
  for (const auto& [name, value] : fields) {
    if (value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("capacity.", name, " must not be negative (got ", value, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Center> LoadCenter(store::Transaction& txn, const std::string& id,
                                      absl::string_view lock_suffix) {
  return store::LoadDoc<v1::Center>(txn, "centers", "center", id, lock_suffix);
}

absl::Status SaveCenter(store::Transaction& txn, const v1::Center& center) {
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(center));
  JC_ASSIGN_OR_RETURN(int64_t n, txn.Exec("UPDATE centers SET region = $2, status = $3, doc = $4 "
                                          "WHERE id = $1",
                                          {center.ai_center_id(), center.region(),
                                           int64_t{center.status()}, doc}));
  if (n == 0) {
    return absl::NotFoundError(absl::StrCat("center \"", center.ai_center_id(), "\" not found"));
  }
  return absl::OkStatus();
}

// The center's offered capacity from `at` on (migration 27: utilisation is offered capacity
// against use). Written in the transaction that changes the center, so the history and
// the registry never disagree. `capacity` null: the center left, offering nothing.
absl::Status RecordCapacity(store::Transaction& txn, const std::string& id, absl::Time at,
                            const v1::ComputingResources* capacity) {
  const int64_t cpu = capacity ? capacity->cpu() : 0, gpu = capacity ? capacity->gpu() : 0,
                memory = capacity ? capacity->memory() : 0;
  // Changes within a minute of the center's latest step are that step (an operator's
  // script flipping its capacity would otherwise grow the history without end: helper-52 F5).
  const int64_t at_us = absl::ToUnixMicros(at);
  JC_ASSIGN_OR_RETURN(int64_t coalesced,
                      txn.Exec("UPDATE center_capacity SET cpu = $3, gpu = $4, memory_mb = $5 WHERE center_id = $1 "
                               "AND effective_us > $2 AND effective_us = (SELECT MAX(effective_us) FROM center_capacity "
                               "WHERE center_id = $1)",
                               {id, at_us - absl::ToInt64Microseconds(absl::Minutes(1)), cpu, gpu, memory}));
  if (coalesced > 0) return absl::OkStatus();
  return txn
      .Exec("INSERT INTO center_capacity (center_id, effective_us, cpu, gpu, memory_mb) VALUES ($1, $2, $3, $4, $5) "
            "ON CONFLICT (center_id, effective_us) DO UPDATE SET cpu = excluded.cpu, gpu = excluded.gpu, "
            "memory_mb = excluded.memory_mb",
            {id, at_us, cpu, gpu, memory})
      .status();
}

bool SameOffer(const v1::ComputingResources& a, const v1::ComputingResources& b) {
  return a.cpu() == b.cpu() && a.gpu() == b.gpu() && a.memory() == b.memory();
}

}  // namespace

absl::Status ValidateCenter(const v1::Center& c) {
  JC_RETURN_IF_ERROR(CheckId("ai_center_id", c.ai_center_id()));
  // A center's adapter certificate names its center id, and adapters take calls from the
  // control plane's certificates by name (--tls_allowed_clients): a center named like one of
  // Jointcloud's own services would get a certificate every adapter takes for the control
  // plane's.
  static constexpr absl::string_view kServiceNames[] = {"jointcloud", "registry", "catalog",    "datamon", "scheduler",
                                                        "gateway",    "identity", "jobs",       "monitor", "accounting"};
  for (absl::string_view reserved : kServiceNames) {
    if (c.ai_center_id() == reserved) {
      return absl::InvalidArgumentError(absl::StrCat("ai_center_id \"", reserved,
                                                     "\" is reserved: Jointcloud's own services carry it in their "
                                                     "certificates, which adapters accept as the control plane"));
    }
  }
  JC_RETURN_IF_ERROR(CheckRequiredText("name", c.name()));
  JC_RETURN_IF_ERROR(CheckOptionalText("region", c.region()));
  if (c.has_status() && (c.status() < 0 || c.status() > 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "status must be 0 (unavailable), 1 (available) or 2 (unknown); got ", c.status()));
  }
  if (!c.geometry().empty()) {
    if (c.geometry_size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "geometry must be [longitude, latitude]; got ", c.geometry_size(), " numbers"));
    }
    double lon = c.geometry(0), lat = c.geometry(1);
    if (!std::isfinite(lon) || lon < -180 || lon > 180) {
      return absl::InvalidArgumentError(
          absl::StrCat("geometry longitude must be within [-180, 180]; got ", lon));
    }
    if (!std::isfinite(lat) || lat < -90 || lat > 90) {
      return absl::InvalidArgumentError(
          absl::StrCat("geometry latitude must be within [-90, 90]; got ", lat));
    }
  }
  JC_RETURN_IF_ERROR(CheckResources(c.capacity()));
  if (c.security_grade() < 0) {
    return absl::InvalidArgumentError("security_grade must not be negative");
  }
  JC_RETURN_IF_ERROR(CheckOptionalText("adapter_address", c.adapter_address(), 255));
  JC_RETURN_IF_ERROR(CheckOptionalText("network_topology", c.network_topology(), 255));
  if (c.data_roots_size() > 16) return absl::InvalidArgumentError("data_roots: at most 16 directories");
  for (const auto& root : c.data_roots()) {
    if (root.empty() || root[0] != '/' || root.size() > 1024) {
      return absl::InvalidArgumentError(absl::StrCat("data_roots: \"", root, "\" is not an absolute path"));
    }
    if (!IsPlainPath(root)) {
      return absl::InvalidArgumentError(absl::StrCat("data_roots: \"", root, "\" must not contain . or .. parts"));
    }
  }
  for (const auto& [key, value] : c.labels()) {
    JC_RETURN_IF_ERROR(CheckRequiredText("label key", key));
    JC_RETURN_IF_ERROR(CheckOptionalText(absl::StrCat("label \"", key, "\""), value, 255));
  }
  return absl::OkStatus();
}

Registry::Registry(store::Store* store, const Clock* clock, RegistryOptions options)
    : store_(store), clock_(clock), options_(options), started_(clock->Now()) {}

void Registry::Publish(v1::CenterEvent::Type type, const v1::Center& center,
                       int previous_status) {
  v1::CenterEvent event;
  event.set_type(type);
  *event.mutable_center() = center;
  event.set_previous_status(previous_status);
  *event.mutable_at() = ToTimestamp(clock_->Now());
  events_.Append(std::move(event), [](v1::CenterEvent& e, uint64_t rev) { e.set_revision(rev); });
}

absl::StatusOr<v1::Center> Registry::Create(v1::Center center) {
  JC_RETURN_IF_ERROR(ValidateCenter(center));
  if (!center.has_status()) center.set_status(kUnknown);
  center.set_adapter_key_issued(false);  // output only: IssueAdapterKey sets it
  auto now = ToTimestamp(clock_->Now());
  *center.mutable_created_at() = now;
  *center.mutable_updated_at() = now;
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(center));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  auto inserted = txn->Exec("INSERT INTO centers (id, region, status, doc) VALUES ($1, $2, $3, $4)",
                            {center.ai_center_id(), center.region(),
                             int64_t{center.status()}, doc});
  if (absl::IsAlreadyExists(inserted.status())) {
    return absl::AlreadyExistsError(
        absl::StrCat("center \"", center.ai_center_id(), "\" already exists"));
  }
  JC_RETURN_IF_ERROR(inserted.status());
  JC_RETURN_IF_ERROR(RecordCapacity(*txn, center.ai_center_id(), clock_->Now(), &center.capacity()));
  JC_RETURN_IF_ERROR(txn->Commit());
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_seen_[center.ai_center_id()] = clock_->Now();
  }
  Publish(v1::CenterEvent::JOINED, center, center.status());
  return center;
}

absl::Status Registry::BackfillCapacityHistory() {
  // Centers registered before the history was kept (migration 27): their capacity from when
  // they were registered (their document's created_at; the history cannot know of changes
  // before). Idempotent: a center with any row is left alone.
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT doc FROM centers WHERE id NOT IN "
                                                      "(SELECT DISTINCT center_id FROM center_capacity)"));
  for (const auto& row : rows) {
    JC_ASSIGN_OR_RETURN(v1::Center center, store::DecodeDoc<v1::Center>(row[0]));
    JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
    absl::Time since = center.has_created_at() ? FromTimestamp(center.created_at()) : clock_->Now();
    JC_RETURN_IF_ERROR(RecordCapacity(*txn, center.ai_center_id(), since, &center.capacity()));
    JC_RETURN_IF_ERROR(txn->Commit());
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Center> Registry::Get(const std::string& id) {
  JC_RETURN_IF_ERROR(CheckId("ai_center_id", id));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::Center center, LoadCenter(*txn, id, ""));
  JC_RETURN_IF_ERROR(txn->Commit());
  return center;
}

absl::StatusOr<v1::Center> Registry::Update(const v1::Center& patch, const FieldMask& mask) {
  JC_RETURN_IF_ERROR(CheckId("ai_center_id", patch.ai_center_id()));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::Center center,
                      LoadCenter(*txn, patch.ai_center_id(), store_->for_update()));
  int previous = center.status();
  const v1::ComputingResources capacity_before = center.capacity();
  JC_RETURN_IF_ERROR(ApplyUpdate(patch, mask, MutableFields(), {"ai_center_id"}, &center));
  if (!center.has_status()) center.set_status(previous);
  JC_RETURN_IF_ERROR(ValidateCenter(center));
  *center.mutable_updated_at() = ToTimestamp(clock_->Now());
  JC_RETURN_IF_ERROR(SaveCenter(*txn, center));
  if (!SameOffer(capacity_before, center.capacity())) {
    JC_RETURN_IF_ERROR(RecordCapacity(*txn, center.ai_center_id(), clock_->Now(), &center.capacity()));
  }
  JC_RETURN_IF_ERROR(txn->Commit());
  Publish(previous != center.status() ? v1::CenterEvent::STATUS_CHANGED : v1::CenterEvent::UPDATED,
          center, previous);
  return center;
}

absl::Status Registry::Delete(const std::string& id) {
  JC_RETURN_IF_ERROR(CheckId("ai_center_id", id));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::Center center, LoadCenter(*txn, id, store_->for_update()));
  JC_RETURN_IF_ERROR(txn->Exec("DELETE FROM centers WHERE id = $1", {id}).status());
  JC_RETURN_IF_ERROR(DropAdapterKeysIn(*txn, id));
  JC_RETURN_IF_ERROR(RecordCapacity(*txn, id, clock_->Now(), nullptr));
  JC_RETURN_IF_ERROR(txn->Commit());
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_seen_.erase(id);
  }
  Publish(v1::CenterEvent::LEFT, center, center.status());
  return absl::OkStatus();
}

absl::StatusOr<IssuedAdapterKey> Registry::IssueAdapterKey(const std::string& id) {
  JC_RETURN_IF_ERROR(CheckId("ai_center_id", id));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::Center center, LoadCenter(*txn, id, store_->for_update()));
  JC_ASSIGN_OR_RETURN(IssuedAdapterKey issued, IssueAdapterKeyIn(*txn, id, clock_->Now(), options_.adapter_key_grace));
  const bool changed = !center.adapter_key_issued();
  if (changed) {
    center.set_adapter_key_issued(true);
    *center.mutable_updated_at() = ToTimestamp(clock_->Now());
    JC_RETURN_IF_ERROR(SaveCenter(*txn, center));
  }
  JC_RETURN_IF_ERROR(txn->Commit());
  if (changed) Publish(v1::CenterEvent::UPDATED, center, center.status());
  return issued;
}

absl::StatusOr<v1::ListCentersResponse> Registry::List(const v1::ListCentersRequest& req) {
  if (req.has_status() && (req.status() < 0 || req.status() > 2)) {
    return absl::InvalidArgumentError("status filter must be 0, 1 or 2");
  }
  std::vector<store::Condition> where;
  if (!req.region().empty()) where.push_back({"region = $?", req.region()});
  if (req.has_status()) where.push_back({"status = $?", int64_t{req.status()}});
  JC_ASSIGN_OR_RETURN(store::DocPage page,
                      store::ListDocs(*store_, "centers", where, req.page_token(), req.page_size()));
  v1::ListCentersResponse out;
  for (const auto& doc : page.docs) {
    JC_ASSIGN_OR_RETURN(*out.add_centers(), store::DecodeDoc<v1::Center>(doc));
  }
  out.set_next_page_token(page.next_page_token);
  return out;
}

absl::StatusOr<v1::Center> Registry::SetStatus(const std::string& id, int status) {
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::Center center, LoadCenter(*txn, id, store_->for_update()));
  int previous = center.status();
  if (previous == status) return center;
  center.set_status(status);
  *center.mutable_updated_at() = ToTimestamp(clock_->Now());
  JC_RETURN_IF_ERROR(SaveCenter(*txn, center));
  JC_RETURN_IF_ERROR(txn->Commit());
  Publish(v1::CenterEvent::STATUS_CHANGED, center, previous);
  return center;
}

absl::StatusOr<int> Registry::Heartbeat(const std::string& id, bool healthy) {
  JC_RETURN_IF_ERROR(CheckId("ai_center_id", id));
  JC_ASSIGN_OR_RETURN(v1::Center center, SetStatus(id, healthy ? kAvailable : kUnavailable));
  std::lock_guard<std::mutex> lock(mu_);
  last_seen_[id] = clock_->Now();
  return center.status();
}

absl::StatusOr<std::array<int, 3>> Registry::CountByStatus() {
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      store_->Query("SELECT status, COUNT(*) FROM centers GROUP BY status"));
  std::array<int, 3> counts{0, 0, 0};
  for (const auto& row : rows) {
    int status = std::stoi(*row[0]);
    if (status >= 0 && status < 3) counts[status] = std::stoi(*row[1]);
  }
  return counts;
}

absl::StatusOr<int> Registry::SweepHealth() {
  // Status lives in the store so every replica and every restart agree on it; the
  // sweep reads the ids and statuses only (no documents) to stay cheap.
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT id, status FROM centers"));
  absl::Time now = clock_->Now();
  int changed = 0;
  for (const auto& row : rows) {
    const std::string& id = *row[0];
    int status = std::stoi(*row[1]);
    absl::Time seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = last_seen_.find(id);
      seen = it == last_seen_.end() ? started_ : it->second;
    }
    absl::Duration silent = now - seen;
    int target = status;
    if (silent >= options_.unavailable_after) {
      target = kUnavailable;
    } else if (silent >= options_.unknown_after && status == kAvailable) {
      target = kUnknown;
    }
    if (target == status) continue;
    auto set = SetStatus(id, target);
    if (set.ok()) {
      ++changed;
    } else if (!absl::IsNotFound(set.status())) {
      return set.status();
    }
  }
  return changed;
}

}  // namespace jc::registry
