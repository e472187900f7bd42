// jc-adapter-native: connects a center run by the bundled executor (nexec) to Jointcloud.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "adapters/native/nexec_backend.h"
#include "adapters/sdk/run_adapter.h"
#include "executor/client/master_list.h"

ABSL_FLAG(std::string, nexec_master, "127.0.0.1:6800",
          "gRPC address of nexec-master, or of every master (A,B,C: one leads, the others stand by)");
ABSL_FLAG(std::string, queue, "", "nexec queue for Jointcloud's replicas (default: the master's)");
ABSL_FLAG(std::string, nexec_auth, "munge", "how calls to nexec-master are signed: munge, or none (a master run with --auth=none)");
ABSL_FLAG(std::string, nexec_master_account, "",
          "the account(s) nexec-master runs as, uids or names, comma-separated: its answers count only when signed "
          "by one of them or root (default: $NEXEC_MASTER_UID, else this adapter's own account and \"nexec\")");
ABSL_FLAG(std::string, munge_socket, "", "munged's socket (default: $NEXEC_MUNGE_SOCKET, else munge's own)");

int main(int argc, char** argv) {
  auto options = jc::adapter::ParseAdapterFlags(
      argc, argv, "jc-adapter-native --center_config=center.yaml --nexec_master=127.0.0.1:6800");
  auto auth = jc::nexec::MungeAuthFromFlags(absl::GetFlag(FLAGS_nexec_auth), absl::GetFlag(FLAGS_munge_socket));
  if (!auth.ok()) {
    std::fprintf(stderr, "jc-adapter-native: %s\n", std::string(auth.status().message()).c_str());
    return 2;
  }
  // A list that names something other than a nexec master is a mistake, said now; a master
  // that does not answer may be a standby that is down.
  auto masters = jc::nexec::MasterList::Parse(absl::GetFlag(FLAGS_nexec_master));
  auto accounts = jc::nexec::MasterList::MasterAccounts(absl::GetFlag(FLAGS_nexec_master_account));
  if (!accounts.ok()) {
    std::fprintf(stderr, "jc-adapter-native: --nexec_master_account: %s\n", std::string(accounts.status().message()).c_str());
    return 2;
  }
  if (masters.ok()) (*masters)->Prove(*auth, *accounts);
  absl::Status checked = masters.ok() ? (*masters)->Check(absl::Seconds(2)) : masters.status();
  if (!checked.ok()) {
    std::fprintf(stderr, "jc-adapter-native: --nexec_master: %s\n", std::string(checked.message()).c_str());
    return 2;
  }
  jc::adapter::NexecBackend backend(absl::GetFlag(FLAGS_nexec_master), absl::GetFlag(FLAGS_queue), *auth,
                                    absl::GetFlag(FLAGS_nexec_master_account));
  return jc::adapter::RunAdapter(backend, options);
}
