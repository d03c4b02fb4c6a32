"""What a sandboxed child does to itself before running untrusted code.

Everything here runs in the child between ``fork`` and running the program, so it may
only touch the child's own process state. The layers, each optional where the OS
refuses it:

* a new session (own process group) so the whole tree can be killed at once;
* a new network namespace (no interfaces but a down loopback) when privileged;
* a dedicated unprivileged uid per worker slot when running as root, so the program
  cannot signal the parent, read ``/proc/<parent>/environ`` or write the project's
  files, and every process it leaves behind can be found and killed by uid;
* resource limits: CPU seconds, address space, file size, processes, open files.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
from dataclasses import dataclass

CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

#: First uid used for sandboxed programs when the parent is root; slot ``k`` runs as
#: ``SANDBOX_UID_BASE + k``. The range is far above normal system and login accounts.
SANDBOX_UID_BASE = 61000
SANDBOX_GID = 65534  # nogroup

IS_ROOT = os.geteuid() == 0


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed run."""

    cpu_seconds: int
    memory_mb: int
    file_size_mb: int = 16
    max_processes: int = 64
    max_open_files: int = 64


def _unshare_network() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(CLONE_NEWNET) == 0
    except (OSError, AttributeError):
        return False


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda v: None if v is None else v.encode())  # noqa: E731
    if _libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}")


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


def _private_mounts(workdir: str, readable: list[str]) -> None:
    """In a new mount namespace: private tmpfs on /tmp, /var/tmp and /dev/shm, and every
    non-traversable directory (such as ``/root`` under pyenv) replaced by an empty tmpfs
    that exposes only the interpreter and library paths the program needs. The working
    directory is mounted back where it was."""
    if _libc().unshare(CLONE_NEWNS) != 0:
        return
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    covers = dict(_blocking_ancestors(readable))
    for scratch in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(scratch):
            covers.setdefault(scratch, [])
    for cover in sorted(covers):
        # Keep the working directory and every interpreter path below the cover (a
        # virtual environment may live in /tmp).
        below = [p for p in [workdir, *readable] if p.startswith(cover + os.sep) and os.path.isdir(p)]
        keep = sorted(set(below))
        keep = [p for p in keep if not any(p.startswith(q + os.sep) for q in keep if q != p)]
        # Hold each kept directory open: after the cover is mounted, /proc/self/fd/N still
        # reaches the original, and is bind-mounted back at the same path.
        held = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in keep]
        size = "1m" if covers[cover] else "16m"
        _mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
        for path, fd in held:
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            os.close(fd)


def interpreter_paths() -> list[str]:
    """Directories a sandboxed Python needs to read: its prefixes and import path."""
    import sys

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    return sorted(paths)


def confine_current_process(
    limits: Limits, slot: int, workdir: str, isolate_network: bool, readable: list[str]
) -> None:
    """Apply every isolation layer to the calling (child) process. Never returns an error:
    a layer the OS refuses is skipped (``network_isolation_available`` reports it)."""
    os.setsid()
    if isolate_network and IS_ROOT:
        _unshare_network()
    if IS_ROOT:
        _private_mounts(workdir, readable)
        uid = SANDBOX_UID_BASE + slot
        os.setgroups([])
        os.setgid(SANDBOX_GID)
        os.setuid(uid)
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
    # SIGPIPE back to default so that a program writing to a closed pipe dies quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def kill_slot_processes(slot: int, pgid: int | None) -> None:
    """Kill every process the run may have left: its process group and, when the run had
    its own uid, every process of that uid (children that escaped with ``setsid``)."""
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    if not IS_ROOT:
        return
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in a short-lived child
        try:
            os.setgid(SANDBOX_GID)
            os.setuid(SANDBOX_UID_BASE + slot)
            # kill(-1) as an unprivileged uid reaches exactly the processes of that uid.
            # Repeat until nothing is left, since a fork bomb may still be forking.
            for _ in range(100):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def network_isolation_available() -> bool:
    """Whether sandboxed programs get a private network namespace on this machine."""
    if not IS_ROOT:
        return False
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in a short-lived child
        os._exit(0 if _unshare_network() else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
