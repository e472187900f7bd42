#include "executor/master/master_service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/call_deadlines.h"
#include "common/event_stream.h"
#include "common/exec/exec_stream.h"
#include "common/grpc_status.h"
#include "common/log_follow.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "executor/auth/munge_auth.h"
#include "executor/client/submit_packer.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {
namespace {

using grpc::ServerContext;
using grpc::Status;

// Every handler starts by proving its caller (munge); the first line of each.
#define NEXEC_CALLER(caller, method)                                   \
  auto caller##_or = auth_.Verify(ctx, method, *req);                  \
  if (!caller##_or.ok()) return ToGrpcStatus(caller##_or.status());   \
  [[maybe_unused]] const Caller& caller = *caller##_or

// What a job pack's result says of a refusal: UTF-8, as a protobuf string must be (one byte
// of a character a refusal quoted made the whole answer unreadable to the client, whose
// jobs were taken all the same: attacker helper-78), and short: a refusal may quote its
// submission (a NUL in an environment name is four bytes escaped), and answers many times
// their packs' size grew the master's memory by gigabytes (the same helper).
constexpr size_t kMaxPackResultMessage = 512;
static_assert(kMaxSubmissionBytes == Master::kMaxJobSpecBytes, "clients refuse what the master would");
std::string PackResultMessage(absl::string_view message) {
  if (message.size() <= kMaxPackResultMessage) return ToUtf8(message);
  return absl::StrCat(ToUtf8(message.substr(0, kMaxPackResultMessage)), "...");
}

// A callback method's answer given before any work: finished now, with why.
grpc::ServerUnaryReactor* FinishNow(grpc::ServerUnaryReactor* reactor, const Status& status) {
  reactor->Finish(status);
  return reactor;
}

// Submit, the call made once per job, and Heartbeat, made by every agent at each round
// with tasks ended, are callback methods: each hands its work to the master's loop and
// returns, and the answer is sent from the loop once committed, so no handler thread
// sleeps on each call and is woken for its answer (those two thread switches per job
// were a tenth of the master's CPU). The others stay synchronous.
class MasterService final
    : public pb::Master::WithCallbackMethod_Submit<pb::Master::WithCallbackMethod_SubmitPack<
          pb::Master::WithCallbackMethod_Heartbeat<pb::Master::WithCallbackMethod_AgentStream<pb::Master::Service>>>> {
 public:
  MasterService(Master* m, MungeAuth auth, uid_t agent_uid, std::function<pb::LeadershipInfo()> leadership,
                std::shared_ptr<AgentStreams> streams)
      : m_(m), auth_(std::move(auth)), agent_uid_(agent_uid), leadership_(std::move(leadership)),
        streams_(std::move(streams)) {}

  // The agents' streams (issue 48): agent_streams.cc; a master made without them has none.
  grpc::ServerBidiReactor<pb::AgentStreamFrame, pb::AgentStreamFrame>* AgentStream(
      grpc::CallbackServerContext* ctx) override {
    if (streams_ == nullptr) {
      return pb::Master::WithCallbackMethod_AgentStream<pb::Master::Service>::AgentStream(ctx);
    }
    return streams_->Serve(ctx, m_, auth_, agent_uid_);
  }

  // Anyone may ask who leads (a standby answers it too): it tells nothing but addresses. A
  // caller with a credential is answered in a session (the AnswerSigner signs it), so that
  // it can tell this master from whoever listens on a master's address while it is down.
  Status Leadership(ServerContext* ctx, const pb::LeadershipRequest* req, pb::LeadershipInfo* resp) override {
    if (MungeAuth::CarriesCredential(ctx)) {
      auto caller = auth_.Verify(ctx, "Leadership", *req);
      if (!caller.ok()) return ToGrpcStatus(caller.status());
    }
    if (leadership_) {
      *resp = leadership_();
    } else {
      resp->set_leading(true);
      resp->set_state("leading");
      resp->set_term(m_->term());
    }
    resp->set_identity(m_->identity());
    return Status::OK;
  }

  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* ctx, const pb::SubmitRequest* req,
                                   pb::SubmitResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    auto caller = auth_.Verify(ctx, "Submit", *req);
    if (!caller.ok()) return FinishNow(reactor, ToGrpcStatus(caller.status()));
    absl::StatusOr<pb::JobSpec> spec = SpecOf(*caller, *req);
    if (!spec.ok()) return FinishNow(reactor, ToGrpcStatus(spec.status()));
    m_->SubmitThen(*std::move(spec), [reactor, resp](absl::StatusOr<int64_t> id) {
      if (id.ok()) resp->set_job_id(*id);
      reactor->Finish(id.ok() ? Status::OK : ToGrpcStatus(id.status()));
    });
    return reactor;
  }
  // A job pack: each submission goes the way Submit's goes (SpecOf, then SubmitThen), so
  // that a pack can take nothing a call per job could not; the answer is sent once the last
  // of them is committed or refused (they share the loop's burst, and so its commit).
  grpc::ServerUnaryReactor* SubmitPack(grpc::CallbackServerContext* ctx, const pb::SubmitPackRequest* req,
                                       pb::SubmitPackResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    auto caller = auth_.Verify(ctx, "SubmitPack", *req);
    if (!caller.ok()) return FinishNow(reactor, ToGrpcStatus(caller.status()));
    const int n = req->submissions_size();
    if (n == 0) return FinishNow(reactor, Status(grpc::StatusCode::INVALID_ARGUMENT, "the job pack is empty"));
    if (n > kMaxPackSubmissions) {
      return FinishNow(reactor, Status(grpc::StatusCode::INVALID_ARGUMENT,
                                       absl::StrCat("the job pack has ", n, " submissions; at most ",
                                                    kMaxPackSubmissions, " go in one (split it)")));
    }
    for (int i = 0; i < n; ++i) resp->add_results();
    // Answers come from the loop for the ones it takes, and from here for the ones refused
    // before it: the last to land finishes the call.
    auto left = std::make_shared<std::atomic<int>>(n);
    auto settle = [reactor, resp, left](int i, const absl::StatusOr<int64_t>& id) {
      pb::SubmitPackResult* result = resp->mutable_results(i);
      if (id.ok()) {
        result->set_job_id(*id);
      } else {
        result->set_code(static_cast<int>(id.status().code()));
        result->set_message(PackResultMessage(id.status().message()));
      }
      if (left->fetch_sub(1, std::memory_order_acq_rel) == 1) reactor->Finish(Status::OK);
    };
    std::vector<pb::JobSpec> specs;
    std::vector<int> taken;  // their indices in the pack
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<pb::JobSpec> spec = SpecOf(*caller, req->submissions(i));
      if (!spec.ok()) {
        settle(i, spec.status());
        continue;
      }
      specs.push_back(*std::move(spec));
      taken.push_back(i);
    }
    if (specs.empty()) return reactor;  // each refused here: finished by the last settle
    // Taken in one burst, committed together.
    m_->SubmitAllThen(std::move(specs), [settle, taken](std::vector<absl::StatusOr<int64_t>> ids) {
      for (size_t k = 0; k < taken.size(); ++k) settle(taken[k], ids[k]);
    });
    return reactor;
  }
  Status GetJob(ServerContext* ctx, const pb::JobRef* req, pb::Job* resp) override {
    NEXEC_CALLER(caller, "GetJob");
    auto job = m_->GetJob(req->job_id());
    if (job.ok()) m_->HidePrivate(Of(caller), &*job);
    return Reply(std::move(job), resp);
  }
  Status ListJobs(ServerContext* ctx, const pb::ListJobsRequest* req, pb::ListJobsResponse* resp) override {
    NEXEC_CALLER(caller, "ListJobs");
    for (auto& j : m_->ListJobs(*req)) {
      m_->HidePrivate(Of(caller), &j);
      *resp->add_jobs() = std::move(j);
    }
    return Status::OK;
  }
  Status Kill(ServerContext* ctx, const pb::JobRef* req, pb::ControlResponse* resp) override {
    NEXEC_CALLER(caller, "Kill");
    if (auto s = m_->MayControl(Of(caller), req->job_id()); !s.ok()) return ToGrpcStatus(s);
    bool taken_back = false;
    Status s = Control(m_->Kill(req->job_id(), "", req->only_if_pending(), &taken_back), resp);
    resp->set_taken_back(taken_back);
    return s;
  }
  Status Suspend(ServerContext* ctx, const pb::JobRef* req, pb::ControlResponse* resp) override {
    NEXEC_CALLER(caller, "Suspend");
    if (auto s = m_->MayControl(Of(caller), req->job_id()); !s.ok()) return ToGrpcStatus(s);
    return Control(m_->Suspend(req->job_id()), resp);
  }
  Status Resume(ServerContext* ctx, const pb::JobRef* req, pb::ControlResponse* resp) override {
    NEXEC_CALLER(caller, "Resume");
    if (auto s = m_->MayControl(Of(caller), req->job_id()); !s.ok()) return ToGrpcStatus(s);
    return Control(m_->Resume(req->job_id()), resp);
  }
  Status Rerun(ServerContext* ctx, const pb::JobRef* req, pb::ControlResponse* resp) override {
    NEXEC_CALLER(caller, "Rerun");
    if (auto s = m_->MayControl(Of(caller), req->job_id()); !s.ok()) return ToGrpcStatus(s);
    return Control(m_->Rerun(req->job_id()), resp);
  }
  Status Requeue(ServerContext* ctx, const pb::JobRef* req, pb::ControlResponse* resp) override {
    NEXEC_CALLER(caller, "Requeue");
    if (auto s = m_->MayControl(Of(caller), req->job_id()); !s.ok()) return ToGrpcStatus(s);
    return Control(m_->Requeue(req->job_id()), resp);
  }
  Status AddTimedJob(ServerContext* ctx, const pb::TimedJob* req, pb::TimedJob* resp) override {
    NEXEC_CALLER(caller, "AddTimedJob");
    pb::TimedJob tj = *req;
    if (tj.spec().user().empty()) tj.mutable_spec()->set_user(caller.user);
    tj.mutable_spec()->set_submitter(caller.user);
    if (auto s = m_->MaySubmitAs(Of(caller), tj.spec().user()); !s.ok()) return ToGrpcStatus(s);
    return Reply(m_->AddTimedJob(std::move(tj)), resp);
  }
  Status ListTimedJobs(ServerContext* ctx, const pb::ListTimedJobsRequest* req,
                       pb::ListTimedJobsResponse* resp) override {
    NEXEC_CALLER(caller, "ListTimedJobs");
    for (auto& tj : m_->ListTimedJobs()) {
      // Another account's timed job shows what a job of theirs does: not its command,
      // environment (the endpoint tokens a replica gets, say) or image.
      pb::Job view;
      *view.mutable_spec() = std::move(*tj.mutable_spec());
      m_->HidePrivate(Of(caller), &view);
      *tj.mutable_spec() = std::move(*view.mutable_spec());
      *resp->add_timed_jobs() = std::move(tj);
    }
    return Status::OK;
  }
  Status RemoveTimedJob(ServerContext* ctx, const pb::TimedJobRef* req, pb::TimedJob* resp) override {
    NEXEC_CALLER(caller, "RemoveTimedJob");
    if (auto s = m_->MayControlTimedJob(Of(caller), req->id()); !s.ok()) return ToGrpcStatus(s);
    return Reply(m_->RemoveTimedJob(req->id()), resp);
  }
  Status ListHosts(ServerContext* ctx, const pb::ListHostsRequest* req, pb::ListHostsResponse* resp) override {
    NEXEC_CALLER(caller, "ListHosts");
    for (auto& h : m_->ListHosts()) {
      m_->HidePrivate(Of(caller), &h);
      *resp->add_hosts() = std::move(h);
    }
    return Status::OK;
  }
  Status ListQueues(ServerContext* ctx, const pb::ListQueuesRequest* req, pb::ListQueuesResponse* resp) override {
    NEXEC_CALLER(caller, "ListQueues");
    for (auto& q : m_->ListQueues()) *resp->add_queues() = std::move(q);
    return Status::OK;
  }
  Status ListLimits(ServerContext* ctx, const pb::ListLimitsRequest* req, pb::ListLimitsResponse* resp) override {
    NEXEC_CALLER(caller, "ListLimits");
    for (auto& l : m_->ListLimits()) *resp->add_limits() = std::move(l);
    return Status::OK;
  }
  Status EstimateStart(ServerContext* ctx, const pb::EstimateStartRequest* req,
                       pb::EstimateStartResponse* resp) override {
    NEXEC_CALLER(caller, "EstimateStart");
    // Each probe is a what-if over the whole model on the master's loop: a few per call
    // (one per resource spec a center offers), not a way to stall the loop.
    constexpr int kMaxProbes = 64;
    if (req->probes_size() > kMaxProbes) {
      return Status(grpc::StatusCode::INVALID_ARGUMENT,
                    absl::StrCat("at most ", kMaxProbes, " probes a call, got ", req->probes_size()));
    }
    // A probe asks as a user would submit: as the caller (an empty user), or as an account
    // the caller may submit for. Anything else would read another account's limits and
    // usage from the answer's reasons, and fill the model's per-user maps with names.
    pb::EstimateStartRequest probes = *req;
    for (auto& probe : *probes.mutable_probes()) {
      if (probe.user().empty()) probe.set_user(caller.user);
      if (auto s = m_->MaySubmitAs(Of(caller), probe.user()); !s.ok()) return ToGrpcStatus(s);
    }
    *resp = m_->EstimateStart(probes);
    return Status::OK;
  }
  Status ListShares(ServerContext* ctx, const pb::ListSharesRequest* req, pb::ListSharesResponse* resp) override {
    NEXEC_CALLER(caller, "ListShares");
    for (auto& n : m_->ListShares(req->queue())) *resp->add_nodes() = std::move(n);
    return Status::OK;
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx, const pb::HeartbeatRequest* req,
                                      pb::HeartbeatResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    auto caller = auth_.Verify(ctx, "Heartbeat", *req);
    if (!caller.ok()) return FinishNow(reactor, ToGrpcStatus(caller.status()));
    // A heartbeat makes a host schedulable: only the agents' account (or root) may send one.
    if (!caller->root() && caller->uid != agent_uid_) {
      return FinishNow(reactor, Status(grpc::StatusCode::PERMISSION_DENIED,
                                       absl::StrCat("heartbeats come from nexec agents, not from ", caller->user)));
    }
    // `req` lives until Finish: the loop reads it before the answer is sent.
    m_->HeartbeatThen(*req, [reactor, resp](absl::StatusOr<pb::HeartbeatResponse> answer) {
      if (answer.ok()) *resp = std::move(*answer);
      reactor->Finish(answer.ok() ? Status::OK : ToGrpcStatus(answer.status()));
    });
    return reactor;
  }
  Status RunTask(ServerContext* ctx, const pb::RunTaskRequest* req, pb::Task* resp) override {
    NEXEC_CALLER(caller, "RunTask");
    // The job's owner starts tasks in its allocation (nexec-run inside the job runs as the
    // owner); so may root and the administrators. A task runs as the job's account: not a
    // group's administrators, who may stop a member's job but not act as them (an attacker
    // helper ran a shell as a member through nexec-run).
    if (auto s = m_->MayExec(Of(caller), req->job_id()); !s.ok()) return ToGrpcStatus(s);
    return Reply(m_->RunTask(*req), resp);
  }
  Status SignalTask(ServerContext* ctx, const pb::SignalTaskRequest* req, pb::ControlResponse* resp) override {
    NEXEC_CALLER(caller, "SignalTask");
    if (auto s = m_->MayControl(Of(caller), req->job_id()); !s.ok()) return ToGrpcStatus(s);
    return Control(m_->SignalTask(*req), resp);
  }
  // A command in a running task (nexec exec): the caller's first frame, signed, says what
  // and where; the master checks who may, finds the task's agent and passes the stream
  // both ways, reading none of it. The command runs as the job's account, whoever asks.
  Status Exec(ServerContext* ctx, grpc::ServerReaderWriter<pb::ExecFrame, pb::ExecFrame>* stream) override {
    // Who asks, proven before anything is read (a silent stream holds this thread), then
    // the first frame within kFirstFrameWithin, and what the credential was made for.
    auto opening = auth_.VerifyStreamOpening(ctx);
    if (!opening.ok()) return ToGrpcStatus(opening.status());
    LastingCall held(this, Lasting::kExec, opening->caller);
    if (!held.status().ok()) return ToGrpcStatus(held.status());
    pb::ExecFrame first;
    {
      CallDeadlines::Ticket waiting = deadlines_.CancelAt(ctx, absl::Now() + kFirstFrameWithin);
      // (Ended here when it overstays: the caller then sees CANCELLED.)
      if (!stream->Read(&first)) {
        return Status(grpc::StatusCode::INVALID_ARGUMENT, "the exec stream ended before it said what to run");
      }
    }
    if (!first.has_start()) {
      return Status(grpc::StatusCode::INVALID_ARGUMENT, "an exec stream starts with what to run (start)");
    }
    if (auto s = MungeAuth::CheckBinding(*opening, "Exec", first); !s.ok()) return ToGrpcStatus(s);
    const Caller& caller = opening->caller;
    pb::ExecStart start = first.start();
    if (auto s = exec_stream::CheckCommand(start.command()); !s.ok()) return ToGrpcStatus(s);
    if (auto s = m_->MayExec(Of(caller), start.job_id()); !s.ok()) return ToGrpcStatus(s);
    auto address = m_->ExecTarget(&start);
    if (!address.ok()) return ToGrpcStatus(address.status());
    return RelayExec(ctx, stream, *address, start);
  }
  Status SendInput(ServerContext* ctx, const pb::InputRequest* req, pb::InputResponse* resp) override {
    NEXEC_CALLER(caller, "SendInput");
    // What a command reads is typed as its account: MayExec's, as for a command run in it.
    if (auto s = m_->MayExec(Of(caller), req->job_id()); !s.ok()) return ToGrpcStatus(s);
    auto accepted = m_->SendInput(*req);
    if (!accepted.ok()) return ToGrpcStatus(accepted.status());
    resp->set_accepted(*accepted);
    return Status::OK;
  }
  Status Watch(ServerContext* ctx, const pb::WatchRequest* req,
               grpc::ServerWriter<pb::JobEvent>* writer) override {
    NEXEC_CALLER(caller, "Watch");
    LastingCall held(this, Lasting::kFollow, caller);
    if (!held.status().ok()) return ToGrpcStatus(held.status());
    return StreamEvents<pb::JobEvent>(
        ctx, m_->events(), req->since_cursor(), writer,
        {"master is shutting down", "events after since_cursor were compacted; list jobs and watch from now"},
        [&](pb::JobEvent& e) {
          if (e.has_job()) m_->HidePrivate(Of(caller), e.mutable_job());
        });
  }
  Status ReadLog(ServerContext* ctx, const pb::ReadLogRequest* req,
                 grpc::ServerWriter<pb::LogChunk>* writer) override {
    NEXEC_CALLER(caller, "ReadLog");
    // A job's output is its owner's (and its administrators'), as its files are.
    if (auto s = m_->MayControl(Of(caller), req->job_id()); !s.ok()) return ToGrpcStatus(s);
    LastingCall held(this, Lasting::kFollow, caller);
    if (!held.status().ok()) return ToGrpcStatus(held.status());
    constexpr int64_t kChunk = 1 << 20;
    LogFollow log;
    log.read = [&](int64_t offset) {
      pb::ReadLogRequest at = *req;
      at.set_offset(offset);
      return m_->ReadLog(at, kChunk);
    };
    bool interactive = false;
    log.ended = [&]() -> absl::StatusOr<bool> {
      auto job = m_->GetJob(req->job_id());
      if (!job.ok()) return true;  // gone: nothing more will be written
      interactive = job->spec().interactive();
      return job->state() == pb::DONE || job->state() == pb::EXIT ||
             (req->task_index() > 0 && req->task_index() < job->tasks_size() &&
              job->tasks(req->task_index()).state() == pb::TASK_EXITED);
    };
    // Quickly for an interactive job, whose user waits on it.
    log.poll = [&] { return absl::Milliseconds(interactive ? 40 : 200); };
    return FollowLog(ctx, req->offset(), req->follow(), log, writer);
  }

