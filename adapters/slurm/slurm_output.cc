#include "adapters/slurm/slurm_output.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace jc::adapter {
namespace {

// Counts past this are the cluster's nonsense, not a figure to add up.
constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();

// `*sum` + `n`, held at the type's largest value instead of wrapping (undefined).
template <typename T>
void Add(T* sum, int64_t n) {
  const int64_t most = std::numeric_limits<T>::max();
  if (n <= 0) {
    if (n < 0 && *sum >= std::numeric_limits<T>::min() - n) *sum = static_cast<T>(*sum + n);
    return;
  }
  *sum = *sum > most - n ? static_cast<T>(most) : static_cast<T>(*sum + n);
}

bool IsJobId(absl::string_view id) {
  int64_t n = 0;
  return !id.empty() && absl::SimpleAtoi(id, &n) && n > 0;
}

// "2026-11-26T08:00:01" (Slurm's local time) -> a time; nullopt for "Unknown", "None", "".
std::optional<absl::Time> SlurmTime(absl::string_view text) {
  static const absl::TimeZone local = [] {
    absl::TimeZone tz;
    return absl::LoadTimeZone("localtime", &tz) ? tz : absl::UTCTimeZone();
  }();
  absl::Time t;
  std::string error;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%S", text, local, &t, &error)) return std::nullopt;
  // absl::ParseTime takes "infinite-future" and "infinite-past" whatever the format: a job's
  // name or comment could carry them into a field, and an infinite end made an infinite
  // wall time (found by slurm_output_fuzz).
  if (t == absl::InfiniteFuture() || t == absl::InfinitePast()) return std::nullopt;
  return t;
}

// A TRES count in sacct's "billing=2,cpu=2,gres/gpu=1,mem=1G" form; 0 when absent.
int64_t TresCount(absl::string_view tres, absl::string_view name) {
  for (absl::string_view item : absl::StrSplit(tres, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    int64_t v = 0;
    if (kv.first == name && absl::SimpleAtoi(kv.second, &v)) return std::max<int64_t>(v, 0);
  }
  return 0;
}

// "1024K", "3.5M", "2G", "512" (KB) -> KB.
int64_t SacctKilobytes(std::string text) {
  int64_t scale = 1;
  if (!text.empty() && (text.back() == 'K' || text.back() == 'M' || text.back() == 'G')) {
    scale = text.back() == 'K' ? 1 : text.back() == 'M' ? 1024 : 1024 * 1024;
    text.pop_back();
  }
  double v = 0;
  if (!absl::SimpleAtod(text, &v)) return 0;
  v *= static_cast<double>(scale);
  // NaN, negative and past int64's range: no figure (a cast would be undefined).
  return v >= 0 && v < 9e18 ? static_cast<int64_t>(v) : 0;
}

}  // namespace

// "3:0" (sacct) -> a wait status.
int WaitStatusFromExitCode(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  int code = 0, signal = 0;
  if (!parts.empty() && (!absl::SimpleAtoi(parts[0], &code) || code < 0 || code > 255)) code = 0;
  if (parts.size() > 1 && (!absl::SimpleAtoi(parts[1], &signal) || signal < 0 || signal > 127)) signal = 0;
  return (code << 8) | signal;
}

double SlurmDurationSeconds(absl::string_view text) {
  // [DD-[HH:]]MM:SS[.mmm] (sacct's TotalCPU, Elapsed)
  double days = 0;
  if (size_t dash = text.find('-'); dash != absl::string_view::npos) {
    if (!absl::SimpleAtod(text.substr(0, dash), &days)) return 0;
    text = text.substr(dash + 1);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  double total = 0;
  for (absl::string_view p : parts) {
    double v = 0;
    if (!absl::SimpleAtod(p, &v)) return 0;
    total = total * 60 + v;
  }
  const double seconds = days * 86400 + total;
  // "inf", "nan", "-3" and 1e308 days are no duration.
  return std::isfinite(seconds) && seconds >= 0 ? seconds : 0;
}

void AddSlurmTimes(absl::string_view start, absl::string_view end, ReplicaObservation* o) {
  std::optional<absl::Time> started = SlurmTime(start), ended = SlurmTime(end);
  if (started) o->started_at = *started;
  bool over = o->state == pb::REPLICA_SUCCEEDED || o->state == pb::REPLICA_FAILED || o->state == pb::REPLICA_STOPPED;
  if (!over || !started || !ended || *ended < *started) return;
  o->ended_at = *ended;
  pb::ReplicaUsage usage = o->usage.value_or(pb::ReplicaUsage());
  usage.set_wall_seconds(absl::ToDoubleSeconds(*ended - *started));
  o->usage = usage;
}

ReplicaObservation ObserveSlurmJob(absl::string_view state, absl::string_view reason, int wait_status) {
  ReplicaObservation o;
  // "CANCELLED by 0" (sacct) -> "CANCELLED".
  absl::string_view base = state.substr(0, state.find(' '));
  int exit_code = (wait_status >> 8) & 0xff;
  int signal = wait_status & 0x7f;
  if (signal != 0) exit_code = 128 + signal;
  std::string why = reason.empty() || reason == "None" ? std::string() : absl::StrCat(" (", reason, ")");
  if (base == "PENDING" || base == "CONFIGURING" || base == "REQUEUED" || base == "REQUEUE_HOLD" ||
      base == "REQUEUE_FED" || base == "RESV_DEL_HOLD") {
    o.state = pb::REPLICA_PENDING;
    o.message = absl::StrCat("slurm: ", base, why);
  } else if (base == "RUNNING" || base == "COMPLETING" || base == "SUSPENDED" || base == "STAGE_OUT" ||
             base == "RESIZING" || base == "SIGNALING" || base == "STOPPED") {
    // COMPLETING: the script ended and Slurm is cleaning up; the outcome comes next poll.
    o.state = pb::REPLICA_RUNNING;
    if (base != "RUNNING") o.message = absl::StrCat("slurm: ", base, why);
  } else if (base == "COMPLETED") {
    o.state = pb::REPLICA_SUCCEEDED;
  } else if (base == "CANCELLED") {
    o.state = pb::REPLICA_STOPPED;
    o.exit_code = exit_code != 0 ? exit_code : 128 + 15;
    o.message = absl::StrCat("slurm: CANCELLED", why);
  } else {
    // FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE, PREEMPTED, ...
    o.state = pb::REPLICA_FAILED;
    o.exit_code = exit_code != 0 ? exit_code : -1;
    o.message = base == "FAILED" && exit_code != 0 ? absl::StrCat("exited with ", exit_code)
                                                   : absl::StrCat("slurm: ", base, why);
  }
  return o;
}

std::map<std::string, ReplicaObservation> ParseSqueueJobs(absl::string_view text) {
  std::map<std::string, ReplicaObservation> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> f = absl::StrSplit(line, '|');
    if (f.size() < 4) continue;
    for (auto& s : f) absl::StripAsciiWhitespace(&s);
    if (!IsJobId(f[0])) continue;
    int wait_status = 0;
    (void)absl::SimpleAtoi(f[3], &wait_status);
    ReplicaObservation o = ObserveSlurmJob(f[1], f[2], wait_status);
    if (f.size() >= 6) AddSlurmTimes(f[4], f[5], &o);
    out[f[0]] = std::move(o);
  }
  return out;
}

SqueueCounts ParseSqueueStates(absl::string_view text) {
  SqueueCounts c;
  for (absl::string_view s : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    s = absl::StripAsciiWhitespace(s);
    if (s == "RUNNING" || s == "COMPLETING" || s == "SUSPENDED") {
      ++c.running;
    } else if (s == "PENDING" || s == "CONFIGURING" || s == "REQUEUED") {
      ++c.waiting;
    }
  }
  return c;
}

std::string OldestTaggedJob(absl::string_view text, absl::string_view tag) {
  std::string found;
  int64_t oldest = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> f = absl::StrSplit(absl::StripAsciiWhitespace(line), absl::MaxSplits('|', 1));
    int64_t id = 0;
    if (f.size() != 2 || !IsJobId(f[0]) || absl::StripAsciiWhitespace(f[1]) != tag || !absl::SimpleAtoi(f[0], &id)) {
      continue;
    }
    if (found.empty() || id < oldest) {
      found = std::string(f[0]);
      oldest = id;
    }
  }
  return found;
}

