"""The fork server: a small, warm Python process that forks one child per sandboxed run.

Starting an interpreter costs tens of milliseconds; forking a warm one that has already
imported the usual standard-library modules costs about 1.6 ms. The executor starts one
server per parent process (``python -I -B -c BOOTSTRAP``, with the scrubbed
environment, so nothing secret is in its memory or its ``/proc/<pid>/environ``) and
talks to it over its stdin/stdout with length-prefixed JSON frames.

The server is single-threaded (forking a multithreaded process is unsafe) and runs one
event loop over the control pipe, the zygote's socket and, per run, the child's
stdout/stderr/stdin pipes and a pidfd that becomes readable when the child exits.

Runs are not forked from the server itself but from its **zygote** (:class:`_Zygote`): a
process forked from the server once, right after the warm imports and ``gc.freeze()``,
that only waits for a request and forks. The server sends it each run's pipe ends and a
memfd holding the program (``SCM_RIGHTS`` over a ``SOCK_SEQPACKET`` pair); the zygote
answers with the run's pid, and later, when asked, reaps it and answers with its wait
status. So the busy event loop no longer shares its pages with live children (each write
to a shared page was a copy-on-write fault, about 270 per run) and no longer pays for the
fork. The program's source reaches the run only through that memfd and its input only
through its stdin pipe: neither the server's requests nor other runs' data are ever in the
zygote's memory, so not in a run's.

The zygote carries the seccomp filter (installed once, inherited by every run) and, when
root, forks each run into a PID namespace of its own, whose end kills everything the run
left. A run's process is the zygote's child, but the server is a child subreaper (and the
zygote is not), so without PID namespaces every process a run leaves behind is still
re-parented to the server, where it is seen (``/proc/self/task/<tid>/children``, less the
zygote), killed and reaped before the run's result is sent. A run's main process is reaped
(by the zygote, on the server's request) only after its process group was killed, so the
group id cannot have been reused by then. The zygote dies with the server
(``PR_SET_PDEATHSIG``), and the runs with the zygote; if the zygote dies first (only a
program running as the server's own uid, i.e. without root, can kill it), the server kills
every run and exits, and the client starts a new one.

Frames (client -> server): ``{"id", "code", "stdin", "timeout", "memory_mb",
"max_output_bytes", "max_processes", "isolate_network"}``, plus ``"batch"`` and
``"batch_workers"`` for the runs of one ``execute_many`` call: at most that many of their
programs run at once (the next one starts as soon as a program's main process has exited,
while what it left is cleaned up). Server -> client: first a hello
``{"pid", "network", "block", "zygote", "isolation"}`` (``isolation``: which of the layers
``filesystem``, ``uid``, ``pid``, ``ipc``, ``syscalls`` hold; or ``{"fatal": message}``), then one
``{"id", "stdout", "stderr", "returncode", "timed_out", "overflow", "duration",
"network_isolated"}`` per run. End of input (the parent closed the pipe or died) shuts
the server down after killing every run.
"""

from __future__ import annotations

import _random
import _signal
import _thread
import array
import atexit
import builtins
import contextlib
import ctypes
import gc
import json
import linecache
import os
import random
import selectors
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback
import types
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pettingllm_envs.sandbox import seccomp
from pettingllm_envs.sandbox.filesystem import DirectoryState, directory_state, enter_view, mount_workdir, remove_tree
from pettingllm_envs.sandbox.isolation import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWPID,
    IS_ROOT,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    SANDBOX_GID,
    SANDBOX_UID_BASE,
    SLOTS_PER_BLOCK,
    Limits,
    _libc,
    claim_uid_block,
    confine_current_process,
    isolate_network,
    kill_uid_processes,
    namespace_works,
    prctl,
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

#: Started as ``python -I -B -c BOOTSTRAP PACKAGE_PARENT_DIR CONFIG``, where ``CONFIG`` is
#: ``{"block": preferred uid block or null, "packages": [allowed import names]}`` in JSON. It makes
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

