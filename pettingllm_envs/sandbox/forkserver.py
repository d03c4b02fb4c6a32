"""The fork server: a small, warm Python process that forks one child per sandboxed run.

Starting an interpreter costs tens of milliseconds; forking a warm one that has already
imported the usual standard-library modules costs about 1.6 ms. The executor starts one
server per parent process (``python -I -B -c BOOTSTRAP``, with the scrubbed
environment, so nothing secret is in its memory or its ``/proc/<pid>/environ``) and
talks to it over its stdin/stdout with length-prefixed JSON frames.

The server is single-threaded (forking a multithreaded process is unsafe) and runs one
event loop over the control pipe and, per run, the child's stdout/stderr/stdin pipes and
a pidfd that becomes readable when the child exits. It is a child subreaper, so every
process a run leaves behind is re-parented to it rather than to init, where it is seen
(``/proc/self/task/<tid>/children``), killed and reaped before the run's result is sent.
A run's main process is reaped only after its process group was killed, so the group id
cannot have been reused by then.

Frames (client -> server): ``{"id", "code", "stdin", "timeout", "memory_mb",
"max_output_bytes", "max_processes", "isolate_network"}``, plus ``"batch"`` and
``"batch_workers"`` for the runs of one ``execute_many`` call: at most that many of them
run at once. Server -> client: first a hello
``{"pid", "network", "block", "private_mounts"}`` (or ``{"fatal": message}``), then one
``{"id", "stdout", "stderr", "returncode", "timed_out", "overflow", "duration",
"network_isolated"}`` per run. End of input (the parent closed the pipe or died) shuts
the server down after killing every run.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import shutil
import signal
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from pettingllm_envs.sandbox.isolation import (
    IS_ROOT,
    PR_SET_CHILD_SUBREAPER,
    SANDBOX_UID_BASE,
    SLOTS_PER_BLOCK,
    Limits,
    claim_uid_block,
    confine_current_process,
    interpreter_paths,
    isolate_network,
    kill_uid_processes,
    mount_workdir,
    prctl,
    private_mounts,
    remove_files_of,
    uid_processes,
)

#: Imported once in the server so that programs do not pay for them (``typing`` alone
#: takes several milliseconds to import cold). Few and standard library only: every
#: module makes each fork copy more page tables, and large native libraries may start
#: threads. The list covers what HumanEval-style programs import.
PREIMPORTED = ("typing", "math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string",
               "random", "copy", "hashlib", "traceback")

#: Environment of every sandboxed program: nothing inherited from the parent.
SCRUBBED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}

#: Started as ``python -I -B -c BOOTSTRAP PACKAGE_PARENT_DIR [PREFERRED_BLOCK]``. It makes
#: ``pettingllm_envs`` and ``pettingllm_envs.sandbox`` importable without running their
#: ``__init__`` (which loads every env and its dependencies), keeping the server small.
BOOTSTRAP = """
import sys, types
root = sys.argv[1]
for name, sub in (("pettingllm_envs", ""), ("pettingllm_envs.sandbox", "/sandbox")):
    module = types.ModuleType(name)
    module.__path__ = [root + "/pettingllm_envs" + sub]
    sys.modules[name] = module
