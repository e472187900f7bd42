#include "services/datamon/datamon.h"

#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/path_inside.h"
#include "common/status_macros.h"
#include "common/store/doc_table.h"
#include "common/timestamp.h"
#include "common/update_mask.h"
#include "common/validate.h"
#include "services/datamon/source_selection.h"

namespace jc::datamon {
namespace {

constexpr absl::string_view kProjectPlaceholder = "{project}";

const std::vector<std::string>& MutableFields() {
  static const auto* f =
      new std::vector<std::string>{"created_user", "location", "is_private", "size_mb"};
  return *f;
}

absl::Status CheckKey(const v1::DatasetKey& key) {
  JC_RETURN_IF_ERROR(CheckId("data_name", key.data_name()));
  return CheckId("data_version", key.data_version());
}

v1::DatasetKey KeyOf(const v1::Dataset& d) {
  v1::DatasetKey key;
  key.set_data_name(d.data_name());
  key.set_data_version(d.data_version());
  return key;
}

// Names, versions and project names are URL-safe ids, so "/" occurs in none of them: a
// project's dataset is "<project>/<name>/<version>", the federation's "<name>/<version>"
// (store migration 21). Names are unique within a project, not across projects.
std::string RowId(const std::string& project, const v1::DatasetKey& key) {
  if (project.empty()) return absl::StrCat(key.data_name(), "/", key.data_version());
  return absl::StrCat(project, "/", key.data_name(), "/", key.data_version());
}

// A key's project as stored: "-" names the federation's ("").
std::string StoredProject(const std::string& project) { return project == "-" ? "" : project; }

std::string Describe(const v1::DatasetKey& key) {
  return absl::StrCat("dataset ", key.data_name(), ":", key.data_version());
}

}  // namespace

absl::Status ValidateDataset(const v1::Dataset& d) {
  JC_RETURN_IF_ERROR(CheckKey(KeyOf(d)));
  if (d.project() == "-") {
    return absl::InvalidArgumentError(
        "project \"-\" names the federation when reading a dataset; leave project empty to register one for it");
  }
  JC_RETURN_IF_ERROR(CheckOptionalText("created_user", d.created_user()));
  if (d.size_mb() < 0) return absl::InvalidArgumentError("size_mb must not be negative");
  std::set<std::string> seen;
  for (int i = 0; i < d.location_size(); ++i) {
    const auto& l = d.location(i);
    std::string at = absl::StrCat("location[", i, "].");
    JC_RETURN_IF_ERROR(CheckId(at + "ai_center_id", l.ai_center_id()));
    if (!seen.insert(l.ai_center_id()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "location lists center \"", l.ai_center_id(), "\" twice; one entry per center"));
    }
    JC_RETURN_IF_ERROR(CheckRequiredText(at + "dataset_url", l.dataset_url(), 1024));
    if (l.access() != "r" && l.access() != "rw" && l.access() != "none") {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "access must be \"r\", \"rw\" or \"none\"; got \"", l.access(), "\""));
    }
    if (l.download_rate_limit() < 0 || l.concurrency_limit() < 0 || l.current_downloads() < 0 ||
        l.download_cost() < 0 || l.download_state().succeeded() < 0 ||
        l.download_state().interrupted() < 0 || l.download_state().failed() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          at, "download_rate_limit, concurrency_limit, current_downloads, download_cost and "
              "download_state counts must not be negative"));
    }
    JC_RETURN_IF_ERROR(CheckOptionalText(at + "network_topology", l.network_topology(), 255));
  }
  return absl::OkStatus();
}

Datamon::Datamon(store::Store* store, const Clock* clock, registry::CenterDirectory* centers,
                 std::map<std::string, double> weights)
    : store_(store), clock_(clock), centers_(centers), weights_(std::move(weights)) {}

