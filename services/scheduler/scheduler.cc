#include "services/scheduler/scheduler.h"

#include "common/timestamp.h"

#include "common/status_macros.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_join.h"
#include "services/estimator/job_class.h"
#include "services/scheduler/filters.h"
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/profile_file.h"

namespace jc::scheduler {

Scheduler::Scheduler(InputsSource* source, const Clock* clock, SchedulerOptions options)
    : source_(source), clock_(clock), options_(std::move(options)), profiles_(options_.profiles) {
  RegisterBuiltinScorers(scorers_);
  placer_ = std::make_unique<Placer>(scorers_, *models_.Find(kDefaultModel));
  if (options_.placement_store != nullptr && options_.placement_records > 0) {
    journal_ = std::make_unique<PlacementJournal>(options_.placement_store, &scorers_, options_.journal);
  }
}

absl::Status Scheduler::RegisterScorer(std::unique_ptr<Scorer> scorer) {
  std::lock_guard<std::mutex> lock(mu_);
  return scorers_.Register(std::move(scorer));
}

absl::Status Scheduler::RegisterModel(std::unique_ptr<EvaluationModel> model) {
  std::lock_guard<std::mutex> lock(mu_);
  return models_.Register(std::move(model));
}

namespace {

// "mtime:size" of a file, or empty when it cannot be read.
std::string FileStamp(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ":", st.st_size);
}

// Whether an adapter's Usage.at is when it began measuring (adapter.proto): the SDK's from
// version 3 ("jointcloud-adapter-sdk/3"); an earlier one stamped it after, and an adapter of
// another make says so by claiming 3 or later (docs/adapter-sdk.md).
bool StampsUsageBeforeMeasuring(absl::string_view adapter_version) {
  constexpr absl::string_view kSdk = "jointcloud-adapter-sdk/";
  if (!absl::ConsumePrefix(&adapter_version, kSdk)) return false;
  int version = 0;
  return absl::SimpleAtoi(adapter_version, &version) && version >= 3;
}

}  // namespace

absl::Status Scheduler::LoadWeightProfiles() {
  const std::string& path = options_.weight_profiles_file;
  if (path.empty()) return absl::OkStatus();
  std::string stamp = FileStamp(path);
  // Under mu_: the registries are read, and a file changes rarely (decisions wait for one
  // parse, once per change).
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<WeightProfiles> loaded = ::jc::scheduler::LoadWeightProfiles(path, scorers_, &models_);
  if (!loaded.ok()) return loaded.status();
  // The file's profiles on top of those given in the options.
  WeightProfiles merged = options_.profiles;
  for (const auto& [name, weights] : loaded->profiles()) {
    if (absl::Status s = merged.Set(name, weights, loaded->ModelOf(name)); !s.ok()) return s;
  }
  profiles_ = std::move(merged);
  profiles_file_stamp_ = stamp;
  return absl::OkStatus();
}

void Scheduler::ReloadProfilesIfChanged() {
  if (options_.weight_profiles_file.empty()) return;
  std::string stamp = FileStamp(options_.weight_profiles_file);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stamp == profiles_file_stamp_) return;
  }
  if (absl::Status s = LoadWeightProfiles(); !s.ok()) {
    spdlog::error("scheduler: weight profiles in {} not reloaded, the previous ones stay: {}",
                  options_.weight_profiles_file, s.ToString());
    std::lock_guard<std::mutex> lock(mu_);
    profiles_file_stamp_ = stamp;  // said once per change of the file
    if (reloads_failed_ != nullptr) reloads_failed_->Increment();
    return;
  }
  spdlog::info("scheduler: weight profiles reloaded from {}", options_.weight_profiles_file);
  std::lock_guard<std::mutex> lock(mu_);
  if (reloads_ok_ != nullptr) reloads_ok_->Increment();
}

absl::StatusOr<Scheduler::Resolved> Scheduler::Resolve(const std::string& profile,
                                                       const std::map<std::string, double>& overrides) const {
  auto weights = profiles_.Resolve(profile, overrides, scorers_);
  if (!weights.ok()) return weights.status();
  const std::string& name = profiles_.ModelOf(profile);
  const EvaluationModel* model = models_.Find(name);
  if (model == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("weight profile \"", profile, "\" names unknown evaluation model \"", name, "\""));
  }
  return Resolved{std::move(*weights), model};
}

void Scheduler::EnableMetrics(prometheus::Registry& registry) {
  auto& family = prometheus::BuildCounter()
                     .Name("jc_scorer_seconds_total")
                     .Help("Time spent in each scoring strategy (A11), estimated from one decision in 16")
                     .Register(registry);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : scorers_.scorers()) scorer_seconds_.push_back(&family.Add({{"algorithm", std::string(s->id())}}));
  exported_nanos_.assign(scorers_.size(), 0);
  auto& reloads = prometheus::BuildCounter()
                      .Name("jc_weight_profile_reloads_total")
                      .Help("Rereads of the weight-profiles file after it changed (A10), by result")
                      .Register(registry);
  reloads_ok_ = &reloads.Add({{"result", "ok"}});
  reloads_failed_ = &reloads.Add({{"result", "error"}});
  if (journal_ != nullptr) journal_->EnableMetrics(registry);
}

absl::StatusOr<v1::Placement> Scheduler::JobPlacement(const std::string& job_id) const {
  std::shared_ptr<const PlacementRecord> record;
  absl::Time decided_at;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = placements_.find(job_id); it != placements_.end()) {
      record = it->second;
      decided_at = record->decided_at;
    }
  }
  if (record == nullptr) {
    // Decided before a restart, or by another instance: as kept in the store (a query,
    // outside the lock: no decision waits on it).
    if (journal_ != nullptr) return journal_->Read(job_id);
    return absl::NotFoundError(absl::StrCat("no placement record of job \"", job_id,
                                            "\": it was never placed, or placed too long ago to be kept"));
  }
  v1::Placement placement;  // made now, from the numbers kept (PlacementRecord)
  ToProto(*record, scorers_, &placement);
  *placement.mutable_decided_at() = ToTimestamp(decided_at);
  return placement;
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  if (journal_ != nullptr) journal_->Start();
  loop_.Start(options_.refresh_interval, [this] {
    ReloadProfilesIfChanged();
    if (absl::Status s = Refresh(); !s.ok()) spdlog::warn("scheduler: cannot refresh its view: {}", s.ToString());
  }, "jc-sched-view");
}

