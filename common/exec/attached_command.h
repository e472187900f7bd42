#pragma once

// A command attached to an exec stream (SPEC A17; exec_stream.h): started on pipes or a
// pseudo-terminal, its output and exit status sent to its caller as frames, the caller's
// input, sizes and end of input written to it, until it exits and its output is out, or
// its caller goes (its process group is then ended: SIGHUP and SIGTERM, SIGKILL 5 s later).
// Shared by the adapters (`jcctl job exec` through a center's adapter) and nexec's agent
// (`nexec exec`, and the native adapter's commands): each gives its own transport.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::exec_stream {

// What to start, and how.
struct CommandPlan {
  std::vector<std::string> argv;  // argv[0] looked up in the plan's PATH (env)
  std::vector<std::string> env;   // "NAME=value"
  std::string cwd;                // entered by the command (as `identity`); empty: /
  std::vector<std::string> cwd_fallbacks;  // tried in turn when `cwd` cannot be entered
  // The account it runs as: the child takes these ids before it enters `cwd`, so a
  // directory its account may not enter is refused, never entered by this process's
  // privileges. nullopt: this process's own.
  struct Identity {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
  };
  std::optional<Identity> identity;
  // Run first in the child, between fork and exec, as this process (before `identity`):
  // async-signal-safe, 0 or -1 with errno set. nexec's agent moves the child into its
  // task's cgroup here, so the command is contained, limited and ended with the task.
  std::function<int()> in_child;
  // How long the command may take from the fork to its exec (entering `cwd` can wait on a
  // file system that never answers; its account can stop it): past it, it is killed and the
  // start fails saying so. nexec's agent gives its --task_start_timeout.
  std::chrono::milliseconds start_limit{10'000};
  // Called with a child killed at start_limit that has not ended: it may be in an
  // uninterruptible wait, so it is waited for only if it ends within a moment, else handed
  // over (nexec's agent counts it against its account). Unset: it is reaped when it ends, by
  // a thread of its own.
  std::function<void(pid_t)> reap_stuck;
};

// A started command: its pid (the leader of a session and process group of its own) and
// this process's ends of its standard streams. With a terminal, `input` and `output` are
// the same fd (the terminal's master side) and `errors` is -1.
struct AttachedCommand {
  pid_t pid = -1;
  int input = -1;
  int output = -1;
  int errors = -1;
  bool tty = false;
};

// Starts `plan`; `rows` and `cols` size its terminal (0: 24x80). FailedPrecondition when
// the program cannot be run or its directory entered, saying why. Ignores SIGPIPE in this
// process from the first call on (input written to a command that closed its stdin is an
// error, not the signal that would end a daemon); the command gets the default back.
absl::StatusOr<AttachedCommand> StartAttached(const CommandPlan& plan, bool tty, int rows, int cols);

// Starts killed at their start_limit and left to a thread of their own (no reap_stuck) that
// still wait in the kernel; with kMaxStuckStarts of them StartAttached refuses (UNAVAILABLE)
// until some end. SetMaxStuckStarts: for tests.
inline constexpr int kMaxStuckStarts = 64;
int StuckStarts();
void SetMaxStuckStarts(int most);

// The caller's side of one command's stream, as a transport sees it. Send and Close are
// called from one thread, Receive from another, Cancelled from both.
class ExecPeer {
 public:
  virtual ~ExecPeer() = default;
  // Tells the caller the command started; false when it is gone.
  virtual bool Started() = 0;
  // Exec-stream bytes for the caller; false when it is gone.
  virtual bool Send(std::string bytes) = 0;
  // The last word after the exit frame (the caller's stream ends).
  virtual void Close() = 0;
  // The caller's next exec-stream bytes; `closed` set when it says it sends no more
  // input. False once it sends nothing more at all.
  virtual bool Receive(std::string* bytes, bool* closed) = 0;
  // Whether the caller went away.
  virtual bool Cancelled() = 0;
  // The command's side is done (its exit status sent); the caller should now end its
  // stream, and a transport may end it for a caller that does not (its Receive then
  // ends). From the thread that sends.
  virtual void Finished() {}
};

// Says the command started, then pumps the exec stream both ways and sends its exit status
// last. Returns once the command ended (or was ended) and every fd is closed. The command
// is ended when its caller goes, or once `still_running` (asked every second; may be
// empty) says what it runs in no longer runs; when it exits, whatever it left in its
// process group is killed.
void PumpAttached(AttachedCommand command, ExecPeer& peer, const std::function<bool()>& still_running);

}  // namespace jc::exec_stream
