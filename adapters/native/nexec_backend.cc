#include "adapters/native/nexec_backend.h"

#include <set>

#include <grpcpp/grpcpp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>


#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "executor/client/master_list.h"
#include "executor/client/submit_packer.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::adapter {

namespace npb = ::nexec::v1;

struct NexecBackend::Client {
  // The masters (one leads, the others stand by, issue 47); a bad list is every call's error.
  std::unique_ptr<nexec::MasterList> masters;
  absl::Status list_error;
  nexec::MungeAuth auth = nexec::MungeAuth::Disabled();  // every call signed: the master takes the adapter's account from it
  std::vector<uid_t> master_uids;  // whose answers count, besides root
  // The master that leads as far as the adapter knows, and its stub.
  absl::StatusOr<std::pair<std::string, std::shared_ptr<npb::Master::Stub>>> Leader() {
    if (!list_error.ok()) return list_error;
    std::string address = masters->Current();
    return std::make_pair(address, masters->Stub(address));
  }
  // A call answered UNAVAILABLE: the next goes to the leader a standby named, or another master.
  bool Failed(const std::string& address, const grpc::Status& s, const grpc::ClientContext& ctx) {
    return masters->Failed(address, s, nexec::MasterList::LeaderNamed(ctx));
  }
  template <typename Req, typename Resp, typename Call>
  absl::StatusOr<Resp> Unary(const char* method, Call call, const Req& req) {
    Resp resp;
    grpc::Status s;
    // Each master at most once (a standby names the leader; one that is down is skipped).
    for (size_t tries = 0; tries <= (list_error.ok() ? masters->addresses().size() : 0); ++tries) {
      JC_ASSIGN_OR_RETURN(auto leader, Leader());
      std::string named;
      // The session is held with each master apart: the address is the peer.
      // What the master answers becomes replica states and usage the federation bills: it
      // counts only when the master's account signed it (issue 47).
      nexec::MungeAuth::AnswerFrom from_master;
      from_master.response = &resp;
      from_master.uids = master_uids;
      s = auth.Call(
          leader.first, method, req, std::chrono::seconds(10),
          [&](grpc::ClientContext* ctx) {
            grpc::Status answer = (leader.second.get()->*call)(ctx, req, &resp);
            named = nexec::MasterList::LeaderNamed(*ctx);
            return answer;
          },
          &from_master);
      if (s.ok() || !masters->Failed(leader.first, s, named)) break;
    }
    if (!s.ok()) {
      absl::Status st = FromGrpcStatus(s);
      return absl::Status(st.code(), absl::StrCat("nexec master: ", st.message()));
    }
    return resp;
  }
};

namespace {

bool ParseJobId(const std::string& text, int64_t* id) { return absl::SimpleAtoi(text, id) && *id > 0; }

// A replica's external id as the master's job id; InvalidArgument for anything else.
absl::StatusOr<int64_t> JobIdOf(const std::string& external_id) {
  int64_t id = 0;
  if (!ParseJobId(external_id, &id)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", external_id, "\" is not a nexec job id"));
  }
  return id;
}

std::string CurrentUser() {
  passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : "root";
}

// A sum of hosts' figures as the standard's int32 fields: never negative, never past
// INT32_MAX, 0 for what is not a number (a cast of either is undefined).
int32_t Whole(double v) {
  if (!(v > 0)) return 0;
  return static_cast<int32_t>(std::min<double>(v, std::numeric_limits<int32_t>::max()));
}

}  // namespace

