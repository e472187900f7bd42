#include "adapters/sdk/dataset_mover.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/path_inside.h"

extern char** environ;

namespace jc::adapter {
namespace {

namespace fs = std::filesystem;

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
  absl::Status Copy(const std::string& url, const fs::path& target) const override {
    if (absl::Status allowed = Allowed(url); !allowed.ok()) return allowed;  // resolved again: it may have changed
    std::error_code ec;
    // Links inside the dataset are left out: followed, they would copy what they point at
    // with the adapter's rights, wherever that is.
    fs::copy(fs::path(url.substr(7)), target, fs::copy_options::recursive | fs::copy_options::skip_symlinks, ec);
    if (ec) return absl::UnavailableError(absl::StrCat(url, ": ", ec.message()));
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> sources_;
};

class CommandMover final : public DatasetMover {
 public:
  explicit CommandMover(CommandMoverConfig c) : c_(std::move(c)), prefix_(c_.scheme + "://") {}
  bool Handles(const std::string& url) const override { return absl::StartsWith(url, prefix_); }
  absl::Status Copy(const std::string& url, const fs::path& target) const override {
    std::vector<std::string> args;
    for (const auto& a : c_.argv) args.push_back(absl::StrReplaceAll(a, {{"{source}", url}, {"{target}", target.string()}}));
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // Its output goes to a file beside the target, so that a failure can say why.
    std::string log = target.string() + ".mover.log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid = -1;
    int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      return absl::UnavailableError(absl::StrCat(url, ": cannot run the ", c_.scheme, " mover ", args[0], ": ",
                                                 std::strerror(rc)));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::string output;
    if (FILE* f = std::fopen(log.c_str(), "r")) {
      char buf[4096];
      size_t n = std::fread(buf, 1, sizeof buf, f);
      output.assign(buf, n);
      std::fclose(f);
    }
    std::error_code ec;
    fs::remove(log, ec);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
    std::string how = WIFEXITED(status) ? absl::StrCat("exited ", WEXITSTATUS(status))
                                        : absl::StrCat("was killed by signal ", WTERMSIG(status));
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
