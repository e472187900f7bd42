// jcctl's commands that hold a connection to a running replica (SPEC A17): `job exec` runs a
// command in it, `job port-forward` carries a local port's connections to one of its named
// ports. Both go through the endpoint listener, as the job's project's members, never to
// the center directly (listener_conn.h).

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "common/send_all.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/exec/exec_client.h"
#include "common/exec/exec_stream.h"
#include "tools/jcctl/command_kit.h"
#include "tools/jcctl/listener_conn.h"

namespace jc::jcctl {
namespace {

using nlohmann::json;
namespace es = exec_stream;

const std::string kJobs = "/openapi/v1/trainjob";

absl::StatusOr<int> Index(const Invocation& inv, const std::string& flag) {
  int value = 0;
  if (!absl::SimpleAtoi(inv.Get(flag, "0"), &value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", inv.Get(flag), "\" is not an index"));
  }
  return value;
}

int Exec(Context& ctx, Client* client, const Invocation& inv) {
  auto task = Index(inv, "task");
  if (!task.ok()) return ctx.Fail(task.status());
  auto replica = Index(inv, "replica");
  if (!replica.ok()) return ctx.Fail(replica.status());
  std::vector<std::string> command(inv.args.begin() + 1, inv.args.end());
  if (!command.empty() && command[0] == "--") command.erase(command.begin());
  if (command.empty()) {
    return ctx.Fail(absl::InvalidArgumentError("the command to run: jcctl job exec JOB -- COMMAND [ARG...]"));
  }
  const bool input = inv.Has("stdin") || inv.Has("it");
  const bool tty = inv.Has("tty") || inv.Has("it");
  json body = {{"taskIndex", *task}, {"replicaIndex", *replica}, {"exec", {{"command", command}, {"tty", tty}}}};
  auto opened = client->Call("POST", kJobs + "/" + Escape(inv.args[0]) + "/open", &body);
  if (!opened.ok()) return ctx.Fail(opened.status());
  auto link = ParseLink(opened->value("url", ""), client->ca_file());
  if (!link.ok()) return ctx.Fail(link.status());
  std::string target = link->target;
  if (tty) {
    if (auto size = es::TerminalSize()) absl::StrAppend(&target, "&rows=", size->first, "&cols=", size->second);
  }
  std::string early;
  auto listener = Switch(*link, target, "jointcloud-exec", "", &early);
  if (!listener.ok()) return ctx.Fail(listener.status());
  ListenerConn& conn = **listener;
  es::ClientLink stream;
  stream.send = [&](const std::string& bytes) { return conn.Send(bytes); };
  stream.receive = [&](std::string* bytes) {
    if (!early.empty()) {
      bytes->swap(early);
      early.clear();
      return true;
    }
    char chunk[64 << 10];
    ssize_t n = conn.Receive(chunk, sizeof chunk);
    if (n <= 0) return false;
    bytes->assign(chunk, static_cast<size_t>(n));
    return true;
  };
  stream.stop = [&] { conn.Shutdown(); };
  auto status = es::RunExecClient(stream, input, tty, ctx.out(), ctx.err());
  if (!status.ok()) return ctx.Fail(status.status());
  return *status;
}

int PortForward(Context& ctx, Client* client, const Invocation& inv) {
  auto task = Index(inv, "task");
  if (!task.ok()) return ctx.Fail(task.status());
  auto replica = Index(inv, "replica");
  if (!replica.ok()) return ctx.Fail(replica.status());
  // [LOCAL:]NAME
  std::string spec = inv.args[1], port_name = spec;
  int local = 0;
  if (size_t colon = spec.rfind(':'); colon != std::string::npos) {
    port_name = spec.substr(colon + 1);
    if (!absl::SimpleAtoi(spec.substr(0, colon), &local) || local < 0 || local > 65535) {
      return ctx.Fail(absl::InvalidArgumentError(
          absl::StrCat("\"", spec, "\": [LOCAL:]PORT, LOCAL a port number (0: any free one), PORT the port's name")));
    }
  }
  if (port_name.empty()) return ctx.Fail(absl::InvalidArgumentError("the name of the port to forward to"));
  const bool all = inv.Has("all");
  json body = {{"taskIndex", *task}, {"replicaIndex", *replica}, {"portName", port_name}, {"allReplicas", all}};
  auto opened = client->Call("POST", kJobs + "/" + Escape(inv.args[0]) + "/open", &body);
  if (!opened.ok()) return ctx.Fail(opened.status());
  auto link = ParseLink(opened->value("url", ""), client->ca_file());
  if (!link.ok()) return ctx.Fail(link.status());
  auto cookie = OpenSession(*link);
  if (!cookie.ok()) return ctx.Fail(cookie.status());

  const std::string address = inv.Get("address", "127.0.0.1");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), std::to_string(local).c_str(), &hints, &found) != 0 || found == nullptr) {
    return ctx.Fail(absl::InvalidArgumentError(absl::StrCat("address: \"", address, "\" is not an IP address")));
  }
  int listener = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool bound = listener >= 0 && ::bind(listener, found->ai_addr, found->ai_addrlen) == 0 && ::listen(listener, 64) == 0;
  ::freeaddrinfo(found);
  if (!bound) {
    int saved = errno;
    if (listener >= 0) ::close(listener);
    return ctx.Fail(absl::UnavailableError(absl::StrCat("cannot listen on ", address, ":", local, ": ", std::strerror(saved))));
  }
  sockaddr_storage bound_addr{};
  socklen_t len = sizeof bound_addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&bound_addr), &len);
  int port = ntohs(bound_addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound_addr)->sin6_port
                                                    : reinterpret_cast<sockaddr_in*>(&bound_addr)->sin_port);
  ctx.out() << "Forwarding from " << (address.find(':') != std::string::npos ? "[" + address + "]" : address) << ":"
            << port << " -> " << inv.args[0] << " task " << *task << " "
            << (all ? std::string("(its ready replicas in turn)") : absl::StrCat("replica ", *replica)) << " port "
            << port_name << std::endl;

  // Each connection to the local port is one through the listener, on a thread of its own.
  // A refusal that says the caller may not (its token revoked, no member any more) ends
  // jcctl; others end that connection only. The threads outlive this function (detached),
  // so what they share is owned with them, and once it returns they no longer write to
  // ctx, which is the caller's (helper-73: they used this frame's locals after it ended).
  struct Shared {
    std::atomic<int> fatal{0};
    std::mutex err_mu;
    bool returned = false;  // under err_mu: ctx may be gone
  };
  auto shared = std::make_shared<Shared>();
  while (shared->fatal.load() == 0) {
    int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (shared->fatal.load() != 0) break;
      std::lock_guard<std::mutex> lock(shared->err_mu);
      shared->returned = true;
      ::close(listener);
      return ctx.Fail(absl::UnavailableError(absl::StrCat("accept: ", std::strerror(errno))));
    }
    std::thread([&ctx, shared, listener, conn, link = *link, session = *cookie] {
      std::string early;
      auto up = Switch(link, "/.jointcloud/forward", "jointcloud-forward", session, &early);
      if (!up.ok()) {
        ::close(conn);
        std::lock_guard<std::mutex> lock(shared->err_mu);
        if (shared->returned) return;
        ctx.err() << "jcctl: a connection was refused: " << up.status().message() << std::endl;
        if (absl::IsPermissionDenied(up.status()) || absl::IsUnauthenticated(up.status()) ||
            absl::IsNotFound(up.status())) {
          if (shared->fatal.exchange(ExitCode(up.status())) == 0) ::shutdown(listener, SHUT_RDWR);
        }
        return;
      }
      if (early.empty() || SendAll(conn, early)) Splice(conn, **up);
      ::close(conn);
    }).detach();
  }
  {
    std::lock_guard<std::mutex> lock(shared->err_mu);
    shared->returned = true;
  }
  ::close(listener);
  return shared->fatal.load();
}

}  // namespace