 private:
  static Principal Of(const Caller& c) { return Principal{c.user, c.root()}; }
  // The spec a submission from `caller` asks for, as the master takes it: the submitter is
  // the proven caller, never the request's, the timed-job mark is the master's own, and the
  // user it runs as is one the caller may submit as (PERMISSION_DENIED otherwise).
  absl::StatusOr<pb::JobSpec> SpecOf(const Caller& caller, const pb::SubmitRequest& req) {
    pb::JobSpec spec = req.spec();
    if (spec.user().empty()) spec.set_user(caller.user);
    spec.set_submitter(caller.user);  // proven, never taken from the request
    spec.clear_timed_job_id();        // the master's own mark on a timed job's runs
    JC_RETURN_IF_ERROR(m_->MaySubmitAs(Of(caller), spec.user()));
    return spec;
  }
  // Exec's relay: opens the command at the agent (signed as the master), answers its first
  // frame or refusal, then passes frames both ways until the agent's side ends; the caller
  // going cancels the agent's stream, which ends the command.
  Status RelayExec(ServerContext* ctx, grpc::ServerReaderWriter<pb::ExecFrame, pb::ExecFrame>* caller,
                   const std::string& address, const pb::ExecStart& start) {
    grpc::ClientContext agent_ctx;
    pb::ExecFrame open;
    *open.mutable_start() = start;
    // Signed for the agent's Exec, not the master's: a caller's credential for one is never
    // taken by the other (an attacker helper replayed root's to an agent).
    if (auto s = auth_.Sign(&agent_ctx, "agent.Exec", open); !s.ok()) return ToGrpcStatus(s);
    auto agent = AgentStub(address)->Exec(&agent_ctx);
    pb::ExecFrame answer;
    if (!agent->Write(open) || !agent->Read(&answer)) {
      agent->WritesDone();
      return agent->Finish();  // the agent's refusal, as it said it
    }
    std::atomic<bool> agent_done{false};
    CallDeadlines::Ticket leave;  // a caller that stays once it has it all is let go
    std::thread back([&] {
      bool there = caller->Write(answer);
      pb::ExecFrame frame;
      while (there && agent->Read(&frame)) there = caller->Write(frame);
      if (!there) agent_ctx.TryCancel();
      leave = deadlines_.CancelAt(ctx, absl::Now() + kLeaveWithin);
      agent_done = true;
    });
    pb::ExecFrame in;
    while (!ctx->IsCancelled() && caller->Read(&in)) {
      in.clear_start();
      in.clear_started();
      if (!agent->Write(in)) break;
    }
    // The caller sends no more: gone before the command ended, it ends the command.
    if (!agent_done.load()) agent_ctx.TryCancel();
    agent->WritesDone();
    back.join();
    leave.Forget();
    Status s = agent->Finish();
    return s.error_code() == grpc::StatusCode::CANCELLED ? Status::OK : s;
  }
  pb::Agent::Stub* AgentStub(const std::string& address) {
    std::lock_guard<std::mutex> lock(stubs_mu_);
    auto& stub = agent_stubs_[address];
    if (!stub) stub = pb::Agent::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    return stub.get();
  }
  // The master's threads held by calls that last (Exec, Watch, ReadLog): its server has 256,
  // and no account may take those everyone's other calls need (attacker helpers held all of
  // them with silent Exec streams, then with Watch streams). An ordinary account holds at
  // most kPerAccount of each kind, all ordinary accounts kOrdinary; root and the
  // administrators — the native adapter, for every user of the federation — have their own
  // kTrusted, so no ordinary account keeps them out.
  static constexpr absl::Duration kFirstFrameWithin = absl::Seconds(5);
  static constexpr absl::Duration kLeaveWithin = absl::Seconds(5);
  enum class Lasting { kExec = 0, kFollow = 1 };  // Exec; Watch and ReadLog
  static constexpr int kPerAccount = 16;
  static constexpr int kOrdinary[2] = {48, 48};
  static constexpr int kTrusted[2] = {64, 32};
  class LastingCall {
   public:
    LastingCall(MasterService* service, Lasting kind, const Caller& caller)
        : service_(service), kind_(static_cast<int>(kind)), user_(caller.user) {
      trusted_ = service_->m_->Administers(Of(caller));
      std::lock_guard<std::mutex> lock(service_->lasting_mu_);
      int& total = (trusted_ ? service_->trusted_ : service_->ordinary_)[kind_];
      int& own = service_->by_account_[kind_][user_];
      const char* what = kind_ == 0 ? "commands in jobs" : "event and log streams";
      if (total >= (trusted_ ? kTrusted : kOrdinary)[kind_]) {
        status_ = absl::ResourceExhaustedError(absl::StrCat("the master serves ", total, " ", what, " for ",
                                                            trusted_ ? "root and its administrators" : "accounts",
                                                            " already; try again later"));
      } else if (!trusted_ && own >= kPerAccount) {
        status_ = absl::ResourceExhaustedError(
            absl::StrCat(user_, " holds ", kPerAccount, " ", what, " already; end one first"));
      } else {
        ++total;
        ++own;
        held_ = true;
      }
      if (!held_ && own == 0) service_->by_account_[kind_].erase(user_);
    }
    ~LastingCall() {
      if (!held_) return;
      std::lock_guard<std::mutex> lock(service_->lasting_mu_);
      --(trusted_ ? service_->trusted_ : service_->ordinary_)[kind_];
      if (--service_->by_account_[kind_][user_] == 0) service_->by_account_[kind_].erase(user_);
    }
    const absl::Status& status() const { return status_; }

