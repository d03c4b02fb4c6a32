"""Run untrusted Python programs: ``execute`` for one, ``execute_many`` for a batch.

Each run gets a fresh temporary working directory (removed afterwards), a scrubbed
environment, the isolation layers of :mod:`pettingllm_envs.sandbox.isolation`, a
wall-clock timeout that kills the whole process tree, and caps on captured output.
"""

from __future__ import annotations

import os
import queue
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pettingllm_envs.sandbox.isolation import (
    IS_ROOT,
    SANDBOX_GID,
    SANDBOX_UID_BASE,
    Limits,
    confine_current_process,
    interpreter_paths,
    kill_slot_processes,
    network_isolation_available,
)

#: Environment of every sandboxed program: nothing inherited from the parent.
SCRUBBED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}

#: Seconds a finished program's leftover children may keep its pipes open.
EXIT_GRACE_SECONDS = 0.05


@dataclass(frozen=True)
class ExecutionResult:
    """What a sandboxed program did."""

    stdout: str
    stderr: str
    returncode: int | None
    """Exit code, or ``-signal`` when killed by a signal, or None if it never finished."""
    timed_out: bool
    stop_reason: str | None
    """Why the run was stopped or failed abnormally: ``"timeout"``, ``"memory"``,
    ``"output_limit"``, ``"cpu_limit"``, ``"signal:<NAME>"``, or None for a normal exit."""
    duration: float
    """Wall-clock seconds."""
    network_isolated: bool
    """True when the program ran in a private network namespace."""

    @property
    def passed(self) -> bool:
        """The program exited with code 0 within its time limit."""
        return self.returncode == 0 and not self.timed_out


class _SlotPool:
    """Hands out worker slots so that concurrent runs use distinct sandbox uids."""

    def __init__(self, size: int = 64) -> None:
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for slot in range(size):
            self._free.put(slot)

    def acquire(self) -> int:
        return self._free.get()

    def release(self, slot: int) -> None:
        self._free.put(slot)


_SLOTS = _SlotPool()
_READABLE = interpreter_paths()
_NETWORK_ISOLATION: bool | None = None
_NETWORK_LOCK = threading.Lock()


def _network_isolation() -> bool:
    global _NETWORK_ISOLATION
    with _NETWORK_LOCK:
        if _NETWORK_ISOLATION is None:
            _NETWORK_ISOLATION = network_isolation_available()
        return _NETWORK_ISOLATION


def _decode(data: bytes, cap: int) -> str:
    return data[:cap].decode("utf-8", errors="replace")


def _stop_reason(returncode: int | None, stderr: str, timed_out: bool, overflow: bool) -> str | None:
    if timed_out:
        return "timeout"
    if overflow:
        return "output_limit"
    if returncode is None or returncode == 0:
        return None
    if returncode < 0:
        if -returncode == signal.SIGXCPU:
            return "cpu_limit"
        try:
            return f"signal:{signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal:{-returncode}"
    if "MemoryError" in stderr[-2000:]:
        return "memory"
    return None


