#include "executor/agent/task_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace jc::nexec {
namespace {

// Compaction once the file holds this many lines more than four per live task.
constexpr int64_t kCompactSlack = 4096;

absl::Status WriteAll(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::string LiveLines(const std::map<std::string, JournaledTask>& live) {
  std::string text;
  for (const auto& [key, t] : live) {
    absl::StrAppend(&text, "S ", key, "\n");
    if (t.pgid > 0) absl::StrAppend(&text, "P ", key, " ", t.pgid, " ", t.start_time, "\n");
    if (t.exit_code) absl::StrAppend(&text, "X ", key, " ", *t.exit_code, "\n");
  }
  return text;
}

// Replaces `path` with `text`, atomically (a crash leaves the old file or the new one).
absl::StatusOr<int> Rewrite(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  if (absl::Status s = WriteAll(fd, text, tmp); !s.ok()) {
    close(fd);
    return s;
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot replace ", path, ": ", std::strerror(errno)));
  }
  int out = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (out < 0) return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  return out;
}

}  // namespace

std::map<std::string, JournaledTask> TaskJournal::Read(const std::string& path) {
  std::map<std::string, JournaledTask> live;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: cut short by a crash, never acted on
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() == 2 && f[0] == "S") {
      live[std::string(f[1])];
    } else if (f.size() == 2 && f[0] == "E") {
      live.erase(std::string(f[1]));
    } else if (f.size() == 4 && f[0] == "P") {
      JournaledTask t;
      if (absl::SimpleAtoi(f[2], &t.pgid) && absl::SimpleAtoi(f[3], &t.start_time)) live[std::string(f[1])] = t;
    } else if (f.size() == 3 && f[0] == "X") {
      int code = 0;
      if (absl::SimpleAtoi(f[2], &code)) live[std::string(f[1])].exit_code = code;
    }
  }
  return live;
}

absl::StatusOr<std::unique_ptr<TaskJournal>> TaskJournal::Open(const std::string& path, const std::string& legacy_dir) {
  std::map<std::string, JournaledTask> inherited = Read(path);
  std::error_code ec;
  std::vector<std::filesystem::path> legacy;
  for (const auto& entry : std::filesystem::directory_iterator(legacy_dir, ec)) {
    std::ifstream in(entry.path());
    JournaledTask t;
    in >> t.pgid >> t.start_time;
    inherited.emplace(entry.path().filename().string(), t);
    legacy.push_back(entry.path());
  }
  // The inherited tasks stay in the new journal until the caller has dealt with them
  // (killed their groups and reported them ended): a crash meanwhile loses none.
  auto fd = Rewrite(path, LiveLines(inherited));
  if (!fd.ok()) return fd.status();
  for (const auto& p : legacy) std::filesystem::remove(p, ec);
  std::unique_ptr<TaskJournal> journal(new TaskJournal(path, *fd));
  journal->live_ = inherited;
  journal->inherited_ = std::move(inherited);
  journal->lines_ = static_cast<int64_t>(journal->live_.size()) * 2;
  return journal;
}

TaskJournal::~TaskJournal() {
  if (fd_ >= 0) close(fd_);
}

absl::Status TaskJournal::Append(const std::string& line) {
  ++lines_;
  return WriteAll(fd_, line, path_);  // one write of the whole line: O_APPEND keeps lines whole
}

absl::Status TaskJournal::Starting(const std::string& key) { return Starting(std::vector<std::string>{key}); }

absl::Status TaskJournal::Starting(const std::vector<std::string>& keys) {
  if (keys.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  std::string lines;
  for (const std::string& key : keys) {
    live_[key] = JournaledTask{};
    absl::StrAppend(&lines, "S ", key, "\n");
  }
  lines_ += static_cast<int64_t>(keys.size()) - 1;  // Append counts one
  return Append(lines);
}

absl::Status TaskJournal::Started(const std::string& key, pid_t pgid, uint64_t start_time) {
  std::lock_guard<std::mutex> lock(mu_);
  live_[key] = JournaledTask{pgid, start_time};
  return Append(absl::StrCat("P ", key, " ", pgid, " ", start_time, "\n"));
}

absl::Status TaskJournal::Exited(const std::vector<std::pair<std::string, int>>& keys_and_codes) {
  if (keys_and_codes.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  std::string lines;
  for (const auto& [key, code] : keys_and_codes) {
    live_[key].exit_code = code;
    absl::StrAppend(&lines, "X ", key, " ", code, "\n");
  }
  lines_ += static_cast<int64_t>(keys_and_codes.size()) - 1;  // Append counts one
  return Append(lines);
}

absl::Status TaskJournal::Ended(const std::string& key) { return Ended(std::vector<std::string>{key}); }

absl::Status TaskJournal::Ended(const std::vector<std::string>& keys) {
  if (keys.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  std::string lines;
  for (const std::string& key : keys) {
    live_.erase(key);
    absl::StrAppend(&lines, "E ", key, "\n");
  }
  lines_ += static_cast<int64_t>(keys.size()) - 1;  // Append counts one
  if (absl::Status s = Append(lines); !s.ok()) return s;
  if (lines_ > static_cast<int64_t>(live_.size()) * 4 + kCompactSlack) return CompactLocked();
  return absl::OkStatus();
}

absl::Status TaskJournal::CompactLocked() {
  auto fd = Rewrite(path_, LiveLines(live_));
  if (!fd.ok()) return fd.status();  // the old file is intact and still appended to
  close(fd_);
  fd_ = *fd;
  lines_ = static_cast<int64_t>(live_.size()) * 3;
  return absl::OkStatus();
}

}  // namespace jc::nexec