   private:
    MasterService* service_;
    int kind_;
    std::string user_;
    bool trusted_ = false;
    bool held_ = false;
    absl::Status status_;
  };
  std::mutex lasting_mu_;
  int ordinary_[2] = {0, 0};
  int trusted_[2] = {0, 0};
  std::map<std::string, int> by_account_[2];
  CallDeadlines deadlines_;
  std::mutex stubs_mu_;
  std::map<std::string, std::unique_ptr<pb::Agent::Stub>> agent_stubs_;
  static Status Control(absl::StatusOr<pb::Job> job, pb::ControlResponse* resp) {
    if (!job.ok()) return ToGrpcStatus(job.status());
    *resp->mutable_job() = std::move(job).value();
    return Status::OK;
  }
  Master* m_;
  const MungeAuth auth_;
  const uid_t agent_uid_;
  std::function<pb::LeadershipInfo()> leadership_;
  std::shared_ptr<AgentStreams> streams_;
};

// The master's calls to agents, each signed with munge: agents take launches only from
// the master's account.
class GrpcAgentDialer final : public AgentDialer {
 public:
  explicit GrpcAgentDialer(MungeAuth auth) : auth_(std::move(auth)) {}
  absl::StatusOr<int> Launch(const std::string& address, const pb::LaunchRequest& req) override {
    pb::LaunchResponse resp;
    grpc::Status s = auth_.Call(address, "Launch", req, std::chrono::seconds(10),
                                [&](grpc::ClientContext* ctx) { return Stub(address)->Launch(ctx, req, &resp); });
    if (s.error_code() == grpc::StatusCode::ALREADY_EXISTS) return 0;
    if (!s.ok()) return FromGrpcStatus(s);
    return resp.pid();
  }
  std::vector<absl::StatusOr<int>> LaunchBatch(
      const std::string& address, const std::vector<pb::LaunchRequest>& reqs) override {
    if (reqs.size() == 1) return {Launch(address, reqs[0])};
    pb::LaunchBatchRequest req;
    for (const auto& r : reqs) *req.add_launches() = r;
    pb::LaunchBatchResponse resp;
    grpc::Status s = auth_.Call(address, "LaunchBatch", req, std::chrono::seconds(10), [&](grpc::ClientContext* ctx) {
      return Stub(address)->LaunchBatch(ctx, req, &resp);
    });
    if (!s.ok()) return std::vector<absl::StatusOr<int>>(reqs.size(), FromGrpcStatus(s));
    return LaunchResultsOf(resp, reqs.size());
  }
  absl::Status Signal(const std::string& address, const pb::SignalRequest& req) override {
    pb::SignalResponse resp;
    return FromGrpcStatus(auth_.Call(address, "Signal", req, std::chrono::seconds(10), [&](grpc::ClientContext* ctx) {
      return Stub(address)->Signal(ctx, req, &resp);
    }));
  }
  absl::Status Lead(const std::string& address, const pb::LeadRequest& req) override {
    pb::LeadResponse resp;
    return FromGrpcStatus(auth_.Call(address, "agent.Lead", req, std::chrono::seconds(10),
                                     [&](grpc::ClientContext* ctx) { return Stub(address)->Lead(ctx, req, &resp); }));
  }
  absl::StatusOr<int64_t> SendInput(const std::string& address, const pb::InputRequest& req) override {
    pb::InputResponse resp;
    grpc::Status s = auth_.Call(address, "agent.SendInput", req, std::chrono::seconds(10),
                                [&](grpc::ClientContext* ctx) { return Stub(address)->SendInput(ctx, req, &resp); });
    if (!s.ok()) return FromGrpcStatus(s);
    return resp.accepted();
  }
  absl::StatusOr<std::string> ReadLog(const std::string& address, const pb::ReadLogRequest& req,
                                      int64_t max_bytes) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    JC_RETURN_IF_ERROR(auth_.Sign(&ctx, "agent.ReadLog", req));
    auto reader = Stub(address)->ReadLog(&ctx, req);
    std::string out;
    pb::LogChunk chunk;
    while (static_cast<int64_t>(out.size()) < max_bytes && reader->Read(&chunk)) out += chunk.data();
    if (static_cast<int64_t>(out.size()) >= max_bytes) {
      ctx.TryCancel();
      out.resize(static_cast<size_t>(max_bytes));
      reader->Finish().IgnoreError();
      return out;
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return FromGrpcStatus(s);
    return out;
  }

 private:
  pb::Agent::Stub* Stub(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& stub = stubs_[address];
    if (!stub) {
      stub = pb::Agent::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    }
    return stub.get();
  }
  const MungeAuth auth_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<pb::Agent::Stub>> stubs_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeMasterService(Master* master, const MungeAuth& auth, uid_t agent_uid,
                                                 std::function<pb::LeadershipInfo()> leadership,
                                                 std::shared_ptr<AgentStreams> streams) {
  return std::make_unique<MasterService>(master, auth, agent_uid, std::move(leadership), std::move(streams));
}

std::unique_ptr<AgentDialer> MakeGrpcAgentDialer(const MungeAuth& auth) {
  return std::make_unique<GrpcAgentDialer>(auth);
}

}  // namespace jc::nexec
