#include "executor/master/master.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "common/oci/image_reference.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/store/store_identity.h"
#include "common/timestamp.h"

namespace jc::nexec {
// Signals, input and log reads carry the master's store identity, whoever decided them
// (kills, suspensions, elastic notices, remote tasks): an agent serving another store
// refuses them, so a master never acts on another store's job of the same number.
class Master::StampedDialer final : public AgentDialer {
 public:
  StampedDialer(AgentDialer* inner, const std::string* identity, int64_t term)
      : inner_(inner), identity_(identity), term_(term) {}
  absl::StatusOr<int> Launch(const std::string& address, const pb::LaunchRequest& req) override {
    return inner_->Launch(address, req);  // MakeLaunch stamped it
  }
  std::vector<absl::StatusOr<int>> LaunchBatch(const std::string& address,
                                               const std::vector<pb::LaunchRequest>& reqs) override {
    return inner_->LaunchBatch(address, reqs);
  }
  absl::Status Signal(const std::string& address, const pb::SignalRequest& req) override {
    pb::SignalRequest stamped = req;
    stamped.set_master_identity(*identity_);
    stamped.set_master_term(term_);
    return inner_->Signal(address, stamped);
  }
  absl::Status Lead(const std::string& address, const pb::LeadRequest& req) override {
    return inner_->Lead(address, req);  // made with the identity and term
  }
  absl::StatusOr<int64_t> SendInput(const std::string& address, const pb::InputRequest& req) override {
    pb::InputRequest stamped = req;
    stamped.set_master_identity(*identity_);
    stamped.set_master_term(term_);
    return inner_->SendInput(address, stamped);
  }
  absl::StatusOr<std::string> ReadLog(const std::string& address, const pb::ReadLogRequest& req,
                                      int64_t max_bytes) override {
    pb::ReadLogRequest stamped = req;
    stamped.set_master_identity(*identity_);
    return inner_->ReadLog(address, stamped, max_bytes);
  }