absl::Status Datamon::CheckLocations(const v1::Dataset& dataset, bool shared_roots) {
  for (const auto& l : dataset.location()) {
    auto center = centers_->GetCenter(l.ai_center_id());
    if (absl::IsNotFound(center.status())) {
      return absl::InvalidArgumentError(
          absl::StrCat("location names unknown center \"", l.ai_center_id(), "\""));
    }
    JC_RETURN_IF_ERROR(center.status());
    // A file:// dataset must lie under one of the center's declared data roots (its
    // adapter checks its own data_sources again, symlinks resolved, when it stages).
    const std::string& url = l.dataset_url();
    if (!absl::StartsWith(url, "file://")) continue;
    std::string path = url.substr(std::strlen("file://"));
    if (!IsPlainPath(path)) {
      return absl::InvalidArgumentError(absl::StrCat("location at \"", l.ai_center_id(), "\": ", url,
                                                     " is not an absolute path without . or .. parts"));
    }
    // A root naming {project} is each project's own directory: it takes that project's
    // datasets, and is the only kind a project member may register under, so that no
    // member points a dataset at another project's files. Other roots are shared and
    // take datasets that admins register.
    bool under = false;
    for (const auto& root : center->data_roots()) {
      if (absl::StrContains(root, kProjectPlaceholder)) {
        if (dataset.project().empty()) continue;
        under = under || LexicallyUnder(path, absl::StrReplaceAll(root, {{kProjectPlaceholder, dataset.project()}}));
      } else if (shared_roots) {
        under = under || LexicallyUnder(path, root);
      }
    }
    if (!under) {
      return absl::PermissionDeniedError(absl::StrCat(
          "location at \"", l.ai_center_id(), "\": ", url, " is outside the center's data roots (",
          center->data_roots().empty() ? std::string("it declares none; an admin or its operator sets data_roots")
                                       : absl::StrJoin(center->data_roots(), ", "),
          ")", shared_roots ? "" : "; a project member registers only under roots naming {project}",
          dataset.project().empty() ? "" : absl::StrCat(", which is \"", dataset.project(), "\" for this dataset")));
    }
  }
  return absl::OkStatus();
}

