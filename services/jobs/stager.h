#pragma once

// The job manager's stager: gives the center a replica was placed on the task's image when
// the catalog does not list it there (its image mover, SPEC A4) and copies the datasets
// it lacks (A11), through the center's adapter, before the replica is submitted. One copy
// at a time, so two replicas never copy the same data at once. It keeps no job state: the
// outcome goes back to the job manager's event loop.

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/thread_pool.h"
#include "services/jobs/adapter_addresses.h"
#include "services/jobs/data_mover.h"
#include "services/southbound/adapter_client.h"

namespace jc::jobs {

namespace apb = ::jointcloud::adapter::v1;

class Stager {
 public:
  Stager(southbound::AdapterClient* adapters, AdapterAddresses* addresses, DataMover* mover, ThreadPool* pool)
      : adapters_(adapters), addresses_(addresses), mover_(mover), pool_(pool) {}

  // Stages `image_id` (empty: none) and each dataset ("name:version") missing at `center`,
  // on a pool thread; `done` gets the outcome there.
  // `image`: the image's content (registry/repository@sha256:...), empty when it has none.
  // `project`: the job's; its image `image_id` is its own, else the federation's.
  void Stage(std::string center, std::string project, std::string image_id, std::string image,
             std::vector<std::string> datasets, std::function<void(absl::Status)> done);

 private:
  absl::Status CopyAll(const std::string& center, const std::string& project, const std::string& image_id,
                       const std::string& image, const std::vector<std::string>& datasets);
  absl::Status StageImage(const std::string& center, const std::string& address, const std::string& project,
                          const std::string& image_id, const std::string& image);

  southbound::AdapterClient* adapters_;
  AdapterAddresses* addresses_;
  DataMover* mover_;
  ThreadPool* pool_;
  std::mutex one_copy_at_a_time_;
};

}  // namespace jc::jobs
