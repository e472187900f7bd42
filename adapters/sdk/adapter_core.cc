#include "adapters/sdk/adapter_core.h"

#include "adapters/sdk/staged_dataset.h"
#include "adapters/sdk/readiness.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>
#include <filesystem>
#include <fstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/oci/image_reference.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "absl/strings/str_format.h"
#include "common/path_inside.h"
#include "common/replica_forgotten.h"
#include "common/timestamp.h"
#include "common/validate.h"

namespace jc::adapter {
namespace {

bool Ended(pb::ReplicaState s) {
  return s == pb::REPLICA_SUCCEEDED || s == pb::REPLICA_FAILED || s == pb::REPLICA_STOPPED;
}

// When the center says an ended replica ended (every path that ends one sets ended_at; a row
// without one goes by its submit).
absl::Time EndOf(const pb::Replica& r) {
  if (r.has_ended_at()) return FromTimestamp(r.ended_at());
  return r.has_submitted_at() ? FromTimestamp(r.submitted_at()) : absl::InfinitePast();
}

// A running replica with an endpoint on a host: what the prober asks whether it is ready.
bool Serving(const pb::Replica& r) {
  return r.state() == pb::REPLICA_RUNNING && r.endpoints_size() > 0 && !r.endpoints(0).host().empty();
}

// Replicas forgotten in one transaction: a backlog (the first run after an upgrade) goes
// in bounded writes, never one that holds the store for long.
constexpr size_t kForgetBatch = 500;

absl::Status ValidateKey(const pb::ReplicaKey& key) {
  if (key.job_id().empty()) return absl::InvalidArgumentError("the replica key has no job_id");
  if (key.job_id().size() > 128) return absl::InvalidArgumentError("job_id is longer than 128 bytes");
  // The name goes to the center's scheduler as a job name and a file name: '.' and '..'
  // would name a directory above the replica's.
  JC_RETURN_IF_ERROR(CheckPathComponent("job_id", key.job_id()));
  if (key.origin().size() > 32) return absl::InvalidArgumentError("origin is longer than 32 bytes");
  for (char c : key.origin()) {
    if (!std::isalnum(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("origin \"", key.origin(), "\" may hold only letters and digits"));
    }
  }
  if (key.task_index() < 0 || key.replica_index() < 0 || key.attempt() < 0) {
    return absl::InvalidArgumentError("task_index, replica_index and attempt must not be negative");
  }
  return absl::OkStatus();
}

// What a submit asks for, as a stable digest (FNV-1a 64 over length-prefixed fields, so
// that it is the same in every process and release): a repeated submit of a key must ask
// for the same.
std::string SpecDigest(const pb::SubmitReplicaRequest& req) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&h](absl::string_view field) {
    // The length first, so that ("ab", "c") and ("a", "bc") differ.
    uint64_t n = field.size();
    for (int i = 0; i < 8; ++i, n >>= 8) {
      h ^= n & 0xff;
      h *= 1099511628211ull;
    }
    for (unsigned char c : field) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  add(req.command());
  add(req.image_id());
  if (!req.image().empty()) add(req.image());  // digests of replicas from before images stay
  add(req.resource_spec_id());
  add(req.user());
  // Ports only when asked (digests of replicas from before ports stay).
  for (const auto& p : req.ports()) {
    add(p.name());
    add(std::to_string(p.port()));
    add(p.readiness_path());
  }
  // The env in key order (a protobuf map has none of its own).
  std::vector<const google::protobuf::MapPair<std::string, std::string>*> env;
  env.reserve(req.env().size());
  for (const auto& kv : req.env()) env.push_back(&kv);
  std::sort(env.begin(), env.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (const auto* kv : env) {
    add(kv->first);
    add(kv->second);
  }
  return absl::StrFormat("%016x", h);
}

}  // namespace

std::string ReplicaName(const pb::ReplicaKey& key) {
  return absl::StrCat("jc-", key.origin(), key.origin().empty() ? "" : "-", key.job_id(), "-", key.task_index(),
                      "-", key.replica_index(), "-", key.attempt());
}

struct AdapterCore::Metrics {
  prometheus::Family<prometheus::Counter>& submits;
  prometheus::Counter& submitted;
  prometheus::Counter& refused;
  prometheus::Counter& events;
  prometheus::Family<prometheus::Gauge>& replicas;
  prometheus::Counter& collisions;
  prometheus::Counter& forgotten;
};

AdapterCore::AdapterCore(Backend* backend, CenterConfig center, store::Store* store,
                         CoreOptions options)
    : backend_(backend),
      center_(std::move(center)),
      images_(center_.center_id, center_.image_dir, center_.image_mover),
      mirror_(center_.image_mirror, std::filesystem::temp_directory_path().string()),
      run_as_(std::make_shared<const RunAs>(center_.run_as)),
      store_(store),
      options_(options),
      events_(options.event_window),
      ports_(center_.port_first, center_.port_last),
      committer_(store) {
  committer_.SetPrologue([this](store::Transaction&) {
    txn_cursor_ = next_cursor_;
    txn_changed_.clear();
    txn_learned_.clear();
    txn_latest_.clear();
    txn_events_.clear();
    return absl::OkStatus();
  });
  committer_.SetEpilogue([this] { AfterRecords(); });
  movers_.push_back(MakeFileMover(center_.data_sources));
  for (const auto& m : center_.data_movers) movers_.push_back(MakeCommandMover(m));
}

AdapterCore::~AdapterCore() { Stop(); }

void AdapterCore::SetRunAs(RunAs run_as) {
  std::lock_guard<std::mutex> lock(run_as_mu_);
  run_as_ = std::make_shared<const RunAs>(std::move(run_as));
}

std::shared_ptr<const RunAs> AdapterCore::CurrentRunAs() const {
  std::lock_guard<std::mutex> lock(run_as_mu_);
  return run_as_;
}

absl::Status AdapterCore::Start() {
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT doc, ended_us FROM adapter_replicas"));
  {
    const absl::Time now = absl::Now();
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& row : rows) {
      // Either form: rows an adapter before ADR 0002's amendment wrote are JSON.
      JC_ASSIGN_OR_RETURN(pb::Replica r, store::DecodeAnyDoc<pb::Replica>(row[0]));
      if (!Ended(r.state())) {
        for (const auto& e : r.endpoints()) ports_.Restore(r.name(), e.port());
      }
      int64_t learned_us = 0;
      if (!row[1] || !absl::SimpleAtoi(*row[1], &learned_us)) {
        return absl::DataLossError(absl::StrCat("adapter_replicas: ", r.name(), "'s ended_us is not a number"));
      }
      // A row from before the column goes by the center's end (no later than now): a backlog
      // of years is forgotten a batch at a time.
      Book(r, learned_us > 0 ? absl::FromUnixMicros(learned_us) : std::min(now, EndOf(r)));
    }
  }
  JC_ASSIGN_OR_RETURN(store::Rows forgotten,
                      store_->Query("SELECT ended_through_us, replicas FROM adapter_forgotten WHERE id = 1"));
  if (!forgotten.empty()) {
    int64_t through_us = 0, count = 0;
    if (!forgotten[0][0] || !forgotten[0][1] || !absl::SimpleAtoi(*forgotten[0][0], &through_us) ||
        !absl::SimpleAtoi(*forgotten[0][1], &count)) {
      return absl::DataLossError("adapter_forgotten holds a row that is not two numbers");
    }
    std::lock_guard<std::mutex> lock(mu_);
    forgotten_through_ = absl::FromUnixMicros(through_us);
    forgotten_replicas_ = count;
  }
  JC_ASSIGN_OR_RETURN(store::Rows events,
                      store_->Query("SELECT seq, doc FROM adapter_events ORDER BY seq"));
  std::vector<pb::ReplicaEvent> restored;
  uint64_t last = 0;
  for (const auto& row : events) {
    JC_ASSIGN_OR_RETURN(pb::ReplicaEvent e, store::DecodeAnyDoc<pb::ReplicaEvent>(row[1]));
    last = std::max<uint64_t>(last, e.cursor());
    restored.push_back(std::move(e));
  }
  events_.Restore(std::move(restored), last);
  next_cursor_ = last + 1;
  spdlog::info("adapter for center {}: {} replicas and {} events restored (last cursor {}); ended replicas are "
               "forgotten {} after they end{}",
               center_.center_id, rows.size(), events.size(), last, absl::FormatDuration(center_.replica_retention),
               forgotten_replicas_ > 0 ? absl::StrCat(" (", forgotten_replicas_, " forgotten so far, the last ended ",
                                                      absl::FormatTime(forgotten_through_), ")")
                                       : std::string());
  if (ports_.offers()) {
    // The kernel's ephemeral ports (outgoing connections, the adapter's own probes among
    // them) must not be in the replicas' range: a replica's bind there fails at random.
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0, high = 0;
    if (range >> low >> high && center_.port_first <= high && center_.port_last >= low) {
      spdlog::warn("center {}: its replicas' port range {}-{} overlaps the kernel's ephemeral ports {}-{} "
                   "(net.ipv4.ip_local_port_range): replicas' binds there may fail; choose a range outside it, or "
                   "reserve it (net.ipv4.ip_local_reserved_ports)",
                   center_.center_id, center_.port_first, center_.port_last, low, high);
    }
  }
  poller_ = std::thread([this] { PollLoop(); });
  prober_ = std::thread([this] { ProbeLoop(); });
  return absl::OkStatus();
}