 private:
  AgentDialer* inner_;
  const std::string* identity_;
  int64_t term_;
};

Master::Master(store::Store* store, const Clock* clock, AgentDialer* dialer,
               ExecutorConfig config, MasterOptions options)
    : store_(store), clock_(clock), dialer_(dialer), options_(std::move(options)),
      config_(std::move(config)), access_config_(std::make_shared<const ExecutorConfig>(config_)) {
  if (dialer_ != nullptr) {
    stamped_ = std::make_unique<StampedDialer>(dialer_, &identity_, options_.term);
    dialer_ = stamped_.get();
  }
  launcher_ = std::make_unique<Launcher>(
      dialer_, launchers_.get(),
      [this](std::vector<pb::LaunchRequest> batch, std::vector<absl::StatusOr<int>> pids) {
        OnLaunched(std::move(batch), std::move(pids));
      });
  for (const auto& t : config_.host_types) scheduler_.AddHostType(t).IgnoreError();
  for (const auto& [group, members] : config_.user_groups) scheduler_.DefineUserGroup(group, members);
  scheduler_.SetLimits(config_.limits);
  // The load is busier when larger (thresholds and order[r1m]: the least loaded first).
  ResourceTraits load;
  load.larger_is_less = true;
  scheduler_.SetResourceTraits("r1m", load);
  loop_.Start("nexec-master", [this] { Flush(); });
}

Master::~Master() { Stop(); }

namespace {

// The longest half-life of the fair-share queues; none without one.
std::optional<absl::Duration> LongestHalfLife(const ExecutorConfig& config) {
  std::optional<absl::Duration> longest;
  for (const auto& q : config.queues) {
    if (q.fairshare) longest = std::max(longest.value_or(absl::ZeroDuration()), q.fairshare->half_life);
  }
  return longest;
}

}  // namespace

// What a running job holds, from its record's tasks, for the scheduler to take back after a
// restart; `grown` counts the allocations an elastic job grew by.
Placement Master::HeldPlacement(const pb::Job& job, const JobRequest& request, int* grown) {
  Placement p;
  p.job_id = job.id();
  // Memory reservations are per slot, restored from the requirement: the tasks are the
  // placement's allocations in section order (Dispatch), so the slots walked so far say
  // which section a task came from (a multi-section job is never elastic: no growth).
  const auto& secs = request.requirement.sections;
  size_t section = 0;
  int left_in_section = secs.empty() ? 0 : secs[0].slots;
  for (const auto& t : job.tasks()) {
    if (t.remote()) continue;  // started inside the allocation: it holds nothing more
    while (section + 1 < secs.size() && left_in_section <= 0) left_in_section = secs[++section].slots;
    left_in_section -= t.slots();
    // What an elastic job gave back it no longer holds.
    if (!HeldAllocation(t)) continue;
    *grown += t.grown();
    double mem_per_slot = 0;
    if (!secs.empty()) {
      if (auto it = secs[section].rusage.find("mem"); it != secs[section].rusage.end()) mem_per_slot = it->second;
    }
    HostAllocation a{t.host(), t.slots(), {t.gpus().begin(), t.gpus().end()}, mem_per_slot * t.slots(), {}, {}};
    for (const pb::Reservation& r : t.reservations()) {
      a.reserved[r.resource()] = r.amount();
      if (!r.units().empty()) a.units[r.resource()] = {r.units().begin(), r.units().end()};
    }
    p.sections.push_back({a});
  }
  return p;
}

absl::Status Master::Recover() {
  // Made once with the store: agents bind to it, so a master on another store (a
  // reinstall, a second cluster on the same hosts) never has its job 1 taken for ours.
  JC_ASSIGN_OR_RETURN(std::string identity, store::StoreIdentity(*store_, "nexec_master"));
  if (identity.size() > 64 || !std::all_of(identity.begin(), identity.end(), [](char c) {
        return absl::ascii_isxdigit(static_cast<unsigned char>(c));
      })) {
    return absl::DataLossError(absl::StrCat("the store's nexec_master identity \"", absl::CHexEscape(identity.substr(0, 64)),
                                            "\" is not hex digits: agents could not serve it"));
  }
  JC_ASSIGN_OR_RETURN(store::Rows hosts, store_->Query("SELECT id, doc FROM nexec_hosts ORDER BY id"));
  JC_ASSIGN_OR_RETURN(store::Rows jobs, store_->Query("SELECT id, doc FROM nexec_jobs ORDER BY id"));
  // Fair share's usage is not stored: it is computed again from the jobs' records (what
  // they held, from when to when, and their CPU time), decayed to now. Jobs that ended
  // more than 20 half-lives ago count for less than a millionth and are skipped.
  const absl::Time now = clock_->Now();
  const std::optional<absl::Duration> half_life = LongestHalfLife(*AccessConfig());
  const bool fairshare = half_life.has_value();
  const absl::Time forgotten_before = now - 20 * half_life.value_or(absl::ZeroDuration());
  // Jobs cleaned out of memory (master_clean.cc): ids are never given twice, keys still
  // answer with their job, and fair share counts what they used.
  JC_ASSIGN_OR_RETURN(History history,
                      ReadHistory(fairshare ? std::optional<absl::Time>(forgotten_before) : std::nullopt));
  return OnLoop([&]() -> absl::Status {
  identity_ = std::move(identity);
  spdlog::info("nexec master store identity {}", identity_);
  next_id_ = std::max(next_id_, history.max_id + 1);
  for (auto& [key, job] : history.submit_keys) submit_keys_[std::move(key)] = std::move(job);
  for (const auto& row : hosts) {
    JC_ASSIGN_OR_RETURN(pb::AgentInfo info, store::DecodeDoc<pb::AgentInfo>(row[1]));
    JC_RETURN_IF_ERROR(AddHostRecord(info));
    // Known hosts get a grace period to report again before they count as lost.
    hosts_.Add(info, now);
  }
  // (After the hosts: a queue joins the scheduler once its hosts are known.)
  for (const pb::Job& job : history.recent) CountPastUsage(job, JobRequest(), now, forgotten_before);
  int pending = 0, running = 0;
  std::vector<int64_t> preempted;  // suspended for a preemption: they lend their slots again
  std::vector<int64_t> requeueing;  // being requeued for one (their grace running)
  int unrecoverable = 0;  // ended now: written before the master serves
  for (const auto& row : jobs) {
    JC_ASSIGN_OR_RETURN(pb::Job job, store::DecodeAnyDoc<pb::Job>(row[1]));
    next_id_ = std::max(next_id_, job.id() + 1);
    JobRecord rec;
    rec.job = job;
    // A job this configuration cannot take back (its queue was removed from the file,
    // its requirement no longer parses) ends, with the reason, rather than vanish or stop
    // the master; its tasks, if any, are strays the agents are told to end.
    auto end_unrecoverable = [&](const absl::Status& why) {
      spdlog::error("job {} cannot be recovered: {}", job.id(), why.ToString());
      rec.job.set_state(pb::EXIT);
      rec.job.set_exit_code(1);
      rec.job.set_reason(absl::StrCat("cannot be recovered after a master restart: ", why.message()));
      *rec.job.mutable_ended_at() = ToTimestamp(now);
      rec.job.add_history(absl::StrCat(Stamp(), " ", rec.job.reason()));
      ++unrecoverable;
      MarkDirty(job.id());
      Recount(jobs_[job.id()] = std::move(rec));
    };
    if (!job_state::Ended(job.state())) {
      auto req = BuildRequest(job.spec(), job.id());
      if (!req.ok()) {
        end_unrecoverable(req.status());
        continue;
      }
      rec.request = *req;
      rec.request.preemptions = job.preemptions();
      if (job.state() == pb::PENDING) {
        if (absl::Status queued = scheduler_.Submit(rec.request); !queued.ok()) {
          end_unrecoverable(queued);
          continue;
        }
        ++pending;
      } else {
        int grown = 0;  // elastic: allocations it grew by, after those it started with
        const Placement p = HeldPlacement(job, rec.request, &grown);
        if (absl::Status restored =
                scheduler_.Restore(rec.request, p, job.has_started_at() ? FromTimestamp(job.started_at()) : now, grown);
            !restored.ok()) {
          end_unrecoverable(restored);
          continue;
        }
        // A suspended job holds nothing of the resources a suspension releases.
        if (job.state() == pb::SUSPENDED) JC_RETURN_IF_ERROR(scheduler_.SetSuspended(job.id(), true));
        if (job.state() == pb::SUSPENDED && job.preempted_by() != 0 && !job.has_requeue_at()) {
          preempted.push_back(job.id());
        }
        if (job.has_requeue_at()) {
          // Being requeued for a preemption: SIGKILL and requeue at the time stored.
          rec.asked = job_state::Asked::kRequeue;
          rec.preempt_kill_at = FromTimestamp(job.requeue_at());
          requeueing.push_back(job.id());
        }
        active_.insert(job.id());
        ++running;
      }
    }
    if (!job.spec().submit_key().empty()) submit_keys_[SubmitKeyIndex(job.spec())] = {job.id(), job.spec().user()};
    if (fairshare) CountPastUsage(job, rec.request, now, forgotten_before);
    Recount(jobs_[job.id()] = std::move(rec));
  }
  for (int64_t id : requeueing) {
    auto preemptor = jobs_.find(jobs_.at(id).job.preempted_by());
    const bool waiting = preemptor != jobs_.end() && preemptor->second.job.state() == pb::PENDING;
    JC_RETURN_IF_ERROR(scheduler_.RestoreRequeueing(id, waiting ? preemptor->first : 0));
  }
  for (int64_t id : preempted) {
    const int64_t by = jobs_.at(id).job.preempted_by();
    auto preemptor = jobs_.find(by);
    const bool waiting = preemptor != jobs_.end() && preemptor->second.job.state() == pb::PENDING;
    JC_RETURN_IF_ERROR(scheduler_.RestorePreempted(id, waiting ? by : 0));
  }
  spdlog::info("nexec master recovered {} hosts, {} jobs ({} pending, {} running, {} ended as unrecoverable)",
               hosts_.size(), jobs_.size(), pending, running, unrecoverable);
  return RecoverTimedJobs();
  });
}

void Master::CountPastUsage(const pb::Job& job, const JobRequest& request, absl::Time now,
                            absl::Time forgotten_before) {
  if (!job.has_started_at()) return;
  const absl::Time start = FromTimestamp(job.started_at());
  const absl::Time end = job_state::Ended(job.state()) ? (job.has_ended_at() ? FromTimestamp(job.ended_at()) : start) : now;
  if (end < forgotten_before) return;
  JobRequest req = request;
  if (job_state::Ended(job.state())) {
    auto built = BuildRequest(job.spec(), job.id());
    if (!built.ok()) return;  // its queue or user is gone: nothing to count it in
    req = *built;
  }
  int slots = 0, gpus = 0;
  double cpu_seconds = 0;
  for (const pb::Task& t : job.tasks()) {
    cpu_seconds += t.usage().cpu_seconds();
    if (!HeldAllocation(t)) continue;
    slots += t.slots();
    gpus += t.gpus_size();
  }
  scheduler_.AddFairshareHistory(req, slots, gpus, cpu_seconds, start, end, now);
}

absl::StatusOr<JobRequest> Master::BuildRequest(const pb::JobSpec& spec, int64_t id) {
  JobRequest r;
  r.id = id;
  r.user = spec.user();
  r.queue = spec.queue().empty() ? config_.default_queue : spec.queue();
  r.slots = spec.slots() == 0 ? 1 : spec.slots();
  r.exclusive = spec.exclusive();
  r.interactive = spec.interactive();
  r.gpus_per_slot = spec.gpus_per_slot();
  r.project = spec.project();
  r.app = spec.app();
  if (spec.run_limit_seconds() < 0) return absl::InvalidArgumentError("run limit (-W) must not be negative");
  // A launch carries the spec whole, in one gRPC message of at most 4 MiB: a job past it
  // could never be launched and was sent again and again, failing the launches batched
  // with it (attacker helper-60). An exec takes at most 2 MiB of arguments and environment.
  if (const size_t bytes = spec.ByteSizeLong(); bytes > kMaxJobSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the job's command, arguments and environment take ", bytes,
                                                   " bytes: at most ", kMaxJobSpecBytes,
                                                   " (an exec takes at most 2 MiB of arguments and environment)"));
  }
  // What reaches an exec, a shell or a path as a C string: a NUL byte would cut it short, and
  // the job would run other than its record reads (attacker helper-79: `true first\0; touch x`
  // was stored whole and ran `true first`).
  const std::pair<const char*, const std::string*> c_strings[] = {
      {"the command", &spec.command()},          {"the pre-exec (-E)", &spec.pre_exec()},
      {"the post-exec (-Ep)", &spec.post_exec()}, {"the output file (-o)", &spec.stdout_path()},
      {"the error file (-e)", &spec.stderr_path()}, {"the working directory", &spec.cwd()},
      {"the job name (-J)", &spec.name()},        {"the user", &spec.user()}};
  for (const auto& [what, text] : c_strings) {
    if (text->find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(what, " holds a NUL byte: no command line or path can hold it"));
    }
  }
  for (const auto& dir : spec.read_only_dirs()) {
    if (dir.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("a read-only directory holds a NUL byte: no path can hold it");
    }
  }
  // Names an environment can hold: one with '=' would be a second variable to the task
  // (a second PATH, say), an empty one or one with NUL none at all.
  for (const auto& [name, value] : spec.env()) {
    if (name.empty()) return absl::InvalidArgumentError("an environment variable has an empty name");
    if (name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("environment variable \"", absl::CHexEscape(name),
                                                     "\" holds a NUL byte: no environment can hold it"));
    }
    if (name.find('=') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable name \"", name, "\" holds '=': no environment can hold it"));
    }
  }
  if (!spec.image().empty()) {
    // Pulled and run by digest: what runs cannot change under the job.
    auto image = oci::ImageReference::Parse(spec.image());
    if (!image.ok()) return image.status();
    if (image->digest.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--image ", spec.image(),
                                                     ": name the image by digest (registry/repository@sha256:...), "
                                                     "so what runs cannot change under the job"));
    }
  }
  for (const auto& dir : spec.read_only_dirs()) {
    if (spec.image().empty()) return absl::InvalidArgumentError("read-only directories are bound only into an image");
    if (dir.empty() || dir[0] != '/' || absl::StrContains(dir, "/../") || absl::EndsWith(dir, "/..")) {
      return absl::InvalidArgumentError(absl::StrCat("read-only directory \"", dir, "\" is not an absolute path"));
    }
  }
  r.run_limit = absl::Seconds(spec.run_limit_seconds());
  r.max_slots = spec.max_slots();
  JC_ASSIGN_OR_RETURN(r.requirement, ParseRequirement(spec.requirement()));
  return r;
}

