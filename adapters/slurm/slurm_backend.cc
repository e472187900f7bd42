#include "adapters/slurm/slurm_backend.h"

#include <fcntl.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pwd.h>

#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "adapters/sdk/file_range.h"
#include "absl/strings/str_replace.h"
#include "adapters/slurm/command.h"
#include "common/oci/image_reference.h"
#include "common/status_macros.h"
#include "executor/container/container_bundle.h"
#include "executor/container/gpu_container_edits.h"

namespace jc::adapter {
namespace fs = std::filesystem;
namespace {

// squeue and sacct take at most this many job ids a call, to keep command lines short.
constexpr size_t kIdsPerCall = 500;

std::string ShellQuote(absl::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

bool IsEnvName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool IsJobId(absl::string_view id) {
  int64_t n = 0;
  return !id.empty() && absl::SimpleAtoi(id, &n) && n > 0;
}

// An account's uid and gid, by name.
absl::StatusOr<std::pair<uid_t, gid_t>> AccountIds(const std::string& name) {
  passwd pw;
  passwd* found = nullptr;
  char buf[16384];
  if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no local account \"", name, "\" on the adapter's host"));
  }
  return std::pair<uid_t, gid_t>{found->pw_uid, found->pw_gid};
}

std::string CurrentUser() {
  passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : "";
}

// A failed Slurm command -> a status a caller can act on.
absl::Status CommandError(const std::vector<std::string>& argv, const CommandResult& r) {
  std::string what = std::string(absl::StripAsciiWhitespace(r.err.empty() ? r.out : r.err));
  std::string msg = absl::StrCat(argv[0], " failed (exit ", r.exit_code, "): ", what);
  for (const char* transient : {"Unable to contact slurm controller", "Socket timed out",
                                "Zero Bytes were transmitted", "Connection refused",
                                "Slurm temporarily unable"}) {
    if (absl::StrContains(what, transient)) return absl::UnavailableError(msg);
  }
  return absl::FailedPreconditionError(msg);
}

}  // namespace

std::vector<std::string> SbatchResourceArgs(const pb::SpecOffer& spec) {
  const auto& q = spec.quantity();
  std::vector<std::string> args = {"--ntasks=1",
                                   absl::StrCat("--cpus-per-task=", std::max(1, static_cast<int>(std::ceil(q.cpu()))))};
  if (q.memory_mb() > 0) args.push_back(absl::StrCat("--mem=", static_cast<int64_t>(std::ceil(q.memory_mb()))));
  std::vector<std::string> gres;
  if (q.gpu() > 0) gres.push_back(absl::StrCat("gpu:", q.gpu()));
  if (q.npu() > 0) gres.push_back(absl::StrCat("npu:", q.npu()));
  if (q.mlu() > 0) gres.push_back(absl::StrCat("mlu:", q.mlu()));
  if (!gres.empty()) args.push_back(absl::StrCat("--gres=", absl::StrJoin(gres, ",")));
  return args;
}

std::string SbatchTimeArg(absl::Duration limit) {
  if (limit <= absl::ZeroDuration()) return "";
  // Whole minutes, rounded up (--time=MM): a limit is never shortened.
  const int64_t minutes = absl::ToInt64Minutes(absl::Ceil(limit, absl::Minutes(1)));
  return absl::StrCat("--time=", std::max<int64_t>(minutes, 1));
}

SlurmBackend::SlurmBackend(SlurmOptions options) : options_(std::move(options)) {
  std::error_code ec;
  fs::create_directories(options_.log_dir, ec);
}

absl::StatusOr<std::string> SlurmBackend::Slurm(const std::vector<std::string>& argv) {
  JC_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, options_.command_timeout));
  if (r.exit_code != 0) return CommandError(argv, r);
  return std::move(r.out);
}

