#!/usr/bin/python3
# A FUSE file system that never answers a LOOKUP of a name starting with "hang" (and answers
# the rest of what a mount needs): whatever enters <mountpoint>/hang... waits in the kernel,
# uninterruptibly once the request was read, until this process dies. For
# nexec_start_fault_test.cc: a task's working directory on a file system that does not answer,
# as an account's own FUSE daemon can make one (attacker helper-82). Root only; it speaks the
# kernel's protocol on /dev/fuse itself, so nothing but Python is needed.
# usage: hangfs.py MOUNTPOINT     (prints "ready" once mounted, "cannot mount: ..." if not)
import ctypes, os, struct, sys, threading, time

libc = ctypes.CDLL(None, use_errno=True)
mountpoint = sys.argv[1]
try:
    fd = os.open("/dev/fuse", os.O_RDWR)
except OSError as e:
    print(f"cannot mount: /dev/fuse: {e}", flush=True)
    sys.exit(0)
options = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other"
if libc.mount(b"hangfs", mountpoint.encode(), b"fuse", 0, options.encode()) != 0:
    print(f"cannot mount: {os.strerror(ctypes.get_errno())}", flush=True)
    sys.exit(0)


def reply(unique, err=0, body=b""):
    os.write(fd, struct.pack("<IiQ", 16 + len(body), err, unique) + body)


def attr(ino, mode):  # struct fuse_attr
    return struct.pack("<QQQQQQIIIIIIIIII", ino, 0, 0, 0, 0, 0, 0, 0, 0, mode, 2, 0, 0, 0, 4096, 0)


FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_STATFS, FUSE_INIT, FUSE_INTERRUPT, FUSE_BATCH_FORGET = 1, 2, 3, 17, 26, 36, 42


def serve():
    while True:
        try:
            buf = os.read(fd, 1 << 20)
        except OSError:
            return  # unmounted
        length, op, unique = struct.unpack_from("<IIQ", buf)
        arg = buf[40:length]
        if op == FUSE_INIT:
            reply(unique, 0, struct.pack("<IIIIHHIIHHII", 7, 31, 0, 0, 16, 12, 4096, 1, 32, 0, 0, 0) + b"\0" * 24)
        elif op == FUSE_LOOKUP:
            if not arg.split(b"\0")[0].startswith(b"hang"):
                reply(unique, -2)  # ENOENT; a "hang..." lookup is held for ever
        elif op == FUSE_GETATTR:
            reply(unique, 0, struct.pack("<QII", 0, 0, 0) + attr(1, 0o40755))
        elif op == FUSE_STATFS:
            reply(unique, 0, struct.pack("<QQQQQIIII", 0, 0, 0, 0, 0, 4096, 255, 4096, 0) + b"\0" * 24)
        elif op in (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT):
            pass  # no answer is expected (an interrupt of a held lookup is ignored too)
        else:
            reply(unique, -38)  # ENOSYS


threading.Thread(target=serve, daemon=True).start()
os.stat(mountpoint)  # the first GETATTR, answered by the thread
print("ready", flush=True)
while True:
    time.sleep(3600)
