#include "common/exec/exec_client.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <thread>

#include "common/exec/exec_stream.h"

namespace jc::exec_stream {
namespace {

volatile std::sig_atomic_t resized = 0;
void OnResize(int) { resized = 1; }

// This terminal in raw mode (every key to the command, ^C included) while it lives.
class RawTerminal {
 public:
  explicit RawTerminal(bool on) {
    if (!on || ::tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(0, TCSANOW, &saved_);
  }

 private:
  termios saved_{};
  bool active_ = false;
};

}  // namespace

std::optional<std::pair<int, int>> TerminalSize() {
  winsize ws{};
  for (int fd : {0, 1, 2}) {
    if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) return std::make_pair(+ws.ws_row, +ws.ws_col);
  }
  return std::nullopt;
}

absl::StatusOr<int> RunExecClient(const ClientLink& link, bool input, bool tty, std::ostream& out, std::ostream& err) {
  if (tty && input && !::isatty(0)) err << "input is not a terminal: it is passed as it comes\n";
  if (tty) {
    struct sigaction sa {};
    sa.sa_handler = OnResize;
    ::sigaction(SIGWINCH, &sa, nullptr);
  }
  // The command's stream, on another thread: its output here, its exit status ours.
  std::atomic<bool> done{false};
  std::optional<int> status;
  std::string broken;
  std::thread reader([&] {
    Decoder decoder;
    std::string bytes;
    while (!status.has_value()) {
      while (auto frame = decoder.Next()) {
        if (frame->type == Type::kStdout) {
          out.write(frame->payload.data(), static_cast<std::streamsize>(frame->payload.size()));
          out.flush();
        } else if (frame->type == Type::kStderr) {
          err.write(frame->payload.data(), static_cast<std::streamsize>(frame->payload.size()));
          err.flush();
        } else if (frame->type == Type::kExit) {
          status = ParseExit(frame->payload).value_or(255);
          break;
        }
      }
      if (status.has_value()) break;
      if (decoder.broken()) {
        broken = std::string(decoder.error().message());
        break;
      }
      bytes.clear();
      if (!link.receive(&bytes)) break;
      decoder.Feed(bytes);
    }
    done = true;
    link.stop();
  });

  {
    RawTerminal raw(tty && input && ::isatty(0));
    bool input_open = input;
    if (!input_open) link.send(Encode(Type::kStdinEnd, ""));
    char chunk[16 << 10];
    while (!done.load()) {
      if (resized) {
        resized = 0;
        if (auto size = TerminalSize()) link.send(EncodeResize(size->first, size->second));
      }
      pollfd p{0, POLLIN, 0};
      int ready = ::poll(&p, input_open ? 1 : 0, 200);
      if (ready <= 0 || !input_open) continue;
      ssize_t n = ::read(0, chunk, sizeof chunk);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      bool ok = true;
      if (n <= 0) {
        input_open = false;
        ok = link.send(Encode(Type::kStdinEnd, ""));
      } else {
        ok = link.send(EncodeData(Type::kStdin, absl::string_view(chunk, static_cast<size_t>(n))));
      }
      if (!ok) break;
    }
  }
  reader.join();
  if (!status.has_value()) {
    return absl::UnavailableError(broken.empty() ? "the connection to the command ended before its exit status came"
                                                 : broken);
  }
  return *status < 0 || *status > 255 ? 255 : *status;
}

}  // namespace jc::exec_stream