absl::Status Master::Persist(store::Transaction& txn, const pb::Job& job, bool stored) {
  // Base64 protobuf, not JSON: a job is written about three times on its way, and the
  // JSON printer was a third of what a commit cost (ADR 0002). Rows in JSON still read.
  std::string doc = store::EncodeBinaryDoc(job);
  if (!stored) {
    // A new job's id was never used: a row there is another job's, and the write fails
    // (commit or stop) rather than write over it.
    return txn.Exec("INSERT INTO nexec_jobs (id, state, doc) VALUES ($1, $2, $3)", {job.id(), int64_t{job.state()}, doc})
        .status();
  }
  JC_ASSIGN_OR_RETURN(int64_t n, txn.Exec("UPDATE nexec_jobs SET state = $2, doc = $3 WHERE id = $1",
                                          {job.id(), int64_t{job.state()}, doc}));
  if (n == 0) {
    JC_RETURN_IF_ERROR(txn.Exec("INSERT INTO nexec_jobs (id, state, doc) VALUES ($1, $2, $3)",
                                {job.id(), int64_t{job.state()}, doc})
                           .status());
  }
  return absl::OkStatus();
}

void Master::Flush() {
  if (cycling_ && cycle_wanted_) {
    cycle_wanted_ = false;
    // Watchers see what the burst's messages did before what its cycle does (a job
    // submitted and placed in one burst is seen PENDING, then RUNNING).
    for (int64_t id : burst_.jobs) burst_.events_before.push_back(jobs_.at(id).job);
    burst_.jobs.clear();
    CycleCalls calls = Cycle();
    if (!calls.empty()) {
      AfterCommit([this, calls = std::move(calls)] { launchers_->Run([this, calls] { CarryOut(calls); }); });
    }
  }
  Burst burst = std::move(burst_);
  burst_ = Burst();
  Commit(burst);
  // Each event carries its job; the snapshots taken before the cycle move into theirs.
  for (pb::Job& job : burst.events_before) {
    Recount(jobs_.at(job.id()));
    pb::JobEvent e;
    *e.mutable_job() = std::move(job);
    Publish(std::move(e));
  }
  for (int64_t id : burst.jobs) {
    JobRecord& rec = jobs_.at(id);
    Recount(rec);
    pb::JobEvent e;
    *e.mutable_job() = rec.job;
    Publish(std::move(e));
  }
  for (auto& after : burst.after) after();
}

std::map<std::pair<std::string, std::string>, int> Master::JobCounts() {
  return OnLoop([this] { return JobCountsOnLoop(); });
}

std::map<std::pair<std::string, std::string>, int> Master::JobCountsOnLoop() const {
  std::map<std::pair<std::string, std::string>, int> by_name;
  for (const auto& [key, n] : jobs_by_state_) by_name[{pb::JobState_Name(key.first), key.second}] += n;
  return by_name;
}

void Master::Recount(JobRecord& rec) {
  // Every change of a job is written (commit or stop), so counting at the write counts
  // every change. The queue as the job's record has it: a job recovered ended has no
  // request built.
  std::pair<pb::JobState, std::string> now{rec.job.state(), rec.job.spec().queue()};
  if (rec.counted == now) return;
  if (rec.counted) {
    auto before = jobs_by_state_.find(*rec.counted);
    if (before != jobs_by_state_.end() && --before->second <= 0) jobs_by_state_.erase(before);
    if (rec.counted->first == pb::PENDING) {
      auto mine = pending_by_user_.find(rec.job.spec().user());
      if (mine != pending_by_user_.end() && --mine->second <= 0) pending_by_user_.erase(mine);
    }
  }
  ++jobs_by_state_[now];
  if (now.first == pb::PENDING) ++pending_by_user_[rec.job.spec().user()];
  rec.counted = std::move(now);
  // Filed for the clean period once its end is stored (a job that runs again is filed
  // again at its next end; the old entry no longer matches).
  if (job_state::Ended(rec.job.state())) {
    const absl::Time at = rec.job.has_ended_at() ? FromTimestamp(rec.job.ended_at()) : clock_->Now();
    rec.filed_ended_at = at;
    ended_by_time_.insert({at, rec.job.id()});
  } else {
    rec.filed_ended_at.reset();
  }
}

absl::Status Master::MayQueueAnother(const std::string& user) const {
  const int most = config_.max_pend_jobs_per_user;
  if (most <= 0) return absl::OkStatus();
  int pending = 0;
  if (auto it = pending_by_user_.find(user); it != pending_by_user_.end()) pending += it->second;
  if (auto it = burst_.submitted_by_user.find(user); it != burst_.submitted_by_user.end()) pending += it->second;
  if (pending < most) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(user, " has ", pending, " pending jobs, the most an account may have (",
                                                   "max_pend_jobs_per_user: ", most,
                                                   "); submit again once some have started or ended"));
}

void Master::Commit(Burst& burst) {
  if (burst.writes_nothing() && burst.events_before.empty()) return;
  // Each job as memory has it now; those the cycle did not change again, once.
  std::vector<JobRecord*> jobs;
  for (const pb::Job& before : burst.events_before) {
    if (!burst.jobs.count(before.id())) jobs.push_back(&jobs_.at(before.id()));
  }
  for (int64_t id : burst.jobs) jobs.push_back(&jobs_.at(id));
  auto write = [&](bool retry) -> absl::Status {
    JC_ASSIGN_OR_RETURN(std::unique_ptr<store::Transaction> txn, store_->Begin());
    // A master that lost its lease writes nothing (and, after the retries, stops).
    if (options_.fence) JC_RETURN_IF_ERROR(options_.fence(*txn));
    // A retry may follow a commit that was made but not answered (PostgreSQL's connection
    // broken while committing: its outcome unknown), so a new job's row may be there:
    // written as a stored job's, UPDATE first (attacker helper-80).
    for (const JobRecord* rec : jobs) JC_RETURN_IF_ERROR(Persist(*txn, rec->job, rec->stored || retry));
    for (const auto& [host, doc] : burst.hosts) {
      JC_ASSIGN_OR_RETURN(int64_t n, txn->Exec("UPDATE nexec_hosts SET doc = $2 WHERE id = $1", {host, doc}));
      if (n == 0) JC_RETURN_IF_ERROR(txn->Exec("INSERT INTO nexec_hosts (id, doc) VALUES ($1, $2)", {host, doc}).status());
    }
    for (const auto& w : burst.writes) JC_RETURN_IF_ERROR(w(*txn));
    return txn->Commit();
  };
  absl::Status s;
  absl::Duration pause = absl::Milliseconds(100);
  for (int attempt = 0; attempt < 4; ++attempt) {
    s = write(/*retry=*/attempt > 0);
    if (s.ok()) {
      for (JobRecord* rec : jobs) rec->stored = true;
      return;
    }
    spdlog::error("nexec master: writing {} job(s), {} host(s) and {} other row(s) failed: {}; retrying in {}",
                  jobs.size(), burst.hosts.size(), burst.writes.size(), s.ToString(), absl::FormatDuration(pause));
    absl::SleepFor(pause);
    pause *= 2;
  }
  // Commit or stop (docs/adr/0006): memory is ahead of the store, and acting on it (a
  // launch, a relaunch after a restart) could run a job twice. A restart reloads the store.
  spdlog::critical("nexec master: the store does not take writes ({}); exiting so that a restart continues from "
                   "what the store has",
                   s.ToString());
  spdlog::default_logger()->flush();
  std::_Exit(3);
}

