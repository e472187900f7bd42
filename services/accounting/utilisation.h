#pragma once

// Utilisation against offered capacity (issue 49 item 12; the operations analysis of the
// standard's part 11): per center and calendar month (UTC), the capacity it offered — its
// registered capacity (Table 2) integrated over the hours it was registered, from the
// history the registry writes (center_capacity) — against what its replicas were
// allocated (the monthly usage rollup, by spec: the spec's quantity x wall hours), what it
// earned (the records' cost) and what stood idle. The month in progress counts to now.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/store/store.h"
#include "jointcloud/v1/accounting.pb.h"

namespace jc::accounting {

namespace v1 = ::jointcloud::v1;

class Utilisation {
 public:
  Utilisation(store::Store* store, const Clock* clock) : store_(store), clock_(clock) {}

  // `centers`: the centers the caller may see (nullopt: every one, an admin).
  absl::StatusOr<v1::GetUtilisationResponse> Report(const v1::GetUtilisationRequest& request,
                                                    const std::optional<std::vector<std::string>>& centers);

  // One month ("2026-11"), every center: what Report answers in `centers`.
  absl::StatusOr<std::vector<v1::CenterUtilisation>> Month(const std::string& month);

 private:
  // Each spec's CPU count (the catalog's resource_quantity), by spec id.
  absl::StatusOr<std::map<std::string, double>> SpecCpus();
  absl::StatusOr<std::vector<v1::CenterUtilisation>> Month(const std::string& month,
                                                           const std::map<std::string, double>& cpus_of_spec);

  store::Store* store_;
  const Clock* clock_;
};

}  // namespace jc::accounting
