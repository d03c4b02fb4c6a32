"""Run untrusted Python programs: ``execute`` for one, ``execute_many`` for a batch.

Programs run in children forked from a warm fork server
(:mod:`pettingllm_envs.sandbox.forkserver`), one server per parent process, started on
first use, restarted if it dies, shut down at exit (and when the parent dies, since its
control pipe closes). Each run gets its own working directory (emptied afterwards), a
scrubbed environment, the isolation layers of :mod:`pettingllm_envs.sandbox.isolation`,
a wall-clock timeout that kills the whole process tree, and caps on captured output.

This module is the client side. It only writes requests to the server's stdin and
reads results from its stdout on one daemon thread; it never forks the caller, so a
multithreaded parent (a trainer) is safe, and a parent that forks gets its own server
in the child. A pickled client (inside a pickled env, say) unpickles as the loading
process's own.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from pettingllm_envs.sandbox.filesystem import PACKAGES_ENV, allowed_packages
from pettingllm_envs.sandbox.forkserver.protocol import BOOTSTRAP, HEADER, SCRUBBED_ENV, encode_frame
from pettingllm_envs.sandbox.isolation import SANDBOX_UID_BASE, SLOTS_PER_BLOCK

#: Most runs in flight per server; more wait in the server's queue.
MAX_WORKERS = 64
#: Seconds past a run's own timeout after which the client declares the server hung.
SERVER_GRACE_SECONDS = 30.0
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    ``"output_limit"``, ``"cpu_limit"``, ``"signal:<NAME>"``, ``"sandbox_error"`` (the
    sandbox itself failed, e.g. its server was killed), or None for a normal exit."""
    duration: float
    """Wall-clock seconds."""
    network_isolated: bool
    """True when the program ran in a private network namespace (see the isolation module
    for when that is not possible)."""
    filesystem_isolated: bool = False
    """True when the program saw only the sandbox's filesystem view (root only; see the
    filesystem module): no project sources, datasets or writable host directory."""
    uid_isolated: bool = False
    """True when the program ran under a uid of its own (root only)."""
    pid_isolated: bool = False
    """True when the program ran in a PID namespace of its own (root only)."""
    ipc_isolated: bool = False
    """True when the program ran in an IPC namespace of its own (root only)."""
    syscalls_filtered: bool = False
    """True when the seccomp filter was on (with or without root; see the seccomp module)."""

    @property
    def passed(self) -> bool:
        """The program exited with code 0 within its time limit."""
        return self.returncode == 0 and not self.timed_out


class SandboxUnavailable(RuntimeError):
    """The fork server could not be started."""