void Master::Publish(pb::JobEvent e) {
  e.set_job_id(e.job().id());
  e.set_state(e.job().state());
  *e.mutable_at() = ToTimestamp(clock_->Now());
  events_.Append(std::move(e), [](pb::JobEvent& ev, uint64_t c) { ev.set_cursor(c); });
}

std::string Master::SubmitKeyIndex(const pb::JobSpec& spec) {
  // Jobs recorded before submitters were: their user stands in.
  return absl::StrCat(spec.submitter().empty() ? spec.user() : spec.submitter(), "\n", spec.submit_key());
}

void Master::MustNotWaitOnLoop() const {
  if (!loop_.InLoop()) return;
  spdlog::critical("nexec master: a message waited on the loop from the loop itself");
  std::abort();
}

absl::StatusOr<int64_t> Master::Submit(pb::JobSpec spec) {
  MustNotWaitOnLoop();
  auto reply = std::make_shared<std::promise<absl::StatusOr<int64_t>>>();
  std::future<absl::StatusOr<int64_t>> answer = reply->get_future();
  SubmitThen(std::move(spec), [reply](absl::StatusOr<int64_t> id) { reply->set_value(std::move(id)); });
  return answer.get();
}

absl::Status Master::Presubmit(pb::JobSpec& spec) {
  if (spec.command().empty()) return absl::InvalidArgumentError("the job has no command");
  if (spec.user().empty()) return absl::InvalidArgumentError("the job names no user");
  if (spec.slots() < 0) return absl::InvalidArgumentError("-n must be at least 1");
  if (spec.tty()) spec.set_interactive(true);  // a terminal is for an interactive job
  return absl::OkStatus();
}

void Master::SubmitThen(pb::JobSpec spec, std::function<void(absl::StatusOr<int64_t>)> done) {
  if (absl::Status checked = Presubmit(spec); !checked.ok()) return done(checked);
  // Acknowledged only once committed (the answer follows the burst's commit; a crash
  // before it loses nothing acknowledged); submissions that arrive together share one
  // commit, with the cycle that places them.
  OnLoopThen([this, spec = std::move(spec)]() mutable { return SubmitOnLoop(std::move(spec)); }, std::move(done));
}

void Master::SubmitAllThen(std::vector<pb::JobSpec> specs,
                           std::function<void(std::vector<absl::StatusOr<int64_t>>)> done) {
  // One message for them all: posted one by one, a pack's submissions could be split over
  // two bursts (the loop woken by the first), each its own commit and fdatasync.
  const size_t n = specs.size();
  auto answered = [n, done = std::move(done)](std::vector<absl::StatusOr<int64_t>> ids) {
    // None when the master stopped before taking them (LoopAnswer's abandoned answer).
    ids.resize(n, absl::UnavailableError(LoopAnswer<int>::kStopping));
    done(std::move(ids));
  };
  OnLoopThen(
      [this, specs = std::move(specs)]() mutable {
        std::vector<absl::StatusOr<int64_t>> ids;
        ids.reserve(specs.size());
        for (pb::JobSpec& spec : specs) {
          absl::Status checked = Presubmit(spec);
          ids.push_back(checked.ok() ? SubmitOnLoop(std::move(spec)) : absl::StatusOr<int64_t>(checked));
        }
        return ids;
      },
      std::function<void(std::vector<absl::StatusOr<int64_t>>)>(std::move(answered)));
}

absl::StatusOr<int64_t> Master::SubmitOnLoop(pb::JobSpec spec) {
  const std::string key = spec.submit_key().empty() ? std::string() : SubmitKeyIndex(spec);
  if (!key.empty()) {
    if (auto known = submit_keys_.find(key); known != submit_keys_.end()) {
      // A key is its submitter's: another user's equal key is refused, not answered with
      // a job that is not theirs.
      if (known->second.user != spec.user()) {
        return absl::AlreadyExistsError(absl::StrCat("submit key ", spec.submit_key(),
                                                     " names a job of another user; choose another key"));
      }
      return known->second.id;
    }
  }
  JC_RETURN_IF_ERROR(MayQueueAnother(spec.user()));
  JC_ASSIGN_OR_RETURN(JobRequest req, BuildRequest(spec, next_id_));
  JC_RETURN_IF_ERROR(scheduler_.Check(&req));
  const int64_t id = next_id_++;
  ++burst_.submitted_by_user[spec.user()];
  if (spec.queue().empty()) spec.set_queue(req.queue);
  spec.set_slots(req.slots);
  if (!key.empty()) submit_keys_[key] = {id, spec.user()};
  JobRecord& rec = jobs_[id];
  rec.stored = false;  // INSERTed by the burst's commit
  rec.request = std::move(req);
  ApplyEffects(rec, job_state::Submitted(rec, id, std::move(spec), Now()));
  return id;
}

absl::StatusOr<pb::Job> Master::GetJob(int64_t id) {
  absl::StatusOr<pb::Job> job = OnLoop([&]() -> absl::StatusOr<pb::Job> {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
    return ViewOf(it->second);
  });
  // Not in memory: it may have ended long ago (the clean period); its record is history.
  if (absl::IsNotFound(job.status())) return CleanedJob(id);
  return job;
}

absl::Status Master::MaySubmitAs(const Principal& caller, const std::string& user) {
  return ::jc::nexec::MaySubmitAs(*AccessConfig(), caller, user);
}

std::shared_ptr<const ExecutorConfig> Master::AccessConfig() const {
  std::lock_guard<std::mutex> lock(access_mu_);
  return access_config_;
}

absl::Status Master::MayControl(const Principal& caller, int64_t id) {
  absl::Status may = OnLoop([&]() -> absl::Status {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
    return ::jc::nexec::MayControl(config_, caller, it->second.job.spec().user());
  });
  if (!absl::IsNotFound(may)) return may;
  // A job cleaned out of memory is still its owner's: its logs, and the refusal of what
  // no longer applies to it, are for them alone.
  JC_ASSIGN_OR_RETURN(pb::Job cleaned, CleanedJob(id));
  return ::jc::nexec::MayControl(*AccessConfig(), caller, cleaned.spec().user());
}

bool Master::Administers(const Principal& caller) const { return IsAdministrator(*AccessConfig(), caller); }

absl::Status Master::MayExec(const Principal& caller, int64_t id) {
  absl::StatusOr<std::string> user = OnLoop([&]() -> absl::StatusOr<std::string> {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
    return it->second.job.spec().user();
  });
  if (absl::IsNotFound(user.status())) {
    JC_ASSIGN_OR_RETURN(pb::Job cleaned, CleanedJob(id));
    user = cleaned.spec().user();
  }
  if (!user.ok()) return user.status();
  return ::jc::nexec::MayExec(*AccessConfig(), caller, *user);
}

void Master::HidePrivate(const Principal& viewer, pb::Host* host) {
  if (!IsAdministrator(*AccessConfig(), viewer)) host->clear_image_digests();
}