void AdapterCore::Stop() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  if (prober_.joinable()) prober_.join();
  events_.Close();
}

void AdapterCore::EnableMetrics(prometheus::Registry& registry) {
  auto& submits = prometheus::BuildCounter()
                      .Name("jc_adapter_submits_total")
                      .Help("Replica submits by outcome")
                      .Register(registry);
  auto& events = prometheus::BuildCounter()
                     .Name("jc_adapter_events_total")
                     .Help("Replica state changes published")
                     .Register(registry);
  auto& replicas = prometheus::BuildGauge()
                       .Name("jc_adapter_replicas")
                       .Help("Replicas known to the adapter, by state")
                       .Register(registry);
  auto& forgotten = prometheus::BuildCounter()
                        .Name("jc_adapter_replicas_forgotten_total")
                        .Help("Ended replicas forgotten after the center's replica_retention")
                        .Register(registry);
  metrics_ = std::make_unique<Metrics>(Metrics{submits, submits.Add({{"outcome", "accepted"}}),
                                               submits.Add({{"outcome", "refused"}}),
                                               events.Add({}), replicas,
                                               submits.Add({{"outcome", "key_collision"}}), forgotten.Add({})});
}

absl::StatusOr<pb::CenterInfo> AdapterCore::Info() {
  JC_ASSIGN_OR_RETURN(pb::CenterInfo info, backend_->Describe());
  info.set_ai_center_id(center_.center_id);
  info.set_security_grade(center_.security_grade);
  info.set_static_power_watts(center_.static_power_watts);
  info.set_performance_factor(center_.performance_factor);
  *info.mutable_network() = center_.network;
  info.clear_specs();
  for (const auto& s : center_.specs) *info.add_specs() = s;
  *info.mutable_run_as() = CurrentRunAs()->Policy();
  for (const auto& image : center_.images) {
    if (std::find(info.image_ids().begin(), info.image_ids().end(), image.image_id()) == info.image_ids().end()) {
      info.add_image_ids(image.image_id());
    }
  }
  for (const auto& id : images_.Held()) {
    if (std::find(info.image_ids().begin(), info.image_ids().end(), id) == info.image_ids().end()) info.add_image_ids(id);
  }
  // A center with its own registry is given images with content by a copy into it.
  info.set_receives_images(images_.receives() || (mirror_.configured() && backend_->RunsImages()));
  info.set_runs_images(backend_->RunsImages());
  info.set_port_range_size(center_.port_first > 0 ? center_.port_last - center_.port_first + 1 : 0);
  info.set_image_registry(center_.image_registry);
  // 2: says port_range_size (an SDK adapter of 1 gives ports without saying how many).
  // 3: Usage.at is when it began measuring (an earlier one stamped it after).
  info.set_adapter_version("jointcloud-adapter-sdk/3");
  return info;
}

std::vector<pb::Image> AdapterCore::Images() const {
  std::vector<pb::Image> out(center_.images.begin(), center_.images.end());
  for (const auto& id : images_.Held()) {
    if (std::none_of(out.begin(), out.end(), [&](const pb::Image& i) { return i.image_id() == id; })) {
      out.emplace_back().set_image_id(id);
    }
  }
  return out;
}

absl::StatusOr<pb::StageImageResponse> AdapterCore::StageImage(const pb::StageImageRequest& req) {
  if (!req.image().empty()) {
    // An image with content: copied into the center's registry by digest, or, without
    // one, pulled by the hosts when a task starts (nothing to do now).
    if (!backend_->RunsImages()) {
      return absl::FailedPreconditionError(absl::StrCat("center ", center_.center_id,
                                                        " runs commands on its hosts, not in images"));
    }
    pb::StageImageResponse out;
    out.mutable_image()->set_image_id(req.image_id());
    out.mutable_image()->set_name(req.name());
    if (!mirror_.configured()) return out;
    absl::Time started = absl::Now();
    JC_ASSIGN_OR_RETURN(std::string copy, mirror_.Copy(req.image()));
    out.set_source_url(req.image());
    out.set_seconds(absl::ToDoubleSeconds(absl::Now() - started));
    spdlog::info("image {} copied into {} as {}", req.image(), center_.image_mirror.registry, copy);
    return out;
  }
  // The center's own images (its YAML) are the federation's ids: a project's image of the
  // same id is another image, staged apart.
  for (const auto& i : center_.images) {
    if (req.project().empty() && i.image_id() == req.image_id()) {
      pb::StageImageResponse out;
      *out.mutable_image() = i;
      return out;
    }
  }
  return images_.Stage(req);
}

namespace {

// `waiting` more of one resource in use: moved from free to used, up to what the backend
// said there is (used + free): a backlog larger than the center shows it full, not more.
void AddWaiting(double waiting, pb::Usage* usage, int32_t (jointcloud::v1::ComputingResources::*get)() const,
                void (jointcloud::v1::ComputingResources::*set)(int32_t)) {
  if (!(waiting > 0)) return;
  const int64_t used = std::max<int32_t>(0, (usage->used().*get)());
  const int64_t total = used + std::max<int32_t>(0, (usage->free().*get)());
  const int64_t now_used = std::min<int64_t>(total, used + static_cast<int64_t>(std::min(waiting, 1e12)));
  (usage->mutable_used()->*set)(static_cast<int32_t>(std::min<int64_t>(now_used, INT32_MAX)));
  (usage->mutable_free()->*set)(static_cast<int32_t>(std::min<int64_t>(total - now_used, INT32_MAX)));
}

}  // namespace

