#include "adapters/sdk/exec_session.h"

#include <atomic>
#include <thread>

#include "common/exec/exec_stream.h"
#include "jointcloud/adapter/v1/adapter.grpc.pb.h"  // the frames' serialization

namespace jc::adapter {
namespace {

namespace pb = ::jointcloud::adapter::v1;
using Stream = grpc::ServerReaderWriter<pb::TunnelFrame, pb::TunnelFrame>;

// The tunnel's stream as the command's caller.
class TunnelPeer final : public exec_stream::ExecPeer {
 public:
  TunnelPeer(grpc::ServerContext* ctx, Stream* stream) : ctx_(ctx), stream_(stream) {}
  bool Started() override {
    pb::TunnelFrame frame;
    frame.set_connected(true);
    return stream_->Write(frame);
  }
  bool Send(std::string bytes) override {
    pb::TunnelFrame frame;
    frame.set_data(std::move(bytes));
    return stream_->Write(frame);
  }
  void Close() override {
    pb::TunnelFrame frame;
    frame.set_close(true);
    stream_->Write(frame);
  }
  bool Receive(std::string* bytes, bool* closed) override {
    pb::TunnelFrame frame;
    if (!stream_->Read(&frame)) return false;
    *bytes = std::move(*frame.mutable_data());
    *closed = frame.close();
    return true;
  }
  bool Cancelled() override { return ctx_->IsCancelled(); }

 private:
  grpc::ServerContext* ctx_;
  Stream* stream_;
};

}  // namespace

absl::StatusOr<AttachedCommand> StartAttached(const ExecPlan& plan, bool tty, int rows, int cols) {
  exec_stream::CommandPlan command;
  command.argv = plan.argv;
  command.env = plan.env;
  command.cwd = plan.cwd;
  return exec_stream::StartAttached(command, tty, rows, cols);
}

void PumpExec(AttachedCommand command, grpc::ServerContext* ctx, Stream* stream,
              const std::function<bool()>& replica_running) {
  TunnelPeer peer(ctx, stream);
  exec_stream::PumpAttached(command, peer, replica_running);
}

void PumpRelay(ExecRelay& relay, grpc::ServerContext* ctx, Stream* stream) {
  TunnelPeer peer(ctx, stream);
  std::atomic<bool> command_side_done{false};
  bool caller_there = peer.Started();
  // The command's side to the caller; only this thread writes to the tunnel.
  // The stream is read for its exit frame only: the command's side says all it will with
  // it, and its stream is then let go (a relay's other end waits for ours to end first).
  std::thread back([&] {
    std::string bytes;
    bool there = caller_there;
    bool exited = false;
    exec_stream::Decoder decoder;
    while (!exited && relay.Read(&bytes)) {
      if (!decoder.broken()) {
        decoder.Feed(bytes);
        while (auto frame = decoder.Next()) exited = exited || frame->type == exec_stream::Type::kExit;
      }
      if (there && !peer.Send(std::move(bytes))) {
        there = false;
        relay.Cancel();
      }
      bytes.clear();
    }
    if (exited) relay.Cancel();
    if (there) peer.Close();
    command_side_done = true;
  });
  if (!caller_there) relay.Cancel();
  std::string bytes;
  bool closed = false;
  bool input_open = true;
  while (!command_side_done.load()) {
    bytes.clear();
    closed = false;
    if (!peer.Receive(&bytes, &closed)) break;
    if (!bytes.empty() && !relay.Write(bytes)) break;
    // The end of the tunnel's input is the end of the command's (as PumpAttached takes it).
    if (closed && input_open) {
      input_open = false;
      if (!relay.Write(exec_stream::Encode(exec_stream::Type::kStdinEnd, ""))) break;
    }
  }
  // The caller sends no more: gone before the command ended, it ends the command.
  if (!command_side_done.load()) relay.Cancel();
  back.join();
}

}  // namespace jc::adapter
