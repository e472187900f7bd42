#pragma once

// Data monitor (standard 6.3.1, Table 6): datasets and where each center keeps them;
// and migration source selection (6.3.2) over that. Domain logic only.

#include <map>
#include <optional>
#include <vector>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/store/store.h"
#include "jointcloud/v1/datamon.pb.h"
#include "services/registry/center_directory.h"

namespace jc::datamon {

namespace v1 = ::jointcloud::v1;

absl::Status ValidateDataset(const v1::Dataset& dataset);

class Datamon {
 public:
  // `weights` are the configured evaluator weights (complete; see DefaultWeights()).
  Datamon(store::Store* store, const Clock* clock, registry::CenterDirectory* centers,
          std::map<std::string, double> weights);

  // `by_admin`: registered by a federation admin, who may use the center's shared data
  // roots; a project member registers only under roots naming {project}.
  absl::StatusOr<v1::Dataset> Create(v1::Dataset dataset, bool by_admin = true);
  // key.project names the dataset's project ("" or "-": the federation's).
  absl::StatusOr<v1::Dataset> Get(const v1::DatasetKey& key);
  // Every project's dataset of the key's name and version (key.project ignored).
  absl::StatusOr<std::vector<v1::Dataset>> Find(const v1::DatasetKey& key);
  // The patch's project names the dataset's ("": the federation's); it never changes.
  absl::StatusOr<v1::Dataset> Update(const v1::Dataset& patch, const google::protobuf::FieldMask& mask,
                                     bool by_admin = true);
  absl::Status Delete(const v1::DatasetKey& key);
  // `projects`: the projects whose datasets the caller may see besides the federation's
  // (nullopt: all).
  absl::StatusOr<v1::ListDatasetsResponse> List(const v1::ListDatasetsRequest& req,
                                                const std::optional<std::vector<std::string>>& projects = std::nullopt);

  absl::StatusOr<v1::SelectMigrationSourcesResponse> SelectSources(
      const v1::SelectMigrationSourcesRequest& req);

 private:
  absl::Status CheckLocations(const v1::Dataset& dataset, bool shared_roots);
  absl::Status SaveLocations(store::Transaction& txn, const std::string& id,
                             const v1::Dataset& dataset);

  store::Store* store_;
  const Clock* clock_;
  registry::CenterDirectory* centers_;
  std::map<std::string, double> weights_;
};

}  // namespace jc::datamon