absl::StatusOr<pb::Usage> AdapterCore::Usage() {
  // Stamped before measuring: whatever was accepted (Accepted's submitted_at) before it is in
  // what the backend reports (Usage.at in adapter.proto).
  const absl::Time measuring = absl::Now();
  // Its own replicas queued at the center, asked of the backend before it measures: a
  // replica queued in the center's scheduler holds nothing on its nodes, yet the control
  // plane drops its reservation once this usage arrives, so the usage must hold it (else a
  // busy center looks free and is over-filled). Asked, not taken from the last poll: one
  // that started since is on the nodes already, and counted twice it made the center look
  // full. One that starts between the two questions is counted twice for a poll, never
  // missed; an answer that fails counts them all. Only the adapter's own replicas: other
  // accounts' queued jobs (anyone can queue one sized to the center that never starts)
  // would make it look full for free.
  // Each queued replica with its spec and its scheduler job, whose state is asked once (a
  // gang's replicas share one job; each of them holds its own spec while the job waits).
  std::vector<std::pair<std::string, const pb::SpecOffer*>> found;  // (scheduler job, spec), copied out of the book
  ForEachLive([&](const pb::Replica& r) {
    if (r.state() != pb::REPLICA_PENDING || r.has_started_at() || r.external_id().empty()) return;
    if (const pb::SpecOffer* spec = center_.FindSpec(r.resource_spec_id())) found.emplace_back(r.external_id(), spec);
  });
  std::vector<std::string> ids;
  std::vector<std::pair<size_t, const pb::SpecOffer*>> queued;  // (index in ids, spec)
  {
    absl::flat_hash_map<std::string_view, size_t> at;  // views into `found`
    for (const auto& [id, spec] : found) {
      auto [it, fresh] = at.try_emplace(id, ids.size());
      if (fresh) ids.push_back(id);
      queued.emplace_back(it->second, spec);
    }
  }
  double waiting_cpu = 0, waiting_memory = 0;
  int64_t waiting_gpu = 0;
  if (!ids.empty()) {
    auto seen = backend_->Poll(ids);
    std::vector<bool> waits(ids.size(), true);
    if (seen.ok()) {
      for (size_t i = 0; i < ids.size(); ++i) {
        auto it = seen->find(ids[i]);
        waits[i] = it != seen->end() && it->second.state == pb::REPLICA_PENDING;
      }
    }
    for (const auto& [job, spec] : queued) {
      if (!waits[job]) continue;
      waiting_cpu += std::ceil(std::max(0.0, spec->quantity().cpu()));
      waiting_memory += std::ceil(std::max(0.0, spec->quantity().memory_mb()));
      waiting_gpu += std::max(0, spec->quantity().gpu());
    }
  }
  JC_ASSIGN_OR_RETURN(pb::Usage usage, backend_->GetUsage());
  AddWaiting(waiting_cpu, &usage, &jointcloud::v1::ComputingResources::cpu,
             &jointcloud::v1::ComputingResources::set_cpu);
  AddWaiting(static_cast<double>(waiting_gpu), &usage, &jointcloud::v1::ComputingResources::gpu,
             &jointcloud::v1::ComputingResources::set_gpu);
  AddWaiting(waiting_memory, &usage, &jointcloud::v1::ComputingResources::memory,
             &jointcloud::v1::ComputingResources::set_memory);
  usage.set_security_grade(center_.security_grade);
  *usage.mutable_at() = ToTimestamp(measuring);
  // What the scheduler knows of its queue (SPEC A16). Without it the usage is still worth
  // reporting: every spec is then unknown.
  usage.clear_start_estimates();
  auto estimates = backend_->StartEstimates(center_.specs);
  if (!estimates.ok()) {
    spdlog::debug("start estimates of center {}: {}", center_.center_id, estimates.status().ToString());
    return usage;
  }
  for (auto& e : CheckedStartEstimates(center_, *std::move(estimates))) *usage.add_start_estimates() = std::move(e);
  return usage;
}

std::vector<pb::SpecStartEstimate> CheckedStartEstimates(const CenterConfig& center,
                                                         std::vector<pb::SpecStartEstimate> estimates) {
  // One per offered spec, the first valid one a backend gave; a wait that is not a number of
  // seconds is no estimate (the spec stays unknown), never zero.
  std::vector<pb::SpecStartEstimate> out;
  std::set<std::string> seen;
  for (auto& e : estimates) {
    if (!std::isfinite(e.wait_seconds()) || e.wait_seconds() < 0) continue;
    if (center.FindSpec(e.resource_spec_id()) == nullptr || !seen.insert(e.resource_spec_id()).second) continue;
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<pb::ListAccountingResponse> AdapterCore::Accounting(absl::Time from, absl::Time to) {
  std::vector<pb::Replica> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A period reaching back to what the book forgot would be answered short: the center's
    // replicas missing from it would read as never run.
    if (forgotten_replicas_ > 0 && from <= forgotten_through_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "center ", center_.center_id, " forgets a replica ", absl::FormatDuration(center_.replica_retention),
          " after it ended (replica_retention) and has forgotten those that ended up to ",
          absl::FormatTime(forgotten_through_), "; the period asked for starts at ", absl::FormatTime(from),
          ": ask for one that starts after"));
    }
    // The book's ended replicas are those of the retention: few enough to walk for a call
    // made once a period (their order is when the adapter learned of each end, not ended_at).
    for (const auto& [learned, name] : ended_) {
      const pb::Replica& r = replicas_.at(name);
      if (!r.has_ended_at() || r.external_id().empty()) continue;
      const absl::Time end = FromTimestamp(r.ended_at());
      if (end >= from && end < to) ended.push_back(r);
    }
  }
  pb::ListAccountingResponse out;
  if (auto info = backend_->Describe(); info.ok()) out.set_source(info->scheduler());
  // The center's own word on each, asked afresh (not what was reported before).
  constexpr size_t kChunk = 500;
  for (size_t i = 0; i < ended.size(); i += kChunk) {
    std::vector<std::string> ids;
    for (size_t k = i; k < std::min(ended.size(), i + kChunk); ++k) ids.push_back(ended[k].external_id());
    JC_ASSIGN_OR_RETURN(auto seen, backend_->Poll(ids));
    for (size_t k = i; k < std::min(ended.size(), i + kChunk); ++k) {
      const pb::Replica& r = ended[k];
      pb::AccountingEntry* e = out.add_entries();
      *e->mutable_key() = r.key();
      e->set_external_id(r.external_id());
      auto it = seen.find(r.external_id());
      if (it == seen.end()) continue;  // the center has no record of it (left UNSPECIFIED)
      const ReplicaObservation& o = it->second;
      e->set_state(o.state);
      if (o.started_at) *e->mutable_started_at() = ToTimestamp(*o.started_at);
      if (o.ended_at) *e->mutable_ended_at() = ToTimestamp(*o.ended_at);
      if (o.usage) *e->mutable_usage() = *o.usage;
    }
  }
  return out;
}