SIGINT, SIGTERM = int(signal.SIGINT), int(signal.SIGTERM)
#: atexit callbacks registered before any program ran (a program's own come on top).
_ATEXIT_INHERITED = atexit._ncallbacks()
HEADER = struct.Struct(">I")
#: Server -> zygote: fork a run (fds: code memfd, stdin, stdout, stderr and, with network
#: isolation, the network namespace to join; then the working directory): kind, uid (-1:
#: none), CPU seconds, memory MB, processes, code size, new IPC namespace.
SPAWN = struct.Struct("=ciiiii?")
#: Server -> zygote: reap this pid (``R``); zygote -> server: its wait status (``W``).
REAP = struct.Struct("=ci")
FD_SIZE = array.array("i").itemsize
#: Zygote -> server: the pid of a run it forked (``P``), or minus the errno of the fork.
PID = struct.Struct("=ci")
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
    pid: int = 0  # known once the zygote has forked it
    pidfd: int = -1
    stdin: memoryview = field(default_factory=lambda: memoryview(b""))
    fds: dict[str, int] = field(default_factory=dict)
    output: dict[str, bytearray] = field(default_factory=lambda: {"out": bytearray(), "err": bytearray()})
    timed_out: bool = False
    overflow: bool = False
    killed: bool = False
    duration: float = 0.0


class ZygoteDied(Exception):
    """The zygote exited (it is never stopped on purpose while the server runs)."""


