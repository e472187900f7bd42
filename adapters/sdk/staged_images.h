#pragma once

// Images a center was given by its image mover (SPEC A4: one image, many centers). The
// center owner configures a command (apptainer pull, skopeo copy, rsync ...) that fetches
// an image into image_dir/<image id>; an image is present when its entry is there, so a
// restarted adapter still has what it staged. The copy lands under a hidden name first
// and is renamed into place only when the command succeeded: a half-fetched image is
// never taken as present. Catalog image ids are unique within a project (issue 44, hole
// 13): a project's image lives apart, in image_dir/.projects/<project>/<image id>, so two
// projects' images of one id never pass for each other; the federation's in image_dir/<image id>.

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jointcloud/adapter/v1/adapter.pb.h"

namespace jc::adapter {

namespace pb = ::jointcloud::adapter::v1;

class StagedImages {
 public:
  // `argv` with {source}, {target}, {image_id} and {name}; empty: the center receives no
  // images (Stage answers FailedPrecondition). Reads what `image_dir` holds.
  StagedImages(std::string center_id, std::string image_dir, std::vector<std::string> argv);

  bool receives() const { return !argv_.empty(); }
  // `project`'s image `image_id` ('': the federation's) is here.
  bool Has(const std::string& project, const std::string& image_id) const;
  bool Has(const std::string& image_id) const { return Has("", image_id); }
  // Where the copy a job of `project` runs is: its project's of that id if staged here,
  // else the federation's; "" when neither is.
  std::string PathFor(const std::string& project, const std::string& image_id) const;
  // The federation's images held (CenterInfo.image_ids names the federation's; a project's
  // staged image is known to the catalog, which records where it was staged).
  std::vector<std::string> Held() const;

  // Fetches the image from the first source the command copies (the image id itself when
  // the request names none), one stage at a time. An image held already is answered at
  // once with no source.
  absl::StatusOr<pb::StageImageResponse> Stage(const pb::StageImageRequest& req);

 private:
  std::string center_id_;
  std::string image_dir_;
  std::vector<std::string> argv_;
  mutable std::mutex mu_;
  std::set<std::string> held_;  // under mu_; "<project>/<image id>", the federation's as "<image id>"
  std::mutex one_stage_at_a_time_;
};

}  // namespace jc::adapter