void Master::HidePrivate(const Principal& viewer, pb::Job* job) {
  if (viewer.root) return;
  if (::jc::nexec::MayControl(*AccessConfig(), viewer, job->spec().user()).ok()) return;
  pb::JobSpec* spec = job->mutable_spec();
  const bool had_command = !spec->command().empty();
  spec->clear_command();
  spec->clear_env();
  spec->clear_pre_exec();
  spec->clear_post_exec();
  if (had_command) spec->set_command(absl::StrCat("(hidden: a job of ", spec->user(), ")"));
  // Its image too: a reference another account learns, agents pull with their credentials.
  if (!spec->image().empty()) spec->set_image("(hidden)");
  for (pb::Task& t : *job->mutable_tasks()) {
    if (!t.command().empty()) t.set_command("(hidden)");
  }
}

std::vector<pb::Job> Master::ListJobs(const pb::ListJobsRequest& req) {
  return OnLoop([&] {
  std::vector<pb::Job> out;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    const pb::Job& j = it->second.job;
    if (!req.user().empty() && j.spec().user() != req.user()) continue;
    if (!req.queue().empty() && j.spec().queue() != req.queue()) continue;
    if (!req.name().empty() && j.spec().name() != req.name()) continue;
    if (!req.states().empty() &&
        std::find(req.states().begin(), req.states().end(), j.state()) == req.states().end()) {
      continue;
    }
    out.push_back(ViewOf(it->second));
    if (req.limit() > 0 && static_cast<int>(out.size()) >= req.limit()) break;
  }
  std::reverse(out.begin(), out.end());
  return out;
  });
}

std::string Master::AddressOf(const std::string& host) const {
  return hosts_.AddressOf(host);
}

void Master::AddAssignedUnits(const pb::Job& job, const std::string& host, pb::LaunchRequest* l) {
  std::map<std::string, std::vector<int>> units;
  for (const pb::Task& t : job.tasks()) {
    if (t.host() != host || !HeldAllocation(t)) continue;
    for (const pb::Reservation& r : t.reservations()) {
      units[r.resource()].insert(units[r.resource()].end(), r.units().begin(), r.units().end());
    }
  }
  for (const auto& [resource, given] : units) {
    if (given.empty()) continue;
    (*l->mutable_env())[absl::StrCat("NEXEC_ASSIGNED_", absl::AsciiStrToUpper(resource))] = absl::StrJoin(given, ",");
  }
}

void Master::DescribeAllocation(const HostAllocation& a, pb::Task* t) {
  t->set_host(a.host);
  t->set_slots(a.slots);
  for (int g : a.gpus) t->add_gpus(g);
  for (const auto& [resource, amount] : a.reserved) {
    pb::Reservation* r = t->add_reservations();
    r->set_resource(resource);
    r->set_amount(amount);
    if (auto units = a.units.find(resource); units != a.units.end()) {
      for (int u : units->second) r->add_units(u);
    }
  }
}

pb::LaunchRequest Master::MakeLaunch(const pb::Job& job) const {
  pb::LaunchRequest l;
  l.set_master_identity(identity_);
  l.set_master_term(options_.term);
  l.set_job_id(job.id());
  l.set_task_index(0);
  l.set_attempt(job.attempt());
  l.set_command(job.spec().command());
  l.set_user(job.spec().user());
  *l.mutable_env() = job.spec().env();
  l.set_cwd(job.spec().cwd());
  l.set_image(job.spec().image());
  *l.mutable_read_only_dirs() = job.spec().read_only_dirs();
  if (!job.tasks().empty()) {
    l.set_host(job.tasks(0).host());
    *l.mutable_gpus() = job.tasks(0).gpus();
    AddAssignedUnits(job, job.tasks(0).host(), &l);
    // The memory the job holds on the first host, every section's rusage[mem] (MB per slot)
    // times its slots there: the task's memory limit where its agent contains it in a
    // cgroup. (The first section's alone gave a native GPU replica, "1{mem,gpu} 7{mem}", an
    // eighth of its spec's memory.) From the request parsed at submit, not parsed again.
    if (auto rec = jobs_.find(job.id()); rec != jobs_.end()) {
      int grown = 0;
      double mem = 0;
      for (const auto& section : HeldPlacement(job, rec->second.request, &grown).sections) {
        for (const HostAllocation& a : section) {
          if (a.host == job.tasks(0).host()) mem += a.mem_mb;
        }
      }
      if (mem > 0) l.set_memory_limit_mb(static_cast<int64_t>(mem));
    }
  }
  for (const auto& t : job.tasks()) {
    if (!HeldAllocation(t)) continue;
    for (int s = 0; s < t.slots(); ++s) l.add_hosts(t.host());
  }

  // Default output goes to log_dir, which no user can write: the agent opens files there
  // for the job's user itself (output_root), and every other path as the user.
  auto path = [&](const std::string& pattern, const char* suffix) {
    std::string p = pattern.empty() ? absl::StrCat(options_.log_dir, "/%J.", suffix) : pattern;
    if (pattern.empty()) l.set_output_root(options_.log_dir);
    return absl::StrReplaceAll(p, {{"%J", absl::StrCat(job.id())}, {"%I", "0"}});
  };
  l.set_stdout_path(path(job.spec().stdout_path(), "out"));
  l.set_stderr_path(job.spec().stderr_path().empty() && !job.spec().stdout_path().empty()
                        ? l.stdout_path()
                        : path(job.spec().stderr_path(), "err"));
  // Elastic jobs: the file their resize events are appended to (NEXEC_EVENT_FILE), beside
  // their output as the MPI hostfile is.
  if (job.spec().max_slots() > std::max(1, job.spec().slots())) {
    l.set_event_file(l.stdout_path() == "/dev/null" ? path("", "events") : l.stdout_path() + ".events");
  }
  // Queue actions: the queue's pre-exec, then the job's; the job's post-exec, then the queue's.
  const std::string queue = job.spec().queue().empty() ? config_.default_queue : job.spec().queue();
  for (const QueueConfig& q : config_.queues) {
    if (q.name != queue) continue;
    auto both = [](const std::string& first, const std::string& second, const char* join) {
      if (first.empty() || second.empty()) return first.empty() ? second : first;
      return absl::StrCat("(", first, ")", join, "(", second, ")");
    };
    l.set_pre_exec(both(q.pre_exec, job.spec().pre_exec(), " && "));
    l.set_post_exec(both(job.spec().post_exec(), q.post_exec, "; "));
    l.set_pre_exec_timeout_seconds(q.pre_exec_timeout_seconds);
    l.set_bind_cpus(q.cpu_binding);
    l.set_pids_limit(q.pids_limit);
    l.set_suspend_action(q.suspend_action);
    l.set_resume_action(q.resume_action);
    l.set_kill_action(q.kill_action);
    l.set_kill_grace_seconds(10);
    l.set_interactive(job.spec().interactive());
    l.set_tty(job.spec().tty());
    l.set_tty_rows(job.spec().tty_rows());
    l.set_tty_cols(job.spec().tty_cols());
  }
  return l;
}

absl::StatusOr<int> Master::ScheduleOnce() {
  CycleCalls calls = OnLoop([this] { return Cycle(); });
  CarryOut(calls);
  return calls.started;
}

