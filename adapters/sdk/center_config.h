#pragma once

// What a center owner declares about the center in one YAML file: identity, security
// grade, power and network figures, the resource specs it runs, its images and datasets.
// The backend measures the rest (capacity, usage).
//
//   center_id: bj-1
//   security_grade: 3
//   static_power_watts: 2000        # formula 1, during data transfer
//   performance_factor: 1.2         # relative compute performance
//   network: {bandwidth_mbps: 10000, latency_ms: 2, jitter_ms: 0.2, loss_rate: 0}
//   user: jobs                      # account replicas run as when a submit names none
//   data_dir: /srv/jc/data          # where staged datasets go
//   data_sources: [/srv/shared]     # the only places file:// datasets are staged from
//   specs:
//     - {id: gpu-1x, cpu: 8, memory: 64Gi, gpu: 1, execution_power_watts: 350, price: 20}
//   images:
//     - {id: pytorch-2-1, name: PyTorch 2.1, framework: PyTorch}
//   datasets:
//     - {name: imagenet, version: v1, url: file:///srv/data/imagenet}

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jointcloud/adapter/v1/adapter.pb.h"

namespace jc::adapter {

namespace pb = ::jointcloud::adapter::v1;

struct CenterConfig {
  std::string center_id;
  int security_grade = 0;
  double static_power_watts = 0;
  double performance_factor = 1;
  pb::NetworkFigures network;
  std::string user;      // default account for replicas
  std::string data_dir;  // staged datasets
  // Directories a file:// dataset may be staged from (resolved, symlinks followed). None:
  // the built-in mover stages nothing, whatever a caller names.
  std::vector<std::string> data_sources;
  std::vector<pb::SpecOffer> specs;
  std::vector<pb::Image> images;
  std::vector<pb::Dataset> datasets;

  const pb::SpecOffer* FindSpec(const std::string& id) const;
};

// Parses the YAML text; errors name the entry and the field.
absl::StatusOr<CenterConfig> ParseCenterConfig(const std::string& yaml);
absl::StatusOr<CenterConfig> LoadCenterConfig(const std::string& path);

}  // namespace jc::adapter