void ReadSacct(absl::string_view text, const std::set<std::string>& wanted,
               std::map<std::string, ReplicaObservation>* out) {
  // Steps ("123.batch", "123.0") carry what was used (memory, disk IO); the allocation
  // line the state, times, CPU time and what was allocated (GPUs).
  struct StepSums {
    int64_t max_rss_kb = 0, read_bytes = 0, write_bytes = 0;
  };
  std::map<std::string, StepSums> steps;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> f = absl::StrSplit(line, '|');
    if (f.size() < 10) continue;
    std::string job = f[0].substr(0, f[0].find('.'));
    if (!wanted.count(job)) continue;
    StepSums& sums = steps[job];
    sums.max_rss_kb = std::max(sums.max_rss_kb, SacctKilobytes(f[6]));
    if (f[0] != job) {
      Add(&sums.read_bytes, TresCount(f[8], "fs/disk"));
      Add(&sums.write_bytes, TresCount(f[9], "fs/disk"));
      continue;
    }
    ReplicaObservation o = ObserveSlurmJob(f[1], "", WaitStatusFromExitCode(f[2]));
    if (auto known = out->find(job); known != out->end() && known->second.state != o.state) {
      o = known->second;  // squeue's word on a job it still has
    }
    AddSlurmTimes(f[3], f[4], &o);
    if (o.usage.has_value()) {
      o.usage->set_cpu_seconds(SlurmDurationSeconds(f[5]));
      o.usage->set_gpus(static_cast<int32_t>(std::min<int64_t>(TresCount(f[7], "gres/gpu"), kMaxCount)));
    }
    (*out)[job] = std::move(o);
  }
  for (const auto& [job, sums] : steps) {
    auto it = out->find(job);
    if (it == out->end() || !it->second.usage.has_value()) continue;
    pb::ReplicaUsage& usage = *it->second.usage;
    usage.set_memory_peak_mb(sums.max_rss_kb / 1024);
    usage.set_read_bytes(sums.read_bytes);
    usage.set_write_bytes(sums.write_bytes);
    if (usage.gpus() > 0) usage.set_gpu_seconds(usage.gpus() * usage.wall_seconds());
  }
}