def execute(
    code: str,
    *,
    stdin: str = "",
    timeout: float = 5.0,
    memory_mb: int = 512,
    max_output_bytes: int = 64 * 1024,
    max_processes: int = 64,
    isolate_network: bool = True,
) -> ExecutionResult:
    """Run the Python program ``code`` in the sandbox and return what it did.

    Never raises because of the program: syntax errors, crashes, timeouts and limits
    all come back as an :class:`ExecutionResult`.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    slot = _SLOTS.acquire()
    workdir = tempfile.mkdtemp(prefix="pettingllm-sandbox-")
    try:
        return _run(code, stdin, timeout, memory_mb, max_output_bytes, max_processes,
                    isolate_network, slot, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        _SLOTS.release(slot)


def execute_many(
    programs: Sequence[str],
    *,
    stdins: Sequence[str] | None = None,
    workers: int = 2,
    **options: object,
) -> list[ExecutionResult]:
    """Run several programs with up to ``workers`` at a time; results keep the input order."""
    if stdins is not None and len(stdins) != len(programs):
        raise ValueError("stdins must have one entry per program")
    inputs = stdins if stdins is not None else [""] * len(programs)
    if workers <= 1 or len(programs) <= 1:
        return [execute(p, stdin=s, **options) for p, s in zip(programs, inputs, strict=False)]  # type: ignore[arg-type]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda ps: execute(ps[0], stdin=ps[1], **options), zip(programs, inputs, strict=False)))  # type: ignore[arg-type]


def _run(
    code: str,
    stdin: str,
    timeout: float,
    memory_mb: int,
    max_output_bytes: int,
    max_processes: int,
    isolate_network: bool,
    slot: int,
    workdir: str,
) -> ExecutionResult:
    network = isolate_network and _network_isolation()
    program = os.path.join(workdir, "main.py")
    with open(program, "w", encoding="utf-8", errors="replace") as handle:
        handle.write(code)
    if IS_ROOT:
        os.chown(workdir, SANDBOX_UID_BASE + slot, SANDBOX_GID)
        os.chmod(workdir, 0o700)
        os.chown(program, SANDBOX_UID_BASE + slot, SANDBOX_GID)
    limits = Limits(cpu_seconds=max(1, int(timeout) + 1), memory_mb=memory_mb, max_processes=max_processes)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-B", program],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workdir,
        env={**SCRUBBED_ENV, "HOME": workdir, "TMPDIR": workdir},
        preexec_fn=lambda: confine_current_process(limits, slot, workdir, network, _READABLE),
        close_fds=True,
    )
    out, err, timed_out, overflow = _communicate(proc, stdin.encode("utf-8", errors="replace"),
                                                 start + timeout, max_output_bytes)
    kill_slot_processes(slot, proc.pid)
    returncode = proc.wait()
    duration = time.monotonic() - start
    stderr = _decode(err, max_output_bytes)
    if timed_out or overflow:
        returncode_reported: int | None = None if timed_out else returncode
    else:
        returncode_reported = returncode
    return ExecutionResult(
        stdout=_decode(out, max_output_bytes),
        stderr=stderr,
        returncode=returncode_reported,
        timed_out=timed_out,
        stop_reason=_stop_reason(returncode_reported, stderr, timed_out, overflow),
        duration=duration,
        network_isolated=network,
    )


def _communicate(
    proc: subprocess.Popen[bytes], stdin: bytes, deadline: float, cap: int
) -> tuple[bytes, bytes, bool, bool]:
    """Feed stdin and collect stdout/stderr until the program exits, the deadline passes
    or the output exceeds ``cap`` bytes."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd, in_fd = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
    chunks: dict[int, bytearray] = {out_fd: bytearray(), err_fd: bytearray()}
    selector = selectors.DefaultSelector()
    for fd in (out_fd, err_fd):
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(in_fd, False)
        selector.register(in_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    timed_out = overflow = False
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out = proc.poll() is None
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_GRACE_SECONDS:
                break  # leftover children hold the pipes open; they are killed next
            for key, _ in selector.select(min(deadline - now, 0.05)):
                fd = key.fd
                if fd == in_fd:
                    try:
                        written = os.write(fd, pending[:65536])
                    except (BrokenPipeError, OSError):
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        selector.unregister(fd)
                        proc.stdin.close()
                    continue
                data = os.read(fd, 65536)
                if not data:
                    selector.unregister(fd)
                    continue
                chunks[fd] += data
                if len(chunks[fd]) > cap:
                    overflow = True
                    raise StopIteration
    except StopIteration:
        pass
    finally:
        selector.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if not stream.closed:
                stream.close()
    return bytes(chunks[out_fd]), bytes(chunks[err_fd]), timed_out, overflow
