// nexec-userns-exec UID GID COMMAND [ARG...]: runs COMMAND as UID:GID inside a rootless
// container. runc (1.1) makes a user namespace only with root inside mapped to the account
// that runs it; an unprivileged account can map no other id. So the container starts this
// helper as that root, and it makes a nested user namespace mapping UID and GID to it:
// the command then runs with the account's own ids (id -u prints them, files it makes are
// the account's) and, being no longer root, with no capabilities at all. Static, so that
// it runs in any image (bound into the container by the Slurm adapter's batch script).
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == static_cast<ssize_t>(strlen(text)) ? 0 : -1;
}

int main(int argc, char** argv) {
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
