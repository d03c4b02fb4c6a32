"""The trusted driver of code_v0's function-style judge: the main process of a driver run.

:mod:`pettingllm_envs.code.judge.programs` ships this package's modules (compiled on the host,
marshalled) as the run's program and calls :func:`main`; they import nothing from the project,
since the sandbox does not show the project's files. They hold no secret: the run's program is
visible to the code under test.

**Driver runs** (:func:`main`), two processes:

* the **driver** (the run's main process, trusted) makes itself non-dumpable, so that no
  other process of its uid can open ``/proc/<pid>/mem`` or ``/fd`` or ``ptrace`` it; forks
  the candidate *before* reading anything, waits until the candidate has read its frame,
  then reads the tests and runs them. It writes the verdict, a line ``<token> <json>``, on a
  private copy of stdout; the token arrives with the tests, so only the driver knows it;
* the **candidate** (:mod:`.candidate`) reads the code (frame 1) with unbuffered reads,
  points fds 0-2 at ``/dev/null`` (it never sees frame 2), loads the problem's preamble and
  the code, and answers calls over a socket: arguments in, result out, both in the data-only
  codec of :mod:`.wire` (never pickle). The literal calls of all the tests are first made in
  one batch (``prefetch``, a round trip per call was most of a run's latency); if that batch
  crashes or hangs the candidate, the host runs the tests again without it.

The driver runs each test in a fresh namespace (the preamble, then the test's setup and
check) where ``candidate`` and the entry point name are a *proxy*: a driver function that
sends the arguments to the candidate and decodes the reply into plain builtin values
(:class:`.channel.Channel`). So the test's own ``==`` compares plain data that the driver
built; no object, frame, hook or exit of the code under test takes part in the verdict. A test passes only when its
statements ran to their end in the driver within the time limit and every call got a
well-formed reply. A test that crashes, hangs or breaks the candidate fails; the tests
after it get ``None`` (not run), and the host runs them with a fresh candidate.

stdin holds two frames, each a 16-digit ASCII length and that many bytes of ASCII JSON:
frame 1 ``{"preamble", "code", "entry_point", "perturb"}`` (read by the candidate), frame 2
``{"token", "preamble", "entry_point", "tests", "timeout", "shown_chars", "prefetch"}``
(read by the driver after the fork), where ``preamble``, ``code`` and each test are code
objects, compiled and marshalled by the host (hex; a test that did not compile is ``[null,
why]``): compiling them in every run cost more than the rest of the run (the host compiles
each source once and caches it), and only the host can write this stdin. Compiling
untrusted source executes none of it. ``perturb`` makes the candidate change every result
it returns (:func:`.wire.perturb`): the env uses it to find tests that do not check results.
Only the candidate reads it, so a test cannot tell such a run apart.

One-process runs, where the host knows a test's calls in advance, have no driver
(:mod:`.answer`).
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import json
import marshal
import os
import signal
import socket
import time
from typing import Any

from .candidate import candidate_main
from .channel import Broken, Channel, Spoiled, TestTimeout
from .loading import clip, read_frame

PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


def run_tests(channel: Channel, spec: dict[str, Any]) -> list[list[Any] | None]:
    """Each test's ``[passed, reason, timed out, seconds]``; None for the tests after one that left the
    candidate broken (crashed, hung, malformed), and for all of them when the prefetch
    failed: the host runs those again with a fresh candidate (and no prefetch), so that
    one test's crash fails only that test."""
    timeout = float(spec["timeout"])
    limit = int(spec["shown_chars"])
    preamble = marshal.loads(bytes.fromhex(spec["preamble"]))
    entry_point = spec["entry_point"]
    tests = spec["tests"]

    def candidate(*args: Any, **kwargs: Any) -> Any:
        return channel.call(args, kwargs)

    candidate.__name__ = candidate.__qualname__ = entry_point
    armed = [False]

    def on_alarm(signum: int, frame: Any) -> None:
        if armed[0]:
            armed[0] = False
            raise TestTimeout

    signal.signal(signal.SIGALRM, on_alarm)
    armed[0] = True
    signal.setitimer(signal.ITIMER_REAL, timeout)
    channel.wait_loaded()
    calls = spec.get("prefetch") or []
    if calls and channel.load_error is None and not channel.prefetch(calls):
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        channel.stop()
        return [None] * len(tests)
    armed[0] = False
    signal.setitimer(signal.ITIMER_REAL, 0)
    verdicts: list[list[Any] | None] = []
    for compiled, why in tests:
        if channel.load_error is not None or compiled is None:
            verdicts.append([False, channel.load_error or clip(f"the test does not compile: {why}", limit), False, 0.0])
            continue
        if channel.sock is None:
            verdicts.append(None)
            continue
        channel.calls, channel.spoiled = [], None
        reason, timed_out, started = "", False, time.monotonic()
        armed[0] = True
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            namespace: dict[str, Any] = {"__name__": "__test__", "__builtins__": builtins}
            exec(preamble, namespace)
            namespace[entry_point] = candidate
            exec(marshal.loads(bytes.fromhex(compiled)), namespace)
        except TestTimeout:
            reason, timed_out = f"timed out after {timeout:g} s", True
            channel.broken = reason
            channel.stop()
        except (Broken, Spoiled) as error:
            reason = str(error)
        except BaseException as error:
            reason = describe_failure(error, channel)
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
        if not reason:  # a test that swallowed the failure still fails
            reason = channel.spoiled or ("" if channel.sock is not None else channel.broken or "the process is gone")
        verdicts.append([not reason, clip(reason, limit), timed_out, time.monotonic() - started])
    return verdicts


def describe_failure(error: BaseException, channel: Channel) -> str:
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    calls = channel.describe_calls()
    return f"{text}\n{calls}" if calls else text


def make_undumpable() -> None:
    """No process of this uid may read this one's memory or fds (``/proc/<pid>/mem``,
    ``/fd``, ptrace) from now on; refuse to judge where that cannot be made to hold."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError("could not make the judge process non-dumpable")


def fork() -> int:
    """``fork()`` from libc, called with the GIL held: ``os.fork`` would also run Python's
    at-fork machinery (thread state, locks, registered hooks) in both processes, which costs
    more than the rest of a short run's judging; this process never has other threads."""
    pid = ctypes.PyDLL(None, use_errno=True).fork()
    if pid < 0:
        raise OSError(ctypes.get_errno(), "fork failed")
    return pid


def main() -> None:  # pragma: no cover - runs in the sandbox
    make_undumpable()
    ours, theirs = socket.socketpair()
    pid = fork()
    if pid == 0:
        ours.close()
        candidate_main(theirs)
    theirs.close()
    # The candidate reads frame 1 first; frame 2 (the tests) is read only once it is done,
    # so the tests are never in a process the code under test runs in.
    if ours.recv(1) != b"R":
        raise SystemExit("the code's process did not start")
    spec = read_frame()
    verdict_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)  # what tests print does not mix with the verdict
    channel = Channel(ours, pid, spec["entry_point"], int(spec["shown_chars"]))
    started = time.monotonic()
    verdicts = run_tests(channel, spec)
    channel.stop()
    # Reaped here, so that the sandbox finds nothing left behind (its clean-up of leftovers
    # is far slower than a wait).
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    line = f"{spec['token']} {json.dumps({'verdicts': verdicts, 'seconds': time.monotonic() - started})}\n"
    data = memoryview(line.encode())
    while data:
        data = data[os.write(verdict_fd, data):]
    os._exit(0)