absl::StatusOr<SlurmNodeTotals> SlurmBackend::Nodes() {
  std::vector<std::string> argv = {"sinfo", "-N", "-h", "-O",
                                   "NodeHost:|,CPUsState:|,Memory:|,AllocMem:|,Gres:|,GresUsed:|,StateLong:|"};
  if (!options_.partition.empty()) argv.push_back("--partition=" + options_.partition);
  JC_ASSIGN_OR_RETURN(std::string out, Slurm(argv));
  return ParseSinfoNodes(out);
}

absl::StatusOr<pb::CenterInfo> SlurmBackend::Describe() {
  JC_ASSIGN_OR_RETURN(SlurmNodeTotals t, Nodes());
  pb::CenterInfo info;
  info.set_scheduler("slurm");
  info.mutable_capacity()->set_cpu(t.cpu_total);
  info.mutable_capacity()->set_gpu(t.gpu_total);
  info.mutable_capacity()->set_memory(static_cast<int>(t.memory_mb));
  return info;
}

absl::StatusOr<pb::Usage> SlurmBackend::GetUsage() {
  JC_ASSIGN_OR_RETURN(SlurmNodeTotals t, Nodes());
  std::vector<std::string> argv = {"squeue", "-h", "-o", "%T"};
  if (!options_.partition.empty()) argv.push_back("--partition=" + options_.partition);
  JC_ASSIGN_OR_RETURN(std::string states, Slurm(argv));
  const SqueueCounts counts = ParseSqueueStates(states);
  pb::Usage u;
  u.set_running_task_num(static_cast<int32_t>(std::min<int64_t>(counts.running, INT32_MAX)));
  u.set_waiting_task_num(static_cast<int32_t>(std::min<int64_t>(counts.waiting, INT32_MAX)));
  u.mutable_used()->set_cpu(t.cpu_alloc);
  u.mutable_free()->set_cpu(t.cpu_total - t.cpu_alloc);
  u.mutable_used()->set_gpu(t.gpu_alloc);
  u.mutable_free()->set_gpu(t.gpu_total - t.gpu_alloc);
  u.mutable_used()->set_memory(static_cast<int>(t.memory_alloc_mb));
  u.mutable_free()->set_memory(static_cast<int>(t.memory_mb - t.memory_alloc_mb));
  return u;
}

absl::StatusOr<std::vector<pb::SpecStartEstimate>> SlurmBackend::StartEstimates(
    const std::vector<pb::SpecOffer>& specs) {
  if (specs.empty()) return std::vector<pb::SpecStartEstimate>{};
  JC_ASSIGN_OR_RETURN(SlurmNodeTotals t, Nodes());
  const std::string format(kSqueueQueueFields);
  std::vector<std::string> pending = {"squeue", "--start", "-h", "-o", format};
  std::vector<std::string> running = {"squeue", "-h", "-t", "RUNNING", "-o", format};
  if (!options_.partition.empty()) {
    pending.push_back("--partition=" + options_.partition);
    running.push_back("--partition=" + options_.partition);
  }
  const absl::Time now = absl::Now();
  JC_ASSIGN_OR_RETURN(std::string planned, Slurm(pending));
  JC_ASSIGN_OR_RETURN(std::string held, Slurm(running));
  std::vector<QueuedJob> jobs = ParseSqueueQueue(planned);
  for (QueuedJob& j : ParseSqueueQueue(held)) jobs.push_back(std::move(j));
  std::vector<pb::SpecStartEstimate> out;
  for (const auto& spec : specs) {
    const int cpus = std::max(1, static_cast<int>(std::ceil(spec.quantity().cpu())));
    std::optional<absl::Duration> wait =
        SlurmStartWait(jobs, t.cpu_total - t.cpu_alloc, t.gpu_total - t.gpu_alloc, cpus, spec.quantity().gpu(), now);
    if (!wait) continue;  // N/A: unknown
    pb::SpecStartEstimate& e = out.emplace_back();
    e.set_resource_spec_id(spec.resource_spec_id());
    e.set_wait_seconds(absl::ToDoubleSeconds(*wait));
    e.set_source("slurm squeue --start");
  }
  return out;
}