NexecShape ShapeForSpec(const pb::SpecOffer& spec) {
  NexecShape shape;
  const int gpus = spec.quantity().gpu();
  // GPUs are whole and reserved per slot: a slot per GPU, the rest without. The center's
  // config bounds cpu; the clamp keeps the cast defined for any finite number.
  const double cpu = std::isfinite(spec.quantity().cpu()) ? std::clamp(spec.quantity().cpu(), 0.0, 1e6) : 0.0;
  shape.slots = std::max({1, static_cast<int>(std::ceil(cpu)), gpus});
  // Memory per slot of the final slots, rounded down: together they never ask for more than
  // the spec (rounded up, a spec the size of a host asked for up to slots - 1 MB more than
  // the host has and waited for ever; taken before the GPUs' slots, a GPU spec reserved its
  // memory once per GPU).
  // (At least 1 MB a slot when the spec has memory: none would be no limit at all.)
  const int64_t memory_mb = spec.quantity().memory_mb();
  const int64_t mem = memory_mb > 0 ? std::max<int64_t>(1, memory_mb / shape.slots) : 0;
  std::string mem_part = mem > 0 ? absl::StrCat("mem=", mem) : "";
  auto rusage = [&](bool gpu) {
    std::string inner = mem_part;
    if (gpu) inner += (inner.empty() ? "" : ",") + std::string("gpu=1");
    return inner.empty() ? std::string() : absl::StrCat("rusage[", inner, "]");
  };
  if (gpus <= 0) {
    shape.requirement = rusage(false);
    if (!shape.requirement.empty()) shape.requirement += " ";
    shape.requirement += "span[hosts=1]";
    return shape;
  }
  shape.requirement = absl::StrCat(gpus, "{", rusage(true), "}");
  if (shape.slots > gpus) absl::StrAppend(&shape.requirement, " ", shape.slots - gpus, "{", rusage(false), "}");
  return shape;
}

NexecBackend::NexecBackend(const std::string& master, std::string queue, nexec::MungeAuth auth,
                           const std::string& master_accounts)
    : client_(std::make_unique<Client>()), queue_(std::move(queue)) {
  client_->auth = std::move(auth);
  auto masters = nexec::MasterList::Parse(master);
  auto uids = nexec::MasterList::MasterAccounts(master_accounts);
  if (masters.ok() && uids.ok()) {
    client_->masters = std::move(*masters);
    client_->master_uids = *uids;
    client_->masters->Prove(client_->auth, *uids);
  } else {
    client_->list_error = masters.ok() ? uids.status() : masters.status();
  }
}
NexecBackend::~NexecBackend() = default;

namespace {

// What an ended nexec job used, from its tasks' last reports (the agents' cgroup figures).
pb::ReplicaUsage UsageOf(const npb::Job& job, ReplicaObservation* o) {
  pb::ReplicaUsage u;
  if (job.has_started_at()) o->started_at = TimeOf(job.started_at());
  if (job.has_ended_at()) o->ended_at = TimeOf(job.ended_at());
  if (o->started_at && o->ended_at) u.set_wall_seconds(std::max(0.0, absl::ToDoubleSeconds(*o->ended_at - *o->started_at)));
  int64_t peak_kb = 0;
  for (const auto& t : job.tasks()) {
    u.set_cpu_seconds(u.cpu_seconds() + t.usage().cpu_seconds());
    peak_kb = std::max(peak_kb, std::max(t.usage().memory_peak_kb(), t.usage().rss_kb()));
    u.set_read_bytes(u.read_bytes() + t.usage().read_bytes());
    u.set_write_bytes(u.write_bytes() + t.usage().write_bytes());
    u.set_gpus(u.gpus() + t.gpus_size());
  }
  u.set_memory_peak_mb(peak_kb / 1024);
  u.set_gpu_seconds(u.gpus() * u.wall_seconds());
  return u;
}

}  // namespace

absl::StatusOr<pb::CenterInfo> NexecBackend::Describe() {
  JC_ASSIGN_OR_RETURN(auto hosts, (client_->Unary<npb::ListHostsRequest, npb::ListHostsResponse>("ListHosts",
                                      &npb::Master::Stub::ListHosts, {})));
  pb::CenterInfo info;
  info.set_scheduler("nexec");
  auto* cap = info.mutable_capacity();
  std::set<std::string> digests;
  double cpu = 0, gpu = 0, mem = 0;  // summed before the int32 fields
  for (const auto& h : hosts.hosts()) {
    if (h.state() == "unavailable") continue;
    cpu += h.slots();
    gpu += h.gpus_size();
    mem += std::max(0.0, h.mem_mb());
    digests.insert(h.image_digests().begin(), h.image_digests().end());
  }
  cap->set_cpu(Whole(cpu));
  cap->set_gpu(Whole(gpu));
  cap->set_memory(Whole(mem));
  // Present at the center when a host that takes work holds it: a replica placed for it
  // starts without a pull there (nexec does not yet prefer that host; it pulls elsewhere).
  for (const auto& d : digests) info.add_image_digests(d);
  return info;
}

