#include "executor/cli/exec_command.h"

#include <grpcpp/grpcpp.h>

#include <iostream>

#include "common/exec/exec_client.h"
#include "executor/auth/munge_auth.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

int RunExec(pb::Master::Stub* stub, const MungeAuth& auth, int64_t job_id, int32_t task_index,
            std::vector<std::string> command, bool input, bool tty) {
  auto fail = [](const std::string& message) {
    std::cerr << "nexec: exec: " << message << "\n";
    return 1;
  };
  pb::ExecFrame first;
  pb::ExecStart* start = first.mutable_start();
  start->set_job_id(job_id);
  start->set_task_index(task_index);
  for (auto& arg : command) start->add_command(std::move(arg));
  start->set_tty(tty);
  if (tty) {
    if (auto size = exec_stream::TerminalSize()) {
      start->set_rows(size->first);
      start->set_cols(size->second);
    }
  }
  grpc::ClientContext ctx;  // no deadline: a shell lasts as long as its user wants
  if (absl::Status s = auth.Sign(&ctx, "Exec", first); !s.ok()) return fail(std::string(s.message()));
  auto stream = stub->Exec(&ctx);
  pb::ExecFrame answer;
  if (!stream->Write(first) || !stream->Read(&answer)) {
    stream->WritesDone();
    grpc::Status s = stream->Finish();
    return fail(s.ok() ? "the master ended the stream before the command started" : s.error_message());
  }
  exec_stream::ClientLink link;
  link.send = [&](const std::string& bytes) {
    pb::ExecFrame frame;
    frame.set_data(bytes);
    return stream->Write(frame);
  };
  link.receive = [&](std::string* bytes) {
    pb::ExecFrame frame;
    while (stream->Read(&frame)) {
      if (frame.data().empty()) continue;
      *bytes = std::move(*frame.mutable_data());
      return true;
    }
    return false;
  };
  // Once the exit status came (or the stream ended) nothing more is sent or read.
  link.stop = [&] { ctx.TryCancel(); };
  auto status = exec_stream::RunExecClient(link, input, tty, std::cout, std::cerr);
  grpc::Status finished = stream->Finish();
  if (!status.ok()) {
    return fail(finished.ok() || finished.error_code() == grpc::StatusCode::CANCELLED
                    ? std::string(status.status().message())
                    : finished.error_message());
  }
  return *status;
}

}  // namespace jc::nexec
