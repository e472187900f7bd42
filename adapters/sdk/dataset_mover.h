#pragma once

// How a center copies a dataset in before a job reads it (SPEC A6): one mover per URL
// scheme. Built in: file://, from the center's data_sources only. Any other scheme is a
// command the center owner configures (rclone, rsync, a storage system's own tool):
//
//   data_movers:
//     - {scheme: rsync, command: [rsync, -a, "{source}/", "{target}/"]}
//     - {scheme: s3, command: [rclone, copy, "{source}", "{target}"]}
//
// The command runs without a shell, as the adapter's account, with {source} replaced by
// the URL and {target} by the destination directory; exit 0 is success.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace jc::adapter {

struct CommandMoverConfig {
  std::string scheme;              // "rsync" for rsync://...
  std::vector<std::string> argv;   // with {source} and {target}
};

class DatasetMover {
 public:
  virtual ~DatasetMover() = default;
  virtual bool Handles(const std::string& url) const = 0;
  // PermissionDenied when the source is not one the center allows (checked before
  // anything is created at the center).
  virtual absl::Status Allowed(const std::string& url) const { return absl::OkStatus(); }
  // Copies `url` into `target`, a fresh path in a directory only the adapter writes (the
  // copy is handed over and put in place afterwards: staged_dataset.h); an error lets the
  // next source be tried. The file mover opens the source below its data source with
  // openat2 and never follows a link (tree_at.h), whatever is swapped in meanwhile.
  virtual absl::Status Copy(const std::string& url, const std::filesystem::path& target) const = 0;
};

std::unique_ptr<DatasetMover> MakeFileMover(std::vector<std::string> data_sources);
std::unique_ptr<DatasetMover> MakeCommandMover(CommandMoverConfig config);

}  // namespace jc::adapter
