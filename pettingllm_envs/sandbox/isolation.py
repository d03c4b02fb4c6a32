"""The process-level isolation layers of the sandbox, as plain functions on the calling process.

Two kinds of callers use them. The fork server (:mod:`pettingllm_envs.sandbox.forkserver`)
sets up, **once**, what is expensive to create and can be shared: the filesystem view
(:mod:`pettingllm_envs.sandbox.filesystem`, a private mount namespace) at its start, and an
empty network namespace per slot on the slot's first use. Its zygote installs the seccomp
filter (:mod:`pettingllm_envs.sandbox.seccomp`) and forks each run into a new PID
namespace; each run's process then applies the cheap per-run layers with
:func:`confine_current_process`. A mount namespace per run was measured at about 4 ms (on
top of a 1.6 ms fork), which would have cost most of the fork server's speed; making a
network namespace costs about 0.25 ms, and its teardown runs later in the kernel, so one per
slot is kept; joining one costs about 10 us, a new PID namespace about 40 us and a new IPC
namespace 25-50 us.

Layers (each skipped where the OS refuses it, never silently weakened when it worked; every
run reports which held, see ``ExecutionResult``):

* a new session and process group per run, so the whole tree can be killed at once;
* when root, a dedicated unprivileged uid per worker slot: the program cannot signal the
  parent or the fork server, cannot read ``/proc/<pid>/environ`` or memory of either,
  cannot write the project's files, and every process it leaves behind is found and
  killed by uid. Each fork server claims its own block of uids (an abstract-socket lock),
  so two processes that both use the sandbox never share, or kill, each other's uids;
* when root, a PID namespace per run whose init is the program: when it exits or is
  killed, the kernel kills every process left in the namespace, however it was created
  (``setsid``, double forks, ``clone(CLONE_PARENT)``), and the program cannot name, let
  alone signal, a process outside it. The program sees ``os.getpid() == 1`` and
  ``os.getppid() == 0``; as an init, it ignores signals it sends itself while their action
  is the default (faults such as a segfault still kill it);
* when root, an IPC namespace per run (SysV objects and POSIX message queues die with the
  run), on top of the seccomp filter refusing those calls outright;
* when root, the filesystem view (see :mod:`pettingllm_envs.sandbox.filesystem`);
* when root, an empty network namespace per slot (only a loopback interface, which is
  down): connecting anywhere, localhost included, fails with "network is unreachable", and
  runs in different slots cannot reach each other through abstract Unix sockets or netlink
  (both scoped to a network namespace);
* with or without root, the seccomp filter (see :mod:`pettingllm_envs.sandbox.seccomp`);
* resource limits: CPU seconds, address space, file size, processes, open files, no core.

Fallback without root (or where a namespace is refused, e.g. in a locked-down container):
programs share the parent's network, filesystem and PID space, and the result of every run
says so (``network_isolated``, ``filesystem_isolated``, ``uid_isolated``, ``pid_isolated``,
``ipc_isolated`` are False); nothing fails. A program then runs as the parent's uid, so it
can read every file the parent can, its ``/proc/<pid>/environ`` and memory, and signal it
(the fork server and zygote are made non-dumpable, so their memory at least is closed);
only the session, the scrubbed environment, the temporary working directory, the seccomp
filter and the resource limits hold. Run the sandbox as root (e.g. in a container) for
untrusted code.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
from dataclasses import dataclass
from functools import cache

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWIPC = 0x08000000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
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


def isolate_network() -> int | None:
    """Move the calling process into a new, empty network namespace and return an fd of
    the original one (for runs that ask for no isolation), or None where it is refused."""
    host = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    if _libc().unshare(CLONE_NEWNET) != 0:
        os.close(host)
        return None
    return host


def confine_current_process(limits: Limits, uid: int | None, workdir: str, network: int | None,
                             new_ipc: bool) -> None:
    """Apply the per-run layers to the calling (freshly forked) child: a new session, the
    network namespace ``network`` (an fd: the slot's own, or the host's when the run asked
    for no isolation), a new IPC namespace (``new_ipc``), the slot's uid, the resource
    limits, the working directory. Raises if a layer fails."""
    os.setsid()
    if network is not None:
        _check(_libc().setns(network, CLONE_NEWNET), "setns")
    if new_ipc:
        _check(_libc().unshare(CLONE_NEWIPC), "unshare(CLONE_NEWIPC)")
    if uid is not None:
        os.setgroups([])
        os.setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID)
        os.setresuid(uid, uid, uid)
    # After the uid change (which clears it): die with the zygote, whatever kills it.
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


def namespace_works(flag: int) -> bool:
    """Whether the calling process may create a namespace of this kind (tried in a child)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - a short-lived child
        os._exit(0 if _libc().unshare(flag) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    return status == 0


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
