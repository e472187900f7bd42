#pragma once

// How the job manager brings a task's datasets to the center it was placed on (SPEC A6):
// datamon chooses and ranks the sources (standard 6.3.2), the center's adapter copies from
// the first that works, and datamon learns the new location. The real one calls datamon
// over gRPC.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grpc {
class Channel;
}

namespace jc::jobs {

class DataMover {
 public:
  virtual ~DataMover() = default;
  // Source URLs best first; empty when the target already holds the dataset.
  virtual absl::StatusOr<std::vector<std::string>> Sources(const std::string& name, const std::string& version,
                                                           const std::string& target_center) = 0;
  // How a copy went, for the sources' download history (standard 6.3.2 b and d), which
  // the next source selection reads.
  struct Transfer {
    std::string source_url;  // where it came from; empty: nothing was copied
    double seconds = 0;
    std::vector<std::string> failed_source_urls;  // tried first, and failed
  };
  // Records that `center` now holds the dataset at `url`, and the transfer in the history
  // of the locations it came from (succeeded, average download time) or failed at.
  virtual absl::Status AddLocation(const std::string& name, const std::string& version, const std::string& center,
                                   const std::string& url, const Transfer& transfer) = 0;
};

std::unique_ptr<DataMover> MakeGrpcDataMover(std::function<std::shared_ptr<grpc::Channel>()> datamon);

}  // namespace jc::jobs
