#!/usr/bin/python3
# A FUSE file system that never answers some requests, for nexec_start_fault_test.cc: what an
# account's own FUSE daemon can do to whoever touches its files (attacker helpers 82 and 85).
# Whatever waits on an unanswered request waits in the kernel, uninterruptibly once the
# request was read, until this process dies.
#
#   hangfs.py MOUNTPOINT                 a LOOKUP of a name starting with "hang" is never
#                                        answered; every other name does not exist
#   hangfs.py MOUNTPOINT --files         every name is a regular file that opens, takes writes
#                                        and reads as empty, but a FLUSH (sent by every
#                                        close(2) of a descriptor of it) is never answered
#   hangfs.py MOUNTPOINT --gate NAME --missing-for N,M,...
#                                        the root holds one directory, NAME, looked up anew by
#                                        every path walk; the Nth, Mth... lookup of it by each
#                                        process is answered "no such file", as an account's
#                                        daemon can answer one walk and not the next (attacker
#                                        helper-86); every other name does not exist
#   --file-root       with --files: the mount's root is itself such a file, for a MOUNTPOINT
#                     that is a regular file (an account may mount on a file of its own)
#   --root-owned      the root says it is root's, 0755 (what the daemon says is believed)
#   --owner UID:GID   mounted as that account would mount it (user_id=UID): only processes
#                     whose user ids are all UID may enter, root included (default 0:0)
#   --allow-other     everyone may enter (as /etc/fuse.conf's user_allow_other permits an
#                     account; always, for root's mounts here)
#
# Root only; it speaks the kernel's protocol on /dev/fuse itself, so nothing but Python is
# needed. Prints "ready" once mounted, "cannot mount: ..." if it cannot.
import ctypes, os, struct, sys, threading, time

libc = ctypes.CDLL(None, use_errno=True)
args = sys.argv[1:]
mountpoint = args[0]
files = "--files" in args
owner = args[args.index("--owner") + 1] if "--owner" in args else "0:0"
uid, gid = (int(x) for x in owner.split(":"))
allow_other = "--allow-other" in args or uid == 0
file_root = "--file-root" in args
gate = args[args.index("--gate") + 1].encode() if "--gate" in args else None
missing_for = {int(n) for n in args[args.index("--missing-for") + 1].split(",")} if "--missing-for" in args else set()
gate_lookups = {}  # pid: how many lookups of the gate it made
try:
    fd = os.open("/dev/fuse", os.O_RDWR)
except OSError as e:
    print(f"cannot mount: /dev/fuse: {e}", flush=True)
    sys.exit(0)
options = f"fd={fd},rootmode={'100000' if file_root else '40000'},user_id={uid},group_id={gid}" + (
    ",allow_other" if allow_other else "")
if libc.mount(b"hangfs", mountpoint.encode(), b"fuse", 0, options.encode()) != 0:
    print(f"cannot mount: {os.strerror(ctypes.get_errno())}", flush=True)
    sys.exit(0)


def reply(unique, err=0, body=b""):
    try:
        os.write(fd, struct.pack("<IiQ", 16 + len(body), err, unique) + body)
    except OSError:
        pass  # the request was interrupted meanwhile


root_owned = "--root-owned" in args


def attr(ino, mode):  # struct fuse_attr
    owner_uid, owner_gid = (0, 0) if root_owned and ino == 1 else (uid, gid)
    if root_owned and ino == 1:
        mode = 0o40755
    return struct.pack("<QQQQQQIIIIIIIIII", ino, 0, 0, 0, 0, 0, 0, 0, 0, mode, 1, owner_uid, owner_gid, 0, 4096, 0)


def attr_of(ino):
    if gate is not None:
        return attr(ino, 0o40755)  # the root and the gate
    return attr(ino, 0o40777 if ino == 1 and not file_root else 0o100666)


def entry(ino, valid=1 << 30):  # struct fuse_entry_out: valid for a long time, so few LOOKUPs repeat
    return struct.pack("<QQQQII", ino, 0, valid, valid, 0, 0) + attr_of(ino)


FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_SETATTR, FUSE_OPEN, FUSE_READ, FUSE_WRITE = 1, 2, 3, 4, 14, 15, 16
FUSE_STATFS, FUSE_RELEASE, FUSE_FLUSH, FUSE_INIT, FUSE_CREATE, FUSE_INTERRUPT, FUSE_BATCH_FORGET = 17, 18, 25, 26, 35, 36, 42
inodes = {}


def inode(name):
    return inodes.setdefault(name, len(inodes) + 2)


def serve():
    while True:
        try:
            buf = os.read(fd, 1 << 21)
        except OSError:
            return  # unmounted
        length, op, unique, node, _, _, pid = struct.unpack_from("<IIQQIII", buf)
        arg = buf[40:length]
        if op == FUSE_INIT:
            reply(unique, 0, struct.pack("<IIIIHHIIHHII", 7, 31, 0, 0, 16, 12, 131072, 1, 32, 0, 0, 0) + b"\0" * 24)
        elif op == FUSE_LOOKUP and gate is not None:
            name = arg.split(b"\0")[0]
            count = gate_lookups[pid] = gate_lookups.get(pid, 0) + 1 if name == gate else gate_lookups.get(pid, 0)
            if name == gate and count not in missing_for:
                reply(unique, 0, entry(2, valid=0))  # valid for no time: every walk asks again
            else:
                reply(unique, -2)  # ENOENT
        elif op == FUSE_LOOKUP:
            name = arg.split(b"\0")[0]
            if name.startswith(b"hang"):
                pass  # held for ever
            elif files:
                reply(unique, 0, entry(inode(name)))
            else:
                reply(unique, -2)  # ENOENT
        elif op in (FUSE_GETATTR, FUSE_SETATTR):
            reply(unique, 0, struct.pack("<QII", 1 << 30, 0, 0) + attr_of(node))
        elif op == FUSE_STATFS:
            reply(unique, 0, struct.pack("<QQQQQIIII", 0, 0, 0, 0, 0, 4096, 255, 4096, 0) + b"\0" * 24)
        elif files and op == FUSE_OPEN:
            reply(unique, 0, struct.pack("<QIi", 1, 0, 0))
        elif files and op == FUSE_CREATE:
            reply(unique, 0, entry(inode(arg[16:].split(b"\0")[0])) + struct.pack("<QIi", 1, 0, 0))
        elif files and op == FUSE_WRITE:
            reply(unique, 0, struct.pack("<II", struct.unpack_from("<QQI", arg)[2], 0))
        elif files and op == FUSE_READ:
            reply(unique, 0, b"")
        elif files and op == FUSE_RELEASE:
            reply(unique, 0)
        elif files and op == FUSE_FLUSH:
            pass  # held for ever
        elif op in (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT):
            pass  # no answer is expected (an interrupt of a held request is ignored too)
        else:
            reply(unique, -38)  # ENOSYS


threading.Thread(target=serve, daemon=True).start()
try:
    os.stat(mountpoint)  # the first GETATTR, answered by the thread
except PermissionError:
    pass  # an account's mount: root may not enter it
print("ready", flush=True)
while True:
    time.sleep(3600)
