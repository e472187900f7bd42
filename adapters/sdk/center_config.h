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
//   run_as:                         # Jointcloud projects and users -> local accounts
//     projects: {vision: jc-vision}
//     users: {alice: alice}         # a user's own mapping wins over the project's
//     default: jc-guest             # anyone else (omit: only those listed)
//   data_dir: /srv/jc/data          # where staged datasets go
//   data_sources: [/srv/shared]     # the only places file:// datasets are staged from
//   data_movers:                    # other URL schemes, copied by a command (dataset_mover.h)
//     - {scheme: rsync, command: [rsync, -a, "{source}/", "{target}/"]}
//   image_dir: /srv/jc/images       # where staged images go, one entry per image id
//   image_mover: [apptainer, pull, "{target}", "docker://{source}"]   # no shell
//   image_registry: registry.bj-1:5000   # where other centers fetch this one's images
//   default_time_limit: 4h          # replicas whose job sets no time limit run at most this
//   replica_retention: 336h         # an ended replica is forgotten this long after it ended
//   specs:
//     - {id: gpu-1x, cpu: 8, memory: 64Gi, gpu: 1, execution_power_watts: 350, price: 20}
//   images:
//     - {id: pytorch-2-1, name: PyTorch 2.1, framework: PyTorch}
//   datasets:
//     - {name: imagenet, version: v1, url: file:///srv/data/imagenet}

#include <map>

#include "adapters/sdk/image_mirror.h"
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/sdk/dataset_mover.h"
#include "jointcloud/adapter/v1/adapter.pb.h"

namespace jc::adapter {

namespace pb = ::jointcloud::adapter::v1;

// Which local account runs a replica (SPEC C6): the center maps Jointcloud's projects and
// users to its own accounts, never to root.
struct RunAs {
  bool configured = false;  // a run_as section is present
  std::map<std::string, std::string> projects;
  std::map<std::string, std::string> users;
  std::string default_account;  // empty: only the listed projects and users

  // The account for a replica of `user` in `project`, or FailedPrecondition naming what
  // the center does not map.
  absl::StatusOr<std::string> AccountFor(const std::string& center_id, const std::string& project,
                                         const std::string& user) const;
  // What the center tells the control plane (the accounts stay private).
  pb::RunAsPolicy Policy() const;
};

struct CenterConfig {
  std::string center_id;
  int security_grade = 0;
  double static_power_watts = 0;
  double performance_factor = 1;
  pb::NetworkFigures network;
  std::string user;      // default account for replicas (without run_as)
  RunAs run_as;
  std::string data_dir;  // staged datasets
  // Directories a file:// dataset may be staged from (resolved, symlinks followed). None:
  // the built-in mover stages nothing, whatever a caller names.
  std::vector<std::string> data_sources;
  std::vector<CommandMoverConfig> data_movers;  // by URL scheme
  // Images (SPEC A4): a center with an image mover can be given images it lacks. The
  // command runs without a shell with {source} (a source from the request, else the image
  // id), {target} (image_dir/<image id>), {image_id} and {name} replaced; exit 0 and
  // something at {target} is success. What is in image_dir is present, restarts included.
  std::string image_dir;
  std::vector<std::string> image_mover;
  std::string image_registry;  // offered to other centers' movers as a source prefix
  // Images with content are moved into the center's own registry by digest
  // (image_mirror.h); empty registry: they are pulled from their source at the task's start.
  ImageMirrorConfig image_mirror;
  std::vector<pb::SpecOffer> specs;
  // The ports replicas may listen on (SPEC A17, `ports: {first: 30000, last: 30999}`): each
  // replica that declares ports is given some from this range, none held by another replica
  // of the center, whichever host it runs on. 0 and 0: none (replicas asking are refused).
  int port_first = 0, port_last = 0;
  // The host the adapter reaches a replica's ports on when its scheduler does not say
  // which host runs it (`endpoint_host`, default 127.0.0.1: replicas on the adapter's host).
  std::string endpoint_host = "127.0.0.1";
  // The time limit a replica whose job has none is submitted with (Slurm's --time,
  // nexec's -W): a scheduler estimates when waiting jobs start only from their time
  // limits. Zero (absent): none (Slurm then applies its partition's DefaultTime).
  absl::Duration default_time_limit = absl::ZeroDuration();
  // How long the adapter keeps a replica after it learned that it ended (`replica_retention`,
  // at least a day, default 14 days), as Slurm's MinJobAge: its book (repeated submits, GetReplica,
  // ListAccounting) and its store hold the replicas that run and those that ended within it,
  // so that a center running for months holds and walks no more than that. A replica it
  // forgot is never taken for one it never had (AdapterCore::Read).
  absl::Duration replica_retention = kDefaultReplicaRetention;
  static constexpr absl::Duration kDefaultReplicaRetention = absl::Hours(14 * 24);
  // A day: longer than a control plane is expected to be away (it resends a submit it had no
  // answer for, and a key forgotten meanwhile would run again), and what the control plane
  // relies on before it believes a center forgot a replica (job_manager.cc).
  static constexpr absl::Duration kMinReplicaRetention = absl::Hours(24);
  std::vector<pb::Image> images;
  std::vector<pb::Dataset> datasets;

  const pb::SpecOffer* FindSpec(const std::string& id) const;
};

// Whether `account` is root on this host (by name, or by uid 0).
bool IsRootAccount(const std::string& account);

// Parses the YAML text; errors name the entry and the field.
absl::StatusOr<CenterConfig> ParseCenterConfig(const std::string& yaml);
absl::StatusOr<CenterConfig> LoadCenterConfig(const std::string& path);

}  // namespace jc::adapter