Master::CycleCalls Master::Cycle() {
  CycleCalls calls;
  absl::Time begin = clock_->Now();
  CycleStats cs;
  ApplyWindows(begin);  // a queue outside its run window dispatches nothing
  if (!config_.limits.empty()) scheduler_.SetLimitTime(begin, options_.time_zone);
  scheduler_.AdvanceFairshare(begin);
  scheduler_.SetNow(begin);
  std::vector<Placement> placements = scheduler_.Cycle(&cs);
  std::vector<Resize> resizes = scheduler_.TakeResizes();
  std::vector<Preemption> preemptions = scheduler_.TakePreemptions();
  calls.resumes = scheduler_.TakeResumes();
  const job_state::At at{begin, options_.time_zone};
  for (const Preemption& p : preemptions) {
    JobRecord& victim = jobs_.at(p.victim);
    JobRecord& preemptor = jobs_.at(p.preemptor);
    if (metrics_) metrics_->CountPreemption(victim.request.queue, p.requeue);
    preemptor.job.add_history(absl::StrCat(Stamp(), " preempting job ", p.victim, " (queue ", victim.request.queue,
                                           p.requeue ? ", holds GPUs: requeued" : ": suspended", ")"));
    const QueueConfig* q = QueueConfigOf(victim.request.queue);
    job_state::Effects fx =
        p.requeue ? job_state::PreemptedForRequeue(victim, p.preemptor, p.reason,
                                                   q != nullptr ? q->preempt_grace : absl::ZeroDuration(), at)
                  : job_state::PreemptedForSuspend(victim, p.preemptor);
    victim.request.preemptions = victim.job.preemptions();
    ApplyEffects(victim, fx);
    MarkDirty(preemptor.job.id());
    calls.preemptions.push_back({p, std::move(fx)});
  }
  std::vector<Launch> launches;
  for (const Placement& p : placements) {
    JobRecord& rec = jobs_.at(p.job_id);
    if (p.backfilled_before != 0 && metrics_) metrics_->CountBackfill(rec.request.queue);
    std::vector<pb::Task> tasks;
    for (const auto& section : p.sections) {
      for (const auto& a : section) DescribeAllocation(a, &tasks.emplace_back());
    }
    ApplyEffects(rec, job_state::Dispatch(rec, std::move(tasks), p.backfilled_before, rec.request.run_limit, at));
    launches.push_back({AddressOf(rec.job.tasks(0).host()), MakeLaunch(rec.job)});
  }
  // After the placements: a job that started in this cycle may have lent its grown
  // slots to one of them.
  if (!resizes.empty()) ApplyResizes(resizes, &calls.agent_calls);
  stats_.cycles++;
  stats_.placements += static_cast<int64_t>(placements.size());
  stats_.last_cycle_seconds = absl::ToDoubleSeconds(clock_->Now() - begin);
  if (metrics_) metrics_->ObserveCycle(stats_.last_cycle_seconds, static_cast<int>(placements.size()));
  calls.started = static_cast<int>(launches.size());
  // Decisions are committed (with the burst) before any task starts, or the master
  // stops: a decision the store does not have must never run.
  if (!launches.empty()) {
    AfterCommit([this, launches = std::move(launches)]() mutable {
      for (Launch& l : launches) StartLaunch(std::move(l));
    });
  }
  return calls;
}

void Master::CarryOut(const CycleCalls& calls) {
  if (!calls.agent_calls.empty()) CarryOutAgentCalls(calls.agent_calls);
  if (!calls.preemptions.empty() || !calls.resumes.empty()) CarryOutPreemptions(calls.preemptions, calls.resumes);
}

void Master::LogInconsistency(int64_t job_id, const char* what, const absl::Status& status) {
  // No write is involved: the job's record is the truth and goes on; the scheduler's model
  // disagreeing with it is a defect to see in the log, not a state to act on.
  if (!status.ok()) spdlog::error("job {}: the scheduler refused to {} it: {}", job_id, what, status.ToString());
}

const QueueConfig* Master::QueueConfigOf(const std::string& name) const {
  for (const QueueConfig& q : config_.queues) {
    if (q.name == name) return &q;
  }
  return nullptr;
}

void Master::TellTermTo(const pb::AgentInfo& info) {
  // A master alone (no lease) has no term to tell; each agent is told once per term.
  if (options_.term == 0 || !told_term_.insert(info.host()).second) return;
  pb::LeadRequest req;
  req.set_master_identity(identity_);
  req.set_master_term(options_.term);
  AfterCommit([this, address = info.address(), host = info.host(), req] {
    launchers_->Run([this, address, host, req] {
      absl::Status told = dialer_->Lead(address, req);
      if (told.ok()) return;
      spdlog::warn("nexec host {}: telling its agent of term {} failed ({}); told again at its next heartbeat", host,
                   req.master_term(), told.ToString());
      loop_.Post([this, host] { told_term_.erase(host); });
    });
  });
}

void Master::StartLaunch(Launch l) { launcher_->Launch(l.address, std::move(l.request)); }

void Master::OnLaunched(std::vector<pb::LaunchRequest> batch, std::vector<absl::StatusOr<int>> pids) {
  // A sender's answers: posted as one message, not waited on (the sender goes on with its
  // next batch).
  loop_.Post([this, batch = std::move(batch), pids = std::move(pids)] {
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!pids[i].ok() && IsStaleTerm(pids[i].status())) {
        // An agent has heard from a later leader: this master's term is over, whatever it
        // believes of its lease. It acts on nothing more (restarted, it stands by).
        spdlog::critical("nexec master: {}; exiting so that it acts on nothing more", pids[i].status().message());
        spdlog::default_logger()->flush();
        std::_Exit(4);
      }
      auto it = jobs_.find(batch[i].job_id());
      if (it == jobs_.end()) continue;
      JobRecord& rec = it->second;
      const absl::StatusOr<int>& pid = pids[i];
      if (!pid.ok() && rec.job.attempt() == batch[i].attempt() && !rec.job.tasks().empty()) {
        spdlog::warn("job {}: launch on {} failed: {}", rec.job.id(), rec.job.tasks(0).host(), pid.status().ToString());
      }
      const std::string host = rec.job.tasks().empty() ? "" : rec.job.tasks(0).host();
      ApplyEffects(rec, job_state::LaunchAnswered(rec, batch[i].attempt(), pid, Now()));
      if (!pid.ok()) cycle_wanted_ = true;
      // Its agent serves another store: nothing more goes there (the job itself went back
      // to its queue) until its heartbeats say it serves this one.
      if (absl::IsAborted(pid.status()) && !host.empty()) {
        if (HostBook::Host* h = hosts_.Find(host); h != nullptr && h->available) {
          LoseHost(host, *h, absl::StrCat("its agent refused a launch: ", pid.status().message()));
        }
      }
    }
  });
}

void Master::ApplyEffects(JobRecord& rec, const job_state::Effects& fx) {
  using Step = job_state::SchedulerStep;
  const int64_t id = rec.job.id();
  if (fx.cpu_seconds > 0) scheduler_.AddFairshareCpuTime(id, fx.cpu_seconds);
  switch (fx.scheduler) {
    case Step::kNone:
      break;
    case Step::kQueue:
      if (absl::Status queued = scheduler_.Submit(rec.request); !queued.ok()) job_state::QueueRefused(rec, std::string(queued.message()));
      break;
    case Step::kCancel:
      LogInconsistency(id, "cancel", scheduler_.Cancel(id));
      break;
    case Step::kRelease:
      scheduler_.AdvanceFairshare(clock_->Now());
      LogInconsistency(id, "release", scheduler_.Release(id));
      break;
    case Step::kRequeue:
      scheduler_.AdvanceFairshare(clock_->Now());
      LogInconsistency(id, "release", scheduler_.Release(id));
      if (absl::Status queued = scheduler_.Submit(rec.request); !queued.ok()) {
        job_state::RequeueRefused(rec, std::string(queued.message()));
      }
      break;
    case Step::kSuspend:
      LogInconsistency(id, "suspend", scheduler_.SetSuspended(id, true));
      break;
    case Step::kResume:
      LogInconsistency(id, "resume", scheduler_.SetSuspended(id, false));
      break;
    case Step::kCancelPreemption:
      LogInconsistency(id, "cancel the preemption of", scheduler_.CancelPreemption(id));
      break;
  }
  if (rec.job.state() == pb::RUNNING || rec.job.state() == pb::SUSPENDED) {
    active_.insert(id);
  } else {
    active_.erase(id);
  }
  // What frees or takes back resources is for a cycle to look at.
  if (fx.scheduler != Step::kNone || fx.freed) cycle_wanted_ = true;
  if (fx.write) MarkDirty(id);
}

