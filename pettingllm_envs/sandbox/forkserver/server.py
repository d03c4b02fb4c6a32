"""The fork server: a small, warm Python process that forks one child per sandboxed run.

Starting an interpreter costs tens of milliseconds; forking a warm one that has already
imported the usual standard-library modules costs about 1.6 ms. The executor starts one
server per parent process (``python -I -B -c BOOTSTRAP``, with the scrubbed
environment, so nothing secret is in its memory or its ``/proc/<pid>/environ``) and
talks to it over its stdin/stdout with length-prefixed JSON frames
(:mod:`~pettingllm_envs.sandbox.forkserver.protocol`).

The server is single-threaded (forking a multithreaded process is unsafe) and runs one
event loop over the control pipe, the zygote's socket and, per run, the child's
stdout/stderr/stdin pipes and a pidfd that becomes readable when the child exits.

Runs are not forked from the server itself but from its zygote
(:mod:`~pettingllm_envs.sandbox.forkserver.zygote`), which forks each run's process
(:mod:`~pettingllm_envs.sandbox.forkserver.child`) on request and reaps it when told to.
When root, each run has a PID namespace of its own, whose end kills everything the run
left. A run's process is the zygote's child, but the server is a child subreaper (and the
zygote is not), so without PID namespaces every process a run leaves behind is still
re-parented to the server, where it is seen (``/proc/self/task/<tid>/children``, less the
zygote), killed and reaped before the run's result is sent
(:mod:`~pettingllm_envs.sandbox.forkserver.reaper`). A run's main process is reaped
(by the zygote, on the server's request) only after its process group was killed, so the
group id cannot have been reused by then. If the zygote dies first (only a program running
as the server's own uid, i.e. without root, can kill it), the server kills every run and
exits, and the client starts a new one.

Each of the server's slots (at most ``SLOTS_PER_BLOCK`` runs at once) has, when root, a uid
of its own, a working directory (a tmpfs renewed whenever a program changed anything about
it) and an empty network namespace (:mod:`~pettingllm_envs.sandbox.forkserver.slots`).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pettingllm_envs.sandbox.forkserver.protocol import PID, REAP, SPAWN, encode_frame, take_frames
from pettingllm_envs.sandbox.forkserver.reaper import (
    children,
    kill_from_the_top,
    kill_group,
    kill_until_gone,
    proc_uid,
    reap,
)
from pettingllm_envs.sandbox.forkserver.slots import Slots
from pettingllm_envs.sandbox.forkserver.zygote import Zygote, ZygoteDied
from pettingllm_envs.sandbox.isolation import (
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    SLOTS_PER_BLOCK,
    kill_uid_processes,
    prctl,
    uid_processes,
)

#: Imported once in the server so that programs do not pay for them (``typing`` alone
#: takes several milliseconds to import cold). Few and standard library only: every
#: module makes each fork copy more page tables, and large native libraries may start
#: threads. The list covers what HumanEval-style programs import.
PREIMPORTED = ("typing", "math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string",
               "random", "copy", "hashlib", "traceback")

#: Bytes read from (or written to) a run's pipe at once.
READ_CHUNK = 65536


#: How a run's output names its working directory: the same for every slot and run.
SHOWN_WORKDIR = b"/tmp/sandbox"

@dataclass
class Run:
    """One run in flight: its request, its slot, its process and what it wrote so far."""

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


class ForkServer:
    """The server's state and event loop (see the module docstring)."""

    def __init__(self, control_in: int, control_out: int, preferred_block: int | None,
                 packages: list[str]) -> None:
        self.control_in = control_in
        self.control_out = control_out
        self.buffer = bytearray()
        self.selector = selectors.DefaultSelector()
        self.runs: dict[int, Run] = {}  # by slot; the zygote has forked each (its pid is known)
        # What the zygote was asked and has not answered yet, oldest first: to fork a run
        # ("spawn", its pid comes back) or to reap one ("reap", its wait status comes back).
        self.expected: deque[tuple[str, Run]] = deque()
        self.zygote: Zygote | None = None
        self.waiting: dict[Any, deque[dict[str, Any]]] = {}  # requests not started yet, per batch, oldest first
        self.running_per_batch: dict[Any, int] = {}
        # A program running as this process's uid (no root) must not read or write its
        # memory through /proc/<pid>/mem; the zygote inherits this with the memory.
        prctl(PR_SET_DUMPABLE, 0)
        self.slots = Slots(preferred_block, packages)
        self.children_path = f"/proc/{os.getpid()}/task/{os.getpid()}/children"
        prctl(PR_SET_CHILD_SUBREAPER, 1)

    # -- plumbing ---------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(encode_frame(message))
        while data:
            data = data[os.write(self.control_out, data):]

    def _orphans(self) -> set[int]:
        """Children of the server that are not the zygote: what runs left behind (and, while
        the zygote is dead, the runs' own processes)."""
        return children(self.children_path, self.zygote.pid if self.zygote is not None else None)

    # -- starting runs ----------------------------------------------------------------

    def start_waiting(self) -> None:
        """Start every waiting request that a free slot and its batch's worker count allow.
        A batch (``execute_many``) is throttled here, so that the next run of a batch
        starts the moment one ends, without a round trip to the client. Each batch has
        its own queue, so this costs O(batches), not O(waiting requests): walking a long
        queue would touch (and, with a child alive, copy) every page holding a request."""
        for batch, queue in list(self.waiting.items()):
            if not self.slots.free:
                return
            limit = queue[0].get("batch_workers", SLOTS_PER_BLOCK) if batch is not None else SLOTS_PER_BLOCK
            while queue and self.slots.free and self.running_per_batch.get(batch, 0) < limit:
                self.running_per_batch[batch] = self.running_per_batch.get(batch, 0) + 1
                self._start(queue.popleft())
            if not queue:
                del self.waiting[batch]

    def _start(self, request: dict[str, Any]) -> None:
        slot = self.slots.free.pop()
        try:
            workdir = self.slots.workdir(slot)
            now = time.monotonic()
            run = Run(request, slot, self.slots.uid(slot), workdir, now, now + float(request["timeout"]))
            run.stdin = memoryview(request["stdin"].encode("utf-8", errors="replace"))
            self._spawn(run)
        except OSError as exc:  # e.g. out of memory or pids: this run fails, the server lives on
            self._start_failed(request, slot, exc)

    def _start_failed(self, request: dict[str, Any], slot: int, exc: OSError, *, slot_reusable: bool = True) -> None:
        if slot_reusable:
            self.slots.free.append(slot)
        self._batch_done(request)
        self.send({"id": request["id"], "error": f"could not start the run: {exc}"})

    def _batch_done(self, request: dict[str, Any]) -> None:
        batch = request.get("batch")
        self.running_per_batch[batch] -= 1
        if not self.running_per_batch[batch]:
            del self.running_per_batch[batch]

    def _spawn(self, run: Run) -> None:
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
                self.slots.ipc_namespaces) + run.workdir.encode()
            network = self.slots.network_namespace(run.slot, bool(run.request["isolate_network"]))
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

    def _spawned(self, run: Run, reply: bytes) -> None:
        """The zygote's answer to a spawn request: the run's pid, or why not."""
        (_, pid) = PID.unpack(reply)
        if pid <= 0:
            for fd in run.fds.values():
                os.close(fd)
            run.fds = {}
            self._start_failed(run.request, run.slot, OSError(-pid, os.strerror(-pid)),
                               slot_reusable=self.slots.reset_workdir(run.slot, run.workdir))
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

    def _close(self, run: Run, name: str) -> None:
        fd = run.fds.pop(name, None)
        if fd is not None:
            self.selector.unregister(fd)
            os.close(fd)

    def _on_io(self, run: Run, name: str) -> None:
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

    def _read(self, run: Run, name: str) -> None:
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

    def _kill(self, run: Run) -> None:
        if run.killed:
            return
        run.killed = True
        kill_group(run.pid)
        if run.uid is not None:
            kill_uid_processes(run.uid)

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for run in list(self.runs.values()):
            if not run.killed and now >= run.deadline:
                run.timed_out = True
                self._kill(run)

    # -- finishing runs ---------------------------------------------------------------

    def _finish(self, run: Run) -> None:
        """The run's main process has exited (it is a zombie until reaped here)."""
        run.duration = time.monotonic() - run.start
        kill_group(run.pid)
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

    def _reaped(self, run: Run, status: int) -> None:
        if self.slots.reset_workdir(run.slot, run.workdir):
            self.slots.free.append(run.slot)
        cap = int(run.request["max_output_bytes"])
        # The working directory differs by slot (and is random without the private view); shown
        # as is, it would make a traceback, and so every observation that quotes one, depend on
        # which slot ran the program instead of on the program.
        workdir = run.workdir.encode()
        self.send({
            "id": run.request["id"],
            "stdout": bytes(run.output["out"][:cap]).replace(workdir, SHOWN_WORKDIR).decode("utf-8", errors="replace"),
            "stderr": bytes(run.output["err"][:cap]).replace(workdir, SHOWN_WORKDIR).decode("utf-8", errors="replace"),
            "returncode": os.waitstatus_to_exitcode(status),
            "timed_out": run.timed_out,
            "overflow": run.overflow,
            "duration": run.duration,
            "network_isolated": self.slots.network and bool(run.request["isolate_network"]),
        })
        self.start_waiting()

    def _clean_leftovers(self, run: Run) -> None:
        """Kill and reap every process the run left behind. Cheap when there is none: a
        surviving descendant always shows up as an orphan re-parented to the server."""
        uid = run.uid
        if uid is None:
            # Without per-run uids, orphans cannot be told apart: kill them all, from the top.
            kill_until_gone(lambda: reap(self._orphans()), kill_from_the_top)
            return
        orphans = reap(self._orphans())
        if not run.killed and not any(proc_uid(pid) == uid for pid in orphans):
            return

        def uid_survivors() -> set[int]:
            reap(self._orphans())
            return set(uid_processes(range(uid, uid + 1))) - {run.pid}

        kill_until_gone(uid_survivors, lambda _: kill_uid_processes(uid))

    # -- the loop ---------------------------------------------------------------------

    def _on_control(self) -> bool:
        data = os.read(self.control_in, 1 << 20)
        if not data:
            return False
        self.buffer += data
        for request in take_frames(self.buffer):
            self.waiting.setdefault(request.get("batch"), deque()).append(request)
        self.start_waiting()
        return True

    def start_zygote(self) -> None:
        """Fork the zygote (call after the warm imports and ``gc.freeze()``)."""
        self.zygote = Zygote.start(self.slots.pid_namespaces,
                                    (self.control_in, self.control_out, self.selector.fileno()))
        self.selector.register(self.zygote.socket, selectors.EVENT_READ, "zygote")
        self.selector.register(self.zygote.pidfd, selectors.EVENT_READ, "zygote-exit")

    def serve(self) -> None:
        assert self.zygote is not None
        self.selector.register(self.control_in, selectors.EVENT_READ, None)
        slots = self.slots
        self.send({"pid": os.getpid(), "network": slots.network, "block": slots.block, "zygote": self.zygote.pid,
                   "isolation": {"filesystem": slots.private, "uid": slots.block is not None,
                                 "pid": slots.pid_namespaces, "ipc": slots.ipc_namespaces,
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
        uids = [run.uid for run in runs if run.uid is not None]

        def kill_everything(orphans: set[int]) -> None:
            kill_from_the_top(orphans)
            for uid in uids:
                kill_uid_processes(uid)

        kill_until_gone(lambda: reap(self._orphans()), kill_everything)
        for run in runs:
            self.slots.reset_workdir(run.slot, run.workdir)


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