std::string ReplicaTag(const std::string& secret, const std::string& name) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(name.data()),
       name.size(), mac, &size);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string tag = "jc:";
  for (unsigned int i = 0; i < 16 && i < size; ++i) {
    tag.push_back(kHex[mac[i] >> 4]);
    tag.push_back(kHex[mac[i] & 15]);
  }
  return tag;
}

absl::StatusOr<std::string> SlurmBackend::TagSecret() {
  if (!tag_secret_.empty()) return tag_secret_;
  const std::string path = options_.tag_key_file.empty()
                               ? (fs::path(options_.log_dir) / ".jc-replica-tag.key").string()
                               : options_.tag_key_file;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) {
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1) {
      close(fd);
      return absl::InternalError("cannot draw the adapter's tag secret");
    }
    std::string hex;
    for (unsigned char c : raw) absl::StrAppend(&hex, absl::Hex(c, absl::kZeroPad2));
    const bool written = write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
    close(fd);
    if (!written) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  // Read back (made now or earlier), and only if it is the adapter's alone: a file someone
  // else made, or could read, would let them tag jobs as the adapter's.
  fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  struct stat st{};
  char buf[128];
  const ssize_t n = fstat(fd, &st) == 0 ? read(fd, buf, sizeof buf) : -1;
  close(fd);
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s must be a file of the adapter's account (uid %d) that only it can read; it belongs to uid %d with mode "
        "%04o: remove it and the adapter makes its own",
        path, geteuid(), st.st_uid, st.st_mode & 07777));
  }
  if (n < 32) return absl::FailedPreconditionError(absl::StrCat(path, " holds no secret; remove it"));
  tag_secret_.assign(buf, static_cast<size_t>(n));
  return tag_secret_;
}

absl::StatusOr<std::string> SlurmBackend::FindByName(const std::string& name) {
  JC_ASSIGN_OR_RETURN(std::string secret, TagSecret());
  const std::string tag = ReplicaTag(secret, name);
  JC_ASSIGN_OR_RETURN(std::string out,
                      Slurm({"squeue", "--states=all", "-h", "--name=" + name, "-o", "%i|%k"}));
  // Only a job carrying the tag is the replica (anyone may name a job anything); of those,
  // the oldest (a copy of the tag is only possible once the real job shows it).
  return OldestTaggedJob(out, tag);
}

