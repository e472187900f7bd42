#include "adapters/sdk/dataset_mover.h"

#include "adapters/sdk/run_program.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "adapters/sdk/tree_at.h"
#include "common/path_inside.h"

extern char** environ;

namespace jc::adapter {
namespace {

namespace fs = std::filesystem;

// The project's account may not read (part of) the dataset: the center's data, as the
// project's jobs would see it, is not this project's to stage.
absl::Status NotReadable(const std::string& url, const CopyAccount& as, absl::string_view why) {
  return absl::PermissionDeniedError(absl::StrCat(url, ": datasets of a project are staged with the rights of its account ",
                                                  as.name, ", which may not read it all (", why, ")"));
}

class FileMover final : public DatasetMover {
 public:
  explicit FileMover(std::vector<std::string> sources) : sources_(std::move(sources)) {}
  bool Handles(const std::string& url) const override { return absl::StartsWith(url, "file://"); }
  absl::Status Allowed(const std::string& url) const override {
    // Only from where the center's owner allows: a caller must not have the adapter's
    // account copy what it can read (its keys, /etc) into a place jobs read from.
    // And only from the path as registered: the control plane admitted it by its text
    // (under the project's own data root), so a link on the way — planted by a member in
    // the project's directory, pointing at another project's — is refused, not followed.
    const fs::path path(url.substr(7));
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(path, ec);
    const fs::path lexical = path.lexically_normal();
    auto trimmed = [](const fs::path& p) {
      std::string text = p.string();
      while (text.size() > 1 && text.back() == '/') text.pop_back();
      return text;
    };
    if (ec || trimmed(resolved) != trimmed(lexical)) {
      return absl::PermissionDeniedError(absl::StrCat(url, ": datasets are staged from their path as registered; this one "
                                                      "leads through a symbolic link to ",
                                                      ec ? ec.message() : resolved.string()));
    }
    if (absl::Status allowed = CheckResolvedUnder(url.substr(7), sources_); !allowed.ok()) {
      return absl::PermissionDeniedError(absl::StrCat(url, ": datasets are staged only from the center's data_sources: ",
                                                      allowed.message()));
    }
    return absl::OkStatus();
  }
  absl::Status Copy(const std::string& url, const fs::path& target, const CopyAccount* as) const override {
    if (absl::Status allowed = Allowed(url); !allowed.ok()) return allowed;  // for its message; the opens decide
    // Every open below, of the source and of the copy, with the account's rights: what it
    // may not read stays behind (the copy fails saying so).
    std::optional<ScopedFileIdentity> identity;
    if (as != nullptr) {
      identity.emplace(*as);
      if (!identity->status().ok()) return identity->status();
    }
    // The check above resolved the path by name, and a member of the project can swap a
    // link in right after it. So nothing is opened by that name: the data source root (the
    // operator's) is opened once, the dataset below it with openat2 refusing any link on
    // the way, and every entry inside by name relative to its directory's descriptor with
    // O_NOFOLLOW (tree_at.h). Links inside the dataset are left out: followed, they would
    // copy what they point at with the adapter's rights, wherever that is.
    const fs::path path = fs::path(url.substr(7)).lexically_normal();
    std::string relative;
    UniqueFd root;
    for (const auto& source : sources_) {
      std::error_code ec;
      const fs::path base = fs::weakly_canonical(fs::absolute(source, ec), ec);
      if (ec || !LexicallyUnder(path.string(), base.string())) continue;
      root = UniqueFd(open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (root.get() < 0) continue;
      relative = fs::path(path).lexically_relative(base).string();
      break;
    }
    if (root.get() < 0) {
      if (errno == EACCES && as != nullptr) return NotReadable(url, *as, std::strerror(errno));
      return absl::PermissionDeniedError(absl::StrCat(url, ": datasets are staged only from the center's data_sources"));
    }
    auto from = OpenBeneath(root.get(), relative == "." ? "" : relative, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (!from.ok()) {
      if (as != nullptr && absl::StrContains(from.status().message(), std::strerror(EACCES))) {
        return NotReadable(url, *as, from.status().message());
      }
      if (absl::IsPermissionDenied(from.status())) {
        return absl::PermissionDeniedError(absl::StrCat(url, ": datasets are staged from their path as registered: ",
                                                        from.status().message()));
      }
      return absl::UnavailableError(absl::StrCat(url, ": ", from.status().message()));
    }
    // The target's parent is the adapter's own directory inside data_dir (staged_dataset.h).
    UniqueFd parent(open(target.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (parent.get() < 0) {
      return absl::UnavailableError(absl::StrCat(target.parent_path().string(), ": ", std::strerror(errno)));
    }
    if (absl::Status copied = CopyTreeAt(from->get(), parent.get(), target.filename().string()); !copied.ok()) {
      if (as != nullptr && absl::StrContains(copied.message(), std::strerror(EACCES))) {
        return NotReadable(url, *as, copied.message());
      }
      return absl::UnavailableError(absl::StrCat(url, ": ", copied.message()));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> sources_;
};

class CommandMover final : public DatasetMover {
 public:
  explicit CommandMover(CommandMoverConfig c) : c_(std::move(c)), prefix_(c_.scheme + "://") {}
  bool Handles(const std::string& url) const override { return absl::StartsWith(url, prefix_); }
  absl::Status Copy(const std::string& url, const fs::path& target, const CopyAccount* as) const override {
    std::vector<std::string> args;
    for (const auto& a : c_.argv) args.push_back(absl::StrReplaceAll(a, {{"{source}", url}, {"{target}", target.string()}}));
    if (as != nullptr) args = RunAsArgv(*as, args);
    // Its output goes to a file beside the target, so that a failure can say why.
    // Copying as an account, the log goes beside the target's parent, in the adapter's own
    // directory: the account owns the target's parent and could plant a link there where
    // root would then write.
    const ProgramResult run =
        RunProgram(args, as != nullptr ? target.parent_path().string() + ".mover.log" : target.string() + ".mover.log",
                   c_.timeout);
    if (!run.started) {
      return absl::UnavailableError(absl::StrCat(url, ": cannot run the ", c_.scheme, " mover ", args[0], ": ", run.how));
    }
    if (run.ok) return absl::OkStatus();
    const std::string& how = run.how;
    const std::string& output = run.output;
    return absl::UnavailableError(absl::StrCat(url, ": the ", c_.scheme, " mover (", absl::StrJoin(args, " "), ") ", how,
                                               output.empty() ? "" : ": ", output.substr(0, 1000)));
  }

 private:
  CommandMoverConfig c_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<DatasetMover> MakeFileMover(std::vector<std::string> data_sources) {
  return std::make_unique<FileMover>(std::move(data_sources));
}

std::unique_ptr<DatasetMover> MakeCommandMover(CommandMoverConfig config) {
  return std::make_unique<CommandMover>(std::move(config));
}

}  // namespace jc::adapter
