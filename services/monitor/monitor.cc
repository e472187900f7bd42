#include "services/monitor/monitor.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/timestamp.h"

namespace jc::monitor {

namespace {

// The resource kinds of Table 4, as metric labels.
constexpr const char* kResources[] = {"cpu", "gpu", "npu", "mlu", "memory_mb", "storage_gb", "user_define"};

double Amount(const v1::ComputingResources& r, int kind) {
  switch (kind) {
    case 0: return r.cpu();
    case 1: return r.gpu();
    case 2: return r.npu();
    case 3: return r.mlu();
    case 4: return r.memory();
    case 5: return r.storage();
    default: return r.user_define();
  }
}

}  // namespace

struct Monitor::Gauges {
  prometheus::Family<prometheus::Gauge>* running;
  prometheus::Family<prometheus::Gauge>* waiting;
  prometheus::Family<prometheus::Gauge>* used;
  prometheus::Family<prometheus::Gauge>* free;
  prometheus::Family<prometheus::Gauge>* security;
  prometheus::Family<prometheus::Gauge>* reachable;
  prometheus::Family<prometheus::Counter>* polls;
  // Per center, every gauge made for it, so a center that leaves takes its series along.
  std::map<std::string, std::vector<std::pair<prometheus::Family<prometheus::Gauge>*, prometheus::Gauge*>>> series;
};

namespace {

bool Printable(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

int BoundQueueReport(apb::Usage* usage, const apb::CenterInfo* info) {
  std::set<std::string> offered;
  if (info != nullptr) {
    for (const auto& spec : info->specs()) offered.insert(spec.resource_spec_id());
  }
  const size_t most = info != nullptr ? offered.size() : static_cast<size_t>(kMaxStartEstimates);
  std::set<std::string> seen;
  google::protobuf::RepeatedPtrField<apb::SpecStartEstimate> kept;
  int dropped = 0;
  for (auto& e : *usage->mutable_start_estimates()) {
    const std::string& spec = e.resource_spec_id();
    const double wait = e.wait_seconds();
    if (kept.size() >= static_cast<int>(most) || spec.empty() || spec.size() > kMaxSpecIdLength || !Printable(spec) ||
        (info != nullptr && !offered.count(spec)) || seen.count(spec) || !std::isfinite(wait) || wait < 0) {
      ++dropped;
      continue;
    }
    seen.insert(spec);
    e.set_wait_seconds(std::min(wait, kMaxStartWaitSeconds));
    std::string source = e.source().substr(0, kMaxSourceLength);
    for (char& c : source) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    e.set_source(std::move(source));
    *kept.Add() = std::move(e);
  }
  usage->mutable_start_estimates()->Swap(&kept);
  return dropped;
}

std::string QueueReportChange(const apb::Usage& before, const apb::Usage& after) {
  std::map<std::string, double> was, now;
  for (const auto& e : before.start_estimates()) was.emplace(e.resource_spec_id(), e.wait_seconds());
  for (const auto& e : after.start_estimates()) now.emplace(e.resource_spec_id(), e.wait_seconds());
  std::vector<std::string> changes;
  auto text = [](double seconds) { return absl::StrCat(static_cast<int64_t>(std::llround(seconds)), "s"); };
  for (const auto& [spec, wait] : now) {
    auto it = was.find(spec);
    if (it == was.end()) {
      changes.push_back(absl::StrCat(spec, " ", text(wait), " (was unknown)"));
    } else if (std::abs(wait - it->second) > 60 && std::abs(wait - it->second) > 0.5 * std::max(wait, it->second)) {
      changes.push_back(absl::StrCat(spec, " ", text(wait), " (was ", text(it->second), ")"));
    }
  }
  for (const auto& [spec, wait] : was) {
    if (!now.count(spec)) changes.push_back(absl::StrCat(spec, " unknown (was ", text(wait), ")"));
  }
  return absl::StrJoin(changes, ", ");
}

v1::CenterUsage ToCenterUsage(const std::string& id, const CenterObservation& o) {
  v1::CenterUsage u;
  u.set_ai_center_id(id);
  u.set_running_task_num(o.usage.running_task_num());
  u.set_waiting_task_num(o.usage.waiting_task_num());
  *u.mutable_used() = o.usage.used();
  *u.mutable_free() = o.usage.free();
  u.set_security_grade(o.usage.security_grade() != 0 ? o.usage.security_grade() : o.center.security_grade());
  if (o.has_usage) *u.mutable_observed_at() = ToTimestamp(o.observed_at);
  if (o.has_usage) {
    if (o.usage.has_at()) *u.mutable_queue_reported_at() = o.usage.at();
    for (const auto& e : o.usage.start_estimates()) {
      v1::SpecStartEstimate* out = u.add_start_estimates();
      out->set_resource_spec_id(e.resource_spec_id());
      out->set_wait_seconds(e.wait_seconds());
      out->set_source(e.source());
    }
  }
  u.set_reachable(o.reachable);
  u.set_last_error(o.last_error);
  return u;
}

Monitor::Monitor(registry::CenterDirectory* centers, southbound::AdapterClient* adapters, const Clock* clock, MonitorOptions options)
    : centers_(centers), adapters_(adapters), clock_(clock), options_(options), pool_(std::max(1, options.parallelism)) {}

Monitor::~Monitor() { Stop(); }

void Monitor::Start() {
  loop_.Start(options_.interval, [this] {
    if (absl::Status s = PollOnce(); !s.ok()) spdlog::warn("monitor: {}", s.ToString());
  }, "jc-monitor");
}

void Monitor::Stop() { loop_.Stop(); }

bool HoldsNothing(const apb::CenterInfo& info) {
  const auto& c = info.capacity();
  return info.has_capacity() && c.cpu() <= 0 && c.gpu() <= 0 && c.npu() <= 0 && c.mlu() <= 0 && c.memory() <= 0;
}

void Monitor::Observe(CenterObservation* o) {
  const std::string& address = o->center.adapter_address();
  // The usage answered is measured after this moment, so it includes every replica the
  // center acknowledged before it. The scheduler drops a replica's assumed reservation
  // only for usage observed after the acknowledgement: stamping the answer's arrival
  // instead let a poll already under way drop reservations it did not include, and the
  // center looked free until the next poll (jobs were placed past its capacity).
  absl::Time asked = clock_->Now();
  auto usage = adapters_->GetUsage({o->center.ai_center_id(), address}, options_.call_timeout);
  if (!usage.ok()) {
    o->reachable = false;
    o->last_error = std::string(usage.status().message());
    return;
  }
  absl::Time now = clock_->Now();
  std::string info_error;
  // Asked again at the next poll while the center said it holds nothing: an adapter asked
  // before its cluster's hosts came up (a nexec center whose agents had not joined yet)
  // says so, and for info_refresh every job would have been refused as one no center could
  // ever run (the live placement bench, twice under a fresh clone's CI).
  if (!o->has_info || now - o->info_at >= options_.info_refresh || HoldsNothing(o->info)) {
    auto info = adapters_->GetCenterInfo({o->center.ai_center_id(), address}, options_.call_timeout);
    if (info.ok()) {
      o->info = std::move(*info);
      o->has_info = true;
      o->info_at = now;
    } else {
      info_error = std::string(info.status().message());
    }
  }
  // The queue report is bounded where it enters, before the log, REST or the scheduler see
  // it: a rogue center's thousands of entries, unknown specs, NaN or negative waits and
  // control characters stop here (said once per change in how many were dropped).
  const int dropped = BoundQueueReport(&*usage, o->has_info ? &o->info : nullptr);
  // An instant no timestamp can hold (seconds past 9999-12-31, nanos outside a second: a rogue
  // adapter's, attacker helper-53) is dropped here: printed, it failed every usage list.
  if (usage->has_at() && (usage->at().seconds() < 0 || usage->at().seconds() > 253402300799 ||
                          usage->at().nanos() < 0 || usage->at().nanos() > 999999999)) {
    usage->clear_at();
  }
  if (dropped > 0 && dropped != o->start_estimates_dropped) {
    spdlog::warn("monitor: center {} reported {} start estimates that are not for a spec it offers, or not a wait; "
                 "dropped", o->center.ai_center_id(), dropped);
  }
  o->start_estimates_dropped = dropped;
  if (std::string change = QueueReportChange(o->has_usage ? o->usage : apb::Usage(), *usage); !change.empty()) {
    spdlog::info("monitor: center {} says a replica would now wait: {}", o->center.ai_center_id(), change);
  }
  o->usage = std::move(*usage);
  o->has_usage = true;
  o->observed_at = asked;
  o->reachable = true;
  o->last_error = std::move(info_error);
}

absl::Status Monitor::PollOnce() {
  auto listed = centers_->ListCenters();
  if (!listed.ok()) return listed.status();

  // Work on copies so that no lock is held while adapters answer.
  std::vector<CenterObservation> round;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& center : *listed) {
      if (center.adapter_address().empty()) continue;  // reports by REST heartbeats instead
      auto it = observations_.find(center.ai_center_id());
      CenterObservation o = it == observations_.end() ? CenterObservation{} : it->second;
      o.center = std::move(center);
      round.push_back(std::move(o));
    }
  }
  absl::BlockingCounter done(static_cast<int>(round.size()));
  for (auto& o : round) {
    pool_.Run([this, &o, &done] {
      Observe(&o);
      // The adapter answered: the center is alive, said at once — not after the round,
      // which a silent center's calls hold up to their deadlines (its neighbours went
      // unavailable behind it). A failed heartbeat (the center was just deleted, the
      // registry is away) only delays its status.
      if (o.reachable) {
        auto status = centers_->Heartbeat(o.center.ai_center_id(), true);
        if (!status.ok()) {
          spdlog::debug("monitor: heartbeat of {}: {}", o.center.ai_center_id(), status.status().ToString());
        }
      }
      done.DecrementCount();
    });
  }
  done.Wait();