void Scheduler::Stop() {
  loop_.Stop();
  if (journal_ != nullptr) journal_->Stop();  // what is queued is written first
}

absl::Status Scheduler::Refresh() {
  // Refreshes run at once (the timer's, and a create's for a spec it does not know yet): one
  // whose read began before another's was applied is older, and must not put back the
  // catalog as it was (a spec created between the two reads would vanish, and a job of it
  // submitted meanwhile fail as asking for a spec that does not exist).
  const uint64_t began = fetches_begun_.fetch_add(1) + 1;
  auto inputs = source_->Fetch();
  std::lock_guard<std::mutex> lock(mu_);
  if (began < fetch_applied_) return absl::OkStatus();  // a later read is in force
  fetch_applied_ = began;
  if (!inputs.ok()) {
    last_refresh_ = inputs.status();
    return inputs.status();
  }
  snapshot_ = BuildSnapshot(*inputs);
  ideal_ = Ideal(snapshot_);
  ++ideal_generation_;
  if (never_memo_.size() > 100000) never_memo_.clear();  // jobs that ended while waiting
  inputs_ = std::move(*inputs);
  ApplyAssumed();
  last_refresh_ = absl::OkStatus();
  return absl::OkStatus();
}

Snapshot Scheduler::Ideal(const Snapshot& live) {
  Snapshot ideal;
  ideal.spec_quantity = live.spec_quantity;
  for (CenterView c : live.centers()) {
    c.available = true;  // an unavailable center may come back
    c.free = c.capacity;
    c.running_tasks = c.waiting_tasks = c.assumed_replicas = 0;
    c.reported_start_delay.clear();  // an empty center has no queue to wait in
    c.specs.insert(c.dormant_specs.begin(), c.dormant_specs.end());
    if (!c.described) {
      // Not heard from yet: it may run images, be given them, and take any account.
      c.runs_images = c.receives_images = c.runs_any_project = true;
      c.port_range_size = std::numeric_limits<int>::max();
    }
    ideal.Upsert(std::move(c));
  }
  return ideal;
}

std::string Scheduler::NeverLocked(std::vector<PlacementRequest> requests, bool gang, const Resolved& weights) {
  for (PlacementRequest& r : requests) {
    r.avoid_centers.clear();  // where attempts failed is a preference, not a limit
    r.refused_centers.clear();
    r.sibling_centers.clear();
    r.draining_centers.clear();  // a drain ends when its job starts: never a reason for good
    r.kept_centers.clear();      // a keep is a preference among centers that can start it now
    r.scarce_centers.reset();
  }
  Placer placer(scorers_, *weights.model);
  JobDecision d = placer.DecideJob(requests, ideal_, weights.weights, gang, nullptr, weights.model);
  // What it reserved on the ideal view goes back: the view stays whole for the next job.
  for (size_t i = 0; i < requests.size(); ++i) {
    if (d.centers[i] < 0) continue;
    const CenterView& c = ideal_.centers()[d.centers[i]];
    ideal_.Release(d.centers[i], c.specs.at(requests[i].spec_id).quantity);
  }
  if (d.placed) return "";
  // The placer speaks of the live view ("now"); on the ideal one it is for good. Then each
  // center's own reason for the first replica that found none (up to three).
  std::string reason = absl::StrReplaceAll(d.reason, {{"no center can run it now (", "no center can run it ("}});
  for (size_t i = 0; i < requests.size(); ++i) {
    if (d.centers[i] >= 0) continue;
    std::vector<std::string> why;
    for (const CenterView& c : ideal_.centers()) {
      std::string sentence;
      if (FilterCenter(requests[i], c, /*ignore_avoid=*/true, &sentence) != nullptr && why.size() < 3) {
        why.push_back(absl::StrCat(c.id, ": ", sentence));
      }
    }
    if (!why.empty()) absl::StrAppend(&reason, " — ", absl::StrJoin(why, "; "));
    break;
  }
  return reason;
}

namespace {

// What of a job its placement depends on (not its name, command or retry policy), as bytes:
// jobs of one shape could run anywhere alike, so NeverRuns answers them once per refresh.
std::string ShapeOf(const v1::CreateTrainJobRequest& job) {
  v1::CreateTrainJobRequest shape = job;
  shape.clear_name();
  shape.clear_desc();
  shape.clear_created_user();
  shape.clear_idempotency_key();
  shape.clear_retry_policy();
  shape.clear_status_policy();
  for (auto& task : *shape.mutable_tasks()) {
    task.clear_name();
    task.clear_command();
  }
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);  // the weights map in one order
  shape.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

}  // namespace

std::optional<std::string> Scheduler::CenterGone(const std::string& center_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!last_refresh_.ok()) return std::nullopt;
  const CenterView* c = snapshot_.Find(center_id);
  if (c == nullptr) return std::string("no longer registered");
  if (c->status == 0) return std::string("unavailable (no heartbeat)");
  return std::nullopt;
}

absl::StatusOr<std::string> Scheduler::NeverRuns(const v1::CreateTrainJobRequest& job) {
  std::map<std::string, double> overrides(job.scheduling().weights().begin(), job.scheduling().weights().end());
  const std::string shape = ShapeOf(job);
  auto check = [&]() -> absl::StatusOr<std::string> {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto known = never_by_shape_.find(shape);
        known != never_by_shape_.end() && known->second.first == ideal_generation_ && ideal_generation_ != 0) {
      return known->second.second;
    }
    JC_ASSIGN_OR_RETURN(Resolved weights, Resolve(job.scheduling().weight_profile(), overrides));
    if (!last_refresh_.ok() && inputs_.centers.empty()) return last_refresh_;
    JC_ASSIGN_OR_RETURN(std::vector<PlacementRequest> requests, RequestsForJob("", job, inputs_, clock_->Now()));
    std::string never = NeverLocked(std::move(requests), job.scheduling().gang(), weights);
    if (never_by_shape_.size() > 10000) never_by_shape_.clear();
    never_by_shape_[shape] = {ideal_generation_, never};
    return never;
  };
  JC_ASSIGN_OR_RETURN(std::string never, check());
  if (never.empty()) return never;
  // A center registered (or described) since the last refresh may run it.
  if (absl::Status refreshed = Refresh(); !refreshed.ok()) return never;
  return check();
}

