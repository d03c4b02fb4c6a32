"""The isolation layers of the sandbox, as plain functions on the calling process.

Two kinds of callers use them. The fork server (:mod:`pettingllm_envs.sandbox.forkserver`)
sets up, **once at its start**, what is expensive to create and can be shared by every
run: a private mount namespace and an empty network namespace. Each forked child then
applies the cheap per-run layers with :func:`confine_current_process`. Creating the
namespaces per run was measured at about 4 ms (mount) and 2 ms (network) on top of a
1.6 ms fork, which would have cost most of the fork server's speed.

Layers (each skipped where the OS refuses it, never silently weakened when it worked):

* a new session and process group per run, so the whole tree can be killed at once;
* when root, a dedicated unprivileged uid per worker slot: the program cannot signal the
  parent or the fork server, cannot read ``/proc/<pid>/environ`` of either, cannot write
  the project's files, and every process it leaves behind is found and killed by uid.
  Each fork server claims its own block of uids (an abstract-socket lock), so two
  processes that both use the sandbox never share, or kill, each other's uids;
* when root, a private mount namespace: ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are
  fresh tmpfs mounts (``/tmp`` itself is not writable; each slot's working directory is
  its own size-capped tmpfs, emptied after every run), and every directory the sandbox
  uid could not traverse (such as ``/root`` under pyenv) is replaced by an empty tmpfs
  that exposes only the interpreter and library paths;
* when root, an empty network namespace (only a loopback interface, which is down):
  connecting anywhere, localhost included, fails with "network is unreachable";
* resource limits: CPU seconds, address space, file size, processes, open files, no core.

Network isolation fallback: without root (or where ``unshare(CLONE_NEWNET)`` is refused,
e.g. in a locked-down container) programs share the parent's network, and the result of
every run says so in ``ExecutionResult.network_isolated`` (False); nothing fails. The
same applies to the other root-only layers: without root a program runs as the parent's
uid, so it can read the parent's ``/proc/<pid>/environ`` and signal the parent; only the
session, the scrubbed environment, the temporary working directory and the resource
limits hold. Run the sandbox as root (e.g. in a container) for untrusted code.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import socket
from dataclasses import dataclass
from functools import cache

CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

#: First uid used for sandboxed programs when running as root. Fork server ``b`` owns
#: uids ``SANDBOX_UID_BASE + b * SLOTS_PER_BLOCK + slot``; the whole range lies far above
#: normal system and login accounts.
SANDBOX_UID_BASE = 61000
SLOTS_PER_BLOCK = 64
UID_BLOCKS = 16
SANDBOX_GID = 65534  # nogroup
#: Every uid a sandboxed program can run as.
SANDBOX_UIDS = range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + SLOTS_PER_BLOCK * UID_BLOCKS)
#: Size of each slot's private working directory (a tmpfs, so it is memory).
WORKDIR_SIZE = "64m"

IS_ROOT = os.geteuid() == 0
SIGKILL = int(signal.SIGKILL)  # a plain int: the enum's machinery is costly in a fresh child


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed run."""

    cpu_seconds: int
    memory_mb: int
    file_size_mb: int = 16
    max_processes: int = 64
    max_open_files: int = 64


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def prctl(option: int, value: int) -> None:
    # Plain ints (libffi widens them to the registers' 64 bits), and no message unless it
    # failed: this runs in every fresh child, where each touched page is a copy.
    if _libc().prctl(option, value, 0, 0, 0) != 0:
        _check(-1, f"prctl({option})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    _check(_libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def claim_uid_block(preferred: int | None) -> tuple[int, socket.socket] | None:
    """Claim a block of sandbox uids for this process; the returned socket is the lock and
    is released by the kernel when the process dies, however it dies."""
    order = list(range(UID_BLOCKS))
    if preferred is not None and preferred in order:
        order.remove(preferred)
        order.insert(0, preferred)
    for block in order:
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            lock.bind(f"\0pettingllm-sandbox-uid-block-{block}")
        except OSError:
            lock.close()
            continue
        return block, lock
    return None


def _blocking_ancestors(paths: list[str]) -> dict[str, list[str]]:
    """Directories that an unprivileged uid cannot traverse, each with the needed paths below it."""
    blocked: dict[str, list[str]] = {}
    for path in paths:
        parts = os.path.abspath(path).split(os.sep)
        for depth in range(2, len(parts)):
            ancestor = os.sep.join(parts[:depth])
            if not os.stat(ancestor).st_mode & 0o001:
                blocked.setdefault(ancestor, []).append(os.path.abspath(path))
                break
    return blocked


def private_mounts(readable: list[str]) -> bool:
    """Move the calling process into a private mount namespace (see the module docstring).
    Returns False, changing nothing, where the OS refuses a new mount namespace."""
    if _libc().unshare(CLONE_NEWNS) != 0:
        return False
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Each cover: (tmpfs options, interpreter paths below it that must stay visible). The
    # scratch directories are covered too, keeping what the interpreter needs (a virtual
    # environment may live in /tmp).
    covers = {cover: ("size=1m,mode=0755", paths) for cover, paths in _blocking_ancestors(readable).items()}
    for scratch, options in (("/tmp", "size=1m,mode=0711"), ("/var/tmp", "size=16m,mode=1777"),
                             ("/dev/shm", "size=16m,mode=1777")):
        if os.path.isdir(scratch) and scratch not in covers:
            covers[scratch] = (options, [p for p in readable if p.startswith(scratch + os.sep)])
    for cover in sorted(covers):
        options, paths = covers[cover]
        keep = sorted({p for p in paths if os.path.isdir(p)})
        keep = [p for p in keep if not any(p.startswith(q + os.sep) for q in keep if q != p)]
        # Hold each kept directory open: after the cover is mounted, /proc/self/fd/N still
        # reaches the original, and is bind-mounted back at the same path.
        held = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in keep]
        _mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, options)
        for path, fd in held:
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            os.close(fd)
    return True