  std::vector<CenterObservation> snapshot;
  std::vector<std::function<void(const std::vector<CenterObservation>&)>> listeners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, CenterObservation> next;
    for (auto& o : round) next[o.center.ai_center_id()] = o;
    for (const auto& [id, old] : observations_) {
      if (!next.count(id)) Forget(id);  // left the registry, or lost its adapter address
    }
    observations_ = std::move(next);
    for (const auto& [id, o] : observations_) {
      Export(id, o);
      snapshot.push_back(o);
    }
    listeners = listeners_;
    if (gauges_) {
      for (const auto& o : round) {
        gauges_->polls->Add({{"outcome", o.reachable ? "ok" : "error"}}).Increment();
      }
    }
  }
  for (const auto& l : listeners) l(snapshot);
  return absl::OkStatus();
}

absl::StatusOr<v1::CenterUsage> Monitor::Get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = observations_.find(id);
  if (it == observations_.end()) {
    return absl::NotFoundError(
        "no usage for center " + id + ": it is not registered, has no adapter_address, or has not been polled yet");
  }
  return ToCenterUsage(id, it->second);
}

std::vector<v1::CenterUsage> Monitor::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::CenterUsage> out;
  for (const auto& [id, o] : observations_) out.push_back(ToCenterUsage(id, o));
  return out;
}