absl::StatusOr<ReplicaLaunch> AdapterCore::Validate(const pb::SubmitReplicaRequest& req) const {
  JC_RETURN_IF_ERROR(ValidateKey(req.key()));
  if (absl::StripAsciiWhitespace(req.command()).empty()) {
    return absl::InvalidArgumentError("the replica has no command");
  }
  if (req.resource_spec_id().empty()) {
    return absl::InvalidArgumentError("the replica names no resource_spec_id");
  }
  const pb::SpecOffer* spec = center_.FindSpec(req.resource_spec_id());
  if (spec == nullptr) {
    std::vector<std::string> offered;
    for (const auto& s : center_.specs) offered.push_back(s.resource_spec_id());
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown resource spec \"", req.resource_spec_id(), "\"; center ", center_.center_id,
        " runs: ", offered.empty() ? "none" : absl::StrJoin(offered, ", ")));
  }
  // The job's image is its project's of that id, else the federation's (image ids are unique
  // within a project): either staged here will do.
  if (!req.image_id().empty() && (!center_.images.empty() || images_.receives()) && !images_.Has(req.image_id()) &&
      (req.project().empty() || !images_.Has(req.project(), req.image_id()))) {
    bool known = false;
    for (const auto& i : center_.images) known |= i.image_id() == req.image_id();
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("image \"", req.image_id(), "\" is not present at center ", center_.center_id));
    }
  }
  ReplicaLaunch l;
  if (!req.image_id().empty()) l.image_path = images_.PathFor(req.project(), req.image_id());
  l.name = ReplicaName(req.key());
  l.key = req.key();
  l.command = req.command();
  if (auto run_as = CurrentRunAs(); run_as->configured) {
    // The center decides the account from who the job belongs to; a mapping removed after
    // the scheduler placed the replica here fails it with this reason.
    JC_ASSIGN_OR_RETURN(l.user, run_as->AccountFor(center_.center_id, req.project(), req.job_user()));
  } else {
    l.user = center_.user;  // its configured account (empty: the adapter's own)
  }
  // The center alone chooses the account (from run_as, else its `user`): a caller naming
  // another one (any local process that reached the adapter, say) gets nothing.
  if (!req.user().empty() && req.user() != l.user) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the replica names account \"", req.user(), "\", but center ", center_.center_id,
        " chooses the accounts its replicas run as (run_as, or user, in its configuration); leave user empty"));
  }
  if (IsRootAccount(l.user)) {
    return absl::InvalidArgumentError("replicas never run as root; configure an ordinary account for the center");
  }
  l.image_id = req.image_id();
  if (!req.image().empty()) {
    auto image = oci::ImageReference::Parse(req.image());
    if (!image.ok()) return image.status();
    if (image->digest.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("image ", req.image(), " is not named by digest"));
    }
    if (!backend_->RunsImages()) {
      // Never a silent bare run of a job that asked for its image.
      return absl::FailedPreconditionError(absl::StrCat("center ", center_.center_id,
                                                        " runs commands on its hosts, not in images: it cannot run "
                                                        "image ", req.image_id(), " (", req.image(), ")"));
    }
    l.image = image->ToString();
    // Copied into the center's registry: pulled from there, by the same digest.
    if (auto mirrored = mirror_.Copied(l.image)) l.image = *mirrored;
  }
  l.project = req.project();
  if (req.time_limit_seconds() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_limit_seconds must not be negative, got ", req.time_limit_seconds()));
  }
  // The job's own limit, else the center's default (a scheduler estimates starts only from
  // time limits: SPEC A16).
  l.time_limit = req.time_limit_seconds() > 0 ? absl::Seconds(req.time_limit_seconds()) : center_.default_time_limit;
  l.env = {req.env().begin(), req.env().end()};
  // Where each of the task's datasets is at this center (a staged copy, one its YAML
  // lists, or one under data_dir): JC_DATASETS for the command; those on the center's file
  // system are bound read-only into its image. A dataset not here is left to the command.
  std::vector<std::string> located;
  for (const auto& key : req.datasets()) {
    const size_t colon = key.rfind(':');
    const std::string name = key.substr(0, colon);
    const std::string version = colon == std::string::npos ? "" : key.substr(colon + 1);
    std::string where;
    // The job's project's copy of the dataset, else the federation's (names are unique only
    // within a project), never another project's.
    if (!req.project().empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = project_datasets_.find(absl::StrCat(req.project(), "/", key)); it != project_datasets_.end()) {
        where = it->second.url();
      }
    }
    if (where.empty() && !req.project().empty() && req.project()[0] != '.' && !center_.data_dir.empty()) {
      auto dir = PathInside(center_.data_dir, {".projects", req.project(), name, version.empty() ? std::string("latest") : version});
      std::error_code ec;
      if (dir.ok() && std::filesystem::is_directory(*dir, ec)) where = "file://" + dir->string();
    }
    if (where.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& d : center_.datasets) {
        if (d.data_name() == name && d.data_version() == version) where = d.url();
      }
    }
    if (where.empty() && !center_.data_dir.empty()) {
      auto dir = PathInside(center_.data_dir, {name, version.empty() ? std::string("latest") : version});
      std::error_code ec;
      if (dir.ok() && std::filesystem::is_directory(*dir, ec)) where = "file://" + dir->string();
    }
    if (where.empty()) continue;
    if (absl::StartsWith(where, "file://")) {
      where = where.substr(7);
      l.read_only_dirs.push_back(where);
    }
    located.push_back(key + "=" + where);
  }
  if (!located.empty()) l.env["JC_DATASETS"] = absl::StrJoin(located, " ");
  // Which center runs it (as Slurm's SLURM_CLUSTER_NAME): a command may adapt to it.
  l.env["JC_CENTER_ID"] = center_.center_id;
  if (req.ports_size() > kMaxPortsPerTask) {
    return absl::InvalidArgumentError(absl::StrCat("a replica has at most ", kMaxPortsPerTask, " ports, got ", req.ports_size()));
  }
  for (int i = 0; i < req.ports_size(); ++i) {
    const auto& p = req.ports(i);
    JC_RETURN_IF_ERROR(CheckPort(absl::StrCat("ports[", i, "]"), p.name(), p.port(), p.readiness_path()));
    for (const auto& other : l.ports) {
      if (other.name == p.name()) return absl::InvalidArgumentError(absl::StrCat("ports: \"", p.name(), "\" named twice"));
    }
    l.ports.push_back({p.name(), p.port(), p.readiness_path()});
  }
  if (!l.ports.empty() && !ports_.offers()) {
    return absl::FailedPreconditionError(absl::StrCat("center ", center_.center_id,
                                                      " offers no ports to its replicas (its configuration has no ports:)"));
  }
  l.spec = *spec;
  l.spec_digest = SpecDigest(req);
  return l;
}

absl::Status AdapterCore::AssignPorts(ReplicaLaunch& launch) {
  if (launch.ports.empty()) return absl::OkStatus();
  std::vector<int> wanted;
  for (const auto& p : launch.ports) wanted.push_back(p.port);
  JC_ASSIGN_OR_RETURN(std::vector<int> given, ports_.Hold(launch.name, wanted));
  for (size_t i = 0; i < given.size(); ++i) {
    launch.ports[i].port = given[i];
    launch.env[PortEnvName(launch.ports[i].name)] = std::to_string(given[i]);
  }
  return absl::OkStatus();
}

void AdapterCore::ReleasePorts(const ReplicaLaunch& launch) {
  std::vector<int> held;
  for (const auto& p : launch.ports) held.push_back(p.port);
  ports_.Release(launch.name, held);
}

absl::StatusOr<pb::Replica> AdapterCore::Repeated(const pb::Replica& known, const ReplicaLaunch& launch) {
  // Replicas recorded before digests existed have none: they are taken as they are.
  if (known.spec_digest().empty() || known.spec_digest() == launch.spec_digest) return known;
  spdlog::error(
      "REFUSED a submit of replica {}: a replica with this key ran here before with a different spec (digest {} "
      "now, {} before). Two control planes, or one whose store was re-initialised or restored, are sending the "
      "same keys to this center",
      launch.name, launch.spec_digest, known.spec_digest());
  if (metrics_) metrics_->collisions.Increment();
  return absl::AlreadyExistsError(absl::StrCat(
      "replica key ", launch.name, " is already taken at center ", center_.center_id,
      " by a replica with a different spec; refusing to answer with another job's replica"));
}

absl::StatusOr<pb::Replica> AdapterCore::Submit(const pb::SubmitReplicaRequest& req) {
  auto launch = Validate(req);
  if (!launch.ok()) {
    if (metrics_) metrics_->refused.Increment();
    return launch.status();
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A repeat of a submit still under way waits for it and gets its answer.
    submitted_cv_.wait(lock, [&] { return !submitting_.count(launch->name); });
    if (auto it = replicas_.find(launch->name); it != replicas_.end()) return Repeated(it->second, *launch);
    if (absl::Status given = AssignPorts(*launch); !given.ok()) {
      if (metrics_) metrics_->refused.Increment();
      return given;
    }
    submitting_.insert(launch->name);
  }
  auto done = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    submitting_.erase(launch->name);
    submitted_cv_.notify_all();
  };
  absl::StatusOr<std::string> id = backend_->Submit(*launch);
  if (!id.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ReleasePorts(*launch);
    }
    done();
    if (metrics_) metrics_->refused.Increment();
    return id.status();
  }
  pb::Replica r = Accepted(*launch, *id);
  absl::Status recorded = Record({r});
  done();
  if (!recorded.ok()) return recorded;  // the next submit finds it through the backend
  if (metrics_) metrics_->submitted.Increment();
  return r;
}