class _Zygote:
    """The server's end of the zygote: a process forked from the server right after its warm
    imports and ``gc.freeze()`` that does nothing but fork runs and reap them on request.
    Runs are forked from it rather than from the busy server, so the server's event loop no
    longer writes pages shared with live children (each such write was a copy-on-write
    fault) and no longer pays for the fork. A run's process is the zygote's child, reaped
    only when the server asks (after killing its process group), so its pid stays valid;
    what a run leaves behind is still re-parented to the server, the child subreaper."""

    def __init__(self, pid: int, sock: socket.socket, filtered: bool) -> None:
        self.pid = pid
        self.sock = sock
        self.socket = sock.fileno()
        self.pidfd = os.pidfd_open(pid)
        self.filtered = filtered
        """Whether the seccomp filter is installed on the zygote (so on every run)."""

    @classmethod
    def start(cls, pid_namespaces: bool, close: tuple[int, ...]) -> _Zygote:
        server_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the zygote
            try:
                server_end.close()
                for fd in close:
                    os.close(fd)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # die with the server, whatever kills it
                if os.getppid() == server:
                    own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY) if pid_namespaces else None
                    # Once, here: every run inherits it (see the seccomp module for why not per run).
                    zygote_end.send(b"F" if seccomp.install() else b"-")
                    zygote_loop(zygote_end, own_pid_namespace)
            finally:
                os._exit(0)
        zygote_end.close()
        try:
            filtered = server_end.recv(1) == b"F"
        except OSError:
            filtered = False
        return cls(pid, server_end, filtered)

    def send(self, message: bytes, fds: list[int]) -> None:
        try:
            if fds:
                self.sock.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            else:
                self.sock.send(message)
        except OSError as exc:
            raise ZygoteDied from exc

    def receive(self, *, block: bool) -> bytes | None:
        try:
            reply = self.sock.recv(64, 0 if block else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise ZygoteDied from exc
        if not reply:
            raise ZygoteDied
        return reply


def zygote_loop(sock: socket.socket, own_pid_namespace: int | None) -> None:  # pragma: no cover - the zygote
    """Fork a run per spawn request, reap a run per reap request, until the server goes.
    Deliberately tiny: every page it writes between forks is copied once per live run.

    With ``own_pid_namespace`` (an fd of the zygote's PID namespace), each run is forked into
    a new PID namespace, as its init: ``unshare(CLONE_NEWPID)`` only sets the namespace of the
    zygote's next child, and ``setns`` back to its own afterwards makes the next
    ``unshare`` possible again (the kernel refuses a second one while they differ).

    Runs are forked with libc's ``fork()`` (called with the GIL held, as ``os.fork`` does)
    rather than ``os.fork``, which would also run ``PyOS_AfterFork_Child`` and the at-fork
    hooks of ``threading`` and ``random`` in every child: that re-initialisation touches
    about 180 pages, each a copy-on-write fault, and cost about 0.7 ms of a run's CPU. It
    exists for processes that had other threads at the fork; the zygote never has any
    (it only ever runs this loop), so the locks it resets are free and the thread
    bookkeeping is already right in the child. The one hook that matters, reseeding
    ``random``, is done by the child itself (``run_child``)."""
    fork = ctypes.PyDLL(None, use_errno=True).fork
    assert threading.active_count() == 1
    ancillary_size = socket.CMSG_SPACE(5 * FD_SIZE)
    while True:
        message, ancillary, _, _ = sock.recvmsg(4096, ancillary_size, socket.MSG_CMSG_CLOEXEC)
        if not message:
            return
        fds = []
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += array.array("i", data[:len(data) - len(data) % FD_SIZE])
        if message[:1] == b"R":
            try:
                _, status = os.waitpid(REAP.unpack(message)[1], 0)
            except ChildProcessError:
                status = 255 << 8
            sock.send(REAP.pack(b"W", status))
            continue
        if own_pid_namespace is not None and _libc().unshare(CLONE_NEWPID) != 0:
            pid = -(ctypes.get_errno() or 1)
        else:
            pid = fork()
            if pid < 0:
                pid = -(ctypes.get_errno() or 1)
            elif pid == 0:
                run_child(message, fds)
            if own_pid_namespace is not None and _libc().setns(own_pid_namespace, CLONE_NEWPID) != 0:
                os._exit(1)  # the next runs would land in this run's namespace: stop (the server sees it)
        for fd in fds:
            os.close(fd)
        sock.send(PID.pack(b"P", pid))


def run_child(message: bytes, fds: list[int]) -> None:  # pragma: no cover - the child
    """In a run's freshly forked process: take the run's pipes, read the program, confine
    the process, run the program. Never returns."""
    try:
        # What ``random``'s at-fork hook does (see ``zygote_loop``), without the Python
        # wrapper of ``Random.seed`` (its only other work is clearing ``gauss_next``).
        _random.Random.seed(random._inst)  # type: ignore[attr-defined]
        random._inst.gauss_next = None  # type: ignore[attr-defined]
        code_fd, stdin_r, stdout_w, stderr_w = fds[:4]
        network = fds[4] if len(fds) > 4 else None
        os.dup2(stdin_r, 0)
        os.dup2(stdout_w, 1)
        os.dup2(stderr_w, 2)
        _, uid, cpu_seconds, memory_mb, max_processes, size, new_ipc = SPAWN.unpack_from(message)
        workdir = message[SPAWN.size:].decode()
        chunks = []
        offset = 0
        while offset < size:
            chunk = os.pread(code_fd, size - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        source = b"".join(chunks).decode("utf-8")
        limits = Limits(cpu_seconds=cpu_seconds, memory_mb=memory_mb, max_processes=max_processes)
        confine_current_process(limits, None if uid < 0 else uid, workdir, network, new_ipc)
        os.closerange(3, 1 << 16)
    except BaseException as exc:  # report any setup failure, then exit
        with contextlib.suppress(BaseException):
            os.write(2, f"sandbox setup failed: {exc!r}\n".encode())
        os._exit(SETUP_FAILED)
    run_program(source, workdir)


class ForkServer:
    """The server's state and event loop (see the module docstring)."""

    def __init__(self, control_in: int, control_out: int, preferred_block: int | None,
                 packages: list[str]) -> None:
        self.control_in = control_in
        self.control_out = control_out
        self.buffer = bytearray()
        self.selector = selectors.DefaultSelector()
        self.runs: dict[int, _Run] = {}  # by slot; the zygote has forked each (its pid is known)
        # What the zygote was asked and has not answered yet, oldest first: to fork a run
        # ("spawn", its pid comes back) or to reap one ("reap", its wait status comes back).
        self.expected: deque[tuple[str, _Run]] = deque()
        self.zygote: _Zygote | None = None
        self.waiting: dict[Any, deque[dict[str, Any]]] = {}  # requests not started yet, per batch, oldest first
        self.running_per_batch: dict[Any, int] = {}
        self.free_slots = list(range(SLOTS_PER_BLOCK - 1, -1, -1))
        # Slots whose working-directory tmpfs is mounted, with its state when it was new.
        self.mounted: dict[int, DirectoryState] = {}
        self.block: int | None = None
        self.block_lock = None
        self.private = False  # the filesystem view (see the filesystem module)
        self.host_netns: int | None = None  # the host's network namespace, for runs that ask for it
        # An empty network namespace per slot: runs in different slots cannot reach each other
        # (abstract Unix sockets and netlink are per namespace); made on the slot's first use.
        self.slot_netns: dict[int, int] = {}
        self.server_netns: int | None = None
        self.pid_namespaces = False
        self.ipc_namespaces = False
        # A program running as this process's uid (no root) must not read or write its
        # memory through /proc/<pid>/mem; the zygote inherits this with the memory.
        prctl(PR_SET_DUMPABLE, 0)
        if IS_ROOT:
            claimed = claim_uid_block(preferred_block)
            if claimed is None:
                raise RuntimeError("every block of sandbox uids is taken by other fork servers")
            self.block, self.block_lock = claimed
            self._sweep_block()
            self.private = enter_view(packages)
            self.host_netns = isolate_network()
            if self.host_netns is not None:
                self.server_netns = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            self.pid_namespaces = namespace_works(CLONE_NEWPID)
            self.ipc_namespaces = namespace_works(CLONE_NEWIPC)
        self.network = self.host_netns is not None
        self.children_path = f"/proc/{os.getpid()}/task/{os.getpid()}/children"
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
        try:
            fd = os.open(self.children_path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                children = {int(pid) for pid in os.read(fd, 1 << 20).split()}
            finally:
                os.close(fd)
        except OSError:
            children = set()
        return children - {self.zygote.pid} if self.zygote is not None else children

    # -- starting runs ----------------------------------------------------------------

    def start_waiting(self) -> None:
        """Start every waiting request that a free slot and its batch's worker count allow.
        A batch (``execute_many``) is throttled here, so that the next run of a batch
        starts the moment one ends, without a round trip to the client. Each batch has
        its own queue, so this costs O(batches), not O(waiting requests): walking a long
        queue would touch (and, with a child alive, copy) every page holding a request."""
        for batch, queue in list(self.waiting.items()):
            if not self.free_slots:
                return
            limit = queue[0].get("batch_workers", SLOTS_PER_BLOCK) if batch is not None else SLOTS_PER_BLOCK
            while queue and self.free_slots and self.running_per_batch.get(batch, 0) < limit:
                self.running_per_batch[batch] = self.running_per_batch.get(batch, 0) + 1
                self._start(queue.popleft())
            if not queue:
                del self.waiting[batch]

    def _start(self, request: dict[str, Any]) -> None:
        slot = self.free_slots.pop()
        uid = self.uid(slot)
        try:
            if self.private and uid is not None:
                workdir = f"/tmp/slot-{slot}"
                if slot not in self.mounted:
                    self.mounted[slot] = mount_workdir(workdir, uid, SANDBOX_GID)
            else:
                workdir = tempfile.mkdtemp(prefix="pettingllm-sandbox-")
                if uid is not None:  # root without the view: the slot's uid must be able to use it
                    os.chown(workdir, uid, SANDBOX_GID)
            now = time.monotonic()
            run = _Run(request, slot, uid, workdir, now, now + float(request["timeout"]))
            run.stdin = memoryview(request["stdin"].encode("utf-8", errors="replace"))
            self._spawn(run)
        except OSError as exc:  # e.g. out of memory or pids: this run fails, the server lives on
            self._start_failed(request, slot, exc)

    def _start_failed(self, request: dict[str, Any], slot: int, exc: OSError, *, slot_reusable: bool = True) -> None:
        if slot_reusable:
            self.free_slots.append(slot)
        self._batch_done(request)
        self.send({"id": request["id"], "error": f"could not start the run: {exc}"})

    def _batch_done(self, request: dict[str, Any]) -> None:
        batch = request.get("batch")
        self.running_per_batch[batch] -= 1
        if not self.running_per_batch[batch]:
            del self.running_per_batch[batch]

    def _spawn(self, run: _Run) -> None:
        """Ask the zygote to fork the run's process; its pid comes back later (``_spawned``)."""
        assert self.zygote is not None
        timeout = float(run.request["timeout"])
        code = run.request["code"].encode("utf-8", errors="replace")
        mine: list[int] = []  # the server's ends of the pipes
        theirs: list[int] = []  # the code and the child's ends, for the zygote
        try:
            code_fd = os.memfd_create("main.py", os.MFD_CLOEXEC)
            theirs.append(code_fd)
            view = memoryview(code)
            while view:
                view = view[os.write(code_fd, view):]
            for child_reads in (True, False, False):  # stdin, stdout, stderr
                read_end, write_end = os.pipe()
                theirs.append(read_end if child_reads else write_end)
                mine.append(write_end if child_reads else read_end)
            message = SPAWN.pack(
                b"S", -1 if run.uid is None else run.uid, max(1, int(timeout) + 1), int(run.request["memory_mb"]),
                int(run.request["max_processes"]), len(code),
                self.ipc_namespaces) + run.workdir.encode()
            network = self._network_for(run)
            self.zygote.send(message, theirs + ([network] if network is not None else []))
        except BaseException:
            for fd in mine:
                os.close(fd)
            raise
        finally:
            for fd in theirs:  # the zygote has its own copies now (or the run failed)
                os.close(fd)
        run.fds = {"in": mine[0], "out": mine[1], "err": mine[2]}
        self.expected.append(("spawn", run))

    def _network_for(self, run: _Run) -> int | None:
        """The network namespace the run joins: the host's if it asked for no isolation, else
        its slot's own empty one (or, if one cannot be made, the server's empty one)."""
        if self.host_netns is None or self.server_netns is None:
            return None
        if not run.request["isolate_network"]:
            return self.host_netns
        if run.slot not in self.slot_netns:
            if _libc().unshare(CLONE_NEWNET) != 0:
                return self.server_netns
            try:
                self.slot_netns[run.slot] = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            finally:
                if _libc().setns(self.server_netns, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "could not return to the server's network namespace")
        return self.slot_netns[run.slot]

    def _spawned(self, run: _Run, reply: bytes) -> None:
        """The zygote's answer to a spawn request: the run's pid, or why not."""
        (_, pid) = PID.unpack(reply)
        if pid <= 0:
            for fd in run.fds.values():
                os.close(fd)
            run.fds = {}
            self._start_failed(run.request, run.slot, OSError(-pid, os.strerror(-pid)),
                               slot_reusable=self._reset_workdir(run))
            return
        run.pid = pid
        run.pidfd = os.pidfd_open(pid)  # the zygote reaps it only when told to, so it is still there
        for name in ("out", "err"):
            fd = run.fds[name]
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ, (run, name))
        if run.stdin:
            os.set_blocking(run.fds["in"], False)
            self.selector.register(run.fds["in"], selectors.EVENT_WRITE, (run, "in"))
        else:
            os.close(run.fds.pop("in"))
        self.selector.register(run.pidfd, selectors.EVENT_READ, (run, "exit"))
        self.runs[run.slot] = run

    def _on_zygote(self) -> None:
        """Handle the zygote's answers that arrived, in the order of the requests."""
        assert self.zygote is not None
        while self.expected:
            reply = self.zygote.receive(block=False)
            if reply is None:
                return
            kind, run = self.expected.popleft()
            if kind == "spawn":
                self._spawned(run, reply)
            else:
                self._reaped(run, REAP.unpack(reply)[1])

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
        run.duration = time.monotonic() - run.start
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(run.pid, signal.SIGKILL)
        # The program is over: the batch's next run starts now, in another slot (so with
        # another uid and working directory), and the zygote forks it while this one is
        # cleaned up here.
        self._batch_done(run.request)
        self.start_waiting()
        for name in ("out", "err"):
            if name in run.fds:
                self._read(run, name)
        self._clean_leftovers(run)
        for name in list(run.fds):
            self._close(run, name)
        self.selector.unregister(run.pidfd)
        os.close(run.pidfd)
        del self.runs[run.slot]
        # The zygote reaps it (the process group is dead, so its id can be reused now);
        # the result goes out when the wait status is back (``_reaped``).
        assert self.zygote is not None
        self.zygote.send(REAP.pack(b"R", run.pid), [])
        self.expected.append(("reap", run))

    def _reaped(self, run: _Run, status: int) -> None:
        if self._reset_workdir(run):
            self.free_slots.append(run.slot)
        cap = int(run.request["max_output_bytes"])
        self.send({
            "id": run.request["id"],
            "stdout": bytes(run.output["out"][:cap]).decode("utf-8", errors="replace"),
            "stderr": bytes(run.output["err"][:cap]).decode("utf-8", errors="replace"),
            "returncode": os.waitstatus_to_exitcode(status),
            "timed_out": run.timed_out,
            "overflow": run.overflow,
            "duration": run.duration,
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

    def _reset_workdir(self, run: _Run) -> bool:
        """Leave the run's working directory as new for the slot's next run, whatever the
        program did to it (a directory named like the source file, a tree deeper than any
        recursion, unreadable directories, FIFOs, links, changed permissions, timestamps or
        extended attributes...). Returns whether the slot can be used again; a slot whose
        directory could not be renewed is retired, and the server lives on with the others."""
        if self.private and run.uid is not None:
            with contextlib.suppress(OSError):
                # Untouched (most runs, failed ones too: the source is never written there)?
                if directory_state(run.workdir) == self.mounted.get(run.slot):
                    return True
            try:  # a fresh tmpfs: quicker and surer than deleting whatever is there
                self.mounted[run.slot] = mount_workdir(run.workdir, run.uid, SANDBOX_GID)
            except OSError:
                self.mounted.pop(run.slot, None)
                return False
            return True
        # A fresh directory per run (the slot is reusable whatever happens to this one).
        with contextlib.suppress(OSError):
            remove_tree(run.workdir)
        return True

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
            request = json.loads(self.buffer[HEADER.size:HEADER.size + size])
            self.waiting.setdefault(request.get("batch"), deque()).append(request)
            del self.buffer[:HEADER.size + size]
        self.start_waiting()
        return True

    def start_zygote(self) -> None:
        """Fork the zygote (call after the warm imports and ``gc.freeze()``)."""
        self.zygote = _Zygote.start(self.pid_namespaces,
                                    (self.control_in, self.control_out, self.selector.fileno()))
        self.selector.register(self.zygote.socket, selectors.EVENT_READ, "zygote")
        self.selector.register(self.zygote.pidfd, selectors.EVENT_READ, "zygote-exit")

    def serve(self) -> None:
        assert self.zygote is not None
        self.selector.register(self.control_in, selectors.EVENT_READ, None)
        self.send({"pid": os.getpid(), "network": self.network, "block": self.block, "zygote": self.zygote.pid,
                   "isolation": {"filesystem": self.private, "uid": self.block is not None,
                                 "pid": self.pid_namespaces, "ipc": self.ipc_namespaces,
                                 "syscalls": self.zygote.filtered}})
        try:
            while True:
                deadlines = [run.deadline for run in self.runs.values() if not run.killed]
                wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                for key, _ in self.selector.select(wait):
                    if key.data is None:
                        if not self._on_control():
                            return
                        continue
                    if key.data == "zygote":
                        self._on_zygote()
                        continue
                    if key.data == "zygote-exit":
                        raise ZygoteDied
                    run, name = key.data
                    if self.runs.get(run.slot) is not run:
                        continue  # finished earlier in this batch of events
                    if name == "exit":
                        self._finish(run)
                    elif name in run.fds:
                        self._on_io(run, name)
                self._check_deadlines()
        except ZygoteDied:
            pass  # only a program running as the server's own uid (no root) can kill it
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        """Kill every run and everything it left, whatever state the zygote is in: the
        zygote is killed first, so that every run's process becomes the server's child."""
        runs = list(self.runs.values()) + [run for _, run in self.expected]
        if self.zygote is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.zygote.pid, signal.SIGKILL)
            os.waitpid(self.zygote.pid, 0)
            self.zygote = None
        for run in runs:
            if run.pid:
                self._kill(run)
            elif run.uid is not None:
                kill_uid_processes(run.uid)
        for _ in range(200):
            children = self._orphans()
            if not children:
                break
            for pid in children:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            for run in runs:
                if run.uid is not None:
                    kill_uid_processes(run.uid)
            time.sleep(0.002)
            self._reap(children)
        for run in runs:
            self._reset_workdir(run)


def run_program(source: str, workdir: str) -> None:  # pragma: no cover - runs in the child
    """Run ``source`` as ``__main__`` the way ``python -I main.py`` would (``__file__`` and
    ``sys.argv[0]`` name ``main.py`` in the working directory), then exit the
    process. Called in the forked child after it was confined; never returns.

    Written for a fresh child of the zygote, where the first touch of each page of the
    interpreter's memory is a copy-on-write fault: what it needs is imported at module
    level, and it calls C functions rather than their Python wrappers where that is the
    same thing."""
    # The C functions, with plain ints: ``signal.signal`` and ``os.environ.update`` go through
    # enum and ABC machinery, whose first use in a child copies dozens of pages.
    _signal.signal(SIGINT, _signal.default_int_handler)
    _signal.signal(SIGTERM, _signal.SIG_DFL)
    path = workdir + "/main.py"
    os.environ["HOME"] = workdir  # the rest is SCRUBBED_ENV already
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = None
    # The source is never written to disk (creating a file costs about 0.5 ms, a tenth of a
    # typical check); ``inspect``, ``warnings`` and tracebacks read it from here.
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
        # Report it from the source in linecache. Python's own hook would read the lines from
        # a file, and writing one would change the working directory, which then had to be
        # replaced before the slot's next run (see ``ForkServer._reset_workdir``).
        if sys.excepthook is sys.__excepthook__:
            try:
                traceback.print_exception(type(exc), exc, exc.__traceback__)
            except BaseException:  # e.g. out of memory while formatting: the C hook, without source lines
                sys.__excepthook__(type(exc), exc, exc.__traceback__)
        else:
            sys.excepthook(type(exc), exc, exc.__traceback__)
    try:
        # Wait for non-daemon threads and run threading's exit hooks, as Python does; with
        # no other thread alive and no hook of threading's or the program's, it would only
        # mark the main thread stopped, which nothing could see.
        if _thread._count() or threading._threading_atexits or atexit._ncallbacks() > _ATEXIT_INHERITED:
            threading._shutdown()  # type: ignore[attr-defined]
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
    config = json.loads(argv[0]) if argv else {}
    try:
        server = ForkServer(control_in, control_out, config.get("block"), list(config.get("packages", [])))
    except Exception as exc:  # tell the client why, then exit
        os.write(control_out, encode_frame({"fatal": f"{type(exc).__name__}: {exc}"}))
        return
    # Objects alive now are never garbage; freezing them keeps children's collections
    # from touching (and copying) the server's pages.
    gc.collect()
    gc.freeze()
    try:
        server.start_zygote()
    except OSError as exc:
        os.write(control_out, encode_frame({"fatal": f"could not start the zygote: {exc}"}))
        return
    server.serve()
