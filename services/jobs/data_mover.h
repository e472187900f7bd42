#pragma once

// How the job manager brings a task's datasets to the center it was placed on (SPEC A6):
// datamon chooses and ranks the sources (standard 6.3.2), the center's adapter copies from
// the first that works, and datamon learns the new location. Images likewise (A4): the
// catalog says which centers hold one, the center's image mover fetches it, and the
// catalog's image x center list learns the new center. The real one calls datamon and
// the catalog over gRPC.

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
  // Names and versions are unique within a project (issue 44): `project` below is the
  // dataset's own ("": the federation's), as Project() resolved it.
  // Source URLs best first; empty when the target already holds the dataset.
  virtual absl::StatusOr<std::vector<std::string>> Sources(const std::string& name, const std::string& version,
                                                           const std::string& project,
                                                           const std::string& target_center) = 0;
  // The project of the dataset a job of `job_project` names: the job's project's of that
  // name and version, else the federation's (""). The center hands the copy to the
  // account that runs that project's jobs, and to no other (issue 44 hole 11).
  virtual absl::StatusOr<std::string> Project(const std::string& name, const std::string& version,
                                              const std::string& job_project) = 0;
  // How a copy went, for the sources' download history (standard 6.3.2 b and d), which
  // the next source selection reads.
  struct Transfer {
    std::string source_url;  // where it came from; empty: nothing was copied
    double seconds = 0;
    std::vector<std::string> failed_source_urls;  // tried first, and failed
  };
  // Records that `center` now holds the dataset at `url`, and the transfer in the history
  // of the locations it came from (succeeded, average download time) or failed at.
  virtual absl::Status AddLocation(const std::string& name, const std::string& version, const std::string& project,
                                   const std::string& center,
                                   const std::string& url, const Transfer& transfer) = 0;

  // The catalog's image: its name, the project it belongs to ('': the federation's) and
  // the centers holding it (the registering one first).
  struct ImageCopies {
    std::string name;
    std::vector<std::string> centers;
    std::string project;
  };
  // The image a job of `project` names `image_id`: the project's own, else the
  // federation's (image ids are unique within a project, issue 44 hole 13).
  virtual absl::StatusOr<ImageCopies> Image(const std::string& project, const std::string& image_id) = 0;
  // Adds `center` to the image x center list of `project`'s image `image_id` (the image's
  // own project, ImageCopies.project); nothing when it is there.
  virtual absl::Status AddImageCenter(const std::string& project, const std::string& image_id,
                                      const std::string& center) = 0;
};

std::unique_ptr<DataMover> MakeGrpcDataMover(std::function<std::shared_ptr<grpc::Channel>()> datamon,
                                             std::function<std::shared_ptr<grpc::Channel>()> catalog);

}  // namespace jc::jobs