absl::StatusOr<std::vector<pb::Replica>> AdapterCore::SubmitGang(const pb::SubmitGangRequest& req) {
  if (req.replicas().empty()) return absl::InvalidArgumentError("the gang has no replicas");
  std::vector<ReplicaLaunch> launches;
  std::vector<pb::Replica> existing;
  for (const auto& r : req.replicas()) {
    JC_ASSIGN_OR_RETURN(ReplicaLaunch l, Validate(r));
    launches.push_back(std::move(l));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& l : launches) {
      if (auto it = replicas_.find(l.name); it != replicas_.end()) {
        JC_ASSIGN_OR_RETURN(pb::Replica known, Repeated(it->second, l));
        existing.push_back(std::move(known));
      }
      if (submitting_.count(l.name)) {
        return absl::AbortedError(absl::StrCat("replica ", l.name, " is being submitted; retry"));
      }
    }
    if (existing.size() == launches.size()) return existing;  // a repeated gang submit
    if (!existing.empty()) {
      return absl::AlreadyExistsError(
          "some replicas of this gang exist and others do not; a gang is submitted whole");
    }
    for (size_t i = 0; i < launches.size(); ++i) {
      if (absl::Status given = AssignPorts(launches[i]); !given.ok()) {
        for (size_t k = 0; k < i; ++k) ReleasePorts(launches[k]);
        return given;
      }
    }
    for (const auto& l : launches) submitting_.insert(l.name);
  }
  auto done = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& l : launches) submitting_.erase(l.name);
    submitted_cv_.notify_all();
  };
  auto ids = backend_->SubmitGang(launches);
  if (!ids.ok() || ids->size() != launches.size()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& l : launches) ReleasePorts(l);
    }
    done();
    return ids.ok() ? absl::InternalError("the backend answered a gang with the wrong number of ids")
                    : ids.status();
  }
  std::vector<pb::Replica> out;
  for (size_t i = 0; i < launches.size(); ++i) out.push_back(Accepted(launches[i], (*ids)[i]));
  absl::Status recorded = Record(out);
  done();
  if (!recorded.ok()) return recorded;
  return out;
}

pb::Replica AdapterCore::Accepted(const ReplicaLaunch& launch, const std::string& external_id) {
  pb::Replica r;
  *r.mutable_key() = launch.key;
  r.set_name(launch.name);
  r.set_external_id(external_id);
  r.set_state(pb::REPLICA_PENDING);
  r.set_resource_spec_id(launch.spec.resource_spec_id());
  r.set_spec_digest(launch.spec_digest);
  *r.mutable_submitted_at() = ToTimestamp(absl::Now());
  r.set_account(launch.user);
  for (const auto& p : launch.ports) {
    auto* e = r.add_endpoints();
    e->set_name(p.name);
    e->set_port(p.port);
    e->set_readiness_path(p.readiness_path);
  }
  return r;
}

std::vector<absl::StatusOr<pb::Replica>> AdapterCore::SubmitMany(const pb::SubmitReplicasRequest& req) {
  std::vector<absl::StatusOr<pb::Replica>> out(req.replicas_size(), absl::UnknownError("not submitted"));
  std::vector<std::pair<int, ReplicaLaunch>> fresh;  // (index, launch) of replicas new here
  // Validated before the book's lock, as Submit and SubmitGang do: Validate takes mu_ itself
  // to find a replica's datasets, and a batch holding it deadlocked the whole adapter (every
  // submit, usage read and poll behind it) on its first replica that named a dataset.
  std::vector<absl::StatusOr<ReplicaLaunch>> launches;
  launches.reserve(req.replicas_size());
  for (int i = 0; i < req.replicas_size(); ++i) launches.push_back(Validate(req.replicas(i)));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < req.replicas_size(); ++i) {
      auto& launch = launches[i];
      if (!launch.ok()) {
        out[i] = launch.status();
        continue;
      }
      if (auto it = replicas_.find(launch->name); it != replicas_.end()) {
        out[i] = Repeated(it->second, *launch);  // a repeated submit
      } else if (submitting_.count(launch->name)) {
        out[i] = absl::UnavailableError(absl::StrCat("replica ", launch->name, " is being submitted; retry"));
      } else if (absl::Status given = AssignPorts(*launch); !given.ok()) {
        out[i] = given;
      } else {
        submitting_.insert(launch->name);
        fresh.emplace_back(i, std::move(launch).value());
      }
    }
  }
  std::vector<pb::Replica> accepted;
  std::vector<ReplicaLaunch> to_submit;
  to_submit.reserve(fresh.size());
  for (const auto& [i, launch] : fresh) to_submit.push_back(launch);
  // One request for the batch where the scheduler takes one (nexec's job packs: one call
  // and one commit of the master, not one each in turn).
  std::vector<absl::StatusOr<std::string>> ids =
      to_submit.empty() ? std::vector<absl::StatusOr<std::string>>{} : backend_->SubmitEach(to_submit);
  if (ids.size() != fresh.size()) {
    ids.assign(fresh.size(), absl::InternalError(absl::StrCat("the backend answered ", ids.size(), " of ",
                                                              fresh.size(), " replicas submitted together")));
  }
  for (size_t k = 0; k < fresh.size(); ++k) {
    const auto& [i, launch] = fresh[k];
    if (ids[k].ok()) {
      accepted.push_back(Accepted(launch, *ids[k]));
      out[i] = accepted.back();
    } else {
      out[i] = ids[k].status();
    }
  }
  absl::Status recorded = accepted.empty() ? absl::OkStatus() : Record(accepted);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [i, launch] : fresh) {
      if (!out[i].ok()) ReleasePorts(launch);  // refused by the backend: they were never the replica's
      submitting_.erase(launch.name);
    }
    submitted_cv_.notify_all();
  }
  for (const auto& [i, launch] : fresh) {
    // Not recorded: the next submit finds the replica through the backend.
    if (out[i].ok() && !recorded.ok()) out[i] = recorded;
    if (metrics_) (out[i].ok() ? metrics_->submitted : metrics_->refused).Increment();
  }
  for (const auto& r : out) {
    if (!r.ok() && metrics_ && r.status().code() == absl::StatusCode::kInvalidArgument) metrics_->refused.Increment();
  }
  return out;
}

absl::StatusOr<pb::Replica> AdapterCore::Get(const pb::ReplicaKey& key) {
  JC_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = replicas_.find(ReplicaName(key));
  if (it == replicas_.end()) {
    return absl::NotFoundError(absl::StrCat("no replica ", ReplicaName(key), " at center ", center_.center_id));
  }
  return it->second;
}

absl::StatusOr<pb::Replica> AdapterCore::Read(const pb::ReplicaKey& key) {
  absl::StatusOr<pb::Replica> known = Get(key);
  if (!absl::IsNotFound(known.status())) return known;
  std::lock_guard<std::mutex> lock(mu_);
  if (forgotten_replicas_ == 0) return known;  // a book that forgot nothing: never here
  return MarkReplicaForgotten(absl::FailedPreconditionError(absl::StrCat(
      "replica ", ReplicaName(key), " is not in center ", center_.center_id, "'s book, which forgets a replica ",
      absl::FormatDuration(center_.replica_retention), " after it ended (replica_retention) and has forgotten ",
      forgotten_replicas_, " that ended up to ", absl::FormatTime(forgotten_through_),
      ": it may be one of those, so it is not answered as one that never came here")));
}