absl::StatusOr<std::string> ImageScript(const SlurmOptions& options, const std::string& image,
                                        const std::string& command, uid_t uid, gid_t gid, const std::string& cwd,
                                        const std::vector<std::string>& read_only_dirs, int gpus) {
  JC_ASSIGN_OR_RETURN(auto ref, oci::ImageReference::Parse(image));
  if (ref.digest.empty()) return absl::InvalidArgumentError(absl::StrCat("image ", image, " is not named by digest"));
  const std::string store = absl::StrReplaceAll(options.image_store, {{"%u", absl::StrCat(uid)}});
  nexec::ContainerSpec spec;
  spec.rootfs = absl::StrCat(store, "/", ref.digest.substr(7), "/rootfs");
  spec.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  // The job's environment as Slurm made it on the node, read from a file bound into the
  // container (the bundle is written before the job runs; the file when it does).
  spec.command = ". /tmp/.jc-env; exec /bin/sh -c " + ShellQuote(command);
  spec.cwd = cwd;
  spec.user.uid = uid;
  spec.user.gid = gid;
  spec.user.groups = {gid};
  spec.rootless = uid != 0;
  spec.userns_helper = options.userns_helper;
  spec.cgroup = "@ID@";  // root: below the job's cgroup, named as the container
  spec.mounts.push_back({"@BUNDLE@/env", "/tmp/.jc-env", {"bind", "ro"}});
  for (const auto& dir : read_only_dirs) spec.mounts.push_back({dir, dir, {"rbind", "ro", "nosuid", "nodev"}});
  if (gpus > 0) {
    if (!spec.rootless) {
      return absl::FailedPreconditionError(
          "GPUs in images are given to Slurm jobs of ordinary accounts only (a root job's container would open any "
          "device); map the project to an account (run_as)");
    }
    // Slurm picks the GPUs when the job starts and its cgroup confines the job to them:
    // the node's /dev is bound, and the driver's files as the node has them.
    spec.host_dev = true;
    JC_ASSIGN_OR_RETURN(auto setup, nexec::GpuContainerSetup::Load(options.cdi_spec_dirs, options.gpu_driver_dir,
                                                                   "/dev/nvidia{index}"));
    if (setup.Describe() != "device nodes only") {
      JC_ASSIGN_OR_RETURN(auto edits, setup.For({0}));
      spec.gpu.mounts = edits.mounts;  // its nodes come with /dev; hooks need root
      nexec::ApplyEnv(edits.env, &spec.env);
    }
  }
  const std::string config = nexec::ContainerConfig(spec).dump();
  std::string s;
  absl::StrAppend(&s, "store=", ShellQuote(store), "\n");
  absl::StrAppend(&s, "id=jc-slurm-$SLURM_JOB_ID\n");
  // The store is the account's own: one another account made first (in a shared /var/tmp)
  // could hold a root file system of its choosing.
  absl::StrAppend(&s, "[ -d \"$store\" ] || mkdir -p -m 700 \"$store\" || exit 125\n");
  absl::StrAppend(&s, "if [ -L \"$store\" ] || [ ! -O \"$store\" ]; then echo \"jointcloud: the image store $store "
                      "is not this account's own\" >&2; exit 125; fi\n");
  absl::StrAppend(&s, "bundle=$(mktemp -d \"$store/.bundle.XXXXXX\") || exit 125\n");
  absl::StrAppend(&s, "export -p | grep -v -E '^export (PATH|LD_LIBRARY_PATH|PWD|OLDPWD|SHLVL|HOME|TMPDIR|_)=' >\"$bundle/env\"\n");
  absl::StrAppend(&s, "sed -e \"s|@BUNDLE@|$bundle|g\" -e \"s|@ID@|$id|g\" >\"$bundle/config.json\" <<'JC_CONFIG'\n", config,
                  "\nJC_CONFIG\n");
  // The runner's own configuration comes from the account's store, not from the
  // submitter's environment (sbatch passes it on: HOME may be the adapter's).
  std::string env = "HOME=\"$store\" XDG_RUNTIME_DIR=\"$store\" XDG_CONFIG_HOME=\"$store/.config\" ";
  if (!options.registry_auth_file.empty()) absl::StrAppend(&env, "NEXEC_REGISTRY_AUTH_FILE=", ShellQuote(options.registry_auth_file), " ");
  if (!options.registry_cert_dir.empty()) absl::StrAppend(&env, "NEXEC_REGISTRY_CERT_DIR=", ShellQuote(options.registry_cert_dir), " ");
  absl::StrAppend(&s, env, "NEXEC_IMAGE_PULL_TIMEOUT_S=", options.image_pull_timeout_s, " ", ShellQuote(options.image_runner),
                  " \"$store\" ", ShellQuote(ref.ToString()), " \"$bundle\" \"$id\"\n");
  absl::StrAppend(&s, "rc=$?\nrm -rf \"$bundle\"\nexit $rc\n");
  return s;
}