Resources Scheduler::FederationCapacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  Resources total;
  for (const auto& c : snapshot_.centers()) {
    if (c.available) total += c.capacity;
  }
  return total;
}

absl::StatusOr<Resources> Scheduler::SpecQuantity(const std::string& spec_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = snapshot_.spec_quantity.find(spec_id);
  if (it == snapshot_.spec_quantity.end()) return absl::NotFoundError(absl::StrCat("unknown resource spec ", spec_id));
  return it->second;
}

std::optional<SpecAtCenter> Scheduler::OfferAt(const std::string& center_id, const std::string& spec_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const CenterView* c = snapshot_.Find(center_id);
  if (c == nullptr) return std::nullopt;
  auto it = c->specs.find(spec_id);
  if (it == c->specs.end()) return std::nullopt;
  return it->second;
}

std::optional<Scheduler::QueueReport> Scheduler::ReportedQueue(const std::string& center_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const CenterView* c = snapshot_.Find(center_id);
  if (c == nullptr) return std::nullopt;
  QueueReport out;
  out.start_delay.insert(c->reported_start_delay.begin(), c->reported_start_delay.end());
  out.reported_at = c->queue_reported_at;
  return out;
}

double Scheduler::HighestPrice(const std::string& spec_id) const {
  // What a hard budget reserves for a job before it is placed: the most any center may
  // charge for it, including centers that are down now (their offers are dormant, and the
  // job may wait for them) and price steps scheduled for later (the attempt is billed at
  // the price in force at its start).
  std::lock_guard<std::mutex> lock(mu_);
  double highest = 0;
  auto consider = [&highest](const SpecAtCenter& offer) {
    highest = std::max(highest, offer.price);
    for (const auto& [from, value] : offer.prices) highest = std::max(highest, value);
  };
  for (const CenterView& c : snapshot_.centers()) {
    if (auto it = c.specs.find(spec_id); it != c.specs.end()) consider(it->second);
    if (auto it = c.dormant_specs.find(spec_id); it != c.dormant_specs.end()) consider(it->second);
  }
  return highest;
}

double Scheduler::StaticPowerOf(const std::string& center_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const CenterView* c = snapshot_.Find(center_id);
  return c == nullptr ? 0 : c->static_power_watts;
}

double Scheduler::PerformanceOf(const std::string& center_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const CenterView* c = snapshot_.Find(center_id);
  return c == nullptr || c->performance_factor <= 0 ? 1.0 : c->performance_factor;
}

estimator::TaskEstimates Scheduler::TaskEstimates(const v1::CreateTrainJobRequest& job) const {
  estimator::TaskEstimates out;
  if (estimator_ == nullptr) return out;
  out.reserve(job.tasks_size());
  for (int t = 0; t < job.tasks_size(); ++t) out.push_back(estimator_->EstimateTask(job, t));
  return out;
}

void Scheduler::ApplyEstimates(const v1::CreateTrainJobRequest& job,
                               const std::vector<std::optional<estimator::DurationEstimate>>& estimates,
                               std::vector<PlacementRequest>& requests, std::vector<std::string>* explain) const {
  const std::optional<absl::Duration> limit = estimator::TimeLimitOf(job);
  for (PlacementRequest& r : requests) {
    r.time_limit = limit;
    if (r.task_index < static_cast<int>(estimates.size()) && estimates[r.task_index].has_value()) {
      const estimator::DurationEstimate& e = *estimates[r.task_index];
      r.expected_runtime = e.assumed;  // a one-off's cautious figure, else the median
      // Learned runs only: a figure of the user's own (runs 0) is never enforced.
      if (e.runs > 0) r.backfill_runtime = e.p90;
    }
  }
  if (explain == nullptr) return;
  explain->clear();
  // A standby (or an instance that stepped down) holds no history: it says so, rather than
  // let "nothing known" or its own figures read as what the federation learned.
  if (estimator_ != nullptr && !estimator_->loaded()) {
    explain->push_back(
        "no run history here: this instance's job manager is not leading (the leader's plans use it); the job's own figures only");
  }
  for (size_t t = 0; t < estimates.size(); ++t) {
    if (!estimates[t].has_value()) continue;
    explain->push_back(absl::StrCat("task ", job.tasks(static_cast<int>(t)).name(), ": ", estimates[t]->basis));
  }
}

void Scheduler::ApplyAssumed() {
  // Per center: when its last usage was asked for (this clock), and from when it was measured
  // (the adapter's clock, Usage.at) where its adapter says `at` means that (SDK 3 on; an older
  // one stamped it after measuring, which proves nothing); InfinitePast otherwise.
  struct Seen {
    absl::Time asked;
    absl::Time measured_from;
  };
  std::map<std::string, Seen> observed_at;
  for (const auto& o : inputs_.observations) {
    if (!o.has_usage) continue;
    const bool measured_from = o.usage.has_at() && o.has_info && StampsUsageBeforeMeasuring(o.info.adapter_version());
    observed_at[o.center.ai_center_id()] = {o.observed_at, measured_from ? FromTimestamp(o.usage.at())
                                                                         : absl::InfinitePast()};
  }
  for (auto it = assumed_.begin(); it != assumed_.end();) {
    auto seen = observed_at.find(it->second.center_id);
    // Asked for after the acceptance arrived; or, a poll under way while the submit was (asked
    // after the placement: one asked before it cannot hold the replica, whatever a center's
    // clock says — a rogue center dating its acceptances in 1970 drops a reservation no sooner
    // than a poll after it was placed), measured after the center accepted it by its own clock.
    bool counted = seen != observed_at.end() &&
                   (seen->second.asked > it->second.reported_at ||
                    (seen->second.asked >= it->second.placed_at &&
                     seen->second.measured_from >= it->second.center_accepted_at));
    int index = snapshot_.IndexOf(it->second.center_id);
    if (counted || index < 0) {
      it = assumed_.erase(it);  // the center's usage includes it now (or the center left)
      continue;
    }
    snapshot_.Reserve(index, it->second.quantity);
    ++it;
  }
}