std::vector<CommandSpec> SessionCommands() {
  std::vector<CommandSpec> c;
  c.push_back({{"job", "exec"}, "JOB -- COMMAND [ARG...]",
               "Runs a command in a running replica, in its image and as its account, for the job's submitter "
               "(audited): its output comes here and its exit status is jcctl's. Use -it for a shell",
               {{"task", 0, true, "task index (default 0)"},
                {"replica", 0, true, "replica index (default 0)"},
                {"stdin", 'i', false, "pass this terminal's input to the command (else it reads nothing)"},
                {"tty", 't', false, "run it on a terminal (output and errors then come as one)"},
                {"it", 0, false, "-i and -t: an interactive shell", true}},
               2, 1 + static_cast<int>(es::kMaxArgs) + 1, WithClient(Exec)});
  c.push_back({{"job", "port-forward"}, "JOB [LOCAL:]PORT",
               "Forwards a local port to a running replica's named port through the endpoint listener, for members "
               "of the job's project: each connection to 127.0.0.1:LOCAL (0 or left out: any free port, printed) "
               "reaches PORT. Runs until interrupted",
               {{"task", 0, true, "task index (default 0)"},
                {"replica", 0, true, "replica index (default 0)"},
                {"all", 0, false, "the task's endpoint: each connection goes to one of its ready replicas in turn"},
                {"address", 0, true, "the local address to listen on (default 127.0.0.1)"}},
               2, 2, WithClient(PortForward)});
  return c;
}

}  // namespace jc::jcctl
