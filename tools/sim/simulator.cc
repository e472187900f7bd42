#include "tools/sim/simulator.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/datamon/source_selection.h"
#include "services/estimator/duration_estimator.h"
#include "services/scheduler/filters.h"
#include "tools/sim/metrics.h"

namespace jc::sim {
namespace {

using scheduler::CenterView;
using scheduler::PlacementRequest;
using scheduler::Resources;
using scheduler::Snapshot;

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

enum class EventKind { kOutageEnd, kFinish, kDataArrived, kOutageStart, kArrival };

struct Event {
  double time;
  EventKind kind;  // at the same time: recoveries and finishes free capacity before arrivals
  int64_t seq;
  int a;  // job or center
  int b;  // attempt
  bool operator>(const Event& o) const {
    if (time != o.time) return time > o.time;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

struct Job {
  const TraceJob* trace = nullptr;
  int spec = -1;  // index into specs
  PlacementRequest request;
  int dataset = -1;  // index into datasets; -1: none
  bool private_data = false;
  JobRecord record;
  int center = -1;          // running there, -1 when not running
  double attempt_start = 0;  // of the running attempt
  bool done = false;         // completed or failed for good
  double attained_gpu_s = 0;  // what its ended attempts ran (least attained service)
  // What placement was told of its run (reference seconds) at its last decision: the
  // centers' own start estimates count with it, never with the trace's duration.
  double expected_run_s = 3600;
  int held_at = -1;  // the busy center it waits for (expected completion), -1: none
};

struct Spec {
  std::string id;
  Resources quantity;
};

struct DatasetState {
  const SimDataset* config = nullptr;  // null: known from the trace only (outside the federation)
  std::string key;
  double size_mb = 0;
  std::vector<int> holders;  // centers
  jointcloud::v1::Dataset record;  // locations with their download history, for datamon
};

class Simulation {
 public:
  Simulation(const Federation& f, const std::vector<TraceJob>& trace, const SimOptions& o, PlacementPolicy& policy)
      : f_(f), trace_(trace), options_(o), policy_(policy), queue_(o.queue) {}

  absl::Status Init();
  void Run();
  RunResult Result() const;

 private:
  int SpecFor(const TraceJob& j);
  int DatasetFor(const TraceJob& j);
  void Push(double time, EventKind kind, int a, int b = 0) { events_.push({time, kind, next_event_++, a, b}); }
  void Enqueue(int job);
  estimator::JobClass ClassOf(const Job& job) const;
  // What the scheduler counts on the job running, as the control plane: a one-off's cautious
  // figure (estimator::DurationEstimate::assumed), else the median; < 0 unknown.
  double ExpectedOf(const Job& job) const;
  void SchedulePass();
  bool TryPlace(int job);
  void Start(int job, int center);
  void EndAttempt(int job, double now);  // releases what the running attempt holds
  void Finish(int job, int attempt);
  void OutageStart(int center);
  double SpeedAt(const Job& job, int center) const;
  void Hold(int job, int center);
  void Unhold(int job);
  // The job waits: the centers that could ever take it are kept for it against jobs that
  // could run at more (PlacementRequest::kept_centers), at once, and again by every full pass.
  void KeepFor(int index, bool cacheable);
  // What center `center` would report as the start delay of `job`'s spec (SimOptions::
  // center_reports "start"): its running jobs end at their expected ends, the jobs held for
  // it start first, in the order they were held.
  double ReportedStartDelay(int center, const Job& job) const;

  const Federation& f_;
  const std::vector<TraceJob>& trace_;
  const SimOptions& options_;
  PlacementPolicy& policy_;
  scheduler::JobQueue queue_;
  // What the queue order knows of durations: only the jobs that ended (never the trace's).
  estimator::DurationEstimator estimator_;
  Snapshot snapshot_;
  std::vector<Spec> specs_;
  absl::flat_hash_map<std::string, int> spec_index_;
  std::vector<DatasetState> datasets_;
  absl::flat_hash_map<std::string, int> dataset_index_;
  std::vector<Job> jobs_;
  std::vector<absl::flat_hash_set<int>> running_at_;  // per center
  std::vector<std::vector<int>> held_;  // per center: jobs waiting for it, in the order held
  std::vector<double> busy_gpu_s_;
  std::vector<int> attempts_at_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t next_event_ = 0;
  double now_ = 0;
  bool freed_ = true;  // capacity came back since the last pass: every waiting job may fit
  bool full_pass_ = false;  // every waiting job is being tried
  std::vector<int> arrived_;  // jobs queued since the last pass
  absl::flat_hash_set<int> failed_specs_;  // in this pass
  // Centers draining for an overdue job (center id -> the job), decided again by every full
  // pass, kept by passes that only try new arrivals (SPEC A16, "nothing starves").
  struct Drain {
    int job = -1;             // the overdue job it drains for
    absl::Time start;         // when that job is expected to start there
  };
  absl::flat_hash_map<std::string, Drain> draining_;
  // Centers kept for waiting jobs that can run at few centers (center id -> how many the
  // narrowest could ever run at; SPEC A16): in force from the job's failed decision on,
  // decided again by each full pass, as the control plane's.
  absl::flat_hash_map<std::string, int> kept_, next_kept_;
  absl::flat_hash_map<std::string, int> kept_by_;  // project -> its job keeping this pass
  // The specs placed lately, and the centers kept for the scarce ones as of the last full
  // pass (null: none), as the control plane's.
  scheduler::ScarceSpecs scarce_specs_;
  std::shared_ptr<const scheduler::ScarceCenters> scarce_;
  uint64_t federation_generation_ = 1;  // which centers are available: changes with outages
  // How many centers could ever take a spec (CentersThatCouldEverTake), until availability
  // changes; for jobs whose filters depend on nothing else.
  absl::flat_hash_map<int, std::vector<int>> ever_by_spec_;
  int64_t decisions_ = 0;
  double moved_mb_ = 0;
  double window_start_ = 0, window_end_ = 0;  // first and last submission
};

double Simulation::SpeedAt(const Job& job, int center) const {
  const SimCenter& c = f_.centers[center];
  return job.trace->gpus > 0 ? f_.PerformanceOf(c) : c.performance;
}

int Simulation::SpecFor(const TraceJob& j) {
  std::string id = absl::StrCat("g", j.gpus, "-c", j.cpus, "-m", j.memory_mb, j.gpu_model.empty() ? "" : "@",
                                j.gpu_model);
  auto [it, added] = spec_index_.try_emplace(id, static_cast<int>(specs_.size()));
  if (!added) return it->second;
  Spec spec{id, Resources{}};
  spec.quantity.gpu = j.gpus;
  spec.quantity.cpu = j.cpus;
  spec.quantity.memory_mb = j.memory_mb;
  std::vector<std::string> models = absl::StrSplit(j.gpu_model, '|', absl::SkipEmpty());
  snapshot_.spec_quantity[id] = spec.quantity;
  // Every center that could ever run it offers it, priced and powered by its own figures.
  for (size_t i = 0; i < f_.centers.size(); ++i) {
    const SimCenter& c = f_.centers[i];
    if (j.gpus > 0 && c.gpus <= 0) continue;
    if (!models.empty() && std::find(models.begin(), models.end(), c.gpu_model) == models.end()) continue;
    scheduler::SpecAtCenter offer;
    offer.quantity = spec.quantity;
    offer.price = j.gpus * c.price_per_gpu_hour + j.cpus * c.price_per_cpu_hour;
    double gpu_watts = c.gpu_model.empty() ? 0 : f_.gpu_models.at(c.gpu_model).watts;
    offer.execution_power_watts = j.gpus * gpu_watts + j.cpus * c.watts_per_cpu;
    snapshot_.MutableAt(static_cast<int>(i)).specs[id] = offer;
  }
  specs_.push_back(std::move(spec));
  return it->second;
}

int Simulation::DatasetFor(const TraceJob& j) {
  if (j.dataset.empty()) return -1;
  auto [it, added] = dataset_index_.try_emplace(j.dataset, static_cast<int>(datasets_.size()));
  if (!added) return it->second;
  DatasetState d;
  d.key = j.dataset;
  auto known = f_.datasets.find(j.dataset);
  if (known != f_.datasets.end()) {
    d.config = &known->second;
    d.size_mb = known->second.size_mb;
  } else {
    d.size_mb = j.dataset_mb;
  }
  d.record.set_is_private(d.config != nullptr && d.config->is_private);
  datasets_.push_back(std::move(d));
  return it->second;
}

absl::Status Simulation::Init() {
  for (size_t i = 0; i < f_.centers.size(); ++i) {
    const SimCenter& c = f_.centers[i];
    CenterView v;
    v.id = c.id;
    v.available = true;
    v.security_grade = c.security_grade;
    v.topology = c.topology;
    v.capacity.gpu = c.gpus;
    v.capacity.cpu = c.cpus;
    v.capacity.memory_mb = c.memory_mb;
    v.free = v.capacity;
    v.static_power_watts = c.static_power_watts;
    v.performance_factor = f_.PerformanceOf(c);
    v.network.bandwidth_mbps = c.bandwidth_mbps;
    v.network.latency_ms = c.latency_ms;
    for (const auto& d : c.datasets) v.datasets.insert(d);
    snapshot_.Upsert(std::move(v));
  }
  Resources total;
  for (const auto& c : snapshot_.centers()) total += c.capacity;
  queue_.SetCapacity(total);
  running_at_.resize(f_.centers.size());
  held_.resize(f_.centers.size());
  busy_gpu_s_.assign(f_.centers.size(), 0);
  attempts_at_.assign(f_.centers.size(), 0);

  jobs_.resize(trace_.size());
  if (!trace_.empty()) {
    window_start_ = trace_.front().submit;
    window_end_ = trace_.back().submit;
    for (const auto& t : trace_) {
      window_start_ = std::min(window_start_, t.submit);
      window_end_ = std::max(window_end_, t.submit);
    }
  }
  for (size_t i = 0; i < trace_.size(); ++i) {
    const TraceJob& t = trace_[i];
    for (absl::string_view m : absl::StrSplit(t.gpu_model, '|', absl::SkipEmpty())) {
      if (!f_.gpu_models.count(std::string(m))) {
        return absl::InvalidArgumentError(absl::StrCat("trace job ", i + 1, " (submitted at ", t.submit,
                                                       " s) names unknown GPU model \"", m,
                                                       "\"; the federation file's gpu_models lists the known ones"));
      }
    }
    Job& job = jobs_[i];
    job.trace = &t;
    job.spec = SpecFor(t);
    job.dataset = DatasetFor(t);
    job.record.submit = t.submit;
    PlacementRequest& r = job.request;
    r.job_id = absl::StrCat("j", i);
    r.spec_id = specs_[job.spec].id;
    r.project = t.project;
    r.user = t.user;
    if (options_.oracle_durations) r.expected_runtime = absl::Seconds(t.duration);
    if (t.deadline >= 0) r.deadline = absl::UnixEpoch() + absl::Seconds(t.deadline);
    if (job.dataset >= 0) {
      const DatasetState& d = datasets_[job.dataset];
      job.private_data = d.record.is_private();
      r.datasets.push_back({d.key, d.size_mb, job.private_data, {}});
    }
    Push(t.submit, EventKind::kArrival, static_cast<int>(i));
  }
  // Where each dataset is at the start.
  for (size_t c = 0; c < f_.centers.size(); ++c) {
    for (const auto& key : f_.centers[c].datasets) {
      auto it = dataset_index_.find(key);
      if (it == dataset_index_.end()) continue;  // no job reads it
      DatasetState& d = datasets_[it->second];
      d.holders.push_back(static_cast<int>(c));
      auto* loc = d.record.add_location();
      loc->set_ai_center_id(f_.centers[c].id);
      loc->set_network_topology(f_.centers[c].topology);
      loc->set_access("r");
    }
  }
  for (const auto& o : f_.outages) {
    int c = snapshot_.IndexOf(o.center);
    Push(o.start, EventKind::kOutageStart, c);
    Push(o.end, EventKind::kOutageEnd, c);
  }
  return absl::OkStatus();
}

estimator::JobClass Simulation::ClassOf(const Job& job) const {
  // A trace names no command: the job's name (when the trace has one) by its user, else the
  // user's jobs of the spec, is what history can tell.
  return {job.trace->project, job.trace->user, job.trace->name, "", specs_[job.spec].id};
}

double Simulation::ExpectedOf(const Job& job) const {
  auto e = estimator_.Estimate(ClassOf(job), 1.0);
  return e ? absl::ToDoubleSeconds(e->assumed) : -1;
}

void Simulation::Enqueue(int job) {
  scheduler::QueuedJob q;
  q.seq = job;
  q.project = jobs_[job].trace->project;
  q.submitted = jobs_[job].record.submit;
  q.attained_s = jobs_[job].attained_gpu_s;
  if (options_.queue.UsesExpected()) q.expected_s = ExpectedOf(jobs_[job]);
  queue_.Push(q);
  arrived_.push_back(job);
}

void Simulation::Run() {
  while (!events_.empty()) {
    now_ = events_.top().time;
    // Every event at this instant, then one scheduling pass.
    while (!events_.empty() && events_.top().time == now_) {
      Event e = events_.top();
      events_.pop();
      switch (e.kind) {
        case EventKind::kArrival:
          Enqueue(e.a);
          break;
        case EventKind::kFinish:
          Finish(e.a, e.b);
          break;
        case EventKind::kDataArrived: {
          // The copy is complete: the center holds the dataset from now on.
          Job& job = jobs_[e.a];
          if (job.record.attempts != e.b || job.center < 0) break;
          DatasetState& d = datasets_[job.dataset];
          CenterView* c = &snapshot_.MutableAt(job.center);
          if (c->datasets.insert(d.key).second) {
            d.holders.push_back(job.center);
            auto* loc = d.record.add_location();
            loc->set_ai_center_id(c->id);
            loc->set_network_topology(c->topology);
            loc->set_access("r");
          }
          break;
        }
        case EventKind::kOutageStart:
          OutageStart(e.a);
          break;
        case EventKind::kOutageEnd:
          snapshot_.MutableAt(e.a).available = true;
          ever_by_spec_.clear();
          ++federation_generation_;
          freed_ = true;
          break;
      }
    }
    SchedulePass();
  }
}

void Simulation::SchedulePass() {
  if (queue_.size() == 0) {
    arrived_.clear();
    return;
  }
  failed_specs_.clear();
  if (options_.keep_scarce) {
    // As the control plane's BeginPass: the scarce specs placed lately keep their centers.
    scarce_ = scarce_specs_.Centers(snapshot_, absl::UnixEpoch() + absl::Seconds(now_), federation_generation_);
    if (scarce_->empty()) scarce_.reset();
  }
  if (freed_) {
    if (options_.queue.UsesExpected()) {
      // What ended since the last pass may have taught the estimator: waiting jobs' ranks
      // are asked again (the jobs in memory, no I/O).
      for (int job = 0; job < static_cast<int>(jobs_.size()); ++job) {
        if (queue_.Contains(job)) queue_.SetExpected(job, ExpectedOf(jobs_[job]));
      }
    }
    // Every waiting job decides again, in queue order: those earlier in it are ahead in
    // the centers' queues they hold for.
    for (size_t c = 0; c < held_.size(); ++c) {
      for (int job : held_[c]) jobs_[job].held_at = -1;
      held_[c].clear();
      snapshot_.MutableAt(static_cast<int>(c)).waiting_tasks = 0;
    }
    draining_.clear();
    next_kept_.clear();
    kept_by_.clear();
    full_pass_ = true;
    queue_.Pass(now_, [this](int64_t job) { return TryPlace(static_cast<int>(job)); });
    full_pass_ = false;
    kept_.swap(next_kept_);
  } else {
    // Nothing was freed since the last pass, so the jobs that did not fit then cannot
    // fit now: only the new arrivals are tried, in the order they came.
    for (int job : arrived_) {
      if (queue_.Contains(job) && TryPlace(job)) queue_.Erase(job);
    }
  }
  freed_ = false;
  arrived_.clear();
}

bool Simulation::TryPlace(int index) {
  Job& job = jobs_[index];
  PlacementRequest& r = job.request;
  // Within a pass capacity only shrinks: a spec that fit nowhere still fits nowhere, for
  // any job whose filters depend on nothing else (no private data, no centers to avoid).
  // (An overdue job is always asked: where it fits nowhere a center drains for it.)
  bool cacheable = !job.private_data && r.avoid_centers.empty() && !queue_.Overdue(index, now_);
  if (cacheable && failed_specs_.contains(job.spec)) {
    KeepFor(index, cacheable);
    return false;
  }
  r.now = absl::UnixEpoch() + absl::Seconds(now_);
  r.kept_centers = kept_;
  r.scarce_centers = scarce_;
  r.draining_centers.clear();
  for (const auto& [center, drain] : draining_) {
    if (drain.job != index) r.draining_centers[center] = drain.start;
  }
  if (!options_.oracle_durations) {
    // Only what had ended before this decision: the estimator's figure, else the default.
    const double expected = ExpectedOf(job);
    r.expected_runtime = expected > 0 ? absl::Seconds(expected) : PlacementRequest().expected_runtime;
  }
  // What a draining center may count on it to end by, as the control plane: its history's
  // 90th percentile (a trace has no time limits), else nothing.
  if (auto e = estimator_.Estimate(ClassOf(job), 1.0); e && e->runs > 0) {
    r.backfill_runtime = e->p90;
  } else {
    r.backfill_runtime = absl::InfiniteDuration();
  }
  job.expected_run_s = absl::ToDoubleSeconds(r.expected_runtime);
  Unhold(index);
  // A job may wait for a faster busy center while it has waited less than its own expected
  // run: beyond that, no faster center can make up for the wait (and nothing waits forever).
  r.consider_busy_centers = policy_.waits_for_busy() && now_ - job.record.submit < job.expected_run_s;
  if (r.consider_busy_centers) {
    const Resources& need = specs_[job.spec].quantity;
    for (size_t c = 0; c < f_.centers.size(); ++c) {
      CenterView& v = snapshot_.MutableAt(static_cast<int>(c));
      if (options_.center_reports == "start") {
        v.queue_reported_at = r.now;
        v.reported_start_delay[r.spec_id] =
            v.free.Covers(need) ? absl::ZeroDuration() : absl::Seconds(ReportedStartDelay(static_cast<int>(c), job));
      }
    }
  }
  if (job.dataset >= 0) {
    auto& need = r.datasets.front();
    need.locations.clear();
    for (int c : datasets_[job.dataset].holders) need.locations.push_back(snapshot_.centers()[c].topology_path);
  }
  ++decisions_;
  int center = policy_.Choose(r, snapshot_);
  const bool fits = center >= 0 && snapshot_.centers()[center].free.Covers(specs_[job.spec].quantity);
  if (!fits && queue_.Overdue(index, now_)) {
    // Past the longest wait and nowhere to start: a center drains for it (the one it holds
    // for, else the closest to fitting), or backfill would hand its capacity on piecemeal.
    int drain = center >= 0 ? center : scheduler::DrainingCenterFor(r, snapshot_);
    for (const auto& [id, d] : draining_) {
      // One drain per project at a time, as the control plane.
      if (d.job != index && jobs_[d.job].trace->project == job.trace->project) drain = -1;
    }
    if (drain >= 0) {
      // Others may still start there if they end before it would (backfill): its expected
      // start is what the center would report of its queue.
      const absl::Time start = r.now + absl::Seconds(ReportedStartDelay(drain, job));
      draining_.try_emplace(snapshot_.centers()[drain].id, Drain{index, start});
    }
  }
  if (center < 0) {
    if (cacheable) failed_specs_.insert(job.spec);
    KeepFor(index, cacheable);
    return false;
  }
  if (!fits) {
    Hold(index, center);  // its expected completion is soonest there: it waits for it
    KeepFor(index, cacheable);
    return false;
  }
  // Placed: a center that drained for it is free for the others from now on (a pass that
  // only tries new arrivals would otherwise keep it).
  for (auto it = draining_.begin(); it != draining_.end();) {
    if (it->second.job == index) {
      draining_.erase(it++);
    } else {
      ++it;
    }
  }
  // Its spec is kept for a day, if few centers could run it, as the control plane's.
  if (options_.keep_scarce && r.pinned_centers.empty()) scarce_specs_.Saw(r.spec_id, job.trace->project, r.now);
  Start(index, center);
  return true;
}

void Simulation::KeepFor(int index, bool cacheable) {
  if (!options_.keep_scarce) return;
  const Job& job = jobs_[index];
  // One job's keeps per project a pass, as the control plane.
  if (kept_by_.try_emplace(job.trace->project, index).first->second != index) return;
  std::vector<int> own;
  const std::vector<int>* ever = &own;
  if (cacheable) {
    auto it = ever_by_spec_.find(job.spec);
    if (it == ever_by_spec_.end()) {
      it = ever_by_spec_.emplace(job.spec, scheduler::CentersThatCouldEverTake(job.request, snapshot_)).first;
    }
    ever = &it->second;
  } else {
    own = scheduler::CentersThatCouldEverTake(job.request, snapshot_);
  }
  const int breadth = static_cast<int>(ever->size());
  // In force at once (for the jobs behind it), and decided again by every full pass.
  for (int c : *ever) {
    scheduler::Keep(kept_, snapshot_.centers()[c].id, breadth);
    if (full_pass_) scheduler::Keep(next_kept_, snapshot_.centers()[c].id, breadth);
  }
}

void Simulation::Hold(int index, int center) {
  jobs_[index].held_at = center;
  held_[center].push_back(index);
  ++snapshot_.MutableAt(center).waiting_tasks;
}

void Simulation::Unhold(int index) {
  Job& job = jobs_[index];
  if (job.held_at < 0) return;
  auto& held = held_[job.held_at];
  held.erase(std::find(held.begin(), held.end(), index));
  --snapshot_.MutableAt(job.held_at).waiting_tasks;
  job.held_at = -1;
}

double Simulation::ReportedStartDelay(int center, const Job& job) const {
  const CenterView& c = snapshot_.centers()[center];
  Resources free = c.free;
  const Resources& need = specs_[job.spec].quantity;
  if (free.Covers(need)) return 0;
  // (time, resources) released, soonest first. A job past its expected end is taken to
  // run as long again as it has run so far, at least a quarter of its expected run more:
  // run times are heavy-tailed, and the longer a job has overrun, the longer it is likely
  // to go on (a drain timed by "it should end any moment" idles a center for as long as
  // the overrun lasts).
  using Release = std::pair<double, int>;  // time, job
  std::priority_queue<Release, std::vector<Release>, std::greater<Release>> releases;
  for (int r : running_at_[center]) {
    const Job& j = jobs_[r];
    double run = j.expected_run_s / SpeedAt(j, center);
    double end = j.attempt_start + j.record.transfer_s + run;
    if (end <= now_) end = now_ + std::max(0.25 * run, now_ - j.attempt_start);
    releases.push({end, r});
  }
  double t = now_;
  auto release_until = [&](const Resources& want) {
    while (!free.Covers(want) && !releases.empty()) {
      t = std::max(t, releases.top().first);
      free += specs_[jobs_[releases.top().second].spec].quantity;
      releases.pop();
    }
    return free.Covers(want);
  };
  // The jobs held for it before this one start first (the center's queue, in order).
  constexpr size_t kAheadLimit = 256;
  const auto& held = held_[center];
  for (size_t k = 0; k < held.size() && k < kAheadLimit; ++k) {
    const Job& h = jobs_[held[k]];
    if (&h == &job) break;
    const Resources& q = specs_[h.spec].quantity;
    if (!release_until(q)) break;
    free -= q;
    releases.push({t + h.expected_run_s / SpeedAt(h, center), held[k]});
  }
  if (!release_until(need)) {
    // Nothing it runs would make room (capacity taken by what it does not report): an
    // expected run from now.
    return job.expected_run_s / SpeedAt(job, center);
  }
  return t - now_;
}

void Simulation::Start(int index, int center) {
  Job& job = jobs_[index];
  const SimCenter& sc = f_.centers[center];
  CenterView& c = snapshot_.MutableAt(center);
  const Spec& spec = specs_[job.spec];
  c.free -= spec.quantity;
  ++c.running_tasks;
  queue_.AddHeld(job.trace->project, spec.quantity);
  running_at_[center].insert(index);
  ++attempts_at_[center];
  ++job.record.attempts;
  if (job.record.start < 0) job.record.start = now_;
  job.center = center;
  job.attempt_start = now_;
  job.record.center = sc.id;

  // Data first: from the source datamon ranks best (6.3.2), or from outside the
  // federation when no center holds it.
  double transfer = 0;
  if (job.dataset >= 0 && !c.datasets.contains(datasets_[job.dataset].key)) {
    DatasetState& d = datasets_[job.dataset];
    double bandwidth = sc.bandwidth_mbps;
    double latency_ms = sc.latency_ms;
    if (!d.holders.empty()) {
      datamon::SelectionInput in;
      in.dataset = d.record;
      in.target_center_id = sc.id;
      in.target_topology = sc.topology;
      for (int h : d.holders) {
        in.centers[f_.centers[h].id] = {true, snapshot_.centers()[h].available ? 1 : 0};
      }
      in.weights = datamon::DefaultWeights();
      auto chosen = datamon::SelectSources(in);
      if (chosen.sources_size() > 0) {
        const SimCenter* src = f_.Find(chosen.sources(0).ai_center_id());
        bandwidth = std::min(bandwidth, src->bandwidth_mbps);
        latency_ms += src->latency_ms;
        // The migration goes into the source's history, which the next selection reads.
        for (auto& loc : *d.record.mutable_location()) {
          if (loc.ai_center_id() == src->id) {
            datamon::RecordDownload(&loc, true, d.size_mb * 8 / bandwidth + latency_ms / 1000);
          }
        }
      }
    }
    transfer = d.size_mb * 8 / bandwidth + latency_ms / 1000;
    moved_mb_ += d.size_mb;
    Push(now_ + transfer, EventKind::kDataArrived, index, job.record.attempts);
  }
  double run = job.trace->duration / SpeedAt(job, center);
  job.record.transfer_s = transfer;
  job.record.run_s = run;
  Push(now_ + transfer + run, EventKind::kFinish, index, job.record.attempts);
}

void Simulation::EndAttempt(int index, double now) {
  Job& job = jobs_[index];
  int center = job.center;
  const SimCenter& sc = f_.centers[center];
  CenterView& c = snapshot_.MutableAt(center);
  const Spec& spec = specs_[job.spec];
  c.free += spec.quantity;
  --c.running_tasks;
  queue_.SubtractHeld(job.trace->project, spec.quantity);
  running_at_[center].erase(index);
  double held = now - job.attempt_start;
  double transferring = std::min(held, job.record.transfer_s);
  double running = held - transferring;
  job.attained_gpu_s += spec.quantity.gpu * running;
  const auto& offer = c.specs.at(spec.id);
  job.record.cost += offer.price * held / 3600;
  job.record.energy_j += sc.static_power_watts * transferring + offer.execution_power_watts * running;
  // Utilisation counts the arrival window only: a long job's tail after the last
  // submission would otherwise dilute it (its makespan can be days on a slow GPU).
  double overlap = std::min(now, window_end_) - std::max(job.attempt_start, window_start_);
  if (overlap > 0) busy_gpu_s_[center] += spec.quantity.gpu * overlap;
  job.center = -1;
  freed_ = true;
}

void Simulation::Finish(int index, int attempt) {
  Job& job = jobs_[index];
  if (job.record.attempts != attempt || job.center < 0) return;  // that attempt was ended by an outage
  const int center = job.center;
  EndAttempt(index, now_);
  job.record.end = now_;
  job.done = true;
  // The run (not the data transfer) at that center's speed, in reference seconds.
  estimator_.Learn(ClassOf(job), absl::Seconds(job.record.run_s), SpeedAt(job, center));
}

void Simulation::OutageStart(int center) {
  ever_by_spec_.clear();
  ++federation_generation_;
  snapshot_.MutableAt(center).available = false;
  std::vector<int> victims(running_at_[center].begin(), running_at_[center].end());
  std::sort(victims.begin(), victims.end());
  for (int index : victims) {
    Job& job = jobs_[index];
    EndAttempt(index, now_);
    // The retry policy: another attempt, elsewhere when possible, up to `retries`.
    if (job.record.attempts > f_.retries) {
      job.done = true;
      continue;
    }
    job.request.avoid_centers.insert(f_.centers[center].id);
    Enqueue(index);
  }
}

RunResult Simulation::Result() const {
  RunResult result;
  std::vector<JobRecord> records;
  records.reserve(jobs_.size());
  std::vector<const TraceJob*> traces;
  for (const auto& j : jobs_) {
    records.push_back(j.record);
    traces.push_back(j.trace);
  }
  result.metrics = ComputeMetrics(records, traces);
  double window = window_end_ - window_start_;
  for (size_t c = 0; c < f_.centers.size(); ++c) {
    CenterUse use;
    use.id = f_.centers[c].id;
    use.jobs = attempts_at_[c];
    if (f_.centers[c].gpus > 0 && window > 0) use.gpu_utilisation = busy_gpu_s_[c] / (f_.centers[c].gpus * window);
    result.centers.push_back(use);
  }
  double total_gpus = f_.TotalGpus(), busy = 0;
  for (double b : busy_gpu_s_) busy += b;
  if (total_gpus > 0 && window > 0) result.metrics.mean_gpu_utilisation = busy / (total_gpus * window);
  result.metrics.decisions = decisions_;
  result.metrics.data_moved_gb = moved_mb_ / 1024;
  if (options_.keep_jobs) result.jobs = std::move(records);
  return result;
}

}  // namespace

absl::StatusOr<RunResult> Simulate(const Federation& federation, const std::vector<TraceJob>& trace,
                                   const SimOptions& options, const PolicyCatalog& catalog) {
  auto wall = std::chrono::steady_clock::now();
  double cpu = CpuSeconds();
  if (options.center_reports != "start" && options.center_reports != "counts") {
    return absl::InvalidArgumentError(
        absl::StrCat("center reports \"", options.center_reports, "\": neither start nor counts"));
  }
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> policy = MakePolicy(options.policy, catalog, options.seed);
  if (!policy.ok()) return policy.status();
  // Centers in id order, as the registry lists them to the real scheduler: ties between
  // equally scored centers (and first fit) then fall the same way here as there.
  Federation ordered = federation;
  std::sort(ordered.centers.begin(), ordered.centers.end(),
            [](const SimCenter& a, const SimCenter& b) { return a.id < b.id; });
  Simulation sim(ordered, trace, options, **policy);
  if (absl::Status s = sim.Init(); !s.ok()) return s;
  sim.Run();
  RunResult result = sim.Result();
  result.metrics.policy = options.policy;
  result.metrics.queue = options.queue.Name();
  result.metrics.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  result.metrics.cpu_seconds = CpuSeconds() - cpu;
  return result;
}

}  // namespace jc::sim