int GresCount(absl::string_view gres, absl::string_view name) {
  int64_t total = 0;
  // Entries are separated by commas outside parentheses: "gpu:2(IDX:0,1),npu:1".
  int depth = 0;
  size_t start = 0;
  auto entry = [&](absl::string_view e) {
    e = e.substr(0, e.find('('));
    std::vector<absl::string_view> parts = absl::StrSplit(e, ':');
    if (parts.size() < 2 || parts[0] != name) return;
    int n = 0;
    if (absl::SimpleAtoi(parts.back(), &n) && n > 0) total = std::min<int64_t>(total + n, kMaxCount);
  };
  for (size_t i = 0; i <= gres.size(); ++i) {
    char c = i < gres.size() ? gres[i] : ',';
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      entry(gres.substr(start, i - start));
      start = i + 1;
    }
  }
  return static_cast<int>(total);
}

SlurmNodeTotals ParseSinfoNodes(absl::string_view text) {
  SlurmNodeTotals t;
  std::set<std::string> seen;  // a node in several partitions is listed once for each
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> f = absl::StrSplit(line, '|');
    if (f.size() < 7) continue;
    for (auto& s : f) absl::StripAsciiWhitespace(&s);
    if (!seen.insert(f[0]).second) continue;
    // Only nodes that can run jobs count: not down, drained, failed or not yet there.
    std::string state = absl::AsciiStrToLower(f[6]);
    bool usable = absl::StartsWith(state, "idle") || absl::StartsWith(state, "mixed") ||
                  absl::StartsWith(state, "allocated") || absl::StartsWith(state, "completing");
    if (!usable || absl::StrContains(state, "drain")) continue;
    std::vector<absl::string_view> cpus = absl::StrSplit(f[1], '/');  // allocated/idle/other/total
    int alloc = 0, total = 0;
    if (cpus.size() == 4) {
      (void)absl::SimpleAtoi(cpus[0], &alloc);
      (void)absl::SimpleAtoi(cpus[3], &total);
    }
    int64_t mem = 0, mem_alloc = 0;
    (void)absl::SimpleAtoi(f[2], &mem);
    (void)absl::SimpleAtoi(f[3], &mem_alloc);
    Add(&t.nodes, 1);
    Add(&t.cpu_total, total);
    Add(&t.cpu_alloc, alloc);
    Add(&t.memory_mb, mem);
    Add(&t.memory_alloc_mb, mem_alloc);
    Add(&t.gpu_total, GresCount(f[4], "gpu"));
    Add(&t.gpu_alloc, GresCount(f[5], "gpu"));
  }
  return t;
}