absl::StatusOr<size_t> AdapterCore::ForgetEnded(absl::Time now) {
  std::lock_guard<std::mutex> one_at_a_time(forget_mu_);
  const absl::Time before = now - center_.replica_retention;
  std::vector<std::pair<absl::Time, std::string>> due;
  absl::Time through;
  int64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    through = forgotten_through_;
    for (auto it = ended_.begin(); it != ended_.end() && it->first < before && due.size() < kForgetBatch; ++it) {
      due.push_back(*it);
      // The bound covers when each ended by the center's word too (no later than now), so
      // that no period ListAccounting answers holds a replica forgotten.
      through = std::max({through, it->first, std::min(now, EndOf(replicas_.at(it->second)))});
    }
    if (due.empty()) return 0;
    total = forgotten_replicas_ + static_cast<int64_t>(due.size());
  }
  // An ended replica is not written again once its end is a day old (a stop, a withdrawal or
  // a repeated submit answers it as it is; a stale look from the prober or the poller is
  // seconds old), so what is deleted here is what memory holds until it is dropped below.
  JC_RETURN_IF_ERROR(committer_.Commit([&](store::Transaction& txn) -> absl::Status {
    for (const auto& [learned, name] : due) {
      JC_RETURN_IF_ERROR(txn.Exec("DELETE FROM adapter_replicas WHERE name = $1", {name}).status());
    }
    return txn.Exec("INSERT INTO adapter_forgotten (id, ended_through_us, replicas) VALUES (1, $1, $2) "
                    "ON CONFLICT (id) DO UPDATE SET ended_through_us = excluded.ended_through_us, "
                    "replicas = excluded.replicas",
                    {absl::ToUnixMicros(through), total})
        .status();
  }));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [learned, name] : due) {
      auto it = replicas_.find(name);
      // Only as it was chosen: an entry booked again since is left to the next pass.
      if (it == replicas_.end() || !Ended(it->second.state()) || EndLearned(name, absl::InfinitePast()) != learned) {
        continue;
      }
      Unindex(it->second);
      replicas_.erase(it);
    }
    forgotten_through_ = std::max(forgotten_through_, through);
    forgotten_replicas_ = total;
  }
  if (metrics_) metrics_->forgotten.Increment(static_cast<double>(due.size()));
  spdlog::info("center {}: {} replicas whose end was learned before {} forgotten ({} in all)", center_.center_id,
               due.size(), absl::FormatTime(before), total);
  return due.size();
}

std::vector<std::string> AdapterCore::LiveOfJob(const std::string& external_id) const {
  auto it = live_by_job_.find(external_id);
  if (it == live_by_job_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

absl::Time AdapterCore::EndLearned(const std::string& name, absl::Time now) const {
  auto it = end_learned_.find(name);
  return it == end_learned_.end() ? now : it->second;
}

void AdapterCore::Book(const pb::Replica& r, absl::Time learned) {
  auto [it, fresh] = replicas_.try_emplace(r.name());
  if (!fresh) {
    // An end learned before stays when it was (a later write of the ended replica, a gang's
    // stop seen again by the poller), so the retention runs from the first word of the end.
    if (Ended(it->second.state())) learned = EndLearned(r.name(), learned);
    Unindex(it->second);
  }
  it->second = r;
  if (Ended(r.state())) {
    live_.erase(r.name());
    ended_.emplace(learned, r.name());
    end_learned_[r.name()] = learned;
    ++ended_by_state_[r.state()];
  } else {
    live_[r.name()] = &it->second;
    live_by_job_[r.external_id()].insert(r.name());
    if (Serving(r)) serving_[r.name()] = &it->second;
  }
}

void AdapterCore::Unindex(const pb::Replica& r) {
  if (Ended(r.state())) {
    if (auto it = end_learned_.find(r.name()); it != end_learned_.end()) {
      ended_.erase({it->second, r.name()});
      end_learned_.erase(it);
    }
    --ended_by_state_[r.state()];
  } else {
    live_.erase(r.name());
    serving_.erase(r.name());
    if (auto job = live_by_job_.find(r.external_id()); job != live_by_job_.end()) {
      job->second.erase(r.name());
      if (job->second.empty()) live_by_job_.erase(job);
    }
  }
}

absl::StatusOr<std::pair<std::string, int>> AdapterCore::TunnelTarget(const pb::ReplicaKey& key,
                                                                      const std::string& port_name) {
  JC_ASSIGN_OR_RETURN(pb::Replica r, Get(key));
  if (r.state() != pb::REPLICA_RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("replica ", r.name(), " is ", pb::ReplicaState_Name(r.state()),
                                                      ", not running: no tunnel to it"));
  }
  std::vector<std::string> names;
  for (const auto& e : r.endpoints()) {
    if (e.name() != port_name) {
      names.push_back(e.name());
      continue;
    }
    if (e.host().empty()) return absl::UnavailableError(absl::StrCat("replica ", r.name(), " has no host yet"));
    if (IsLoopback(e.host()) && !ListenerIsAccounts(e.port(), r.account())) {
      // Nothing of its account listens there, or another account's process does: a tunnel
      // would reach whoever bound the port first, not the replica.
      return absl::UnavailableError(absl::StrCat("nothing of replica ", r.name(), "'s account listens on its port ",
                                                 e.port(), " (", port_name, ") here"));
    }
    return std::make_pair(e.host(), e.port());
  }
  return absl::NotFoundError(absl::StrCat("replica ", r.name(), " has no port named \"", port_name.substr(0, 32),
                                          "\" (it has: ", names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<ExecRequest> AdapterCore::ExecTarget(const pb::ReplicaKey& key) {
  JC_ASSIGN_OR_RETURN(pb::Replica r, Get(key));
  if (r.state() != pb::REPLICA_RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("replica ", r.name(), " is ", pb::ReplicaState_Name(r.state()),
                                                      ", not running: no command runs in it"));
  }
  ExecRequest out;
  out.external_id = r.external_id();
  out.key = key;
  out.account = r.account();
  return out;
}

absl::StatusOr<pb::Replica> AdapterCore::StopReplica(const pb::ReplicaKey& key) {
  JC_ASSIGN_OR_RETURN(pb::Replica r, Get(key));
  if (Ended(r.state())) return r;  // stopping what ended changes nothing
  JC_RETURN_IF_ERROR(backend_->Stop(r.external_id()));
  std::vector<pb::Replica> changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Replicas of one gang share the scheduler's job: they stop together.
    const absl::Time now = absl::Now();
    for (const std::string& name : LiveOfJob(r.external_id())) {
      pb::Replica other = replicas_.at(name);
      other.set_state(pb::REPLICA_STOPPED);
      other.set_message("stopped");
      *other.mutable_ended_at() = ToTimestamp(now);
      Book(other, now);
      changed.push_back(std::move(other));
    }
  }
  JC_RETURN_IF_ERROR(Record(changed));
  return Get(key);
}

absl::StatusOr<pb::Replica> AdapterCore::WithdrawReplica(const pb::ReplicaKey& key) {
  JC_ASSIGN_OR_RETURN(pb::Replica r, Get(key));
  if (Ended(r.state()) || r.state() != pb::REPLICA_PENDING || r.has_started_at()) return r;
  {
    // The poller leaves it alone while the backend is asked: a poll answered before the
    // withdrawal would otherwise record the cancel as a stop of a replica that ran.
    std::lock_guard<std::mutex> lock(mu_);
    withdrawing_.insert(r.external_id());
  }
  absl::StatusOr<bool> withdrawn = backend_->Withdraw(r.external_id());
  std::vector<pb::Replica> changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    withdrawing_.erase(r.external_id());
    if (withdrawn.ok() && *withdrawn) {
      const absl::Time now = absl::Now();
      for (const std::string& name : LiveOfJob(r.external_id())) {
        pb::Replica other = replicas_.at(name);
        other.set_state(pb::REPLICA_STOPPED);
        other.set_withdrawn(true);
        other.clear_started_at();
        other.set_message("withdrawn before it started, at the control plane's request");
        *other.mutable_ended_at() = ToTimestamp(now);
        Book(other, now);
        changed.push_back(std::move(other));
      }
    }
  }
  if (!withdrawn.ok()) return withdrawn.status();
  JC_RETURN_IF_ERROR(Record(changed));
  if (!*withdrawn) JC_RETURN_IF_ERROR(PollOnce());  // it started: say so now
  return Get(key);
}

absl::StatusOr<std::string> AdapterCore::ReadLog(const pb::ReadLogRequest& req, int64_t max_bytes) {
  if (req.offset() < 0) return absl::InvalidArgumentError("offset must not be negative");
  JC_ASSIGN_OR_RETURN(pb::Replica r, Get(req.key()));
  return backend_->ReadLog(r.external_id(), req.stderr(), req.offset(), max_bytes);
}

absl::StatusOr<pb::StageDatasetResponse> AdapterCore::StageDataset(const pb::StageDatasetRequest& req) {
  if (req.data_name().empty()) return absl::InvalidArgumentError("the dataset has no data_name");
  if (req.source_urls().empty()) return absl::InvalidArgumentError("no source_urls to stage from");
  pb::StageDatasetResponse out;
  // A project's dataset is another than the federation's or another project's of the same
  // name and version: kept apart, and never answered by theirs.
  const std::string& project = req.project();
  if (!project.empty() && project[0] == '.') {
    return absl::InvalidArgumentError(absl::StrCat("project \"", project, "\" must not start with '.'"));
  }
  const std::string project_key = absl::StrCat(project, "/", req.data_name(), ":", req.data_version());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!project.empty()) {
      if (auto it = project_datasets_.find(project_key); it != project_datasets_.end()) {
        *out.mutable_dataset() = it->second;
        return out;
      }
    } else {
      for (const auto& d : center_.datasets) {
        if (d.data_name() == req.data_name() && d.data_version() == req.data_version()) {
          *out.mutable_dataset() = d;
          return out;
        }
      }
    }
  }
  if (center_.data_dir.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("center ", center_.center_id, " has no data_dir to stage datasets into"));
  }
  namespace fs = std::filesystem;
  // The copy replaces what is at the destination: it must be a directory of its own
  // inside data_dir, whatever the caller sent as names.
  const std::string version = req.data_version().empty() ? std::string("latest") : req.data_version();
  JC_ASSIGN_OR_RETURN(fs::path dest, project.empty()
                                         ? PathInside(center_.data_dir, {req.data_name(), version})
                                         : PathInside(center_.data_dir, {".projects", project, req.data_name(), version}));
  // Who reads the copy (staged_dataset.h): a project's dataset, the account its jobs run
  // as here; a federation dataset, everyone.
  std::string account = center_.user;
  if (!req.project().empty()) {
    if (auto run_as = CurrentRunAs(); run_as->configured) {
      JC_ASSIGN_OR_RETURN(account, run_as->AccountFor(center_.center_id, req.project(), ""));
    }
  }
  JC_ASSIGN_OR_RETURN(TreeAccess access, StagedAccessFor(account, req.project().empty()));
  std::vector<std::string> errors;
  // Sources in the order given (datamon's ranking), each by the mover of its scheme.
  for (const auto& url : req.source_urls()) {
    const DatasetMover* mover = nullptr;
    for (const auto& m : movers_) {
      if (m->Handles(url)) mover = m.get();
    }
    if (mover == nullptr) {
      errors.push_back(absl::StrCat(url, ": center ", center_.center_id, " has no mover for this scheme"));
      out.add_failed_source_urls(url);
      continue;
    }
    if (absl::Status allowed = mover->Allowed(url); !allowed.ok()) {
      return absl::PermissionDeniedError(absl::StrCat("center ", center_.center_id, ": ", allowed.message()));
    }
    absl::Time started = absl::Now();
    auto staged = StageInto(*mover, url, dest.parent_path().parent_path(), dest.parent_path().filename().string(),
                            dest.filename().string(), access);
    absl::Status copied = staged.status();
    if (copied.code() == absl::StatusCode::kPermissionDenied) {
      return absl::PermissionDeniedError(absl::StrCat("center ", center_.center_id, ": ", copied.message()));
    }
    if (!copied.ok()) {
      errors.push_back(std::string(copied.message()));
      out.add_failed_source_urls(url);
      continue;
    }
    pb::Dataset d;
    d.set_data_name(req.data_name());
    d.set_data_version(req.data_version());
    d.set_url("file://" + dest.string());
    *out.mutable_dataset() = d;
    out.set_source_url(url);
    out.set_seconds(absl::ToDoubleSeconds(absl::Now() - started));
    std::lock_guard<std::mutex> lock(mu_);
    if (project.empty()) {
      center_.datasets.push_back(d);
    } else {
      project_datasets_[project_key] = d;
    }
    return out;
  }
  return absl::UnavailableError(absl::StrCat("no source could be staged: ", absl::StrJoin(errors, "; ")));
}

