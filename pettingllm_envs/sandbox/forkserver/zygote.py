"""The zygote: a process forked from the fork server once, right after its warm imports and
``gc.freeze()``, that does nothing but fork runs and reap them on request.

Runs are forked from it rather than from the busy server, so the server's event loop writes
no pages shared with live children (forked from the server, each such write would be a
copy-on-write fault, about 270 per run) and does not pay for the fork. The server sends it each run's pipe
ends and a memfd holding the program (:data:`~pettingllm_envs.sandbox.forkserver.protocol.SPAWN`);
the zygote answers with the run's pid, and later, when asked, reaps it and answers with its
wait status (:data:`~pettingllm_envs.sandbox.forkserver.protocol.REAP`). A run's process is
the zygote's child, reaped only when the server asks (after killing its process group), so
its pid stays valid; what a run leaves behind is still re-parented to the server, the child
subreaper. The program's source reaches the run only through that memfd and its input only
through its stdin pipe: neither the server's requests nor other runs' data are ever in the
zygote's memory, so not in a run's.

The zygote carries the seccomp filter (installed once, inherited by every run) and, when
root, forks each run into a PID namespace of its own. It dies with the server
(``PR_SET_PDEATHSIG``), and the runs with it.
"""

from __future__ import annotations

import array
import ctypes
import os
import signal
import socket
import threading

from pettingllm_envs.sandbox import seccomp
from pettingllm_envs.sandbox.forkserver.child import run_child
from pettingllm_envs.sandbox.forkserver.protocol import FD_SIZE, PID, REAP
from pettingllm_envs.sandbox.isolation import CLONE_NEWPID, PR_SET_PDEATHSIG, _libc, prctl


class ZygoteDied(Exception):
    """The zygote exited (it is never stopped on purpose while the server runs)."""


class Zygote:
    """The server's end of the zygote (see the module docstring): its pid, its socket and a
    pidfd that becomes readable when it exits."""

    def __init__(self, pid: int, sock: socket.socket, filtered: bool) -> None:
        self.pid = pid
        self.sock = sock
        self.socket = sock.fileno()
        self.pidfd = os.pidfd_open(pid)
        self.filtered = filtered
        """Whether the seccomp filter is installed on the zygote (so on every run)."""

    @classmethod
    def start(cls, pid_namespaces: bool, close: tuple[int, ...]) -> Zygote:
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
    ``random``, is done by the child itself (:func:`~pettingllm_envs.sandbox.forkserver.child.run_child`)."""
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

