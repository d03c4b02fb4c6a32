"""Killing and reaping what runs leave behind, for the fork server.

The server is a child subreaper, so every process a run leaves behind (without PID
namespaces) is re-parented to it: its children, less the zygote, are exactly the leftovers
of finished runs and the main processes of runs in flight. A process can fork between being
listed and being killed, so killing is a loop (:func:`kill_until_gone`) that lists, kills
and reaps again until nothing is left or the rounds run out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

#: Rounds of :func:`kill_until_gone` and the pause between them: 200 x 2 ms bounds the
#: cleanup of a run that keeps forking to about 0.4 s.
KILL_ROUNDS = 200
KILL_PAUSE_SECONDS = 0.002


def children(path: str, exclude: int | None = None) -> set[int]:
    """The pids listed in ``path`` (a ``/proc/<pid>/task/<tid>/children`` file), less ``exclude``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            listed = {int(pid) for pid in os.read(fd, 1 << 20).split()}
        finally:
            os.close(fd)
    except OSError:
        listed = set()
    return listed - {exclude} if exclude is not None else listed


def proc_uid(pid: int) -> int | None:
    """The real uid of process ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def reap(pids: set[int]) -> set[int]:
    """Reap the zombies among ``pids`` (children of this process); return the ones still alive."""
    alive = set()
    for pid in pids:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if not done:
            alive.add(pid)
    return alive


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid``, if it still exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill_from_the_top(pids: set[int]) -> None:
    """SIGKILL each of ``pids`` and the process group it leads (a run's program may have
    made its own group)."""
    for pid in pids:
        kill_group(pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def kill_until_gone(survivors: Callable[[], set[int]], kill: Callable[[set[int]], None]) -> None:
    """Call ``kill`` on what ``survivors`` lists (it should reap what died) until it lists
    nothing, for at most :data:`KILL_ROUNDS` rounds."""
    for _ in range(KILL_ROUNDS):
        left = survivors()
        if not left:
            return
        kill(left)
        time.sleep(KILL_PAUSE_SECONDS)