absl::Status AdapterCore::Record(const std::vector<pb::Replica>& changed) {
  if (changed.empty()) return absl::OkStatus();
  return committer_.Commit([this, &changed](store::Transaction& txn) { return WriteRecords(txn, changed); });
}

absl::Status AdapterCore::WriteRecords(store::Transaction& txn, const std::vector<pb::Replica>& changed) {
  const uint64_t first = txn_cursor_;
  const absl::Time now = absl::Now();
  for (const pb::Replica& r : changed) {
    // This transaction's latest write of the replica: once an ended one is in, only ended
    // ones follow it (below), so it says whether any earlier one ended.
    auto earlier = txn_latest_.find(r.name());
    const bool ended_earlier = earlier != txn_latest_.end() && Ended(txn_changed_[earlier->second].state());
    // A change decided from an older look at the replica (a readiness probe, a poll answer)
    // never moves one that ended back: what ended stays ended (its ports are free already).
    if (!Ended(r.state())) {
      bool ended = ended_earlier;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = replicas_.find(r.name());
        ended |= it != replicas_.end() && Ended(it->second.state());
      }
      if (ended) continue;
    }
    // When the adapter learned of the end: the first word of it (in this transaction, or booked).
    absl::Time learned = absl::InfinitePast();
    if (Ended(r.state())) {
      learned = ended_earlier ? txn_learned_[earlier->second] : now;
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = replicas_.find(r.name()); it != replicas_.end() && Ended(it->second.state())) {
        learned = std::min(learned, EndLearned(r.name(), learned));
      }
    }
    // Protobuf in base64, not JSON (ADR 0002's amendment for the adapter's own rows): only
    // this adapter reads them back, and the JSON printer was its largest cost per replica.
    std::string doc = store::EncodeBinaryDoc(r);
    const int64_t learned_us = Ended(r.state()) ? absl::ToUnixMicros(learned) : 0;
    JC_RETURN_IF_ERROR(txn.Exec("INSERT INTO adapter_replicas (name, state, doc, ended_us) VALUES ($1, $2, $3, $4) "
                                "ON CONFLICT (name) DO UPDATE SET state = excluded.state, doc = excluded.doc, "
                                "ended_us = excluded.ended_us",
                                {r.name(), int64_t{r.state()}, doc, learned_us})
                           .status());
    pb::ReplicaEvent e;
    e.set_cursor(txn_cursor_++);
    *e.mutable_replica() = r;
    *e.mutable_at() = ToTimestamp(absl::Now());
    std::string edoc = store::EncodeBinaryDoc(e);
    JC_RETURN_IF_ERROR(txn.Exec("INSERT INTO adapter_events (seq, doc) VALUES ($1, $2)",
                                {static_cast<int64_t>(e.cursor()), edoc})
                           .status());
    txn_events_.push_back(std::move(e));
    txn_changed_.push_back(r);
    txn_learned_.push_back(learned);
    txn_latest_[r.name()] = txn_changed_.size() - 1;
  }
  // The store keeps as many events as watchers can replay: trimmed each thousand events.
  if (txn_cursor_ / 1000 != first / 1000 && txn_cursor_ > options_.event_window) {
    JC_RETURN_IF_ERROR(txn.Exec("DELETE FROM adapter_events WHERE seq < $1",
                                {static_cast<int64_t>(txn_cursor_ - options_.event_window)})
                           .status());
  }
  return absl::OkStatus();
}