def mount_workdir(path: str, uid: int) -> None:
    """Mount a fresh, size-capped tmpfs owned by ``uid`` at ``path`` (private mounts only)."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    with contextlib.suppress(OSError):
        _check(_libc().umount2(path.encode(), MNT_DETACH), f"umount {path}")
    _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={WORKDIR_SIZE},mode=0700,uid={uid},gid={SANDBOX_GID}")


def remove_files_of(uid: int, directories: tuple[str, ...] = ("/var/tmp", "/dev/shm")) -> None:
    """Remove what ``uid`` left in the shared scratch directories of the private namespace."""
    import shutil

    for directory in directories:
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != uid:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)


def isolate_network() -> int | None:
    """Move the calling process into a new, empty network namespace and return an fd of
    the original one (for runs that ask for no isolation), or None where it is refused."""
    host = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    if _libc().unshare(CLONE_NEWNET) != 0:
        os.close(host)
        return None
    return host


def interpreter_paths() -> list[str]:
    """Directories a sandboxed Python needs to read: its prefixes and import path."""
    import sys

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    return sorted(paths)


def confine_current_process(limits: Limits, uid: int | None, workdir: str, host_netns: int | None) -> None:
    """Apply the per-run layers to the calling (freshly forked) child: a new session, the
    host network namespace when the run asked for it (``host_netns``), the slot's uid,
    the resource limits, the working directory. Raises if a layer fails."""
    os.setsid()
    if host_netns is not None:
        _check(_libc().setns(host_netns, CLONE_NEWNET), "setns")
    if uid is not None:
        os.setgroups([])
        os.setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID)
        os.setresuid(uid, uid, uid)
    # After the uid change (which clears it): die with the fork server, whatever kills it.
    prctl(PR_SET_PDEATHSIG, SIGKILL)
    memory = limits.memory_mb * 1024 * 1024
    file_size = limits.file_size_mb * 1024 * 1024
    for name, value in (
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_DATA, memory),
        (resource.RLIMIT_FSIZE, file_size),
        (resource.RLIMIT_NPROC, limits.max_processes),
        (resource.RLIMIT_NOFILE, limits.max_open_files),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(name, (value, value))
    os.chdir(workdir)


def kill_uid_processes(uid: int) -> None:
    """SIGKILL every process running as ``uid`` (root only), including ones that escaped
    their process group with ``setsid``. Signals are sent from a short-lived child that
    takes that uid, since ``kill(-1)`` as an unprivileged uid reaches exactly its own
    processes; one pass kills a fork bomb (forks racing with it are refused while the
    kernel walks the process list), later passes are a margin."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in a short-lived child
        try:
            os.setgroups([])
            os.setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID)
            os.setresuid(uid, uid, uid)
            for _ in range(3):
                os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def uid_processes(uids: range, *, include_zombies: bool = True) -> list[int]:
    """Pids of the processes whose real uid lies in ``uids`` (a scan of ``/proc``)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as handle:
                status = handle.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields.get("Uid", "-1").split()[0])
        zombie = fields.get("State", "").strip().startswith("Z")
        if uid in uids and (include_zombies or not zombie):
            found.append(int(name))
    return found
