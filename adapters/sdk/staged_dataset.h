#pragma once

// Where a staged dataset lands at a center and who may read it (SPEC A6; issue 44 holes 8
// and 11). The adapter copies as root; what it copies must then be readable by the
// accounts that run the dataset's jobs and by no other account at the center:
//
//   data_dir/                      the operator's
//     <name>/                      the adapter's (root, 0755), holding only versions
//       <version>/                 the project's account and its group, 0750; files 0640
//       .staging-<version>-...     a copy being made: root's alone (0700) until complete
//
// A copy fills a fresh directory only root can enter, is handed to its owner
// (SealTreeAt: owner, modes, no set-id bits, no device nodes), and is then renamed into
// place; an earlier copy is swapped out, taken back and removed by descriptor. Nothing on
// the way is opened by a path an account at the center controls.
//
// Who owns a copy (StagedAccessFor): a project's dataset, the account the center maps the
// project to (run_as.projects, else run_as.default; without run_as, the center's `user`),
// with that account's primary group, so that a user the center maps to an account of its
// own reads it through the group; a federation dataset (no project, seen and used by all),
// the adapter's account with read for everyone.

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "adapters/sdk/dataset_mover.h"
#include "adapters/sdk/tree_at.h"

namespace jc::adapter {

// The access a dataset staged for `account` gets ("" : the adapter's own account);
// `federation`: everyone reads it. InvalidArgument when the center has no such account,
// FailedPrecondition for root.
absl::StatusOr<TreeAccess> StagedAccessFor(const std::string& account, bool federation);

// Copies `url` with `mover` to `data_dir`/`name`/`version` (names already checked with
// PathInside), handed over as `access` says; returns that path. An error leaves nothing
// new behind and keeps an earlier copy in place.
absl::StatusOr<std::filesystem::path> StageInto(const DatasetMover& mover, const std::string& url,
                                                const std::filesystem::path& data_dir, const std::string& name,
                                                const std::string& version, const TreeAccess& access);

}  // namespace jc::adapter