absl::Status Datamon::SaveLocations(store::Transaction& txn, const std::string& id,
                                    const v1::Dataset& dataset) {
  JC_RETURN_IF_ERROR(txn.Exec("DELETE FROM dataset_locations WHERE dataset_id = $1", {id}).status());
  for (const auto& l : dataset.location()) {
    JC_RETURN_IF_ERROR(txn.Exec("INSERT INTO dataset_locations (dataset_id, center_id) "
                                "VALUES ($1, $2)",
                                {id, l.ai_center_id()})
                           .status());
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Dataset> Datamon::Create(v1::Dataset dataset, bool by_admin) {
  JC_RETURN_IF_ERROR(ValidateDataset(dataset));
  JC_RETURN_IF_ERROR(CheckLocations(dataset, by_admin));
  auto now = ToTimestamp(clock_->Now());
  *dataset.mutable_created_at() = now;
  *dataset.mutable_updated_at() = now;
  // Keyed by project too: another project's dataset of this name and version never
  // collides with it (issue 44), so the answer says nothing of other projects'.
  std::string id = RowId(dataset.project(), KeyOf(dataset));
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(dataset));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  auto inserted = txn->Exec("INSERT INTO datasets (id, data_name, created_user, project, doc) "
                            "VALUES ($1, $2, $3, $4, $5)",
                            {id, dataset.data_name(), dataset.created_user(), dataset.project(), doc});
  if (absl::IsAlreadyExists(inserted.status())) {
    return absl::AlreadyExistsError(absl::StrCat(Describe(KeyOf(dataset)), " already exists"));
  }
  JC_RETURN_IF_ERROR(inserted.status());
  JC_RETURN_IF_ERROR(SaveLocations(*txn, id, dataset));
  JC_RETURN_IF_ERROR(txn->Commit());
  return dataset;
}

absl::StatusOr<v1::Dataset> Datamon::Get(const v1::DatasetKey& key) {
  JC_RETURN_IF_ERROR(CheckKey(key));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  auto found = store::LoadDoc<v1::Dataset>(*txn, "datasets", "dataset", RowId(StoredProject(key.project()), key));
  if (absl::IsNotFound(found.status())) {
    return absl::NotFoundError(absl::StrCat(Describe(key), " not found"));
  }
  return found;
}

absl::StatusOr<std::vector<v1::Dataset>> Datamon::Find(const v1::DatasetKey& key) {
  JC_RETURN_IF_ERROR(CheckKey(key));
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      store_->Query("SELECT doc FROM datasets WHERE data_name = $1 ORDER BY id", {key.data_name()}));
  std::vector<v1::Dataset> out;
  for (const auto& row : rows) {
    JC_ASSIGN_OR_RETURN(v1::Dataset d, store::DecodeDoc<v1::Dataset>(row[0]));
    if (d.data_version() == key.data_version()) out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<v1::Dataset> Datamon::Update(const v1::Dataset& patch, const google::protobuf::FieldMask& mask,
                                            bool by_admin) {
  v1::DatasetKey key = KeyOf(patch);
  key.set_project(patch.project().empty() ? "-" : patch.project());
  JC_ASSIGN_OR_RETURN(v1::Dataset dataset, Get(key));
  JC_RETURN_IF_ERROR(
      ApplyUpdate(patch, mask, MutableFields(), {"data_name", "data_version", "project"}, &dataset));
  JC_RETURN_IF_ERROR(ValidateDataset(dataset));
  JC_RETURN_IF_ERROR(CheckLocations(dataset, by_admin));
  *dataset.mutable_updated_at() = ToTimestamp(clock_->Now());
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(dataset));
  std::string id = RowId(dataset.project(), key);
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(int64_t n, txn->Exec("UPDATE datasets SET created_user = $2, doc = $3 "
                                           "WHERE id = $1",
                                           {id, dataset.created_user(), doc}));
  if (n == 0) return absl::NotFoundError(absl::StrCat(Describe(key), " not found"));
  JC_RETURN_IF_ERROR(SaveLocations(*txn, id, dataset));
  JC_RETURN_IF_ERROR(txn->Commit());
  return dataset;
}

absl::Status Datamon::Delete(const v1::DatasetKey& key) {
  JC_RETURN_IF_ERROR(CheckKey(key));
  std::string id = RowId(StoredProject(key.project()), key);
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(int64_t n, txn->Exec("DELETE FROM datasets WHERE id = $1", {id}));
  if (n == 0) return absl::NotFoundError(absl::StrCat(Describe(key), " not found"));
  JC_RETURN_IF_ERROR(txn->Exec("DELETE FROM dataset_locations WHERE dataset_id = $1", {id}).status());
  return txn->Commit();
}

absl::StatusOr<v1::ListDatasetsResponse> Datamon::List(const v1::ListDatasetsRequest& req,
                                                       const std::optional<std::vector<std::string>>& projects) {
  std::vector<store::Condition> where;
  if (!req.project().empty()) where.push_back({"project = $?", req.project() == "-" ? "" : req.project()});
  store::AddProjectScope(projects, &where);
  if (!req.data_name().empty()) where.push_back({"data_name = $?", req.data_name()});
  if (!req.created_user().empty()) where.push_back({"created_user = $?", req.created_user()});
  if (!req.ai_center_id().empty()) {
    where.push_back({"id IN (SELECT dataset_id FROM dataset_locations WHERE center_id = $?)",
                     req.ai_center_id()});
  }
  JC_ASSIGN_OR_RETURN(store::DocPage page,
                      store::ListDocs(*store_, "datasets", where, req.page_token(), req.page_size()));
  v1::ListDatasetsResponse out;
  for (const auto& doc : page.docs) {
    JC_ASSIGN_OR_RETURN(*out.add_datasets(), store::DecodeDoc<v1::Dataset>(doc));
  }
  out.set_next_page_token(page.next_page_token);
  return out;
}

absl::StatusOr<v1::SelectMigrationSourcesResponse> Datamon::SelectSources(
    const v1::SelectMigrationSourcesRequest& req) {
  JC_RETURN_IF_ERROR(CheckId("target_center_id", req.target_center_id()));
  SelectionInput in;
  in.weights = weights_;
  for (const auto& [name, w] : req.weights()) {
    if (!in.weights.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown migration evaluator \"", name,
          "\"; known: least_load, least_time, topology_affinity, success_rate, rate_limit"));
    }
    if (!(w >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("weight of \"", name, "\" must be a non-negative number"));
    }
    in.weights[name] = w;
  }
  JC_ASSIGN_OR_RETURN(in.dataset, Get(req.key()));
  auto target = centers_->GetCenter(req.target_center_id());
  if (absl::IsNotFound(target.status())) {
    return absl::NotFoundError(
        absl::StrCat("target center \"", req.target_center_id(), "\" not found"));
  }
  JC_RETURN_IF_ERROR(target.status());
  in.target_center_id = req.target_center_id();
  in.target_topology =
      req.target_topology().empty() ? target->network_topology() : req.target_topology();
  for (const auto& l : in.dataset.location()) {
    auto center = centers_->GetCenter(l.ai_center_id());
    if (center.ok()) {
      in.centers[l.ai_center_id()] = {true, center->status()};
    } else if (!absl::IsNotFound(center.status())) {
      return center.status();
    }
  }
  return datamon::SelectSources(in);
}

}  // namespace jc::datamon