absl::StatusOr<std::string> SlurmBackend::Submit(const ReplicaLaunch& launch) {
  // The replica's name is the job's name: after an adapter crash the job is found again.
  JC_ASSIGN_OR_RETURN(std::string existing, FindByName(launch.name));
  if (!existing.empty()) return existing;

  std::string script = "#!/bin/sh\n";
  for (const auto& [k, v] : launch.env) {
    if (!IsEnvName(k)) return absl::InvalidArgumentError(absl::StrCat("env: \"", k, "\" is not a variable name"));
    absl::StrAppend(&script, "export ", k, "=", ShellQuote(v), "\n");
  }
  absl::StrAppend(&script, "export JC_REPLICA_NAME=", ShellQuote(launch.name), "\n");
  if (launch.image.empty()) {
    absl::StrAppend(&script, "exec /bin/sh -c ", ShellQuote(launch.command), "\n");
  } else {
    if (options_.image_runner.empty()) {
      return absl::FailedPreconditionError("this center runs commands on its hosts, not in images");
    }
    JC_ASSIGN_OR_RETURN(auto account, AccountIds(launch.user.empty() ? CurrentUser() : launch.user));
    JC_ASSIGN_OR_RETURN(std::string run, ImageScript(options_, launch.image, launch.command, account.first,
                                                     account.second, options_.log_dir, launch.read_only_dirs,
                                                     static_cast<int>(launch.spec.quantity().gpu())));
    absl::StrAppend(&script, run);
  }
  // The script goes to a file of a name nobody can guess or have planted (the log
  // directory may be writable by the accounts replicas run as), created exclusively.
  std::string script_path = (fs::path(options_.log_dir) / (".jc-" + launch.name + "-XXXXXX")).string();
  {
    const int fd = mkstemp(script_path.data());
    if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot create a script in ", options_.log_dir, ": ", std::strerror(errno)));
    const bool written = write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
    fchmod(fd, 0700);
    close(fd);
    if (!written) return absl::UnavailableError(absl::StrCat("cannot write ", script_path));
  }
  JC_ASSIGN_OR_RETURN(std::string secret, TagSecret());

  std::vector<std::string> argv = {"sbatch",
                                   "--parsable",
                                   "--no-requeue",
                                   "--job-name=" + launch.name,
                                   "--comment=" + ReplicaTag(secret, launch.name),
                                   "--chdir=" + options_.log_dir,
                                   "--output=" + (fs::path(options_.log_dir) / "%j.out").string(),
                                   "--error=" + (fs::path(options_.log_dir) / "%j.err").string()};
  for (auto& a : SbatchResourceArgs(launch.spec)) argv.push_back(std::move(a));
  // Its time limit (the job's, else the center's default_time_limit): Slurm ends the job
  // past it, and its backfill planner estimates starts only from time limits (without one,
  // the partition's DefaultTime, or none: every start behind it is N/A).
  if (const std::string time = SbatchTimeArg(launch.time_limit); !time.empty()) argv.push_back(time);
  if (!options_.partition.empty()) argv.push_back("--partition=" + options_.partition);
  if (!options_.account.empty()) argv.push_back("--account=" + options_.account);
  if (!launch.user.empty() && launch.user != CurrentUser()) {
    // Only root may submit for another user; Slurm says so clearly if we are not. The
    // group is the account's own: without --gid, sbatch keeps the adapter's (root's).
    passwd pw;
    passwd* found = nullptr;
    char buf[16384];
    if (getpwnam_r(launch.user.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("no local account \"", launch.user, "\" on the adapter's host"));
    }
    argv.push_back("--uid=" + launch.user);
    argv.push_back(absl::StrCat("--gid=", found->pw_gid));
  }
  argv.push_back(script_path);
  absl::StatusOr<std::string> out = Slurm(argv);
  // Slurm keeps its own copy of the script once it has the job.
  std::error_code ec;
  fs::remove(script_path, ec);
  if (!out.ok()) return out.status();
  // "--parsable" prints "<id>" or "<id>;<cluster>".
  std::string id(absl::StripAsciiWhitespace(absl::string_view(*out).substr(0, out->find(';'))));
  if (!IsJobId(id)) return absl::InternalError(absl::StrCat("sbatch printed no job id: ", *out));
  return id;
}

