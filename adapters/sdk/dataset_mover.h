#pragma once

// How a center copies a dataset in before a job reads it (SPEC A6): one mover per URL
// scheme. Built in: file://, from the center's data_sources only. Any other scheme is a
// command the center owner configures (rclone, rsync, a storage system's own tool):
//
//   data_movers:
//     - {scheme: rsync, command: [rsync, -a, "{source}/", "{target}/"]}
//     - {scheme: s3, command: [rclone, copy, "{source}", "{target}"]}
//
// The command runs without a shell, with {source} replaced by the URL and {target} by the
// destination directory; exit 0 is success. For a project's dataset it runs as the account
// the center maps the project to (copy_as.h), otherwise as the adapter's account.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "adapters/sdk/copy_as.h"

namespace jc::adapter {

struct CommandMoverConfig {
  std::string scheme;              // "rsync" for rsync://...
  std::vector<std::string> argv;   // with {source} and {target}
  // Past this it is killed (the control plane gives a staging an hour; a mover run as a
  // project's account could otherwise stop itself and hold an adapter thread for good).
  absl::Duration timeout = absl::Hours(1);
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
  // `as`: the account whose rights the copy has (it reads only what that account may, and
  // `target`'s parent is that account's); nullptr: the adapter's own.
  virtual absl::Status Copy(const std::string& url, const std::filesystem::path& target,
                            const CopyAccount* as = nullptr) const = 0;
};

std::unique_ptr<DatasetMover> MakeFileMover(std::vector<std::string> data_sources);
std::unique_ptr<DatasetMover> MakeCommandMover(CommandMoverConfig config);

}  // namespace jc::adapter