std::vector<CenterObservation> Monitor::Observations() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CenterObservation> out;
  for (const auto& [id, o] : observations_) out.push_back(o);
  return out;
}

void Monitor::OnRound(std::function<void(const std::vector<CenterObservation>&)> listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(std::move(listener));
}

void Monitor::EnableMetrics(prometheus::Registry& registry) {
  auto gauges = std::make_unique<Gauges>();
  gauges->running = &prometheus::BuildGauge()
                         .Name("jc_center_running_tasks")
                         .Help("Tasks running at the center (Table 4 running_task_num)")
                         .Register(registry);
  gauges->waiting = &prometheus::BuildGauge()
                         .Name("jc_center_waiting_tasks")
                         .Help("Tasks waiting at the center (Table 4 waiting_task_num)")
                         .Register(registry);
  gauges->used = &prometheus::BuildGauge()
                      .Name("jc_center_resource_used")
                      .Help("Resources in use at the center by kind (Table 4; memory in MB, storage in GB)")
                      .Register(registry);
  gauges->free = &prometheus::BuildGauge()
                      .Name("jc_center_resource_free")
                      .Help("Resources free at the center by kind (Table 4; memory in MB, storage in GB)")
                      .Register(registry);
  gauges->security = &prometheus::BuildGauge()
                          .Name("jc_center_security_grade")
                          .Help("Security grade of the center (Table 4)")
                          .Register(registry);
  gauges->reachable = &prometheus::BuildGauge()
                           .Name("jc_center_adapter_reachable")
                           .Help("1 when the center's adapter answered the last poll")
                           .Register(registry);
  gauges->polls = &prometheus::BuildCounter()
                       .Name("jc_monitor_polls_total")
                       .Help("Adapter polls by outcome")
                       .Register(registry);
  std::lock_guard<std::mutex> lock(mu_);
  gauges_ = std::move(gauges);
}

void Monitor::Export(const std::string& id, const CenterObservation& o) {
  if (!gauges_) return;
  auto& series = gauges_->series[id];
  auto set = [&](prometheus::Family<prometheus::Gauge>* family, std::map<std::string, std::string> labels,
                 double value) {
    labels["center"] = id;
    prometheus::Gauge& g = family->Add(labels);  // the same labels return the same gauge
    g.Set(value);
    for (const auto& [f, existing] : series) {
      if (existing == &g) return;
    }
    series.emplace_back(family, &g);
  };
  v1::CenterUsage u = ToCenterUsage(id, o);
  set(gauges_->reachable, {}, o.reachable ? 1 : 0);
  set(gauges_->security, {}, u.security_grade());
  if (!o.has_usage) return;
  set(gauges_->running, {}, u.running_task_num());
  set(gauges_->waiting, {}, u.waiting_task_num());
  for (int k = 0; k < 7; ++k) {
    set(gauges_->used, {{"resource", kResources[k]}}, Amount(u.used(), k));
    set(gauges_->free, {{"resource", kResources[k]}}, Amount(u.free(), k));
  }
}

void Monitor::Forget(const std::string& id) {
  if (!gauges_) return;
  auto it = gauges_->series.find(id);
  if (it == gauges_->series.end()) return;
  for (const auto& [family, gauge] : it->second) family->Remove(gauge);
  gauges_->series.erase(it);
}

}  // namespace jc::monitor