void AdapterCore::AfterRecords() {
  next_cursor_ = txn_cursor_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < txn_changed_.size(); ++i) {
      const pb::Replica& r = txn_changed_[i];
      Book(r, txn_learned_[i]);
      if (Ended(r.state()) && r.endpoints_size() > 0) {
        // Ended: its ports go back to the center's range.
        std::vector<int> held;
        for (const auto& e : r.endpoints()) held.push_back(e.port());
        ports_.Release(r.name(), held);
      }
    }
  }
  // The commit's events at once: a watcher gets them in one read (one WatchBatches message).
  if (metrics_) metrics_->events.Increment(static_cast<double>(txn_events_.size()));
  events_.AppendAll(std::move(txn_events_), [](pb::ReplicaEvent&, uint64_t) {});
  txn_events_.clear();
  txn_changed_.clear();
  txn_learned_.clear();
  txn_latest_.clear();
}

absl::Status AdapterCore::PollOnce() {
  std::vector<std::string> every;  // a gang's replicas share their scheduler job: once each below
  ForEachLive([&](const pb::Replica& r) { every.push_back(r.external_id()); });
  std::vector<std::string> ids;
  absl::flat_hash_set<std::string> polled;
  for (auto& id : every) {
    if (polled.insert(id).second) ids.push_back(std::move(id));
  }
  if (ids.empty()) return absl::OkStatus();
  JC_ASSIGN_OR_RETURN(auto seen, backend_->Poll(ids));
  std::vector<pb::Replica> changed;
  {
    ForEachLive([&](const pb::Replica& r) {
      // Replicas submitted while the backend was being asked were not in the question:
      // their absence from the answer says nothing.
      if (!polled.count(r.external_id()) || withdrawing_.count(r.external_id())) return;
      ReplicaObservation o;
      if (auto it = seen.find(r.external_id()); it != seen.end()) {
        o = it->second;
      } else {
        o.state = pb::REPLICA_FAILED;
        o.exit_code = -1;
        o.message = "the center's scheduler no longer knows this replica";
      }
      const std::string host = o.host.empty() ? center_.endpoint_host : o.host;
      const bool moved_host = o.state == pb::REPLICA_RUNNING && r.endpoints_size() > 0 && r.endpoints(0).host() != host;
      if (o.state == r.state() && o.message == r.message() && !moved_host) return;
      pb::Replica next = r;
      if (o.state == pb::REPLICA_RUNNING) {
        for (auto& e : *next.mutable_endpoints()) e.set_host(host);
      }
      if (Ended(o.state)) {
        for (auto& e : *next.mutable_endpoints()) e.set_ready(false);
      }
      next.set_state(o.state);
      next.set_exit_code(o.exit_code);
      next.set_message(o.message);
      if (o.state != pb::REPLICA_PENDING && !next.has_started_at()) {
        *next.mutable_started_at() = ToTimestamp(o.started_at.value_or(absl::Now()));
      }
      if (Ended(o.state)) {
        *next.mutable_ended_at() = ToTimestamp(o.ended_at.value_or(absl::Now()));
        if (o.usage) *next.mutable_usage() = *o.usage;
      }
      changed.push_back(std::move(next));
    });
  }
  return Record(changed);
}

void AdapterCore::ForEachLive(const std::function<void(const pb::Replica&)>& visit) {
  std::string after;  // the last name visited
  for (bool first = true;; first = false) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = first ? live_.begin() : live_.upper_bound(after);
    for (int n = 0; it != live_.end() && n < kLiveChunk; ++it, ++n) visit(*it->second);
    if (it == live_.end()) return;
    after = std::prev(it)->first;
  }
}

std::vector<pb::Replica> AdapterCore::ProbeEndpoints() {
  std::vector<pb::Replica> due;
  const absl::Time now = absl::Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = probed_.begin(); it != probed_.end();) {  // forget those no longer running
      auto r = replicas_.find(it->first);
      it = r == replicas_.end() || r->second.state() != pb::REPLICA_RUNNING ? probed_.erase(it) : std::next(it);
    }
    for (const auto& [name, r] : serving_) {
      if (auto it = probed_.find(name); it != probed_.end() && now - it->second < absl::Seconds(1)) continue;
      due.push_back(*r);
    }
  }
  // The longest unprobed first; a pass stops at its budget (endpoints that answer slowly
  // delay the others' readiness, never the replicas' state: this is not the poller).
  auto last = [&](const pb::Replica& r) {
    auto it = probed_.find(r.name());
    return it == probed_.end() ? absl::InfinitePast() : it->second;
  };
  std::stable_sort(due.begin(), due.end(), [&](const auto& a, const auto& b) { return last(a) < last(b); });
  const absl::Time budget_end = now + absl::Seconds(2);
  std::vector<pb::Replica> changed;
  for (const pb::Replica& r : due) {
    if (absl::Now() >= budget_end) break;
    probed_[r.name()] = absl::Now();
    std::vector<bool> ready;
    for (const auto& e : r.endpoints()) {
      // On this host, ready only while the replica's own account holds the port: another
      // tenant's process that bound it first answers for nobody.
      const bool own = !IsLoopback(e.host()) || ListenerIsAccounts(e.port(), r.account());
      ready.push_back(own && EndpointReady(e.host(), e.port(), e.readiness_path(), absl::Milliseconds(300)));
    }
    std::lock_guard<std::mutex> lock(mu_);
    // Onto the record as it is now (a stop or the poller's answer may have come meanwhile).
    auto it = replicas_.find(r.name());
    if (it == replicas_.end() || it->second.state() != pb::REPLICA_RUNNING ||
        it->second.endpoints_size() != static_cast<int>(ready.size())) {
      continue;
    }
    pb::Replica next = it->second;
    bool differs = false;
    for (int i = 0; i < next.endpoints_size(); ++i) {
      differs |= next.endpoints(i).ready() != ready[i];
      next.mutable_endpoints(i)->set_ready(ready[i]);
    }
    if (differs) changed.push_back(std::move(next));
  }
  return changed;
}

void AdapterCore::ProbeLoop() {
  std::unique_lock<std::mutex> lock(loop_mu_);
  while (!stopping_) {
    loop_cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    if (absl::Status recorded = Record(ProbeEndpoints()); !recorded.ok()) {
      spdlog::warn("recording replicas' readiness failed: {}", recorded.ToString());
    }
    lock.lock();
  }
}

void AdapterCore::PollLoop() {
  absl::Time next_forget = absl::InfinitePast();
  std::unique_lock<std::mutex> lock(loop_mu_);
  while (!stopping_) {
    loop_cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.poll_interval),
                      [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    absl::Status polled = PollOnce();
    if (!polled.ok()) spdlog::warn("polling the center's scheduler failed: {}", polled.ToString());
    if (absl::Now() >= next_forget) {
      // Nothing is forgotten unless its write committed: a failure is tried again next time.
      // A batch at a time between polls, a second apart while they come full (a backlog).
      absl::StatusOr<size_t> forgot = ForgetEnded(absl::Now());
      if (!forgot.ok()) {
        spdlog::warn("forgetting ended replicas failed (tried again in a minute): {}", forgot.status().ToString());
      }
      next_forget = absl::Now() + (forgot.ok() && *forgot >= kForgetBatch ? absl::Seconds(1) : absl::Minutes(1));
    }
    if (metrics_) {
      std::map<pb::ReplicaState, int64_t> counts;
      ForEachLive([&](const pb::Replica& r) { counts[r.state()]++; });
      {
        std::lock_guard<std::mutex> l(mu_);
        for (const auto& [state, n] : ended_by_state_) counts[static_cast<pb::ReplicaState>(state)] += n;
      }
      for (int s = pb::REPLICA_PENDING; s <= pb::REPLICA_STOPPED; ++s) {
        metrics_->replicas.Add({{"state", pb::ReplicaState_Name(static_cast<pb::ReplicaState>(s))}})
            .Set(counts[static_cast<pb::ReplicaState>(s)]);
      }
    }
    lock.lock();
  }
}

}  // namespace jc::adapter