absl::StatusOr<ExecPlan> SlurmBackend::PlanExec(const ExecRequest& request) {
  if (!IsJobId(request.external_id)) {
    return absl::InvalidArgumentError(absl::StrCat("not a Slurm job id: ", request.external_id));
  }
  const std::string account = request.account.empty() ? CurrentUser() : request.account;
  passwd pw;
  passwd* found = nullptr;
  char buf[16384];
  if (getpwnam_r(account.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no local account \"", account, "\" on the adapter's host"));
  }
  bool in_image = false;
  if (!options_.image_runner.empty()) {
    // Slurm's own copy of the batch script says whether the replica runs in its image.
    JC_ASSIGN_OR_RETURN(std::string script, Slurm({"scontrol", "write", "batch_script", request.external_id, "-"}));
    in_image = absl::StrContains(script, options_.image_runner);
  }
  const bool rootless = in_image && found->pw_uid != 0;
  if (rootless && options_.userns_helper.empty()) {
    return absl::UnimplementedError(
        "this Slurm center runs no commands in a rootless replica's image: it has no nexec-userns-exec "
        "(--userns_helper)");
  }
  ExecPlan plan;
  // The step's environment is srun's (Slurm adds the job's SLURM_* to it): the account's
  // basics, never the adapter's own environment.
  plan.env = {"PATH=/usr/local/bin:/usr/bin:/bin", absl::StrCat("HOME=", found->pw_dir), "USER=" + account,
              "LOGNAME=" + account};
  if (const char* conf = std::getenv("SLURM_CONF")) plan.env.push_back(absl::StrCat("SLURM_CONF=", conf));
  if (account != CurrentUser()) {
    plan.argv = {"setpriv", absl::StrCat("--reuid=", found->pw_uid), absl::StrCat("--regid=", found->pw_gid),
                 "--init-groups", "--"};
  }
  for (const char* arg : {"srun", "--overlap", "--quiet", "--ntasks=1"}) plan.argv.emplace_back(arg);
  plan.argv.push_back("--jobid=" + request.external_id);
  if (in_image) {
    // In its container: a step of the job runs `runc exec` into the container the batch
    // script started (ImageScript: its id and the account's store); the command takes the
    // container's account, environment, directory and cgroup.
    const std::string store = absl::StrReplaceAll(options_.image_store, {{"%u", absl::StrCat(found->pw_uid)}});
    plan.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + store,
                "XDG_RUNTIME_DIR=" + store, "USER=" + account, "LOGNAME=" + account};
    if (const char* conf = std::getenv("SLURM_CONF")) plan.env.push_back(absl::StrCat("SLURM_CONF=", conf));
    plan.argv.emplace_back("--chdir=/");
    if (request.tty) plan.argv.emplace_back("--pty");
    plan.argv.emplace_back("--");
    const std::string runc_root = store + "/.runc", id = "jc-slurm-" + request.external_id;
    if (rootless) {
      // The command runs in a user namespace nested in runc's (nexec-userns-exec gives it
      // the account's own ids), which `runc exec` would join first and then could join none
      // of the container's others: nexec-userns-exec --enter joins them in order, beside
      // the container's process (runc's state names it).
      const auto enter = nexec::RootlessExecArgv(runc_root, id, options_.userns_helper,
                                                 "jointcloud: the replica's container is not running", {});
      plan.argv.insert(plan.argv.end(), enter.begin(), enter.end());
    } else {
      plan.argv.insert(plan.argv.end(), {"runc", "--root", runc_root, "exec"});
      if (request.tty) plan.argv.insert(plan.argv.end(), {"--tty", "--env", "TERM=xterm"});
      // runc takes what follows the container's id as the command, flags and all.
      plan.argv.push_back(id);
    }
  } else {
    plan.argv.push_back(absl::StrCat("--chdir=", found->pw_dir));  // entered on the node, as the account
    if (request.tty) plan.argv.emplace_back("--pty");
    plan.argv.emplace_back("--");
  }
  plan.argv.insert(plan.argv.end(), request.command.begin(), request.command.end());
  return plan;
}

absl::Status SlurmBackend::Stop(const std::string& external_id) {
  if (!IsJobId(external_id)) return absl::InvalidArgumentError(absl::StrCat("not a Slurm job id: ", external_id));
  // scancel of a job that already ended succeeds quietly.
  return Slurm({"scancel", external_id}).status();
}