std::string Scheduler::ReservationKey(const std::string& job_id, int task, int replica, int attempt) {
  return absl::StrCat(job_id, "/", task, "/", replica, "/", attempt);
}

absl::Status Scheduler::Validate(const v1::CreateTrainJobRequest& job) {
  // The scheduling options as a plan takes them: an unknown profile or weight, or a
  // negative weight, is refused at the create (issue 33: it was taken, and the job failed
  // later on no center).
  std::map<std::string, double> overrides(job.scheduling().weights().begin(), job.scheduling().weights().end());
  auto check = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto weights = Resolve(job.scheduling().weight_profile(), overrides); !weights.ok()) return weights.status();
    if (!last_refresh_.ok() && inputs_.centers.empty() && inputs_.specs.empty()) return last_refresh_;
    return RequestsForJob("", job, inputs_, clock_->Now()).status();
  };
  absl::Status s = check();
  if (s.code() != absl::StatusCode::kInvalidArgument) return s;
  // The spec, image or dataset may have been created since the last refresh: a client
  // that just created it must not be told it does not exist.
  if (absl::Status refreshed = Refresh(); !refreshed.ok()) return s;
  return check();
}

absl::StatusOr<Scheduler::Decision> Scheduler::Place(const std::string& job_id, const v1::CreateTrainJobRequest& job,
                                                     const std::vector<Slot>& slots,
                                                     const std::vector<std::string>& sibling_centers,
                                                     v1::Placement* explain, const estimator::TaskEstimates* known) {
  std::map<std::string, double> overrides(job.scheduling().weights().begin(), job.scheduling().weights().end());
  const estimator::TaskEstimates asked =
      known != nullptr && estimator_ != nullptr ? estimator::TaskEstimates() : TaskEstimates(job);
  const estimator::TaskEstimates& estimates = known != nullptr && estimator_ != nullptr ? *known : asked;
  std::lock_guard<std::mutex> lock(mu_);
  auto weights = Resolve(job.scheduling().weight_profile(), overrides);
  if (!weights.ok()) return weights.status();
  auto all = RequestsForJob(job_id, job, inputs_, clock_->Now());
  if (!all.ok()) return all.status();
  // Index the job's requests by (task, replica).
  std::map<std::pair<int, int>, const PlacementRequest*> by_slot;
  for (const auto& r : *all) by_slot[{r.task_index, r.replica_index}] = &r;
  std::vector<PlacementRequest> requests;
  for (const auto& slot : slots) {
    auto it = by_slot.find({slot.task_index, slot.replica_index});
    if (it == by_slot.end()) {
      return absl::InternalError(absl::StrCat("job ", job_id, " has no task ", slot.task_index, " replica ",
                                              slot.replica_index));
    }
    PlacementRequest r = *it->second;
    r.avoid_centers.insert(slot.avoid_centers.begin(), slot.avoid_centers.end());
    r.refused_centers.insert(slot.refused_centers.begin(), slot.refused_centers.end());
    r.avoid_centers.insert(slot.refused_centers.begin(), slot.refused_centers.end());  // each refused one is avoided
    r.sibling_centers = sibling_centers;
    for (const auto& [center, d] : drains_) {
      if (d.job_id != job_id) r.draining_centers[center] = d.start;
    }
    r.kept_centers = kept_;
    r.scarce_centers = scarce_;
    requests.push_back(std::move(r));
  }
  // The job's placement record: kept as numbers for the most recent jobs, its protobuf
  // made when asked (JobPlacement), or now for a caller that wants it.
  PlacementRecord kept;
  PlacementRecord* record = options_.placement_records > 0 || explain != nullptr ? &kept : nullptr;
  ApplyEstimates(job, estimates, requests, nullptr);
  JobDecision d = PlaceJobWithKeeps(*placer_, requests, snapshot_, *weights, job.scheduling().gang(), record);
  if (record != nullptr) {
    record->job_id = job_id;
    ApplyEstimates(job, estimates, requests, &record->expected_durations);
    if (explain != nullptr) ToProto(*record, scorers_, explain);
  }
  if (options_.placement_records > 0) {
    if (!placements_.count(job_id)) placement_order_.push_back(job_id);
    kept.decided_at = clock_->Now();
    auto shared = std::make_shared<const PlacementRecord>(std::move(kept));
    // Kept in the store when it placed something or says something new: a job that waits
    // is decided again every pass, and written each time it pushed the newest placed
    // jobs' explanations out of the bound (helper-50 F1).
    auto before = placements_.find(job_id);
    const bool news = d.placed || std::any_of(d.centers.begin(), d.centers.end(), [](int c) { return c >= 0; }) ||
                      before == placements_.end() || before->second->reason != shared->reason;
    if (journal_ != nullptr && news) journal_->Add(shared, shared->decided_at);
    placements_[job_id] = std::move(shared);
    while (static_cast<int>(placement_order_.size()) > options_.placement_records) {
      placements_.erase(placement_order_.front());
      placement_order_.pop_front();
    }
  }
  for (size_t k = 0; k < scorer_seconds_.size() && k < placer_->scorer_nanos().size(); ++k) {
    int64_t delta = placer_->scorer_nanos()[k] - exported_nanos_[k];
    if (delta > 0) scorer_seconds_[k]->Increment(static_cast<double>(delta) / 1e9);
    exported_nanos_[k] = placer_->scorer_nanos()[k];
  }
  // A placed replica's spec is kept for a day, if few centers could run it (not one that
  // names its centers: that narrowness is its own choice, not a need).
  for (size_t i = 0; i < requests.size() && i < d.centers.size(); ++i) {
    if (d.centers[i] >= 0 && requests[i].pinned_centers.empty()) {
      scarce_specs_.Saw(requests[i].spec_id, job.project(), clock_->Now());
    }
  }
  Decision out;
  out.placed = d.placed;
  out.reason = d.reason;
  if (d.placed) {
    never_memo_.erase(job_id);
  } else {
    NeverMemo& memo = never_memo_[job_id];
    // Each replica's refusals, sorted ("" for none): the keeps change when they do.
    std::vector<std::string> refused_by(requests.size());
    std::string refusals;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].refused_centers.empty()) continue;
      std::vector<absl::string_view> ids(requests[i].refused_centers.begin(), requests[i].refused_centers.end());
      std::sort(ids.begin(), ids.end());
      refused_by[i] = absl::StrJoin(ids, ",");
      absl::StrAppend(&refusals, i, ":", refused_by[i], ";");
    }
    if (memo.generation != ideal_generation_ || memo.slots != requests.size() || memo.refusals != refusals ||
        memo.generation == 0) {
      memo = {ideal_generation_, requests.size(), refusals, NeverLocked(requests, job.scheduling().gang(), *weights),
              {}};
      // The centers that could ever take what waits, and how narrow it is: they are kept
      // for it against replicas that could run at more (PlacementRequest::kept_centers),
      // one entry per center (the narrowest of its replicas). Not for a job that names its
      // centers: that narrowness is its own choice, not a need.
      absl::flat_hash_map<std::string, int> keeps;
      // A task's replicas pass the same filters: once each, and once more for each other set
      // of refusals its replicas hold (a replica scaled up lately holds none).
      absl::flat_hash_set<std::pair<int, std::string>> tasks;
      for (size_t i = 0; i < requests.size(); ++i) {
        if (d.centers[i] >= 0 || !requests[i].pinned_centers.empty()) continue;
        if (!tasks.insert({requests[i].task_index, refused_by[i]}).second) continue;
        std::vector<int> ever = CentersThatCouldEverTake(requests[i], snapshot_);
        // Not a center that refused it while another could take it: it waits for that one
        // (the placer's rule), so the refusing one is neither held for it nor counted.
        const auto refused = [&](int c) { return requests[i].refused_centers.contains(snapshot_.centers()[c].id); };
        if (!requests[i].refused_centers.empty() && !std::all_of(ever.begin(), ever.end(), refused)) {
          ever.erase(std::remove_if(ever.begin(), ever.end(), refused), ever.end());
        }
        for (int c : ever) Keep(keeps, snapshot_.centers()[c].id, static_cast<int>(ever.size()));
      }
      memo.keeps.assign(keeps.begin(), keeps.end());
    }
    out.never = memo.reason;
    // In force at once (for the jobs behind it in this pass, and for a job placed as it is
    // submitted), and decided again by every pass; one job's keeps per project a pass (the
    // first of its jobs in queue order), so a project's many narrow jobs cannot steer
    // everyone's work away from many centers.
    const bool project_keeps = !memo.keeps.empty() && kept_by_.emplace(job.project(), job_id).first->second == job_id;
    for (size_t k = 0; project_keeps && k < memo.keeps.size(); ++k) {
      const auto& [center, breadth] = memo.keeps[k];
      Keep(kept_, center, breadth);
      Keep(next_kept_, center, breadth);
    }
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    if (d.centers[i] < 0) {
      out.centers.emplace_back();
      out.stage_image.push_back(false);
      out.image_content.emplace_back();
      continue;
    }
    const CenterView& c = snapshot_.centers()[d.centers[i]];
    out.centers.push_back(c.id);
    // An image the center lacks is moved there first: by its mover, or, with content, by
    // a copy into its registry. A center that runs images without a registry of its own
    // pulls one with content when the replica starts: nothing to stage.
    out.stage_image.push_back(!requests[i].image_id.empty() && !c.images.contains(requests[i].ImageKeyOrId()) &&
                              (requests[i].image_content.empty() || c.receives_images));
    out.image_content.push_back(requests[i].image_content);
    // PlaceJob reserved it in the view; remember it so a rebuilt view keeps it.
    assumed_[ReservationKey(job_id, slots[i].task_index, slots[i].replica_index, slots[i].attempt)] =
        Assumed{c.id, c.specs.at(requests[i].spec_id).quantity, absl::InfiniteFuture(), absl::InfiniteFuture(),
                clock_->Now()};
  }
  return out;
}

