// nexec-userns-exec UID GID COMMAND [ARG...]: runs COMMAND as UID:GID inside a rootless
// container. runc (1.1) makes a user namespace only with root inside mapped to the account
// that runs it; an unprivileged account can map no other id. So the container starts this
// helper as that root, and it makes a nested user namespace mapping UID and GID to it:
// the command then runs with the account's own ids (id -u prints them, files it makes are
// the account's) and, being no longer root, with no capabilities at all. Static, so that
// it runs in any image (bound into the container by the Slurm adapter's batch script).
//
// nexec-userns-exec --enter PID COMMAND [ARG...]: runs COMMAND beside the container's
// process PID (one this helper started: in its nested user namespace), as the account that
// owns it, in that process's namespaces, root, working directory and environment — what
// `runc exec` cannot do here, since it joins PID's (nested) user namespace first and may
// then join none of the container's others, which runc's user namespace owns. So: runc's
// user namespace first (the nested one's parent), the container's namespaces from there,
// the nested one last; the command is a child in the container's PID namespace, and this
// helper waits for it and exits with its status. Run as the account, on the node (the
// Slurm adapter's `jcctl job exec` step).
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == static_cast<ssize_t>(strlen(text)) ? 0 : -1;
}

static int fail(const char* what) {
  fprintf(stderr, "nexec-userns-exec: %s: %s\n", what, strerror(errno));
  return 125;
}

// The environment of PID (NUL-separated in /proc/PID/environ), as an envp.
static char** environment_of(const char* proc) {
  char path[96];
  snprintf(path, sizeof path, "%s/environ", proc);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  size_t size = 0, cap = 1 << 16;
  char* text = static_cast<char*>(malloc(cap + 1));
  ssize_t n;
  while (text != nullptr && (n = read(fd, text + size, cap - size)) > 0) {
    size += static_cast<size_t>(n);
    if (size == cap && cap < (1 << 24)) {
      cap *= 2;
      text = static_cast<char*>(realloc(text, cap + 1));
    }
  }
  close(fd);
  if (text == nullptr) return nullptr;
  text[size] = '\0';
  size_t count = 0;
  for (size_t i = 0; i < size; ++i) count += text[i] == '\0';
  char** envp = static_cast<char**>(calloc(count + 2, sizeof(char*)));
  size_t k = 0;
  for (size_t i = 0; i < size && envp != nullptr; i += strlen(text + i) + 1) envp[k++] = text + i;
  return envp;
}

static int enter(char** argv) {
  char* end = nullptr;
  long pid = strtol(argv[2], &end, 10);
  if (*end != '\0' || pid <= 1) {
    fprintf(stderr, "nexec-userns-exec: --enter needs the container's process id, got \"%s\"\n", argv[2]);
    return 125;
  }
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%ld", pid);
  // Everything of PID's opened before any namespace changes (/proc is the node's until then).
  const char* kinds[] = {"ipc", "uts", "net", "cgroup", "pid", "mnt"};
  const int types[] = {CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWNET, CLONE_NEWCGROUP, CLONE_NEWPID, CLONE_NEWNS};
  int fds[6];
  char path[96];
  for (int i = 0; i < 6; ++i) {
    snprintf(path, sizeof path, "%s/ns/%s", proc, kinds[i]);
    fds[i] = open(path, O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0) return fail(path);
    // One the container shares with the node (its cgroup namespace, say) is ours already,
    // and is not joined: the node's user namespace owns it.
    char own[64];
    snprintf(own, sizeof own, "/proc/self/ns/%s", kinds[i]);
    struct stat theirs, mine;
    if (fstat(fds[i], &theirs) == 0 && stat(own, &mine) == 0 && theirs.st_ino == mine.st_ino &&
        theirs.st_dev == mine.st_dev) {
      close(fds[i]);
      fds[i] = -1;
    }
  }
  snprintf(path, sizeof path, "%s/ns/user", proc);
  int nested = open(path, O_RDONLY | O_CLOEXEC);
  if (nested < 0) return fail(path);
  snprintf(path, sizeof path, "%s/cwd", proc);
  int cwd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cwd < 0) return fail(path);
  char** envp = environment_of(proc);
  if (envp == nullptr) return fail("the container's environment");
  // On a terminal without a TERM, an xterm (as docker and kubectl say); envp has room.
  if (isatty(0)) {
    char** e = envp;
    while (*e != nullptr && strncmp(*e, "TERM=", 5) != 0) ++e;
    if (*e == nullptr) *e = const_cast<char*>("TERM=xterm");
  }
  int parent = ioctl(nested, NS_GET_PARENT);
  if (parent < 0) return fail("the container's user namespace");
  if (setns(parent, CLONE_NEWUSER) != 0) return fail("joining the container's user namespace");
  for (int i = 0; i < 6; ++i) {
    if (fds[i] >= 0 && setns(fds[i], types[i]) != 0) return fail(kinds[i]);
  }
  if (setns(nested, CLONE_NEWUSER) != 0) return fail("joining the command's user namespace");
  if (fchdir(cwd) != 0) return fail("the container's working directory");
  pid_t child = fork();  // into the container's PID namespace
  if (child < 0) return fail("fork");
  if (child == 0) {
    // Not root in the nested namespace: exec drops every capability setns gave. The
    // program is looked up in the container's PATH.
    for (char** e = envp; *e != nullptr; ++e) {
      if (strncmp(*e, "PATH=", 5) == 0) setenv("PATH", *e + 5, 1);
    }
    execvpe(argv[3], argv + 3, envp);
    fprintf(stderr, "nexec-userns-exec: %s: %s\n", argv[3], strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return fail("waitpid");
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int main(int argc, char** argv) {
  if (argc >= 4 && strcmp(argv[1], "--enter") == 0) return enter(argv);
  if (argc < 4) {
    fprintf(stderr, "usage: nexec-userns-exec UID GID COMMAND [ARG...]\n");
    return 125;
  }
  char* end = nullptr;
  long uid = strtol(argv[1], &end, 10);
  if (*end != '\0' || uid < 0) return 125;
  long gid = strtol(argv[2], &end, 10);
  if (*end != '\0' || gid < 0) return 125;
  if (uid > 0xffffffffL || gid > 0xffffffffL) return 125;
  if (uid != 0 || gid != 0) {
    char map[64];
    if (unshare(CLONE_NEWUSER) != 0) {
      fprintf(stderr, "nexec-userns-exec: unshare(CLONE_NEWUSER): %s\n", strerror(errno));
      return 125;
    }
    snprintf(map, sizeof map, "%ld 0 1\n", uid);
    if (write_file("/proc/self/setgroups", "deny") != 0) {
      fprintf(stderr, "nexec-userns-exec: denying setgroups: %s\n", strerror(errno));
      return 125;
    }
    if (write_file("/proc/self/uid_map", map) != 0) {
      fprintf(stderr, "nexec-userns-exec: mapping uid %ld: %s\n", uid, strerror(errno));
      return 125;
    }
    snprintf(map, sizeof map, "%ld 0 1\n", gid);
    if (write_file("/proc/self/gid_map", map) != 0) {
      fprintf(stderr, "nexec-userns-exec: mapping gid %ld: %s\n", gid, strerror(errno));
      return 125;
    }
  }
  execvp(argv[3], argv + 3);
  fprintf(stderr, "nexec-userns-exec: %s: %s\n", argv[3], strerror(errno));
  return 127;
}