absl::StatusOr<pb::Usage> NexecBackend::GetUsage() {
  JC_ASSIGN_OR_RETURN(auto hosts, (client_->Unary<npb::ListHostsRequest, npb::ListHostsResponse>("ListHosts",
                                      &npb::Master::Stub::ListHosts, {})));
  JC_ASSIGN_OR_RETURN(auto queues, (client_->Unary<npb::ListQueuesRequest, npb::ListQueuesResponse>("ListQueues",
                                       &npb::Master::Stub::ListQueues, {})));
  pb::Usage u;
  for (const auto& q : queues.queues()) {
    u.set_running_task_num(u.running_task_num() + q.running_jobs());
    u.set_waiting_task_num(u.waiting_task_num() + q.pending_jobs());
  }
  // A host's use is bounded by what it has: a job suspended for a preemption lends its
  // slots to the preemptor and still holds them in its record, so a host's listing may show
  // more used than it has; the center's free capacity is never negative. Summed in double:
  // the usage's fields are int32 (memory in MB).
  double used_cpu = 0, free_cpu = 0, used_gpu = 0, free_gpu = 0, used_mem = 0, free_mem = 0;
  for (const auto& h : hosts.hosts()) {
    if (h.state() == "unavailable") continue;
    const double slots = std::min<double>(h.used_slots(), h.slots());
    used_cpu += slots;
    free_cpu += h.slots() - slots;
    const int gpus = std::min(h.used_gpus_size(), h.gpus_size());
    used_gpu += gpus;
    free_gpu += h.gpus_size() - gpus;
    const double mem = std::clamp(h.used_mem_mb(), 0.0, std::max(0.0, h.mem_mb()));
    used_mem += mem;
    free_mem += std::max(0.0, h.mem_mb()) - mem;
  }
  u.mutable_used()->set_cpu(Whole(used_cpu));
  u.mutable_free()->set_cpu(Whole(free_cpu));
  u.mutable_used()->set_gpu(Whole(used_gpu));
  u.mutable_free()->set_gpu(Whole(free_gpu));
  u.mutable_used()->set_memory(Whole(used_mem));
  u.mutable_free()->set_memory(Whole(free_mem));
  return u;
}