absl::StatusOr<std::string> Scheduler::Drain(const std::string& job_id, const v1::CreateTrainJobRequest& job,
                                             const Slot& slot) {
  const auto estimates = TaskEstimates(job);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [center, d] : next_drains_) {
    if (d.job_id == job_id) return center;
    // One drain per project at a time (the first of its overdue jobs in queue order): a
    // project's many wide jobs cannot hold many centers idle.
    if (d.project == job.project()) {
      return absl::FailedPreconditionError(
          absl::StrCat("its project's drain (one at a time) is at ", center, ", for ", d.job_id));
    }
  }
  JC_ASSIGN_OR_RETURN(std::vector<PlacementRequest> all, RequestsForJob(job_id, job, inputs_, clock_->Now()));
  ApplyEstimates(job, estimates, all, nullptr);
  for (PlacementRequest& r : all) {
    if (r.task_index != slot.task_index || r.replica_index != slot.replica_index) continue;
    r.refused_centers.insert(slot.refused_centers.begin(), slot.refused_centers.end());
    // Taken: what drains for another job this pass, or did last pass (until it is decided
    // again, the job it drained for may still come).
    for (const auto& table : {&drains_, &next_drains_}) {
      for (const auto& [center, d] : *table) {
        if (d.job_id != job_id) r.draining_centers[center] = d.start;
      }
    }
    // Where it drained last pass, while that center could still hold it: a drain that
    // moves with every report of free capacity never collects enough (nor may a center
    // that reports itself nearly free capture it each pass).
    int i = -1;
    for (const auto& [center, d] : drains_) {
      if (d.job_id != job_id) continue;
      const int kept = snapshot_.IndexOf(center);
      PlacementRequest ever = r;
      ever.consider_busy_centers = true;
      if (kept >= 0 && !r.draining_centers.contains(center) &&
          FilterCenter(ever, snapshot_.centers()[kept], /*ignore_avoid=*/true, nullptr) == nullptr &&
          !(r.refused_centers.contains(center) && UnrefusedCenterCouldEverTake(r, snapshot_, RequestKeys(r)))) {
        i = kept;
      }
    }
    if (i < 0) i = DrainingCenterFor(r, snapshot_);
    if (i < 0) {
      // None drains for it. Where a center could ever run it, say why: the job's own reason
      // says it waits, not that nothing will ever make room for it.
      PlacementRequest any = r;
      any.draining_centers.clear();
      any.consider_busy_centers = true;
      if (CentersThatCouldEverTake(any, snapshot_).empty()) return std::string();
      return absl::FailedPreconditionError(
          r.refused_centers.empty()
              ? "every center that could run it drains for another job"
              : "every center that could run it drains for another job or refused it less than 10 minutes ago");
    }
    const CenterView& c = snapshot_.centers()[i];
    absl::Time start = absl::InfiniteFuture();
    if (auto it = c.reported_start_delay.find(r.spec_id); it != c.reported_start_delay.end()) {
      // The center's own plan for the spec, aged since it said it (as expected_completion).
      const absl::Duration age = c.queue_reported_at == absl::InfinitePast()
                                     ? absl::ZeroDuration()
                                     : std::max(absl::ZeroDuration(), r.now - c.queue_reported_at);
      start = r.now + std::max(absl::ZeroDuration(), it->second - age);
    }
    drains_[c.id] = {job_id, job.project(), start};
    next_drains_[c.id] = {job_id, job.project(), start};
    return c.id;
  }
  return absl::InternalError(absl::StrCat("job ", job_id, " has no task ", slot.task_index, " replica ",
                                          slot.replica_index));
}

