// Job events as Server-Sent Events (SPEC C8): each event of WatchTrainJobs becomes
//   id: <revision>
//   event: <snapshot|created|updated|moved|ended>
//   data: <the event as JSON>
// so a client that reconnects with Last-Event-ID (what a browser's EventSource sends on
// its own) resumes after the last event it got, also across a server restart. Quiet
// streams carry a comment line now and then, which keeps proxies from closing them and
// tells the gateway when the client went away.
#include <httplib.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/json_proto.h"
#include "jointcloud/v1/jobs.grpc.pb.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {

namespace v1 = ::jointcloud::v1;

namespace {

constexpr int kDefaultHeartbeatSeconds = 15;

// The resume cursor: Last-Event-ID (a reconnecting EventSource) or ?since=.
absl::Status Cursor(const httplib::Request& r, uint64_t* since) {
  std::string text = r.get_header_value("Last-Event-ID");
  const char* name = "Last-Event-ID";
  if (text.empty()) {
    text = QueryString(r, "since");
    name = "since";
  }
  if (text.empty()) return absl::OkStatus();
  if (!absl::SimpleAtoi(text, since)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": \"", text, "\" is not an event id (a revision: 0, 1, ...)"));
  }
  return absl::OkStatus();
}

RestResult Watch(v1::JobService::Stub* stub, const httplib::Request& r, const std::string& job_id) {
  v1::WatchTrainJobsRequest req;
  req.set_job_id(job_id);
  uint64_t since = 0;
  if (absl::Status s = Cursor(r, &since); !s.ok()) return RestResult{s, ""};
  req.set_since_revision(since);
  const std::string history = QueryString(r, "history");
  if (!history.empty() && history != "true" && history != "false") {
    return RestResult{absl::InvalidArgumentError(absl::StrCat("history: \"", history, "\" is not true or false")), ""};
  }
  req.set_history(history == "true");
  int32_t heartbeat = kDefaultHeartbeatSeconds;
  if (absl::Status s = QueryInt(r, "heartbeatSeconds", &heartbeat); !s.ok()) return RestResult{s, ""};
  if (heartbeat < 0 || heartbeat > 3600) {
    return RestResult{absl::InvalidArgumentError("heartbeatSeconds: from 1 to 3600, or 0 for none"), ""};
  }
  // The server beats every second: each quiet second the gateway writes to its client,
  // and a write is how it learns that the client went away (then it ends the watch at
  // once instead of holding it until the next event). The client sees a heartbeat
  // comment every `heartbeat` seconds and an empty comment line in the other quiet ones.
  req.set_heartbeat_seconds(1);

  auto ctx = std::make_shared<grpc::ClientContext>();
  PrepareContext(ctx.get());
  ctx->set_deadline(std::chrono::system_clock::time_point::max());  // as long as the client listens
  // Until the watch is accepted the gateway holds no cancel for it: a remote jobs service
  // that never answers would hold this thread, and a stop of the gateway, for good
  // (helper-73).
  CancelOnStop([ctx] { ctx->TryCancel(); });
  std::shared_ptr<grpc::ClientReader<v1::TrainJobEvent>> reader(stub->WatchTrainJobs(ctx.get(), req).release());
  // The server sends its headers once it accepted the watch; before that, a refusal (not
  // found, a bad cursor, no token) is the call's status, answered as the REST envelope.
  reader->WaitForInitialMetadata();
  if (ctx->GetServerInitialMetadata().count("jc-watch") == 0) {
    v1::TrainJobEvent ignored;
    while (reader->Read(&ignored)) {
    }
    grpc::Status status = reader->Finish();
    // Cancelled here only by the gateway's stop (CancelOnStop): the server's doing, so the
    // client is told to come back (503), as when a watch it holds ends with a stop.
    absl::Status refused =
        status.ok() ? absl::UnavailableError("the watch ended before it started")
        : status.error_code() == grpc::StatusCode::CANCELLED
            ? absl::UnavailableError("the server is stopping: watch again, from the last event you got")
            : FromGrpcStatus(status);
    return RestResult{refused, ""};
  }
  RestResult result{absl::OkStatus(), "", "text/event-stream"};
  result.cancel = [ctx] { ctx->TryCancel(); };
  result.stream = [ctx, reader, heartbeat = absl::Seconds(heartbeat)](httplib::DataSink& sink) {
    auto send = [&sink](const std::string& text) { return sink.is_writable() && sink.write(text.data(), text.size()); };
    if (!send("retry: 2000\n\n")) return ctx->TryCancel();
    absl::Time last_told = absl::Now();  // the last event or heartbeat the client got
    v1::TrainJobEvent event;
    while (reader->Read(&event)) {
      std::string frame;
      if (event.type() == v1::TrainJobEvent::HEARTBEAT) {
        if (heartbeat > absl::ZeroDuration() && absl::Now() - last_told >= heartbeat - absl::Milliseconds(100)) {
          frame = absl::StrCat(": heartbeat ", event.revision(), "\n\n");
          last_told = absl::Now();
        } else {
          frame = ":\n\n";  // only to learn whether the client is still there
        }
      } else {
        last_told = absl::Now();
        auto json = ProtoToJson(event, JsonNames::kCamelCase, /*print_defaults=*/false);
        if (!json.ok()) continue;
        std::string type = absl::AsciiStrToLower(v1::TrainJobEvent::Type_Name(event.type()));
        frame = absl::StrCat("id: ", event.revision(), "\nevent: ", type, "\ndata: ", *json, "\n\n");
      }
      if (!send(frame)) {
        ctx->TryCancel();  // the client went away
        break;
      }
    }
    grpc::Status status = reader->Finish();
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      absl::Status why = FromGrpcStatus(status);
      send(absl::StrCat("event: error\ndata: {\"code\":\"", absl::StatusCodeToString(why.code()),
                        "\",\"errorMsg\":", nlohmann::json(std::string(why.message())).dump(), "}\n\n"));
    }
  };
  return result;
}

}  // namespace