from pettingllm_envs.sandbox.forkserver import main
main(sys.argv[2:])
"""

HEADER = struct.Struct(">I")
#: Exit code of a child whose isolation could not be set up (the program never ran).
SETUP_FAILED = 125
READ_CHUNK = 65536


def encode_frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return HEADER.pack(len(body)) + body


@dataclass
class _Run:
    request: dict[str, Any]
    slot: int
    uid: int | None
    workdir: str
    start: float
    deadline: float
    pid: int = 0
    pidfd: int = -1
    stdin: memoryview = field(default_factory=lambda: memoryview(b""))
    fds: dict[str, int] = field(default_factory=dict)
    output: dict[str, bytearray] = field(default_factory=lambda: {"out": bytearray(), "err": bytearray()})
    timed_out: bool = False
    overflow: bool = False
    killed: bool = False


class ForkServer:
    """The server's state and event loop (see the module docstring)."""

    def __init__(self, control_in: int, control_out: int, preferred_block: int | None) -> None:
        self.control_in = control_in
        self.control_out = control_out
        self.buffer = bytearray()
        self.selector = selectors.DefaultSelector()
        self.runs: dict[int, _Run] = {}  # by child pid
        self.waiting: list[dict[str, Any]] = []  # requests not started yet, oldest first
        self.running_per_batch: dict[Any, int] = {}
        self.free_slots = list(range(SLOTS_PER_BLOCK - 1, -1, -1))
        self.mounted: set[int] = set()  # slots whose working-directory tmpfs is mounted
        self.block: int | None = None
        self.block_lock = None
        self.private = False
        self.host_netns: int | None = None
        if IS_ROOT:
            claimed = claim_uid_block(preferred_block)
            if claimed is None:
                raise RuntimeError("every block of sandbox uids is taken by other fork servers")
            self.block, self.block_lock = claimed
            self._sweep_block()
            self.private = private_mounts(interpreter_paths())
            self.host_netns = isolate_network()
        self.network = self.host_netns is not None
        prctl(PR_SET_CHILD_SUBREAPER, 1)

    # -- plumbing ---------------------------------------------------------------------

    def uid(self, slot: int) -> int | None:
        if self.block is None:
            return None
        return SANDBOX_UID_BASE + self.block * SLOTS_PER_BLOCK + slot

    def _sweep_block(self) -> None:
        """Kill what an earlier owner of this uid block may have left (it was killed)."""
        first = self.uid(0)
        assert first is not None
        for pid_uid in {self._proc_uid(pid) for pid in uid_processes(range(first, first + SLOTS_PER_BLOCK))}:
            if pid_uid is not None:
                kill_uid_processes(pid_uid)

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(encode_frame(message))
        while data:
            data = data[os.write(self.control_out, data):]

    @staticmethod
    def _proc_uid(pid: int) -> int | None:
        try:
            with open(f"/proc/{pid}/status", "rb") as handle:
                for line in handle:
                    if line.startswith(b"Uid:"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            return None
        return None

    def _orphans(self) -> set[int]:
        """Children of the server that are not the main process of a run in flight."""
        tid = os.getpid()
        try:
            with open(f"/proc/{tid}/task/{tid}/children") as handle:
                children = {int(pid) for pid in handle.read().split()}
        except OSError:
            children = set()
        return children - set(self.runs)

    # -- starting runs ----------------------------------------------------------------

    def start_waiting(self) -> None:
        """Start every waiting request that a free slot and its batch's worker count allow.
        A batch (``execute_many``) is throttled here, so that the next run of a batch
        starts the moment one ends, without a round trip to the client."""
        started = []
        for index, request in enumerate(self.waiting):
            if not self.free_slots:
                break
            batch = request.get("batch")
            if batch is not None and self.running_per_batch.get(batch, 0) >= request["batch_workers"]:
                continue
            started.append(index)
            self.running_per_batch[batch] = self.running_per_batch.get(batch, 0) + 1
            self._start(request)
        for index in reversed(started):
            del self.waiting[index]

    def _start(self, request: dict[str, Any]) -> None:
        slot = self.free_slots.pop()
        uid = self.uid(slot)
        try:
            if self.private and uid is not None:
                workdir = f"/tmp/slot-{slot}"
                if slot not in self.mounted:
                    mount_workdir(workdir, uid)
                    self.mounted.add(slot)
            else:
                workdir = tempfile.mkdtemp(prefix="pettingllm-sandbox-")
            now = time.monotonic()
            run = _Run(request, slot, uid, workdir, now, now + float(request["timeout"]))
            run.stdin = memoryview(request["stdin"].encode("utf-8", errors="replace"))
            self._fork(run)
        except OSError as exc:  # e.g. out of memory or pids: this run fails, the server lives on
            self.free_slots.append(slot)
            self._batch_done(request)
            self.send({"id": request["id"], "error": f"could not start the run: {exc}"})

    def _batch_done(self, request: dict[str, Any]) -> None:
        batch = request.get("batch")
        self.running_per_batch[batch] -= 1
        if not self.running_per_batch[batch]:
            del self.running_per_batch[batch]

    def _fork(self, run: _Run) -> None:
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        timeout = float(run.request["timeout"])
        limits = Limits(
            cpu_seconds=max(1, int(timeout) + 1),
            memory_mb=int(run.request["memory_mb"]),
            max_processes=int(run.request["max_processes"]),
        )
        host_netns = self.host_netns if not run.request["isolate_network"] else None
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; coverage cannot follow it
            try:
                os.dup2(stdin_r, 0)
                os.dup2(stdout_w, 1)
                os.dup2(stderr_w, 2)
                confine_current_process(limits, run.uid, run.workdir, host_netns)
                os.closerange(3, 1 << 16)
            except BaseException as exc:  # report any setup failure, then exit
                with contextlib.suppress(BaseException):
                    os.write(2, f"sandbox setup failed: {exc!r}\n".encode())
                os._exit(SETUP_FAILED)
            run_program(run.request["code"], run.workdir)
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
        run.pid = pid
        run.pidfd = os.pidfd_open(pid)
        run.fds = {"out": stdout_r, "err": stderr_r}
        for name, fd in run.fds.items():
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ, (run, name))
        if run.stdin:
            os.set_blocking(stdin_w, False)
            run.fds["in"] = stdin_w
            self.selector.register(stdin_w, selectors.EVENT_WRITE, (run, "in"))
        else:
            os.close(stdin_w)
        self.selector.register(run.pidfd, selectors.EVENT_READ, (run, "exit"))
        self.runs[pid] = run

    # -- while running ----------------------------------------------------------------

    def _close(self, run: _Run, name: str) -> None:
        fd = run.fds.pop(name, None)
        if fd is not None:
            self.selector.unregister(fd)
            os.close(fd)

    def _on_io(self, run: _Run, name: str) -> None:
        if name == "in":
            try:
                written = os.write(run.fds["in"], run.stdin[:READ_CHUNK])
            except BlockingIOError:
                return
            except OSError:  # the program closed stdin or exited
                written = len(run.stdin)
            run.stdin = run.stdin[written:]
            if not run.stdin:
                self._close(run, "in")
            return
        self._read(run, name)

    def _read(self, run: _Run, name: str) -> None:
        """Read what is available on one output pipe; close it at end of file."""
        cap = int(run.request["max_output_bytes"])
        while name in run.fds:
            try:
                data = os.read(run.fds[name], READ_CHUNK)
            except BlockingIOError:
                return
            if not data:
                self._close(run, name)
                return
            run.output[name] += data
            if len(run.output[name]) > cap:
                run.overflow = True
                self._kill(run)
                self._close(run, name)
                return

    def _kill(self, run: _Run) -> None:
        if run.killed:
            return
        run.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(run.pid, signal.SIGKILL)
        if run.uid is not None:
            kill_uid_processes(run.uid)

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for run in list(self.runs.values()):
            if not run.killed and now >= run.deadline:
                run.timed_out = True
                self._kill(run)

    # -- finishing runs ---------------------------------------------------------------

    def _finish(self, run: _Run) -> None:
        """The run's main process has exited (it is a zombie until reaped here)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(run.pid, signal.SIGKILL)
        for name in ("out", "err"):
            if name in run.fds:
                self._read(run, name)
        self._clean_leftovers(run)
        for name in list(run.fds):
            self._close(run, name)
        self.selector.unregister(run.pidfd)
        os.close(run.pidfd)
        del self.runs[run.pid]
        _, status = os.waitpid(run.pid, 0)
        duration = time.monotonic() - run.start
        self._reset_workdir(run)
        self.free_slots.append(run.slot)
        self._batch_done(run.request)
        cap = int(run.request["max_output_bytes"])
        self.send({
            "id": run.request["id"],
            "stdout": bytes(run.output["out"][:cap]).decode("utf-8", errors="replace"),
            "stderr": bytes(run.output["err"][:cap]).decode("utf-8", errors="replace"),
            "returncode": os.waitstatus_to_exitcode(status),
            "timed_out": run.timed_out,
            "overflow": run.overflow,
            "duration": duration,
            "network_isolated": self.network and bool(run.request["isolate_network"]),
        })
        self.start_waiting()

    def _clean_leftovers(self, run: _Run) -> None:
        """Kill and reap every process the run left behind. Cheap when there is none: a
        surviving descendant always shows up as an orphan re-parented to the server."""
        orphans = self._reap(self._orphans())
        if run.uid is not None:
            if not run.killed and not any(self._proc_uid(pid) == run.uid for pid in orphans):
                return
            for _ in range(200):
                kill_uid_processes(run.uid)
                self._reap(self._orphans())
                if not set(uid_processes(range(run.uid, run.uid + 1))) - {run.pid}:
                    return
                time.sleep(0.002)
            return
        # Without per-run uids, orphans cannot be told apart: kill them all, from the top.
        for _ in range(200):
            if not orphans:
                return
            for pid in orphans:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)
            orphans = self._reap(self._orphans())

    @staticmethod
    def _reap(pids: set[int]) -> set[int]:
        """Reap the zombies among ``pids``; return the ones still alive."""
        alive = set()
        for pid in pids:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if not done:
                alive.add(pid)
        return alive

    def _reset_workdir(self, run: _Run) -> None:
        if self.private and run.uid is not None:
            left = os.listdir(run.workdir)
            if left == ["main.py"]:  # a failed program's source, written for its traceback
                os.unlink(os.path.join(run.workdir, "main.py"))
            elif left:  # a fresh tmpfs is quicker and surer than deleting a tree
                mount_workdir(run.workdir, run.uid)
            remove_files_of(run.uid)
        else:
            shutil.rmtree(run.workdir, ignore_errors=True)

    # -- the loop ---------------------------------------------------------------------

    def _on_control(self) -> bool:
        data = os.read(self.control_in, 1 << 20)
        if not data:
            return False
        self.buffer += data
        while len(self.buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self.buffer)
            if len(self.buffer) < HEADER.size + size:
                break
            self.waiting.append(json.loads(self.buffer[HEADER.size:HEADER.size + size]))
            del self.buffer[:HEADER.size + size]
        self.start_waiting()
        return True

    def serve(self) -> None:
        self.selector.register(self.control_in, selectors.EVENT_READ, None)
        self.send({"pid": os.getpid(), "network": self.network, "block": self.block, "private_mounts": self.private})
        try:
            while True:
                deadlines = [run.deadline for run in self.runs.values() if not run.killed]
                wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                for key, _ in self.selector.select(wait):
                    if key.data is None:
                        if not self._on_control():
                            return
                        continue
                    run, name = key.data
                    if self.runs.get(run.pid) is not run:
                        continue  # finished earlier in this batch of events
                    if name == "exit":
                        self._finish(run)
                    elif name in run.fds:
                        self._on_io(run, name)
                self._check_deadlines()
        finally:
            for run in list(self.runs.values()):
                self._kill(run)
                self._clean_leftovers(run)
                os.waitpid(run.pid, 0)
                self._reset_workdir(run)


def run_program(source: str, workdir: str) -> None:  # pragma: no cover - runs in the child
    """Run ``source`` as ``__main__`` the way ``python -I main.py`` would (``__file__`` and
    ``sys.argv[0]`` name ``main.py`` in the working directory), then exit the
    process. Called in the forked child after it was confined; never returns."""
    import atexit
    import builtins
    import linecache
    import threading
    import types

    for name, value in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        signal.signal(name, value)
    path = os.path.join(workdir, "main.py")
    os.environ.update({"HOME": workdir, "TMPDIR": workdir})  # the rest is SCRUBBED_ENV already
    tempfile.tempdir = None
    # The source is written to disk only if the program fails (creating a file costs about
    # 0.5 ms, a tenth of a typical check); ``inspect`` and ``warnings`` read it from here.
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    # sys.stdin/stdout/stderr are the server's own, made by the same ``python -I`` start-up
    # (so with the same encodings and buffering) and never used by it; fds 0-2 now are the
    # run's pipes.
    sys.argv = [path]
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    gc.enable()
    code = 0
    try:
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:  # the program's own failure, reported like Python does
        code = 1
        # Drop this frame from the traceback so that it starts at the program.
        if exc.__traceback__ is not None:
            exc.__traceback__ = exc.__traceback__.tb_next
        # Python's hook reads the source lines of the report from disk: write the program
        # now, on the failure path only (it costs about 0.5 ms).
        with contextlib.suppress(OSError), open(path, "x", encoding="utf-8") as handle:
            handle.write(source)
        sys.excepthook(type(exc), exc, exc.__traceback__)
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # wait for non-daemon threads, as Python does
        atexit._run_exitfuncs()
    except SystemExit as exc:
        code = _exit_code(exc)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # Python exits with 120 when flushing fails
            code = code or 120
    os._exit(code)


def _exit_code(exc: SystemExit) -> int:  # pragma: no cover - runs in the child
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(BaseException):
        print(exc.code, file=sys.stderr)
    return 1


def main(argv: list[str]) -> None:
    """Entry point of the server process (see ``BOOTSTRAP``)."""
    for module in PREIMPORTED:
        __import__(module)
    # The control pipe leaves fds 0 and 1, so that children never see it there.
    control_in = os.dup(0)
    control_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the parent's terminal is the parent's business
    preferred = int(argv[0]) if argv and argv[0].isdigit() else None
    try:
        server = ForkServer(control_in, control_out, preferred)
    except Exception as exc:  # tell the client why, then exit
        os.write(control_out, encode_frame({"fatal": f"{type(exc).__name__}: {exc}"}))
        return
    # Objects alive now are never garbage; freezing them keeps children's collections
    # from touching (and copying) the server's pages.
    gc.collect()
    gc.freeze()
    server.serve()
