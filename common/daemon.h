#pragma once

// What every long-running process (jointcloud, the adapters, nexec-master, nexec-agent)
// does around its own work, written once (issue 32 item 4): the command line with usage and
// --version, logging from --log_level and --log_format, the stop signals blocked before any
// thread starts so that only the main thread takes them, the admin server (/metrics,
// /healthz, /readyz), and waiting for SIGINT or SIGTERM with SIGHUP as "reload".

#include <signal.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/admin_server.h"

namespace prometheus {
class Registry;
}

namespace jc::daemon {

// Sets the usage message and --version (as `name`), parses the command line, turns off
// Abseil's mutex deadlock detection (Debian's build has it on: it costs gRPC's every lock
// a graph update), starts logging (a bad --log_level or --log_format: the reason on stderr,
// exit 2), and blocks the stop signals (BlockStopSignals). Returns what ParseCommandLine
// left (argv[0] and the positional arguments).
std::vector<char*> Begin(const std::string& name, const char* usage, int argc, char** argv);

// Blocks SIGINT and SIGTERM, and SIGHUP when `reloads`, in this thread and every thread it
// starts from now on: they wait for WaitForStop on the main thread, so shutdown runs there,
// in order. (SIGHUP is blocked in any case: an unexpected one must not kill the daemon.)
void BlockStopSignals();

// Waits for SIGINT or SIGTERM and returns it (logged). Each SIGHUP meanwhile calls `reload`,
// or is logged as ignored when there is none.
int WaitForStop(const std::string& name, const std::function<void()>& reload = {});

// Waits at most `wait` for SIGINT or SIGTERM: the signal, or 0 when none came (a SIGHUP
// meanwhile is logged as ignored). For a main thread that waits on something else too (a
// standby waiting for its lease).
int PollStop(const std::string& name, absl::Duration wait);

// /metrics, /healthz and /readyz at `address` (host:port; port 0: any) for `registry`,
// ready when `ready` says so; null when `address` is empty. The bound port is logged.
absl::StatusOr<std::unique_ptr<AdminServer>> ServeAdmin(const std::string& name, const std::string& address,
                                                        std::shared_ptr<prometheus::Registry> registry,
                                                        std::function<absl::Status()> ready);

}  // namespace jc::daemon