int Master::PreExecRetries(const JobRecord& rec) const {
  const QueueConfig* q = QueueConfigOf(rec.request.queue);
  return q != nullptr ? q->pre_exec_retries : 3;
}

std::string Master::Stamp() const {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", clock_->Now(), options_.time_zone);
}

pb::Job Master::ViewOf(const JobRecord& rec) const {
  if (rec.job.state() != pb::PENDING) return rec.job;
  std::optional<ReservationView> reservation = scheduler_.ReservationOf(rec.job.id());
  if (!rec.job.reason().empty() && !reservation) return rec.job;
  if (scheduler_.QueueOpen(rec.request.queue)) {
    // The limit (or reservation, or preemption) that held it in the last cycle, if any.
    pb::Job view = rec.job;
    if (reservation) {
      for (const std::string& h : reservation->hosts) view.add_reserved_hosts(h);
      if (reservation->start != absl::InfiniteFuture()) *view.mutable_reserved_start() = ToTimestamp(reservation->start);
    }
    std::string why = scheduler_.PendingReason(rec.job.id());
    if (!why.empty()) view.set_reason(std::move(why));
    return view;
  }
  pb::Job view = rec.job;
  for (const QueueConfig& q : config_.queues) {
    if (q.name != rec.request.queue) continue;
    absl::Time opens = q.run_window.NextChange(clock_->Now(), options_.time_zone);
    view.set_reason(absl::StrCat("queue ", q.name, " is outside its run window (", q.run_window.text(), ")",
                                 opens == absl::InfiniteFuture()
                                     ? ""
                                     : absl::StrCat("; it opens at ",
                                                    absl::FormatTime("%Y-%m-%d %H:%M", opens, options_.time_zone))));
  }
  return view;
}