std::vector<QueuedJob> ParseSqueueQueue(absl::string_view text) {
  std::vector<QueuedJob> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> f = absl::StrSplit(line, '|');
    if (f.size() != 6) continue;  // a warning, a new version's column: not a job line
    for (auto& s : f) absl::StripAsciiWhitespace(&s);
    QueuedJob j;
    if (!IsJobId(f[0].substr(0, f[0].find('_')))) continue;  // array tasks print "12_3"
    j.id = f[0];
    if (f[1] == "PENDING") {
      j.pending = true;
    } else if (f[1] != "RUNNING" && f[1] != "COMPLETING" && f[1] != "CONFIGURING") {
      continue;  // suspended, ended: neither waits nor frees at a known time
    }
    j.start = SlurmTime(f[2]);
    j.end = SlurmTime(f[3]);
    int64_t cpus = 0;
    if (!absl::SimpleAtoi(f[4], &cpus) || cpus < 0) continue;
    j.cpus = static_cast<int>(std::min<int64_t>(cpus, kMaxCount));
    // "gres:gpu:2", "gres/gpu:2", "gres:gpu:a100:2", comma-separated; "N/A": none.
    std::string gres;
    for (absl::string_view item : absl::StrSplit(f[5], ',', absl::SkipEmpty())) {
      if (!absl::ConsumePrefix(&item, "gres:")) absl::ConsumePrefix(&item, "gres/");
      absl::StrAppend(&gres, gres.empty() ? "" : ",", item);
    }
    j.gpus = GresCount(gres, "gpu");
    out.push_back(std::move(j));
  }
  return out;
}

std::optional<absl::Duration> SlurmStartWait(const std::vector<QueuedJob>& jobs, int free_cpus, int free_gpus,
                                             int cpus, int gpus, absl::Time now) {
  absl::Time start = now;
  // Queued ahead and no bigger: it starts no later than this one could.
  for (const QueuedJob& j : jobs) {
    if (!j.pending || j.cpus > cpus || j.gpus > gpus) continue;
    if (!j.start) return std::nullopt;
    start = std::max(start, *j.start);
  }
  // What runs frees what it holds at the end of its time limit, earliest first.
  if (free_cpus < cpus || free_gpus < gpus) {
    std::vector<const QueuedJob*> running;
    for (const QueuedJob& j : jobs) {
      if (!j.pending) running.push_back(&j);
    }
    std::sort(running.begin(), running.end(), [](const QueuedJob* a, const QueuedJob* b) {
      return a->end.value_or(absl::InfiniteFuture()) < b->end.value_or(absl::InfiniteFuture());
    });
    std::optional<absl::Time> freed_at;
    int64_t c = free_cpus, g = free_gpus;
    for (const QueuedJob* j : running) {
      if (!j->end) return std::nullopt;  // no time limit: what it holds may never free
      c += j->cpus;
      g += j->gpus;
      if (c >= cpus && g >= gpus) {
        freed_at = *j->end;
        break;
      }
    }
    if (!freed_at) return std::nullopt;  // bigger than what the cluster frees
    start = std::max(start, *freed_at);
  }
  return start - now;
}

}  // namespace jc::adapter