absl::StatusOr<bool> SlurmBackend::Withdraw(const std::string& external_id) {
  if (!IsJobId(external_id)) return absl::InvalidArgumentError(absl::StrCat("not a Slurm job id: ", external_id));
  // slurmctld applies the state filter under its own lock: a job that started is not
  // cancelled by this.
  JC_RETURN_IF_ERROR(Slurm({"scancel", "--state=PENDING", external_id}).status());
  JC_ASSIGN_OR_RETURN(auto seen, Poll({external_id}));
  auto it = seen.find(external_id);
  if (it == seen.end()) return absl::UnavailableError(absl::StrCat("slurm job ", external_id, " is not known"));
  const ReplicaObservation& o = it->second;
  if (o.state == pb::REPLICA_PENDING) {
    return absl::UnavailableError(absl::StrCat("slurm job ", external_id, " still waits after scancel; ask again"));
  }
  // A job cancelled while pending has no start, or one at its end (Slurm sets both).
  const bool never_ran = !o.started_at || (o.ended_at && *o.started_at >= *o.ended_at);
  return o.state == pb::REPLICA_STOPPED && never_ran;
}

absl::StatusOr<std::map<std::string, ReplicaObservation>> SlurmBackend::Poll(
    const std::vector<std::string>& external_ids) {
  std::map<std::string, ReplicaObservation> out;
  std::vector<std::string> ids;
  for (const auto& id : external_ids) {
    if (IsJobId(id)) ids.push_back(id);
  }
  for (size_t i = 0; i < ids.size(); i += kIdsPerCall) {
    std::vector<std::string> chunk(ids.begin() + i, ids.begin() + std::min(ids.size(), i + kIdsPerCall));
    std::vector<std::string> argv = {"squeue", "--states=all", "-h", "-O", std::string(kSqueueJobFields),
                                     "--jobs=" + absl::StrJoin(chunk, ",")};
    JC_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, options_.command_timeout));
    // squeue fails with "Invalid job id" only when it knows none of them: all unknown.
    if (r.exit_code != 0 && !absl::StrContains(r.err, "Invalid job id")) return CommandError(argv, r);
    for (auto& [id, o] : ParseSqueueJobs(r.out)) out[id] = std::move(o);
    // Jobs squeue has forgotten, and what ended jobs used (CPU time, memory: accounting
    // keeps them; squeue has only their times).
    std::vector<std::string> ask;
    for (const auto& id : chunk) {
      auto it = out.find(id);
      bool over = it != out.end() && (it->second.state == pb::REPLICA_SUCCEEDED ||
                                      it->second.state == pb::REPLICA_FAILED ||
                                      it->second.state == pb::REPLICA_STOPPED);
      if (it == out.end() || over) ask.push_back(id);
    }
    if (!ask.empty()) ObserveFromAccounting(ask, &out);
  }
  return out;
}

void SlurmBackend::ObserveFromAccounting(const std::vector<std::string>& ids,
                                         std::map<std::string, ReplicaObservation>* out) {
  // squeue forgets a job MinJobAge (300 s by default) after it ends; sacct remembers it
  // when the cluster keeps accounting, with what the job used (TotalCPU: user + system of
  // every step; MaxRSS per step, the largest taken). Without accounting the job stays
  // unknown once squeue forgets it, and an ended job's usage is its wall time alone.
  if (!accounting_) return;
  auto r = RunCommand({"sacct", "-n", "-P", "-o", std::string(kSacctFields), "-j", absl::StrJoin(ids, ",")},
                      options_.command_timeout);
  if (!r.ok()) return;
  if (r->exit_code != 0) {
    if (absl::StrContains(r->err, "disabled")) accounting_ = false;  // not asked again
    return;
  }
  ReadSacct(r->out, std::set<std::string>(ids.begin(), ids.end()), out);
}

absl::StatusOr<std::string> SlurmBackend::ReadLog(const std::string& external_id, bool stderr, int64_t offset,
                                                  int64_t max_bytes) {
  if (!IsJobId(external_id)) return absl::InvalidArgumentError(absl::StrCat("not a Slurm job id: ", external_id));
  // Not there yet means the job has not started: no output so far.
  return ReadFileRange((fs::path(options_.log_dir) / (external_id + (stderr ? ".err" : ".out"))).string(), offset,
                       max_bytes);
}

}  // namespace jc::adapter