class _Server:
    """One running fork server process and the runs in flight on it."""

    def __init__(self, preferred_block: int | None) -> None:
        config = {"block": preferred_block, "packages": list(allowed_packages(os.environ.get(PACKAGES_ENV)))}
        args = [sys.executable, "-I", "-B", "-c", BOOTSTRAP, _PACKAGE_PARENT, json.dumps(config)]
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(SCRUBBED_ENV), close_fds=True, bufsize=0
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.write_fd = self.proc.stdin.fileno()
        self.read_fd = self.proc.stdout.fileno()
        self.pending: dict[int, Future[dict[str, Any]]] = {}
        self.lock = threading.Lock()  # pending and alive
        self.write_lock = threading.Lock()  # one writer at a time, so that frames never interleave
        self.alive = True
        hello = self._read_frame()
        if hello is None or "fatal" in hello:
            self.proc.kill()
            self.proc.wait()
            reason = hello["fatal"] if hello else f"it exited with code {self.proc.returncode}"
            raise SandboxUnavailable(f"the sandbox fork server did not start: {reason}")
        self.pid: int = hello["pid"]
        self.network: bool = hello["network"]
        self.block: int | None = hello["block"]
        self.zygote: int | None = hello.get("zygote")
        layers = hello.get("isolation", {})
        #: The server-wide layers, as ExecutionResult fields (network is per run).
        self.isolation: dict[str, bool] = {
            "filesystem_isolated": bool(layers.get("filesystem")), "uid_isolated": bool(layers.get("uid")),
            "pid_isolated": bool(layers.get("pid")), "ipc_isolated": bool(layers.get("ipc")),
            "syscalls_filtered": bool(layers.get("syscalls"))}
        self.reader = threading.Thread(target=self._read_results, name="sandbox-forkserver-reader", daemon=True)
        self.reader.start()

    def _read_exactly(self, size: int) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            try:
                chunk = os.read(self.read_fd, size - len(data))
            except OSError:
                return None
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    def _read_frame(self) -> dict[str, Any] | None:
        header = self._read_exactly(HEADER.size)
        if header is None:
            return None
        body = self._read_exactly(HEADER.unpack(header)[0])
        return None if body is None else json.loads(body)

    def _read_results(self) -> None:
        while (message := self._read_frame()) is not None:
            with self.lock:
                future = self.pending.pop(message["id"], None)
            if future is not None:
                future.set_result(message)
        self._died("the sandbox fork server exited")

    def _died(self, reason: str) -> None:
        with self.lock:
            self.alive = False
            pending, self.pending = self.pending, {}
        for future in pending.values():
            future.set_result({"error": reason})
        with contextlib.suppress(OSError):
            self.proc.wait(timeout=5)

    def submit(self, requests: Sequence[dict[str, Any]]) -> list[Future[dict[str, Any]]]:
        """Send ``requests`` to the server in one write (one wake-up of the server for a whole
        batch, not one per run); a future per request for its result. The write, which blocks
        while the server's input pipe is full, holds only the write lock: the reader thread
        must still be able to take results, or a server blocked on sending them would never
        read the rest of the batch."""
        futures: list[Future[dict[str, Any]]] = [Future() for _ in requests]
        frames = b"".join(encode_frame(request) for request in requests)
        with self.lock:
            if not self.alive:
                for future in futures:
                    future.set_result({"error": "the sandbox fork server exited"})
                return futures
            for request, future in zip(requests, futures, strict=True):
                self.pending[request["id"]] = future
        with self.write_lock:
            try:
                view = memoryview(frames)
                while view:
                    view = view[os.write(self.write_fd, view):]
            except OSError:
                with self.lock:  # those the reader thread has not failed already
                    for request in requests:
                        if (future := self.pending.pop(request["id"], None)) is not None:
                            future.set_result({"error": "the sandbox fork server exited"})
        return futures

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)

    def close(self) -> None:
        """Ask the server to stop (end of its input), then make sure it did."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()


class _Client:
    """The parent process's connection to its fork server (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._block: int | None = None
        self._ids = itertools.count()

    def __reduce__(self) -> str:
        # One client per process: a pickle names it, and the loading process uses its own.
        return "_CLIENT"

    def server(self) -> _Server:
        with self._lock:
            if self._server is None or not self._server.alive:
                if self._server is not None:
                    self._block = self._server.block  # reclaim it, and kill what the dead one left
                self._server = _Server(self._block)
            return self._server

    def submit(self, requests: Sequence[dict[str, Any]]) -> tuple[_Server, list[Future[dict[str, Any]]]]:
        server = self.server()
        for request in requests:
            request["id"] = next(self._ids)
        return server, server.submit(requests)

    def close(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.close()

    def forget_after_fork(self) -> None:
        """In a forked child: the server belongs to the parent; start a new one if needed."""
        self._lock = threading.Lock()
        server, self._server = self._server, None
        if server is not None:
            for fd in (server.write_fd, server.read_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)


_CLIENT = _Client()
atexit.register(_CLIENT.close)
os.register_at_fork(after_in_child=_CLIENT.forget_after_fork)


@dataclass(frozen=True)
class ServerInfo:
    """This process's fork server, for diagnostics and tests."""

    pid: int
    network_isolation: bool
    """Whether runs that ask for it get an empty network namespace."""
    uids: range | None
    """The sandbox uids this server runs programs as (None without root)."""
    zygote: int | None = None
    """The server's zygote, the process that forks each run (a child of the server; each
    run's process is the zygote's child until the server has it reaped)."""
    isolation: dict[str, bool] | None = None
    """The layers that hold for every run of this server, by ExecutionResult field name."""


def fork_server_info() -> ServerInfo | None:
    """The running fork server of this process, or None before the first run."""
    server = _CLIENT._server
    if server is None or not server.alive:
        return None
    uids = None
    if server.block is not None:
        first = SANDBOX_UID_BASE + server.block * SLOTS_PER_BLOCK
        uids = range(first, first + SLOTS_PER_BLOCK)
    return ServerInfo(server.pid, server.network, uids, server.zygote, dict(server.isolation))


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


#: The defaults of :func:`execute`'s options, for ``execute_many``.
DEFAULTS: dict[str, Any] = {"timeout": 5.0, "memory_mb": 512, "max_output_bytes": 64 * 1024, "max_processes": 64,
                            "isolate_network": True}
_BATCHES = itertools.count()


def _request(code: str, stdin: str, timeout: float, memory_mb: int, max_output_bytes: int, max_processes: int,
             isolate_network: bool) -> dict[str, Any]:
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    # Lone surrogates cannot be encoded; they become "?", as when writing the program to a file.
    return {
        "code": code.encode("utf-8", errors="replace").decode("utf-8"),
        "stdin": stdin.encode("utf-8", errors="replace").decode("utf-8"),
        "timeout": float(timeout),
        "memory_mb": int(memory_mb),
        "max_output_bytes": int(max_output_bytes),
        "max_processes": int(max_processes),
        "isolate_network": bool(isolate_network),
    }


def _result(server: _Server, future: Future[dict[str, Any]], budget: float) -> ExecutionResult:
    """Wait for a run's result; ``budget`` is how long it may take before the server counts as hung."""
    try:
        message = future.result(timeout=budget + SERVER_GRACE_SECONDS)
    except FutureTimeout:
        server.kill()  # hung: its reader thread then fails every run in flight, this one included
        message = future.result()
    if "error" in message:
        return ExecutionResult("", f"sandbox error: {message['error']}", None, False, "sandbox_error", 0.0, False)
    timed_out = bool(message["timed_out"])
    returncode = None if timed_out else message["returncode"]
    return ExecutionResult(
        stdout=message["stdout"],
        stderr=message["stderr"],
        returncode=returncode,
        timed_out=timed_out,
        stop_reason=_stop_reason(returncode, message["stderr"], timed_out, bool(message["overflow"])),
        duration=float(message["duration"]),
        network_isolated=bool(message["network_isolated"]),
        **server.isolation,
    )


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
    all come back as an :class:`ExecutionResult`. Safe to call from several threads.
    """
    start = time.perf_counter()
    request = _request(code, stdin, timeout, memory_mb, max_output_bytes, max_processes, isolate_network)
    server, (future,) = _CLIENT.submit([request])
    try:
        return _result(server, future, timeout)
    finally:
        _WAITED.add(time.perf_counter() - start)


def execute_many(
    programs: Sequence[str],
    *,
    stdins: Sequence[str] | None = None,
    workers: int = 2,
    **options: Any,
) -> list[ExecutionResult]:
    """Run several programs, ``workers`` at a time (each in its own forked child, so they
    really run in parallel); results keep the input order. ``options`` are those of
    :func:`execute`."""
    if stdins is not None and len(stdins) != len(programs):
        raise ValueError("stdins must have one entry per program")
    inputs = stdins if stdins is not None else [""] * len(programs)
    workers = max(1, min(workers, MAX_WORKERS))
    start = time.perf_counter()
    batch = next(_BATCHES)
    requests = [_request(code, stdin, **{**DEFAULTS, **options}) for code, stdin in zip(programs, inputs, strict=True)]
    # All requests go out at once, in one write; the server runs ``workers`` of them at a time.
    server, futures = _CLIENT.submit([{**request, "batch": batch, "batch_workers": workers} for request in requests])
    budget = requests[0]["timeout"] * math.ceil(len(requests) / workers) if requests else 0.0
    try:
        return [_result(server, future, budget) for future in futures]
    finally:
        _WAITED.add(time.perf_counter() - start)


class _WaitClock:
    """Wall seconds callers of this process spent in :func:`execute` and :func:`execute_many`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds = 0.0

    def add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds


_WAITED = _WaitClock()


def seconds_waited() -> float:
    """Wall seconds this process's callers have spent waiting for sandbox runs, summed since it
    started (calls overlapping in several threads each count): a trainer's step profile reads it
    before and after the env's steps to report the sandbox's share."""
    return _WAITED.seconds
