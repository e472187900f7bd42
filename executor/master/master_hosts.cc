// The host half of the nexec master (issue 32 item 1): the host book (hosts joining,
// coming back, declaring other resources), their load and free memory, the master's and
// agents' sensors (RESS), and host checks (a host silent past host_timeout is lost, and
// its jobs rerun or end by the job state machine). `nexec hosts` reads it here too.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/timestamp.h"
#include "executor/master/master.h"

namespace jc::nexec {
namespace {

ResourceValue ParseValue(const std::string& text) {
  if (text == "true" || text == "false") return text == "true";
  try {
    size_t used = 0;
    double d = std::stod(text, &used);
    if (used == text.size()) return d;
  } catch (const std::exception&) {
  }
  return text;
}

}  // namespace

absl::Status Master::AddHostRecord(const pb::AgentInfo& info) {
  HostConfig h;
  h.name = info.host();
  h.slots = info.cpus();
  h.mem_mb = info.mem_mb();
  h.swap_mb = info.swap_mb();
  h.gpus.assign(info.gpus().begin(), info.gpus().end());
  for (const auto& [k, v] : info.resources()) h.resources[k] = ParseValue(v);
  auto st = config_.hosts.find(info.host());
  if (st != config_.hosts.end()) {
    h.type = st->second.type;
    for (const auto& [k, v] : st->second.resources) h.resources[k] = v;
    h.load_thresholds = st->second.load_thresholds;
  }
  JC_RETURN_IF_ERROR(scheduler_.AddHost(h));
  // Queues name hosts; they are added once every host they name is known.
  for (const auto& q : config_.queues) {
    if (scheduler_.AddQueue(q).ok()) {
      spdlog::info("nexec queue {} ready", q.name);
    }
  }
  return absl::OkStatus();
}

// The host half of a heartbeat (issue 32 item 1): a host that joins, comes back, or
// declares other resources; its load, free memory and sensors. Returns whether that may let
// waiting jobs start. The host's stored record is rewritten with the burst when it joined
// or changed.
absl::StatusOr<bool> Master::HostHeartbeat(const pb::AgentInfo& info) {
  bool freed = false;
  std::string doc;
  HostBook::Host* host = hosts_.Find(info.host());
  if (host == nullptr) {
    JC_RETURN_IF_ERROR(AddHostRecord(info));
    JC_ASSIGN_OR_RETURN(doc, store::EncodeDoc(info));
    host = &hosts_.Add(info, clock_->Now());
    spdlog::info("nexec host {} joined: {} slots, {} MB, gpus [{}]", info.host(), info.cpus(),
                 info.mem_mb(), absl::StrJoin(info.gpus(), ","));
    freed = true;
  } else if (!host->available) {
    if (absl::Status s = scheduler_.SetHostState(info.host(), HostState::kOk); !s.ok()) {
      spdlog::error("nexec host {}: cannot mark it available: {}", info.host(), s.ToString());  // known host: a bug
    }
    spdlog::info("nexec host {} is back", info.host());
    freed = true;
  }
  const pb::AgentInfo& before = host->info;
  if (before.cpus() != info.cpus() || before.mem_mb() != info.mem_mb() ||
      before.swap_mb() != info.swap_mb() ||
      !std::equal(before.gpus().begin(), before.gpus().end(), info.gpus().begin(),
                  info.gpus().end())) {
    // The agent came back declaring other resources.
    JC_RETURN_IF_ERROR(scheduler_.UpdateHostCapacity(
        info.host(), info.cpus(), info.mem_mb(), info.swap_mb(),
        {info.gpus().begin(), info.gpus().end()}));
    JC_ASSIGN_OR_RETURN(doc, store::EncodeDoc(info));
    spdlog::info("nexec host {} now offers {} slots, {} MB, {} gpus", info.host(), info.cpus(),
                 info.mem_mb(), info.gpus_size());
    freed = true;
  }
  // Static resources the agent measured late (the GPU model once nvidia-smi answers);
  // the configuration's values for the host still win, as when it joined.
  bool resources_changed = before.resources_size() != info.resources_size();
  for (const auto& [k, v] : info.resources()) {
    auto was = before.resources().find(k);
    resources_changed |= was == before.resources().end() || was->second != v;
  }
  if (resources_changed) {
    auto configured = config_.hosts.find(info.host());
    for (const auto& [k, v] : info.resources()) {
      if (configured != config_.hosts.end() && configured->second.resources.count(k)) continue;
      // The host is known here (found or added above): an error is a bug, and the
      // heartbeat fails with it (the agent sends it again) rather than half-applying it.
      JC_RETURN_IF_ERROR(scheduler_.SetHostResource(info.host(), k, ParseValue(v)).status());
    }
    JC_ASSIGN_OR_RETURN(doc, store::EncodeDoc(info));
    spdlog::info("nexec host {} now has resources {}", info.host(),
                 absl::StrJoin(info.resources(), ",", absl::PairFormatter("=")));
    freed = true;
  }
  host->info = info;
  host->last_seen = clock_->Now();
  host->available = true;
  // Measured, not reserved: select[memfree>4096] sees what the host itself has free now.
  // In memory, for a host known here: a failure is a bug, said, and the heartbeat goes on.
  for (const auto& [name, value] : {std::pair<const char*, double>{"r1m", info.load_1m()},
                                    {"memfree", static_cast<double>(info.mem_free_mb())},
                                    {"swpfree", static_cast<double>(info.swap_free_mb())}}) {
    if (auto set = scheduler_.SetHostResource(info.host(), name, value); !set.ok()) {
      spdlog::error("nexec host {}: cannot set {}: {}", info.host(), name, set.status().ToString());
    }
  }
  // Sensor values apply to the hosts in their locale (the reporter when none); a change
  // may let waiting jobs run.
  for (const pb::SensorResource& r : info.sensors()) freed |= ApplySensor(r, info.host());
  if (sensors_) {
    // The master's cluster resources reach a host from its first heartbeat on, not at
    // the next second's round.
    for (pb::SensorResource r : sensors_->Current()) {
      if (!r.locale().empty() && std::find(r.locale().begin(), r.locale().end(), info.host()) == r.locale().end()) {
        continue;
      }
      const std::string scope = absl::StrJoin(r.locale(), " ");
      const bool shared = r.locale_size() != 1;
      r.clear_locale();
      freed |= ApplySensor(r, info.host());
      // A shared number: this host joins its stock now, before any job here reserves.
      double total = 0;
      if (shared && r.type() == "number" && absl::SimpleAtod(r.value(), &total)) {
        if (absl::Status s = scheduler_.AddToSharedResource(r.resource(), scope, info.host(), total); !s.ok()) {
          spdlog::error("host {} cannot join the stock of {}: {}", info.host(), r.resource(), s.ToString());
        }
      }
    }
  }
  if (!doc.empty()) burst_.hosts[info.host()] = std::move(doc);
  return freed;
}

void Master::LoseHost(const std::string& name, HostBook::Host& host, const std::string& why) {
  host.available = false;
  told_term_.erase(name);  // its agent may come back as another (a new state directory): told again
  // In memory only (the host's silence is not stored): a refusal means the scheduler's
  // model and the host book disagree, a defect to see, not a state to act on.
  if (absl::Status s = scheduler_.SetHostState(name, HostState::kUnavailable); !s.ok()) {
    spdlog::error("nexec host {}: the scheduler refused to mark it unavailable: {}", name, s.ToString());
  }
  spdlog::warn("nexec host {} is unavailable: {}", name, why);
  for (int64_t id : std::vector<int64_t>(active_.begin(), active_.end())) {
    JobRecord& rec = jobs_.at(id);
    if (rec.job.state() != pb::RUNNING && rec.job.state() != pb::SUSPENDED) continue;
    bool uses = std::any_of(rec.job.tasks().begin(), rec.job.tasks().end(),
                            [&](const pb::Task& t) { return t.host() == name; });
    if (!uses) continue;
    // Whatever still runs of it elsewhere is stopped by the agents' next heartbeat
    // (the master tells them the attempt is stale).
    ApplyEffects(rec, job_state::HostLost(rec, RerunsOnHostFailure(rec), absl::StrCat("host ", name, " failed"), Now()));
  }
}

void Master::RefuseHeartbeat(const pb::HeartbeatRequest& req) {
  const pb::AgentInfo& info = req.info();
  int running = 0;
  int exited = 0;
  for (const auto& t : req.tasks()) (t.state() == pb::TASK_EXITED ? exited : running) += 1;
  // The agent keeps another store's exits until that store's master takes them (an exit
  // dropped would be a job run twice): it moves on when they are taken, or when restarted.
  const std::string reason =
      running > 0 || exited == 0
          ? absl::StrCat("its agent serves the master of store ", info.master_identity(), ", not this one (store ",
                         identity_, "), and runs ", running,
                         " task(s) of that store: it takes work from this master once they end and that master "
                         "has taken their exits (or once the agent restarts, which ends them)")
          : absl::StrCat("its agent serves the master of store ", info.master_identity(), ", not this one (store ",
                         identity_, "), and holds ", exited,
                         " exit(s) of that store's tasks that its master has not taken: it takes work from this "
                         "master once that master takes them, or once the agent restarts");
  if (hosts_.Refuse(info, reason, clock_->Now())) {
    spdlog::warn("nexec host {} refuses this master: {}", info.host(), reason);
  }
  // Nothing of this store runs there any more: its jobs there are lost now, and nothing
  // more is placed there.
  if (HostBook::Host* host = hosts_.Find(info.host()); host != nullptr && host->available) {
    LoseHost(info.host(), *host, reason);
  }
}

absl::Status Master::CheckHosts() {
  return OnLoop([this] {
    absl::Time now = clock_->Now();
    for (const std::string& name : hosts_.Silent(now, options_.host_timeout)) {
      HostBook::Host& host = *hosts_.Find(name);
      LoseHost(name, host, absl::StrCat("no heartbeat for ", absl::FormatDuration(now - host.last_seen)));
    }
    hosts_.ForgetRefusals(now, options_.host_timeout);
    return absl::OkStatus();
  });
}

std::vector<pb::Host> Master::ListHosts() {
  std::vector<pb::SensorResource> master_sensor_values;
  if (sensors_) master_sensor_values = sensors_->Current();
  return OnLoop([&] {
  std::vector<pb::Host> out;
  std::map<std::string, std::pair<int, double>> used;  // slots, mem
  std::map<std::string, std::vector<int>> used_gpus;
  // Only running and suspended jobs hold resources: walk those, not every job ever seen
  // (this runs every second for the metrics).
  // What a job holds is what recovery gives the scheduler back (HeldPlacement): its held
  // tasks' slots and GPUs, and memory as its rusage[mem] per slot times those slots.
  for (int64_t id : active_) {
    const JobRecord& rec = jobs_.at(id);
    int grown = 0;
    for (const auto& section : HeldPlacement(rec.job, rec.request, &grown).sections) {
      for (const HostAllocation& a : section) {
        used[a.host].first += a.slots;
        used[a.host].second += a.mem_mb;
        used_gpus[a.host].insert(used_gpus[a.host].end(), a.gpus.begin(), a.gpus.end());
      }
    }
  }
  for (const auto& [name, h] : hosts_.hosts()) {
    pb::Host o;
    o.set_name(name);
    o.set_state(h.available ? "ok" : "unavailable");
    if (const HostBook::Refusal* refused = hosts_.RefusalOf(name); refused != nullptr) {
      o.set_state("refused");
      o.set_reason(refused->reason);
    }
    auto st = config_.hosts.find(name);
    o.set_type(st == config_.hosts.end() || st->second.type.empty() ? "default" : st->second.type);
    for (const auto& t : config_.host_types) {
      if (t.name == o.type()) o.set_cpu_factor(t.cpu_factor);
    }
    if (o.cpu_factor() == 0) o.set_cpu_factor(1);
    o.set_slots(h.info.cpus());
    o.set_used_slots(used[name].first);
    o.set_used_mem_mb(used[name].second);
    o.set_mem_mb(h.info.mem_mb());
    o.set_swap_mb(h.info.swap_mb());
    *o.mutable_gpus() = h.info.gpus();
    for (int g : used_gpus[name]) o.add_used_gpus(g);
    o.set_load_1m(h.info.load_1m());
    o.set_mem_free_mb(h.info.mem_free_mb());
    o.set_swap_free_mb(h.info.swap_free_mb());
    *o.mutable_image_digests() = h.info.image_digests();
    *o.mutable_resources() = h.info.resources();
    for (const auto& [other, oh] : hosts_.hosts()) {
      for (const auto& r : oh.info.sensors()) {
        bool here = r.locale().empty() ? other == name
                                       : std::find(r.locale().begin(), r.locale().end(), name) !=
                                             r.locale().end();
        if (here) (*o.mutable_resources())[r.resource()] = r.value();
      }
    }
    for (const auto& r : master_sensor_values) {  // ress.master: its locale, or every host
      bool here = r.locale().empty() || std::find(r.locale().begin(), r.locale().end(), name) != r.locale().end();
      if (here) (*o.mutable_resources())[r.resource()] = r.value();
    }
    *o.mutable_last_heartbeat() = ToTimestamp(h.last_seen);
    out.push_back(o);
  }
  // Hosts that never served this master and refuse it: listed so an operator sees why.
  for (const auto& [name, refusal] : hosts_.refusals()) {
    if (hosts_.Knows(name)) continue;
    pb::Host& o = out.emplace_back();
    o.set_name(name);
    o.set_state("refused");
    o.set_reason(refusal.reason);
    o.set_type("default");
    o.set_cpu_factor(1);
    o.set_slots(refusal.info.cpus());
    o.set_mem_mb(refusal.info.mem_mb());
    *o.mutable_gpus() = refusal.info.gpus();
    *o.mutable_last_heartbeat() = ToTimestamp(refusal.at);
  }
  return out;
  });
}

bool Master::ApplySensor(const pb::SensorResource& r, const std::string& reporter) {
  ResourceValue value = r.value();
  if (r.type() == "number") {
    value = ParseValue(r.value());
  } else if (r.type() == "tag") {
    value = r.value() != "false";
  }
  if (r.type() == "number") {
    ResourceTraits traits;
    traits.larger_is_less = r.direction() == "increase";
    traits.release = r.release();
    traits.assign = r.assign();
    traits.per_slot = r.slotresource();
    scheduler_.SetResourceTraits(r.resource(), traits);
  }
  // The hosts in its locale; else the reporting host, or every host for the master's
  // own sensor (a cluster resource: licenses, shared storage).
  std::vector<std::string> targets(r.locale().begin(), r.locale().end());
  if (targets.empty() && !reporter.empty()) targets.push_back(reporter);
  if (targets.empty()) {
    for (const auto& [name, h] : hosts_.hosts()) targets.push_back(name);
  }
  bool changed_any = false;
  for (const auto& target : targets) {
    auto changed = scheduler_.SetHostResource(target, r.resource(), value);
    changed_any |= changed.ok() && *changed;
  }
  // A number for several hosts is one stock they share (licenses, shared bandwidth):
  // rusage[] on any of them reserves from it.
  if (const double* total = std::get_if<double>(&value); total != nullptr && targets.size() > 1) {
    std::vector<std::string> known;
    for (const auto& target : targets) {
      if (hosts_.Knows(target)) known.push_back(target);
    }
    if (!known.empty()) {
      // One stock per record scope, whatever hosts join it later.
      if (absl::Status s = scheduler_.SetSharedResource(r.resource(), absl::StrJoin(r.locale(), " "), known, *total);
          !s.ok()) {
        spdlog::error("shared stock of {}: {}", r.resource(), s.ToString());
      }
    }
  }
  return changed_any;
}

}  // namespace jc::nexec