void Scheduler::BeginPass() {
  std::lock_guard<std::mutex> lock(mu_);
  next_drains_.clear();
  next_kept_.clear();
  kept_by_.clear();
  scarce_ = scarce_specs_.Centers(snapshot_, clock_->Now(), ideal_generation_);
  if (scarce_->empty()) scarce_.reset();
}

void Scheduler::EndPass() {
  std::lock_guard<std::mutex> lock(mu_);
  drains_ = std::move(next_drains_);
  next_drains_.clear();
  kept_ = std::move(next_kept_);
  next_kept_.clear();
}

void Scheduler::ClearPasses() {
  std::lock_guard<std::mutex> lock(mu_);
  drains_.clear();
  next_drains_.clear();
  kept_.clear();
  next_kept_.clear();
  kept_by_.clear();
  scarce_.reset();
  scarce_specs_.Clear();
}

void Scheduler::Reported(const std::string& key, absl::Time at, absl::Time center_accepted_at) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = assumed_.find(key);
  if (it == assumed_.end() || it->second.reported_at != absl::InfiniteFuture()) return;
  it->second.reported_at = at;
  it->second.center_accepted_at = center_accepted_at;
}

void Scheduler::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = assumed_.find(key);
  if (it == assumed_.end()) return;
  int index = snapshot_.IndexOf(it->second.center_id);
  if (index >= 0) snapshot_.Release(index, it->second.quantity);
  assumed_.erase(it);
}