namespace {

// What an agent declares of its memory, checked where its heartbeat enters: an older agent
// (before its own check) could declare "inf" or 1e300 MB, which the scheduler then counted.
absl::Status CheckDeclaredMemory(const pb::AgentInfo& info) {
  for (const auto& [name, mb] : {std::pair<const char*, double>{"mem", info.mem_mb()}, {"swap", info.swap_mb()}}) {
    if (!std::isfinite(mb) || mb < 0 || mb > kMaxHostMemMb) {
      return absl::InvalidArgumentError(absl::StrCat("heartbeat of host ", info.host(), " declares ", name, " ", mb,
                                                     " MB: a host's must be a finite number from 0 to ",
                                                     static_cast<int64_t>(kMaxHostMemMb), " MB (1 PiB)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<pb::HeartbeatResponse> Master::Heartbeat(const pb::HeartbeatRequest& req) {
  if (req.info().host().empty()) return absl::InvalidArgumentError("heartbeat without a host name");
  JC_RETURN_IF_ERROR(CheckDeclaredMemory(req.info()));
  // Answered once what it reported is committed: the agent forgets an ended task only then.
  return OnLoop([&] { return HeartbeatOnLoop(req); });
}

void Master::HeartbeatThen(const pb::HeartbeatRequest& req,
                           std::function<void(absl::StatusOr<pb::HeartbeatResponse>)> done) {
  if (req.info().host().empty()) return done(absl::InvalidArgumentError("heartbeat without a host name"));
  if (absl::Status declared = CheckDeclaredMemory(req.info()); !declared.ok()) return done(declared);
  OnLoopThen([this, &req] { return HeartbeatOnLoop(req); }, std::move(done));
}

void Master::StreamedHeartbeatThen(const pb::HeartbeatRequest& req,
                                   std::function<void(absl::StatusOr<StreamedHeartbeat>)> done) {
  if (req.info().host().empty()) return done(absl::InvalidArgumentError("heartbeat without a host name"));
  if (absl::Status declared = CheckDeclaredMemory(req.info()); !declared.ok()) return done(declared);
  OnLoopThen(
      [this, &req]() -> absl::StatusOr<StreamedHeartbeat> {
        auto answer = HeartbeatOnLoop(req);
        if (!answer.ok()) return answer.status();
        const HostBook::Host* host = hosts_.Find(req.info().host());
        const bool here = host != nullptr && host->available && host->info.address() == req.info().address() &&
                          hosts_.RefusalOf(req.info().host()) == nullptr;
        return StreamedHeartbeat{std::move(*answer), here};
      },
      std::move(done));
}

absl::StatusOr<pb::HeartbeatResponse> Master::HeartbeatOnLoop(const pb::HeartbeatRequest& req) {
  const pb::AgentInfo& info = req.info();
  pb::HeartbeatResponse resp;
  resp.set_master_identity(identity_);
  resp.set_master_term(options_.term);
  // An agent serving another master's store: its reports name that store's jobs (its job
  // 1 is not ours). It binds to this store once none of them runs (HeartbeatResponse).
  if (!info.master_identity().empty() && !identity_.empty() && info.master_identity() != identity_) {
    RefuseHeartbeat(req);
    return resp;
  }
  hosts_.Accepted(info.host());
  TellTermTo(info);
  std::vector<Launch> relaunch;
  // The host half: the host book, its resources and sensors — read on the full
  // heartbeats; one with only exits says the host is alive.
  HostBook::Host* known = hosts_.Find(info.host());
  const bool exits_only = req.exits_only() && known != nullptr && known->available;
  bool freed = false;
  if (exits_only) {
    known->last_seen = clock_->Now();
  } else {
    JC_ASSIGN_OR_RETURN(freed, HostHeartbeat(info));
  }

  // What agents saw tasks do goes into the jobs' history (GPU misuse, ...).
  std::set<int64_t> noted;
  for (const pb::TaskNote& n : req.notes()) {
    auto it = jobs_.find(n.job_id());
    if (it == jobs_.end() || it->second.job.attempt() != n.attempt()) continue;
    it->second.job.add_history(absl::StrCat(Stamp(),
                                            " task ", n.task_index(), " on ", info.host(), ": ", n.message()));
    if (n.killed() && n.task_index() == 0) it->second.killed_because = n.message();
    noted.insert(n.job_id());
  }
  std::set<int64_t> reported;
  for (const pb::TaskReport& r : req.tasks()) {
    auto it = jobs_.find(r.job_id());
    if (it == jobs_.end()) {
      if (r.state() != pb::TASK_EXITED) *resp.add_kill() = r;  // a stray: end it
      continue;
    }
    JobRecord& rec = it->second;
    // The current attempt's task is reported by its own host only.
    if (!job_state::Ended(rec.job.state()) && rec.job.state() != pb::PENDING && rec.job.attempt() == r.attempt() &&
        r.task_index() >= 0 && r.task_index() < rec.job.tasks_size() &&
        rec.job.tasks(r.task_index()).host() != info.host()) {
      spdlog::warn("nexec host {} reported task {} of job {}, which runs on {}; ignored", info.host(), r.task_index(),
                   r.job_id(), rec.job.tasks(r.task_index()).host());
      continue;
    }
    const bool first_task = r.task_index() == 0 && !job_state::Ended(rec.job.state()) &&
                            rec.job.state() != pb::PENDING && rec.job.attempt() == r.attempt();
    // One ended by its agent's restart, not by itself, gets the host's rules (rerun or fail).
    job_state::Effects fx =
        r.ended_by_agent_restart()
            ? job_state::EndedByAgentRestart(rec, r, RerunsOnHostFailure(rec), info.host(), PreExecRetries(rec), Now())
            : job_state::TaskReported(rec, r, info.host(), PreExecRetries(rec), Now());
    if (fx.kill_report) *resp.add_kill() = r;
    if (fx.notify.has_value()) *resp.add_notify() = std::move(*fx.notify);
    if (first_task) {
      reported.insert(r.job_id());
      if (fx.write) noted.erase(r.job_id());  // written with its end
    }
    freed |= fx.freed;
    ApplyEffects(rec, fx);
  }
  // Running jobs whose first task lives here but that the agent does not report: if the
  // agent never reported it, launch it again (the agent never runs an attempt twice);
  // if it did and now does not, the agent lost it (it restarted), so the job reruns or
  // fails as on a host failure. Only a full heartbeat reports every task.
  for (int64_t id : exits_only ? std::vector<int64_t>() : std::vector<int64_t>(active_.begin(), active_.end())) {
    JobRecord& rec = jobs_.at(id);
    if (rec.job.tasks().empty() || rec.job.tasks(0).host() != info.host() || reported.count(id)) continue;
    job_state::Effects fx = job_state::NotReported(rec, RerunsOnHostFailure(rec), info.host(), Now());
    if (fx.launch) relaunch.push_back({info.address(), MakeLaunch(rec.job)});
    freed |= fx.freed;
    ApplyEffects(rec, fx);
  }
  for (int64_t id : noted) MarkDirty(id);
  if (!relaunch.empty()) {
    AfterCommit([this, relaunch = std::move(relaunch)]() mutable {
      for (Launch& l : relaunch) StartLaunch(std::move(l));
    });
  }
  if (freed) cycle_wanted_ = true;
  return resp;
}

bool Master::RerunsOnHostFailure(const JobRecord& rec) const {
  return std::any_of(config_.queues.begin(), config_.queues.end(), [&](const QueueConfig& c) {
    return c.name == rec.request.queue && c.rerun_on_host_failure;
  });
}

void Master::EnableMetrics(prometheus::Registry& registry) {
  auto metrics = std::make_unique<MasterMetrics>(registry);
  OnLoop([&] { metrics_ = std::move(metrics); });
}

void Master::UpdateMetrics() {
  std::vector<pb::Host> hosts = ListHosts();
  std::vector<pb::Limit> limits = ListLimits();  // empty, and cheap, without limits
  std::vector<pb::ShareNode> shares = ListShares("");  // likewise without fair share
  OnLoop([&] {
    if (!metrics_) return;
    metrics_->UpdateShares(shares);
    std::vector<pb::Queue> capacity;  // capacity queues' clusters only: no walk over all jobs
    for (const auto& q : config_.queues) {
      if (!q.capacity) continue;
      pb::Queue& o = capacity.emplace_back();
      o.set_name(q.name);
      AddClusters(q, &o);
    }
    metrics_->UpdateCapacity(capacity);
    std::vector<pb::Job> active;
    for (int64_t id : active_) active.push_back(jobs_.at(id).job);
    metrics_->Update(hosts, active, JobCountsOnLoop());
    metrics_->UpdateLimits(limits);
  });
}

absl::Status Master::Reconfigure(ExecutorConfig config) {
  return OnLoop([&]() -> absl::Status {
  // Check first, change after: a refused reload leaves everything as it was.
  for (const auto& old : config_.queues) {
    bool kept = std::any_of(config.queues.begin(), config.queues.end(),
                            [&](const QueueConfig& q) { return q.name == old.name; });
    if (!kept && scheduler_.HasQueue(old.name) && scheduler_.QueueJobs(old.name) > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "queue ", old.name, " is gone from the configuration but still holds ",
          scheduler_.QueueJobs(old.name), " jobs; keep it until they end"));
    }
  }
  for (const auto& t : config.host_types) JC_RETURN_IF_ERROR(scheduler_.AddHostType(t));
  for (const auto& [group, members] : config.user_groups) scheduler_.DefineUserGroup(group, members);
  for (const auto& [name, h] : hosts_.hosts()) {
    auto st = config.hosts.find(name);
    std::string type = st == config.hosts.end() ? "" : st->second.type;
    scheduler_.SetHostType(name, type).IgnoreError();
    if (absl::Status s = scheduler_.SetHostThresholds(
            name, st == config.hosts.end() ? LoadThresholds{} : st->second.load_thresholds);
        !s.ok()) {
      spdlog::error("host {} is unknown to the scheduler: {}", name, s.ToString());  // hosts_ and it hold the same
    }
    if (st != config.hosts.end()) {
      for (const auto& [k, v] : st->second.resources) scheduler_.SetHostResource(name, k, v).IgnoreError();
    }
  }
  for (const auto& old : config_.queues) {
    bool kept = std::any_of(config.queues.begin(), config.queues.end(),
                            [&](const QueueConfig& q) { return q.name == old.name; });
    if (!kept) scheduler_.RemoveQueue(old.name).IgnoreError();
  }
  for (const auto& q : config.queues) {
    absl::Status s = scheduler_.UpdateQueue(q);
    if (!s.ok()) spdlog::warn("queue {} not (yet) usable: {}", q.name, s.message());
  }
  scheduler_.SetLimits(config.limits);
  config_ = std::move(config);
  {
    std::lock_guard<std::mutex> lock(access_mu_);
    access_config_ = std::make_shared<const ExecutorConfig>(config_);
  }
  spdlog::info("nexec configuration reloaded: {} queues, {} host types, {} limits", config_.queues.size(),
               config_.host_types.size(), config_.limits.size());
  cycle_wanted_ = true;
  return absl::OkStatus();
  });
}

MasterStats Master::stats() {
  return OnLoop([this] { return stats_; });
}

void Master::Wake() {
  if (loop_.InLoop()) {
    cycle_wanted_ = true;
    return;
  }
  // A message of its own: the burst it lands in ends with a cycle.
  loop_.Post([this] { cycle_wanted_ = true; });
}

void Master::Start() {
  if (!options_.sensor_dir.empty()) {
    std::string path = options_.sensor_dir + "/ress.master";
    if (access(path.c_str(), X_OK) == 0) {
      spdlog::info("resource sensor {} (cluster resources)", path);
      sensors_ = std::make_unique<SensorRunner>(std::vector<std::string>{path}, options_.sensor_restart_delay);
    }
  }
  loop_.Post([this] {
    cycling_ = true;
    cycle_wanted_ = true;
  });
  housekeeping_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "nexec-housekeep");
    Housekeeping();
  });
}

void Master::Stop() {
  {
    std::lock_guard<std::mutex> lock(housekeeping_mu_);
    stopping_ = true;
  }
  housekeeping_cv_.notify_all();
  if (housekeeping_.joinable()) housekeeping_.join();
  loop_.Stop();
  burst_ = Burst();  // replies never sent are abandoned: their callers see the master stopping
  sensors_.reset();
  events_.Close();
}

void Master::Housekeeping() {
  std::unique_lock<std::mutex> lock(housekeeping_mu_);
  while (!housekeeping_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; })) {
    lock.unlock();
    Wake();  // a cycle at least every second (run windows, limits, time-based policies)
    // Host checks and metrics look at every host and job: once a second.
    auto checked = CheckHosts();
    if (!checked.ok()) spdlog::error("host check failed: {}", checked.ToString());
    if (auto timed = CheckTimedJobs(); !timed.ok()) {
      spdlog::warn("timed jobs: {} (tried again in a second)", timed.ToString());
    }
    auto windows = CheckRunWindows();
    if (!windows.ok()) spdlog::warn("run windows: {} (tried again in a second)", windows.status().ToString());
    if (sensors_) {
      std::vector<pb::SensorResource> current = sensors_->Current();
      OnLoop([&] {
        for (const auto& r : current) cycle_wanted_ |= ApplySensor(r, "");
      });
    }
    CleanEnded();
    UpdateMetrics();
    lock.lock();
  }
}

}  // namespace jc::nexec