std::vector<Route> TrainJobEventRoutes(std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<v1::JobService::Stub> stub = v1::JobService::NewStub(channel);
  constexpr auto kCamel = JsonNames::kCamelCase;
  const std::vector<QueryParam> query = {
      {"since", "string",
       "resume after this event id (revision); the Last-Event-ID header takes its place when sent. "
       "Absent or 0: a snapshot first"},
      {"heartbeatSeconds", "integer", "a comment line after this many quiet seconds (default 15, 0 for none)"},
      {"history", "boolean",
       "one job only: true sends its past events from CREATED (as kept) instead of the snapshot; a job that "
       "ended tells its whole story up to ENDED"}};
  std::vector<Route> routes;
  Route one{"GET", "/openapi/v1/trainjob/{jobId}/events", "trainjob",
            "A job's events as Server-Sent Events (text/event-stream): a snapshot, then each change as it "
            "commits; the stream ends after the job ended. Resumable with Last-Event-ID",
            nullptr, v1::TrainJobEvent::descriptor(), kCamel, query,
            [stub](const httplib::Request& r, const std::vector<std::string>& p) { return Watch(stub.get(), r, p[0]); }};
  one.event_stream = true;
  routes.push_back(std::move(one));
  Route all{"GET", "/openapi/v1/trainjobs/events", "trainjob",
            "Events of every job the caller may see, as Server-Sent Events: a snapshot of the jobs not ended, "
            "then each change as it commits. Resumable with Last-Event-ID",
            nullptr, v1::TrainJobEvent::descriptor(), kCamel, query,
            [stub](const httplib::Request& r, const std::vector<std::string>&) { return Watch(stub.get(), r, ""); }};
  all.event_stream = true;
  routes.push_back(std::move(all));
  return routes;
}

}  // namespace jc::gateway