absl::StatusOr<int> Scheduler::AlgorithmScore(const std::string& algorithm_id, const std::string& center_id,
                                              const std::string& spec_id) {
  const Scorer* scorer = scorers_.Find(algorithm_id);
  if (scorer == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown algorithm \"", algorithm_id,
                                            "\"; GET /openapi/v1/scheduler/algorithms lists them"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (snapshot_.Find(center_id) == nullptr) {
    if (!last_refresh_.ok()) return last_refresh_;
    return absl::NotFoundError(absl::StrCat("unknown center \"", center_id, "\""));
  }
  if (!spec_id.empty() && !std::any_of(inputs_.specs.begin(), inputs_.specs.end(),
                                       [&](const auto& s) { return s.resource_spec_id() == spec_id; })) {
    return absl::NotFoundError(absl::StrCat("unknown resource spec \"", spec_id, "\""));
  }
  // Candidates: available centers that offer the spec (or anything, without one). Free
  // capacity does not matter here: the score is the center's standing, not a placement.
  static const SpecAtCenter kNoOffer;
  std::vector<const CenterView*> centers;
  std::vector<const SpecAtCenter*> specs;
  int index = -1;
  std::string why;
  for (const auto& c : snapshot_.centers()) {
    const SpecAtCenter* spec = nullptr;
    if (!spec_id.empty()) {
      auto it = c.specs.find(spec_id);
      if (it != c.specs.end()) spec = &it->second;
    } else {
      for (const auto& [id, s] : c.specs) {
        if (spec == nullptr || s.price < spec->price) spec = &s;
      }
      if (spec == nullptr) spec = &kNoOffer;
    }
    if (!c.available || spec == nullptr) {
      if (c.id == center_id) {
        why = !c.available ? "the center is not available" : absl::StrCat("the center does not offer ", spec_id);
      }
      continue;
    }
    if (c.id == center_id) index = static_cast<int>(centers.size());
    centers.push_back(&c);
    specs.push_back(spec);
  }
  if (index < 0) return absl::FailedPreconditionError(absl::StrCat("center ", center_id, " is not scored: ", why));
  PlacementRequest request;
  request.spec_id = spec_id;
  request.now = clock_->Now();
  std::vector<CandidateFacts> facts;
  for (const auto* c : centers) facts.push_back(FactsFor(request, *c));
  ScoringContext ctx{&request, &snapshot_, centers, specs, {}, facts};
  std::vector<double> raw(centers.size());
  std::vector<int> normalized(centers.size());
  scorer->Score(ctx, absl::MakeSpan(raw));
  NormalizeScores(raw, scorer->higher_is_better(), absl::MakeSpan(normalized));
  return normalized[index];
}

absl::StatusOr<int> Scheduler::EvaluateScore(const std::string& center_id,
                                             const std::vector<std::string>& algorithm_ids,
                                             const std::vector<int>& scores, const std::string& profile) {
  if (algorithm_ids.empty()) return absl::InvalidArgumentError("algorithmIds: at least one algorithm is required");
  if (algorithm_ids.size() != scores.size()) {
    return absl::InvalidArgumentError(absl::StrCat("algorithmScores: ", scores.size(), " scores for ",
                                                   algorithm_ids.size(), " algorithmIds; give one score each"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (snapshot_.Find(center_id) == nullptr) {
      if (!last_refresh_.ok()) return last_refresh_;
      return absl::NotFoundError(absl::StrCat("unknown center \"", center_id, "\""));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto resolved = Resolve(profile, {});
  if (!resolved.ok()) return resolved.status();
  std::vector<int> all(scorers_.size(), 0);
  std::vector<bool> given(scorers_.size(), false);
  for (size_t i = 0; i < algorithm_ids.size(); ++i) {
    int k = scorers_.IndexOf(algorithm_ids[i]);
    if (k < 0) return absl::InvalidArgumentError(absl::StrCat("algorithmIds: unknown algorithm \"", algorithm_ids[i], "\""));
    if (given[k]) return absl::InvalidArgumentError(absl::StrCat("algorithmIds: \"", algorithm_ids[i], "\" is given twice"));
    if (scores[i] < 0 || scores[i] > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("algorithmScores: ", scores[i], " for ", algorithm_ids[i], " is outside 0..100"));
    }
    all[k] = scores[i];
    given[k] = true;
  }
  // Only the strategies given take part: the others weigh nothing here.
  std::vector<double> w = resolved->weights;
  for (size_t k = 0; k < w.size(); ++k) {
    if (!given[k]) w[k] = 0;
  }
  return static_cast<int>(std::lround(resolved->model->Evaluate(all, w)));
}

std::vector<v1::Algorithm> Scheduler::ListAlgorithms() const {
  std::vector<v1::Algorithm> out;
  for (const auto& s : scorers_.scorers()) {
    v1::Algorithm a;
    a.set_algorithm_id(std::string(s->id()));
    a.set_description(std::string(s->description()));
    a.set_inputs(std::string(s->inputs()));
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<v1::WeightProfile> Scheduler::ListWeightProfiles() const {
  std::vector<v1::WeightProfile> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, listed] : profiles_.profiles()) {
    v1::WeightProfile p;
    p.set_name(name);
    p.set_model(profiles_.ModelOf(name));
    auto weights = profiles_.Resolve(name, {}, scorers_);
    if (weights.ok()) {
      for (size_t k = 0; k < scorers_.size(); ++k) {
        if ((*weights)[k] != 0) (*p.mutable_weights())[std::string(scorers_.scorers()[k]->id())] = (*weights)[k];
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<Scheduler::MoveAnswer> Scheduler::MoveTargets(const std::vector<MoveQuestion>& questions, double margin) {
  std::vector<MoveAnswer> out(questions.size());
  std::vector<std::vector<std::optional<estimator::DurationEstimate>>> estimates;
  estimates.reserve(questions.size());
  for (const auto& q : questions) estimates.push_back(TaskEstimates(*q.job));
  auto human = [](double s) { return absl::FormatDuration(absl::Seconds(std::round(std::min(s, 1e9)))); };
  std::lock_guard<std::mutex> lock(mu_);
  // A dry run on the live view, undone before the lock is let go (no copy of every center
  // each second): what one move would take, the next question of the batch does not get;
  // what a question that stays placed is given back at once.
  Snapshot& view = snapshot_;
  std::vector<std::pair<int, Resources>> taken;
  const absl::Time now = clock_->Now();
  for (size_t n = 0; n < questions.size(); ++n) {
    const MoveQuestion& q = questions[n];
    MoveAnswer& answer = out[n];
    std::map<std::string, double> overrides(q.job->scheduling().weights().begin(),
                                            q.job->scheduling().weights().end());
    auto weights = Resolve(q.job->scheduling().weight_profile(), overrides);
    auto all = RequestsForJob(q.job_id, *q.job, inputs_, now);
    if (!weights.ok() || !all.ok()) {
      answer.why = std::string((!weights.ok() ? weights.status() : all.status()).message());
      continue;
    }
    std::vector<PlacementRequest> requests;
    for (const auto& slot : q.slots) {
      for (const auto& r : *all) {
        if (r.task_index != slot.task_index || r.replica_index != slot.replica_index) continue;
        PlacementRequest moved = r;
        moved.excluded_center = q.from;
        // Never to a center that refused it: the placement after its withdrawal would not
        // send it there (below), so the move would only lose its place in `from`'s queue.
        moved.refused_centers.insert(slot.refused_centers.begin(), slot.refused_centers.end());
        moved.avoid_centers.insert(slot.refused_centers.begin(), slot.refused_centers.end());
        for (const auto& [center, d] : drains_) {
          if (d.job_id != q.job_id) moved.draining_centers[center] = d.start;
        }
        moved.kept_centers = kept_;
        moved.scarce_centers = scarce_;
        requests.push_back(std::move(moved));
      }
    }
    if (requests.size() != q.slots.size()) {
      answer.why = "the job has no such replica";
      continue;
    }
    ApplyEstimates(*q.job, estimates[n], requests, nullptr);
    // Finishing where it waits: the wait its center reports for the spec (aged), else as
    // long again as it waited (a replica that waited long is expected to wait long), then
    // the run at that center's speed.
    const int from_index = view.IndexOf(q.from);
    double stay_s = 0;
    std::string stay_basis;
    for (const PlacementRequest& r : requests) {
      double wait_s = absl::ToDoubleSeconds(q.waited);
      std::string basis = absl::StrCat("as long again as it waited (", human(wait_s), ")");
      double perf = 1;
      if (from_index >= 0) {
        const CenterView& c = view.centers()[from_index];
        perf = c.performance_factor > 0 ? c.performance_factor : 1;
        if (auto it = c.reported_start_delay.find(r.spec_id); it != c.reported_start_delay.end()) {
          absl::Duration age = c.queue_reported_at == absl::InfinitePast()
                                   ? absl::ZeroDuration()
                                   : std::max(absl::ZeroDuration(), now - c.queue_reported_at);
          wait_s = std::max(0.0, absl::ToDoubleSeconds(it->second - age));
          basis = absl::StrCat("its queue report: ", human(wait_s));
        }
      }
      const double finish = wait_s + absl::ToDoubleSeconds(r.expected_runtime) / perf;
      if (finish >= stay_s) {
        stay_s = finish;
        stay_basis = absl::StrCat("start in ", basis, ", finish in ", human(finish));
      }
    }
    Placer placer(scorers_, *weights->model);
    v1::Placement placement;
    PlacementRecord record;  // as a placement decides: a gang is not held back by keeps
    JobDecision d = PlaceJobWithKeeps(placer, requests, view, *weights, q.job->scheduling().gang(), &record);
    AppendTo(record, scorers_, &placement);
    std::vector<std::pair<int, Resources>> placed;
    for (size_t k = 0; k < d.centers.size() && k < requests.size(); ++k) {
      if (d.centers[k] < 0) continue;
      const CenterView& c = view.centers()[d.centers[k]];
      if (auto spec = c.specs.find(requests[k].spec_id); spec != c.specs.end()) {
        placed.emplace_back(d.centers[k], spec->second.quantity);
      }
    }
    const std::string stay = absl::StrCat("waited ", human(absl::ToDoubleSeconds(q.waited)), " at ", q.from, " (",
                                          stay_basis, ")");
    bool to_refused = false;
    for (size_t k = 0; k < d.centers.size() && k < requests.size(); ++k) {
      to_refused |= d.centers[k] >= 0 && requests[k].refused_centers.contains(view.centers()[d.centers[k]].id);
    }
    if (!d.placed || to_refused) {
      for (const auto& [index, quantity] : placed) view.Release(index, quantity);
      answer.why = absl::StrCat(stay, to_refused ? "; only a center that refused it can start it now"
                                                 : "; no other center can start it now");
      continue;
    }
    double go_s = 0;
    std::string to;
    for (const auto& rp : placement.replicas()) {
      for (const auto& e : rp.centers()) {
        if (e.center_id() != rp.center_id()) continue;
        go_s = std::max(go_s, e.expected_finish_seconds());
        to = rp.center_id();
      }
    }
    const bool sooner = go_s < stay_s * (1 - margin);
    answer.why = absl::StrCat(stay, "; ", to, " can start it now and finish in ", human(go_s),
                              sooner ? "" : absl::StrCat(", not sooner by ", std::lround(margin * 100), "%: it stays"));
    if (sooner) {
      answer.to = to;
      taken.insert(taken.end(), placed.begin(), placed.end());
    } else {
      for (const auto& [index, quantity] : placed) view.Release(index, quantity);
    }
  }
  for (const auto& [index, quantity] : taken) view.Release(index, quantity);
  return out;
}

JobDecision Scheduler::PlaceJobWithKeeps(Placer& placer, std::vector<PlacementRequest>& requests, Snapshot& snapshot,
                                         const Resolved& weights, bool gang, PlacementRecord* record) {
  uint64_t kept_off = placer.kept_off();
  JobDecision d = placer.DecideJob(requests, snapshot, weights.weights, gang, record, weights.model);
  // A keep steers one replica at a time: a gang whose replicas each went elsewhere may then
  // not fit as a whole, where it would on the kept centers. Keeps never hold a gang back:
  // without the scarce specs' keeps first (they are for jobs that may come), then without
  // the waiting jobs' too — each time only if a keep took a center off.
  for (int round = 0; round < 2 && !d.placed && gang && placer.kept_off() > kept_off; ++round) {
    for (PlacementRequest& r : requests) {
      r.scarce_centers.reset();
      if (round == 1) r.kept_centers.clear();
    }
    kept_off = placer.kept_off();
    if (record != nullptr) *record = PlacementRecord();
    d = placer.DecideJob(requests, snapshot, weights.weights, true, record, weights.model);
  }
  return d;
}

absl::StatusOr<v1::Placement> Scheduler::Plan(const v1::CreateTrainJobRequest& job) {
  // As for a create: a spec, image or dataset made since the last refresh is known.
  if (absl::Status valid = Validate(job); !valid.ok()) return valid;
  std::map<std::string, double> overrides(job.scheduling().weights().begin(), job.scheduling().weights().end());
  Snapshot snapshot;
  std::vector<PlacementRequest> requests;
  absl::StatusOr<Resolved> weights;
  const auto estimates = TaskEstimates(job);
  {
    std::lock_guard<std::mutex> lock(mu_);
    weights = Resolve(job.scheduling().weight_profile(), overrides);
    if (!weights.ok()) return weights.status();
    if (!last_refresh_.ok() && snapshot_.centers().empty()) return last_refresh_;
    auto r = RequestsForJob("", job, inputs_, clock_->Now());
    if (!r.ok()) return r.status();
    requests = std::move(*r);
    // As a placement now would see it: the centers draining for overdue jobs and those kept
    // for narrow ones (the explanation says so).
    for (PlacementRequest& req : requests) {
      for (const auto& [center, d] : drains_) req.draining_centers[center] = d.start;
      req.kept_centers = kept_;
      req.scarce_centers = scarce_;
    }
    snapshot = snapshot_;  // a dry run works on a copy
  }
  Placer placer(scorers_, *weights->model);
  PlacementRecord record;
  ApplyEstimates(job, estimates, requests, nullptr);
  PlaceJobWithKeeps(placer, requests, snapshot, *weights, job.scheduling().gang(), &record);
  ApplyEstimates(job, estimates, requests, &record.expected_durations);
  v1::Placement placement;
  ToProto(record, scorers_, &placement);
  *placement.mutable_decided_at() = ToTimestamp(clock_->Now());
  return placement;
}

}  // namespace jc::scheduler