absl::Time TimeOf(const google::protobuf::Timestamp& t) {
  // absl::Time holds any int64 of seconds and saturates its arithmetic: no overflow.
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

double StartWaitSeconds(const google::protobuf::Timestamp& now, const google::protobuf::Timestamp& start) {
  // In doubles: any two int64 seconds subtract without overflow (to within a microsecond
  // of what a wait of up to a year needs).
  const double wait = (static_cast<double>(start.seconds()) - static_cast<double>(now.seconds())) +
                      (static_cast<double>(start.nanos()) - static_cast<double>(now.nanos())) / 1e9;
  if (!std::isfinite(wait) || wait <= 0) return 0;
  return std::min(wait, kMaxStartWaitSeconds);
}

absl::StatusOr<std::vector<pb::SpecStartEstimate>> NexecBackend::StartEstimates(
    const std::vector<pb::SpecOffer>& specs) {
  // A probe per spec, shaped as a replica of it is submitted: the master's backfill planner
  // says when such a job would start (nothing is submitted).
  npb::EstimateStartRequest req;
  for (const auto& offer : specs) {
    NexecShape shape = ShapeForSpec(offer);
    npb::JobSpec* probe = req.add_probes();
    probe->set_user(CurrentUser());
    probe->set_queue(queue_);
    probe->set_slots(shape.slots);
    probe->set_requirement(shape.requirement);
  }
  JC_ASSIGN_OR_RETURN(auto resp, (client_->Unary<npb::EstimateStartRequest, npb::EstimateStartResponse>(
                                     "EstimateStart", &npb::Master::Stub::EstimateStart, req)));
  std::vector<pb::SpecStartEstimate> out;
  for (int i = 0; i < resp.estimates_size() && i < static_cast<int>(specs.size()); ++i) {
    const npb::StartEstimate& e = resp.estimates(i);
    if (!e.known()) continue;  // unknown stays absent
    pb::SpecStartEstimate& est = out.emplace_back();
    est.set_resource_spec_id(specs[i].resource_spec_id());
    est.set_wait_seconds(StartWaitSeconds(resp.now(), e.start()));
    est.set_source("nexec backfill");
  }
  return out;
}

npb::SubmitRequest NexecBackend::RequestFor(const ReplicaLaunch& launch) const {
  // The replica's name is the job's submit key: after an adapter crash the same submit
  // answers with the job already there. Keys are the submitter's own (munge-proven), so an
  // account that submits a job of that name, or with that key, beforehand takes nothing:
  // a replica is never found by a name anyone can take.
  NexecShape shape = ShapeForSpec(launch.spec);
  npb::SubmitRequest req;
  auto* spec = req.mutable_spec();
  spec->set_name(launch.name);
  spec->set_submit_key(launch.name);  // an adapter killed mid-submit and restarted gets the same job back
  spec->set_command(launch.command);
  spec->set_image(launch.image);  // nexec pulls and runs it (ADR 0010)
  if (!launch.image.empty()) {
    for (const auto& dir : launch.read_only_dirs) spec->add_read_only_dirs(dir);  // its datasets
  }
  spec->set_user(launch.user.empty() ? CurrentUser() : launch.user);
  spec->set_queue(queue_);
  spec->set_project(launch.project);  // -P: the center's limits over projects apply to it (B7)
  spec->set_slots(shape.slots);
  spec->set_requirement(shape.requirement);
  // -W: killed past it, and what nexec's backfill plans by (a job without one makes every
  // start behind it unknown).
  spec->set_run_limit_seconds(absl::ToInt64Seconds(absl::Ceil(launch.time_limit, absl::Seconds(1))));
  for (const auto& [k, v] : launch.env) (*spec->mutable_env())[k] = v;
  (*spec->mutable_env())["JC_REPLICA_NAME"] = launch.name;
  return req;
}

absl::StatusOr<std::string> NexecBackend::Submit(const ReplicaLaunch& launch) {
  JC_ASSIGN_OR_RETURN(auto resp, (client_->Unary<npb::SubmitRequest, npb::SubmitResponse>(
                                     "Submit", &npb::Master::Stub::Submit, RequestFor(launch))));
  return absl::StrCat(resp.job_id());
}

std::vector<absl::StatusOr<std::string>> NexecBackend::SubmitEach(const std::vector<ReplicaLaunch>& launches) {
  // A master of an earlier release has no job packs (UNIMPLEMENTED): one Submit each, from
  // then on.
  if (launches.size() == 1 || !packs_.load(std::memory_order_relaxed)) return Backend::SubmitEach(launches);
  std::vector<npb::SubmitRequest> requests;
  requests.reserve(launches.size());
  for (const ReplicaLaunch& launch : launches) requests.push_back(RequestFor(launch));
  std::vector<absl::StatusOr<std::string>> out;
  out.reserve(launches.size());
  for (const npb::SubmitPackRequest& pack : nexec::SplitIntoPacks(std::move(requests))) {
    auto answer = client_->Unary<npb::SubmitPackRequest, npb::SubmitPackResponse>(
        "SubmitPack", &npb::Master::Stub::SubmitPack, pack);
    if (!answer.ok() && absl::IsUnimplemented(answer.status())) {
      packs_.store(false, std::memory_order_relaxed);
      for (size_t i = out.size(); i < launches.size(); ++i) out.push_back(Submit(launches[i]));
      return out;
    }
    // The replica keys make a pack safe to send again whole (a lost answer, another leader):
    // a job already taken is answered, never made twice.
    for (auto& id : nexec::PackResults(answer.status(), answer.ok() ? *answer : npb::SubmitPackResponse(),
                                       pack.submissions_size())) {
      if (id.ok()) {
        out.push_back(absl::StrCat(*id));
      } else {
        out.push_back(absl::Status(id.status().code(), absl::StrCat("nexec master: ", id.status().message())));
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> NexecBackend::SubmitGang(
    const std::vector<ReplicaLaunch>& launches) {
  // One nexec job holds every replica's slots: nexec places all of them in one decision
  // or none. The command runs once with the whole host list (NEXEC_HOSTS, a hostfile),
  // as MPI-style launchers expect; every replica reports that job's state.
  for (const ReplicaLaunch& l : launches) {
    if (l.image != launches[0].image) {
      return absl::InvalidArgumentError("a gang runs as one nexec job: its replicas must name the same image");
    }
  }
  std::string name = absl::StrCat(launches[0].name, "-gang", launches.size());
  std::string existing;
  {
    npb::SubmitRequest req;
    auto* spec = req.mutable_spec();
    spec->set_name(name);
    spec->set_submit_key(name);
    spec->set_command(launches[0].command);
    spec->set_image(launches[0].image);
    if (!launches[0].image.empty()) {
      for (const auto& dir : launches[0].read_only_dirs) spec->add_read_only_dirs(dir);
    }
    spec->set_user(launches[0].user.empty() ? CurrentUser() : launches[0].user);
    spec->set_queue(queue_);
    spec->set_project(launches[0].project);
    std::string requirement;
    int slots = 0;
    for (const auto& l : launches) {
      NexecShape shape = ShapeForSpec(l.spec);
      slots += shape.slots;
      // Each replica becomes sections of its own; a plain shape gets an explicit count.
      std::string part = absl::StrContains(shape.requirement, "{")
                             ? shape.requirement
                             : absl::StrCat(shape.slots, "{", shape.requirement, "}");
      absl::StrAppend(&requirement, requirement.empty() ? "" : " ", part);
    }
    spec->set_slots(slots);
    spec->set_requirement(requirement);
    absl::Duration limit = absl::ZeroDuration();  // the gang runs as long as its longest replica may
    for (const auto& l : launches) limit = std::max(limit, l.time_limit);
    spec->set_run_limit_seconds(absl::ToInt64Seconds(absl::Ceil(limit, absl::Seconds(1))));
    JC_ASSIGN_OR_RETURN(auto resp, (client_->Unary<npb::SubmitRequest, npb::SubmitResponse>("Submit",
                                       &npb::Master::Stub::Submit, req)));
    existing = absl::StrCat(resp.job_id());
  }
  return std::vector<std::string>(launches.size(), existing);
}

absl::Status NexecBackend::Stop(const std::string& external_id) {
  npb::JobRef ref;
  JC_ASSIGN_OR_RETURN(int64_t id, JobIdOf(external_id));
  ref.set_job_id(id);
  auto killed = client_->Unary<npb::JobRef, npb::ControlResponse>("Kill", &npb::Master::Stub::Kill, ref);
  // A job that ended meanwhile is stopped already.
  if (!killed.ok() && !absl::IsFailedPrecondition(killed.status())) return killed.status();
  return absl::OkStatus();
}

absl::StatusOr<bool> NexecBackend::Withdraw(const std::string& external_id) {
  npb::JobRef ref;
  JC_ASSIGN_OR_RETURN(int64_t id, JobIdOf(external_id));
  ref.set_job_id(id);
  ref.set_only_if_pending(true);
  JC_ASSIGN_OR_RETURN(npb::ControlResponse answer,
                      (client_->Unary<npb::JobRef, npb::ControlResponse>("Kill", &npb::Master::Stub::Kill, ref)));
  // Only what this call took back: a job its owner killed, or one that ran and ended, is not.
  return answer.taken_back();
}

absl::StatusOr<std::map<std::string, ReplicaObservation>> NexecBackend::Poll(
    const std::vector<std::string>& ids) {
  std::map<std::string, ReplicaObservation> out;
  for (const auto& id : ids) {
    npb::JobRef ref;
    int64_t job_id = 0;
    if (!ParseJobId(id, &job_id)) continue;
    ref.set_job_id(job_id);
    auto job = client_->Unary<npb::JobRef, npb::Job>("GetJob", &npb::Master::Stub::GetJob, ref);
    if (absl::IsNotFound(job.status())) continue;
    if (!job.ok()) return job.status();
    ReplicaObservation o;
    switch (job->state()) {
      case npb::PENDING: o.state = pb::REPLICA_PENDING; o.message = job->reason(); break;
      case npb::RUNNING:
      case npb::SUSPENDED: o.state = pb::REPLICA_RUNNING; break;
      case npb::DONE: o.state = pb::REPLICA_SUCCEEDED; break;
      default:
        o.state = pb::REPLICA_FAILED;
        o.exit_code = job->exit_code();
        o.message = job->reason();
    }
    if (o.state == pb::REPLICA_SUCCEEDED || o.state == pb::REPLICA_FAILED) o.usage = UsageOf(*job, &o);
    out[id] = o;
  }
  return out;
}

namespace {

// A command run by nexec in a replica's task: the master's Exec stream, whose data is the
// exec stream itself (nexec's agent attaches the command to it).
class NexecExecRelay final : public ExecRelay {
 public:
  NexecExecRelay(std::shared_ptr<npb::Master::Stub> stub, std::unique_ptr<grpc::ClientContext> ctx,
                 std::unique_ptr<grpc::ClientReaderWriter<npb::ExecFrame, npb::ExecFrame>> stream)
      : stub_(std::move(stub)), ctx_(std::move(ctx)), stream_(std::move(stream)) {}
  ~NexecExecRelay() override {
    stream_->WritesDone();
    stream_->Finish().IgnoreError();  // its end was read (or cancelled) already
  }
  bool Write(const std::string& bytes) override {
    npb::ExecFrame frame;
    frame.set_data(bytes);
    return stream_->Write(frame);
  }
  bool Read(std::string* bytes) override {
    npb::ExecFrame frame;
    while (stream_->Read(&frame)) {
      if (frame.data().empty()) continue;
      *bytes = std::move(*frame.mutable_data());
      return true;
    }
    return false;
  }
  void Cancel() override { ctx_->TryCancel(); }

 private:
  std::shared_ptr<npb::Master::Stub> stub_;  // its channel, kept while the stream is (MasterList drops failed ones)
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<npb::ExecFrame, npb::ExecFrame>> stream_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ExecRelay>> NexecBackend::RelayExec(const ExecRequest& request) {
  JC_ASSIGN_OR_RETURN(int64_t id, JobIdOf(request.external_id));
  npb::ExecFrame first;
  npb::ExecStart* start = first.mutable_start();
  start->set_job_id(id);
  start->set_task_index(0);  // the replica's command (a gang's one job runs it once)
  for (const auto& arg : request.command) start->add_command(arg);
  start->set_tty(request.tty);
  start->set_rows(request.rows);
  start->set_cols(request.cols);
  auto ctx = std::make_unique<grpc::ClientContext>();
  JC_RETURN_IF_ERROR(client_->auth.Sign(ctx.get(), "Exec", first));
  JC_ASSIGN_OR_RETURN(auto leader, client_->Leader());
  auto stream = leader.second->Exec(ctx.get());
  npb::ExecFrame answer;
  const bool answered = stream->Write(first) && stream->Read(&answer);
  if (!answered || !answer.started()) {
    if (answered) ctx->TryCancel();  // not the answer a master gives first
    grpc::Status s = stream->Finish();
    client_->Failed(leader.first, s, *ctx);
    absl::Status st = s.ok() ? absl::UnavailableError("the master ended the command's stream before it started")
                             : FromGrpcStatus(s);
    return absl::Status(st.code(), absl::StrCat("nexec master: ", st.message()));
  }
  return std::unique_ptr<ExecRelay>(std::make_unique<NexecExecRelay>(leader.second, std::move(ctx), std::move(stream)));
}

absl::StatusOr<std::string> NexecBackend::ReadLog(const std::string& external_id, bool stderr,
                                                  int64_t offset, int64_t max_bytes) {
  npb::ReadLogRequest req;
  JC_ASSIGN_OR_RETURN(int64_t id, JobIdOf(external_id));
  req.set_job_id(id);
  req.set_stderr(stderr);
  req.set_offset(offset);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  JC_RETURN_IF_ERROR(client_->auth.Sign(&ctx, "ReadLog", req));
  JC_ASSIGN_OR_RETURN(auto leader, client_->Leader());
  auto reader = leader.second->ReadLog(&ctx, req);
  std::string out;
  npb::LogChunk chunk;
  while (static_cast<int64_t>(out.size()) < max_bytes && reader->Read(&chunk)) out += chunk.data();
  if (static_cast<int64_t>(out.size()) >= max_bytes) {
    ctx.TryCancel();
    reader->Finish().IgnoreError();
    out.resize(static_cast<size_t>(max_bytes));
    return out;
  }
  grpc::Status s = reader->Finish();
  client_->Failed(leader.first, s, ctx);
  // A job not started yet has no output.
  if (s.error_code() == grpc::StatusCode::NOT_FOUND || s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    return std::string();
  }
  if (!s.ok()) return FromGrpcStatus(s);
  return out;
}

}  // namespace jc::adapter
