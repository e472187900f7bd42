#pragma once

// Migration source selection (standard 6.3.2): filter the locations that hold a dataset,
// score each survivor with five evaluators, combine the scores by weight, and order the
// sources best first. A pure function over its inputs, so it is tested without a store.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jointcloud/v1/datamon.pb.h"

namespace jc::datamon {

namespace v1 = ::jointcloud::v1;

// Evaluator names, as clients give weights for them.
inline constexpr char kLeastLoad[] = "least_load";          // a) current / concurrency limit
inline constexpr char kLeastTime[] = "least_time";          // b) average download time
inline constexpr char kTopologyAffinity[] = "topology_affinity";  // c) logical closeness
inline constexpr char kSuccessRate[] = "success_rate";      // d) download history
inline constexpr char kRateLimit[] = "rate_limit";          // e) highest rate limit

const std::vector<std::string>& EvaluatorNames();

// Every evaluator at weight 1.
std::map<std::string, double> DefaultWeights();

// Parses "least_load=2,least_time=1" (missing evaluators keep their default).
absl::StatusOr<std::map<std::string, double>> ParseWeights(const std::string& text);

// What the filter needs to know about a source center.
struct SourceCenter {
  bool registered = false;
  int status = 2;  // Table 1 status
};

struct SelectionInput {
  v1::Dataset dataset;
  std::string target_center_id;
  std::string target_topology;
  std::map<std::string, SourceCenter> centers;  // by ai_center_id
  std::map<std::string, double> weights;        // complete: every evaluator
};

// Counts path segments shared from the root: "cn/bj/dc1" vs "cn/bj/dc2" -> 2.
int SharedTopologyDepth(const std::string& a, const std::string& b);

// Records one download from `location` in its history, which the evaluators above read:
// a success adds to the average download time (download_cost) and the success count, a
// failure to the failure count.
void RecordDownload(v1::DatasetLocation* location, bool succeeded, double seconds);

// Filters and ranks. Scores are 0..100 per evaluator, normalized over the candidates;
// the total is formula 2 of the standard applied to them: sum of weight x score.
v1::SelectMigrationSourcesResponse SelectSources(const SelectionInput& input);

}  // namespace jc::datamon
