"""Symbolic answer comparison in a child process, bounded in wall-clock time from any thread.

SymPy (through math-verify or the restricted parser of :mod:`.symbolic`) can spend unbounded
time on a short answer: ``(x+1)^{5000}`` expands, ``\\binom{10^9}{5 \\cdot 10^8}`` and
``(10^{10})!`` evaluate exactly. math-verify's own timeouts use ``signal.alarm``, which
works only in the main thread, and no Python-level timeout interrupts a long C call (a big
integer power) that holds the GIL. So the comparison runs in a long-lived child process
(``python -m pettingllm_envs.math.bounded``) that the caller kills when it overruns: the
calling thread waits at most :data:`WALL_SECONDS` whatever the answer is, and gets ``False``.

Protocol: one JSON line per request on the child's stdin (``[answer, gold,
use_math_verify]``), one JSON
line per reply on its stdout (``true``, ``false`` or ``null`` for "cannot decide"). Idle
children are kept in a pool, one per concurrently verifying thread (at most
:data:`MAX_WORKERS`; more threads wait for a free one). A child exits on end of input, so
none outlives its parent while idle; a busy one is killed on timeout, and each request
also runs under a CPU-time limit (``RLIMIT_CPU``, enforced by the kernel even inside a C
call) in case its parent died first. A pickled pool unpickles as the loading process's own.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import resource
import select
import subprocess
import sys
import threading
import time

from pettingllm_envs.math.symbolic import symbolic_equal

#: Longest a caller waits for one comparison; an overrun counts as "not equal".
WALL_SECONDS = 5.0
#: CPU seconds one request may use in the child before the kernel ends it (a backstop only).
CPU_SECONDS_PER_REQUEST = 10
#: Most child processes at once (each holds SymPy, about 100 MB).
MAX_WORKERS = max(1, min(8, os.cpu_count() or 1))

logger = logging.getLogger(__name__)


class _Worker:
    """One child process and the bytes of its stdout not yet consumed."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pettingllm_envs.math.bounded"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
        )
        self.buffer = b""

    def ask(self, request: list[str | bool], deadline: float) -> bool | None:
        """The child's verdict, or raise ``TimeoutError`` / ``OSError`` (the worker is then unusable)."""
        line = json.dumps(request, ensure_ascii=True).encode() + b"\n"
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line)
        self.process.stdin.flush()
        descriptor = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([descriptor], [], [], left)[0]:
                raise TimeoutError("the symbolic comparison overran its time")
            chunk = os.read(descriptor, 65536)
            if not chunk:
                raise OSError("the comparison process exited")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        verdict = json.loads(line)
        return verdict if isinstance(verdict, bool) else None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


class _Pool:
    """Idle workers, shared by every thread of the process."""

    def __init__(self) -> None:
        self.idle: list[_Worker] = []
        self.lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(MAX_WORKERS)
        self.owner = os.getpid()

    def __reduce__(self) -> str:
        # One pool per process: a pickle names it, and the loading process uses its own.
        return "_POOL"

    def compare(self, request: list[str | bool], seconds: float) -> bool | None:
        deadline = time.monotonic() + seconds
        if not self.slots.acquire(timeout=seconds):
            return None
        try:
            with self.lock:
                if os.getpid() != self.owner:  # a forked copy of the pool: its pipes belong to the parent
                    self.idle, self.owner = [], os.getpid()
                worker = self.idle.pop() if self.idle else None
            worker = worker or _Worker()
            try:
                verdict = worker.ask(request, deadline)
            except TimeoutError:  # the expected way out of a runaway comparison
                worker.kill()
                return None
            except (OSError, ValueError) as error:  # not expected: say so, or every symbolic answer is silently wrong
                worker.kill()
                logger.warning("the answer-comparison process failed (%s, exit code %s); the answer counts as wrong",
                               error, worker.process.returncode)
                return None
            with self.lock:
                self.idle.append(worker)
            return verdict
        finally:
            self.slots.release()

    def close(self) -> None:
        with self.lock:
            workers, self.idle = self.idle, []
        for worker in workers:
            worker.kill()


_POOL = _Pool()
atexit.register(_POOL.close)


def bounded_symbolic_equal(
    answer: str, gold: str, use_math_verify: bool, seconds: float = WALL_SECONDS
) -> bool | None:
    """:func:`pettingllm_envs.math.symbolic.symbolic_equal` of the two normalised answers, computed
    in a child process: its verdict, or None when it could not decide within ``seconds``."""
    return _POOL.compare([answer, gold, use_math_verify], seconds)


def _serve() -> None:
    """The child's loop: read requests until end of input, answer each on one line."""
    for line in sys.stdin.buffer:
        used = resource.getrusage(resource.RUSAGE_SELF)
        limit = int(used.ru_utime + used.ru_stime) + CPU_SECONDS_PER_REQUEST
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        resource.setrlimit(resource.RLIMIT_CPU, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
        try:
            answer, gold, use_math_verify = json.loads(line)
            verdict = symbolic_equal(answer, gold, bool(use_math_verify))
        except Exception:  # junk of any shape is "cannot decide", never a dead worker
            verdict = None
        sys.stdout.write(json.dumps(verdict) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
