"""The trusted driver of code_v0's function-style judge: the program of its sandbox runs.

``judge.py`` sends this module's code object (compiled on the host, marshalled) as a run's
program; it imports nothing from the project, since the sandbox does not show the
project's files. It holds no secret: the run's program is visible to the code under test.

**Driver runs** (:func:`main`), two processes:

* the **driver** (the run's main process, trusted) makes itself non-dumpable, so that no
  other process of its uid can open ``/proc/<pid>/mem`` or ``/fd`` or ``ptrace`` it; forks
  the candidate *before* reading anything, waits until the candidate has read its frame,
  then reads the tests and runs them. It writes the verdict, a line ``<token> <json>``, on a
  private copy of stdout; the token arrives with the tests, so only the driver knows it;
* the **candidate** reads the code (frame 1) with unbuffered reads, points fds 0-2 at
  ``/dev/null`` (it never sees frame 2), loads the problem's preamble and the code, and
  answers calls over a socket: arguments in, result out, both in the data-only codec below
  (never pickle). The literal calls of all the tests are first made in one batch
  (``prefetch``, a round trip per call was most of a run's latency); if that batch crashes
  or hangs the candidate, the host runs the tests again without it.

The driver runs each test in a fresh namespace (the preamble, then the test's setup and
check) where ``candidate`` and the entry point name are a *proxy*: a driver function that
sends the arguments to the candidate and decodes the reply into plain builtin values. So
the test's own ``==`` compares plain data that the driver built; no object, frame, hook or
exit of the code under test takes part in the verdict. A test passes only when its
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
it returns (:func:`perturb`): the env uses it to find tests that do not check results. Only
the candidate reads it, so a test cannot tell such a run apart.

**One-process runs** (:func:`answer_calls`): for trusted tests whose calls the host knows
in advance, the run is only the code answering a list of calls; the host runs the tests.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import ctypes
import json
import marshal
import os
import resource
import signal
import socket
import struct
import sys
import time
import traceback
import types
from typing import Any

FRAME_DIGITS = 16
MESSAGE = struct.Struct("!I")
#: Largest call or reply on a candidate socket, bytes.
MAX_MESSAGE = 32 << 20
#: Integers at least this large travel as hexadecimal (decimal conversion is capped by Python).
BIG_INT = 1 << 64
#: How many of a test's latest calls a failure reason lists.
SHOWN_CALLS = 3
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


class Unsupported(Exception):
    """A value that is not plain data (the codec's types)."""


class ProtocolError(Exception):
    """A malformed message on a candidate socket."""


# ------------------------------------------------------------------ the codec
def to_wire(value: Any, depth: int = 0) -> Any:
    """Plain data -> a JSON-able tree. Lists stay lists; other containers and the types
    JSON lacks become one-key objects: ``t`` tuple, ``d`` dict (key/value pairs), ``s`` set,
    ``f`` frozenset, ``b`` bytes (hex), ``c`` complex, ``x`` big int (hex). Subclasses become
    their builtin base (an ``int`` subclass with its own ``__eq__`` arrives as a plain int);
    NumPy scalars and arrays become Python values."""
    if depth > 200:
        raise Unsupported("a value nested more than 200 levels deep")
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    if kind.__module__ == "numpy":
        value = value.tolist() if hasattr(value, "tolist") else value
        kind = type(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        number = int.__int__(value)
        return number if -BIG_INT < number < BIG_INT else {"x": format(number, "x")}
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, list):
        return [to_wire(v, depth + 1) for v in list.__iter__(value)]
    if isinstance(value, tuple | set | frozenset):
        tag = "t" if isinstance(value, tuple) else "f" if isinstance(value, frozenset) else "s"
        return {tag: [to_wire(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"d": [[to_wire(k, depth + 1), to_wire(v, depth + 1)] for k, v in dict.items(value)]}
    if isinstance(value, bytes | bytearray):
        return {"b": bytes(value).hex()}
    if isinstance(value, complex):
        return {"c": [complex.__complex__(value).real, complex.__complex__(value).imag]}
    raise Unsupported(f"a value of type {kind.__name__}")


def from_wire(tree: Any) -> Any:
    """A JSON tree -> plain builtin values; anything outside the codec is a ProtocolError."""
    kind = type(tree)
    if tree is None or kind is bool or kind is int or kind is float or kind is str:
        return tree
    if kind is list:
        return [from_wire(v) for v in tree]
    if kind is dict and len(tree) == 1:
        ((tag, body),) = tree.items()
        try:
            if tag == "x" and type(body) is str:
                return int(body, 16)
            if tag == "b" and type(body) is str:
                return bytes.fromhex(body)
            if tag == "c" and type(body) is list and len(body) == 2 and all(type(p) in (int, float) for p in body):
                return complex(body[0], body[1])
            if type(body) is list:
                if tag == "t":
                    return tuple(from_wire(v) for v in body)
                if tag == "s":
                    return {from_wire(v) for v in body}
                if tag == "f":
                    return frozenset(from_wire(v) for v in body)
                if tag == "d" and all(type(p) is list and len(p) == 2 for p in body):
                    return {from_wire(k): from_wire(v) for k, v in body}
        except (TypeError, ValueError) as error:  # an unhashable key, bad hex
            raise ProtocolError(f"bad {tag!r} value: {error}") from None
    raise ProtocolError(f"not a value of the codec: {type(tree).__name__}")


def perturb(tree: Any) -> Any:
    """A nearby, different value of the same type, on the wire: every number moved, every
    string and sequence extended, every element and dict value changed, booleans flipped.
    A test that still passes when every result is perturbed checks no result."""
    kind = type(tree)
    if tree is None:
        return 0
    if kind is bool:
        return not tree
    if kind is int:
        return tree + 1
    if kind is float:
        if tree != tree:
            return 0.0
        return tree + 1.0 if abs(tree) < 1e15 else -tree
    if kind is str:
        return tree + "\x00"
    if kind is list:
        return [perturb(v) for v in tree] + [perturb(tree[-1]) if tree else 0]
    ((tag, body),) = tree.items()
    if tag == "x":
        return {"x": format(int(body, 16) + 1, "x")}
    if tag == "b":
        return {"b": body + "00"}
    if tag == "c":
        return {"c": [body[0] + 1.0, body[1]]}
    if tag == "d":
        return {"d": [[k, perturb(v)] for k, v in body] or [[0, 0]]}
    return {tag: [perturb(v) for v in body] or [0]}  # tuple, set, frozenset


def encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# ------------------------------------------------------------------ byte plumbing
def read_exactly(fd: int, size: int) -> bytes:
    """``size`` bytes from ``fd`` with ``os.read`` (never a buffered reader, which could
    read ahead into this process's memory what belongs to the other process)."""
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            raise EOFError("stdin ended early")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame() -> dict[str, Any]:
    return json.loads(read_exactly(0, int(read_exactly(0, FRAME_DIGITS))))


def send_message(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(MESSAGE.pack(len(payload)) + payload)


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        count = sock.recv_into(view[got:])
        if not count:
            raise EOFError
        got += count
    return bytes(data)


def receive_message(sock: socket.socket) -> bytes:
    (size,) = MESSAGE.unpack(receive_exactly(sock, MESSAGE.size))
    if size > MAX_MESSAGE:
        raise ProtocolError(f"a message of {size} bytes (the limit is {MAX_MESSAGE})")
    return receive_exactly(sock, size)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 15)] + " [... cut ...]"


def code_line(tb: Any, filename: str) -> str:
    """`` (line N of your code)`` for the deepest frame of the code under test, if any."""
    frames = [f for f in traceback.extract_tb(tb) if f.filename == filename]
    return f" (line {frames[-1].lineno} of the code)" if frames else ""


# ------------------------------------------------------------------ the candidate process
def load_candidate(spec: dict[str, Any]) -> tuple[Any, list[str]]:
    """Run the preamble and the code as module ``solution``: the function and
    ``["loaded"]``, or None and ``["failed", why]``."""
    module = types.ModuleType("solution")
    module.__dict__["__builtins__"] = builtins
    sys.modules["solution"] = module
    try:
        exec(marshal.loads(bytes.fromhex(spec["preamble"])), module.__dict__)
        exec(marshal.loads(bytes.fromhex(spec["code"])), module.__dict__)
        function = module.__dict__.get(spec["entry_point"])
        if not callable(function):
            raise NameError(f"the code does not define the function {spec['entry_point']!r}")
        return function, ["loaded"]
    except BaseException as error:
        return None, ["failed", f"{type(error).__name__}: {error}{code_line(error.__traceback__, 'solution.py')}"]


def answer_calls() -> None:  # pragma: no cover - runs in the sandbox
    """The one-process mode, for trusted tests whose calls are all known in advance:
    stdin is one frame ``{"preamble", "code", "entry_point", "calls", "cpu_seconds"}``, each
    call ``[args, kwargs]`` where JSON carries them exactly, else the ``repr`` of ``(args,
    kwargs)`` (a string, read with ``ast.literal_eval``); the output is one line per item, the load
    status, then one reply per call, each the ``repr`` of a tuple (:func:`answer_repr`). The
    host reads them back as plain data only (``ast.literal_eval``) and decides the tests on
    them, so this process (the code's own) never sees a test. Leaner than the socket codec: this
    mode's runs are most runs, and loading a codec cost a fifth of one."""
    spec = read_frame()
    # All the calls together get one test's time in CPU seconds (a hard limit: the code
    # cannot raise it); the run shares its wall-clock limit with a batch of driver runs.
    resource.setrlimit(resource.RLIMIT_CPU, (spec["cpu_seconds"], spec["cpu_seconds"]))
    sys.set_int_max_str_digits(0)
    out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)  # what the code prints does not mix with the replies
    function, status = load_candidate(spec)
    lines = [repr(tuple(status))]
    if function is not None:
        lines += [answer_repr(function, call) for call in spec["calls"]]
    data = memoryview("\n".join(lines).encode("utf-8", "replace") + b"\n")
    while data:
        data = data[os.write(out, data):]
    os._exit(0)


def answer_repr(function: Any, call: list[Any] | str) -> str:
    """``repr(("ok", result))`` or ``repr(("raise", name, message))`` for one call
    (``[args, kwargs]`` as JSON gave them, or the ``repr`` of ``(args, kwargs)``); the host
    refuses what ``ast.literal_eval`` cannot read back as plain data."""
    try:
        args, kwargs = call if type(call) is list else ast.literal_eval(call)
        return repr(("ok", function(*args, **kwargs)))
    except BaseException as error:
        try:
            return repr(("raise", type(error).__name__, str(error)[:2000] + code_line(error.__traceback__,
                                                                                        "solution.py")))
        except BaseException:
            return "('unreadable',)"


def candidate_main(sock: socket.socket) -> None:  # pragma: no cover - runs in the sandbox
    """The candidate process (see the module docstring). Never returns."""
    try:
        spec = read_frame()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        sock.sendall(b"R")
    except BaseException:
        os._exit(1)
    function, status = load_candidate(spec)
    try:
        send_message(sock, encode(status))
        if status[0] == "loaded":
            serve(sock, function, bool(spec["perturb"]))
    finally:
        os._exit(0)


def answer(function: Any, call: Any, perturbed: bool) -> list[Any]:
    """The reply to one call ``[args, kwargs]`` (wire trees)."""
    try:
        args, kwargs = call
        result = to_wire(function(*map(from_wire, args), **{k: from_wire(v) for k, v in kwargs.items()}))
        reply = ["ok", perturb(result) if perturbed else result]
    except Unsupported as error:
        reply = ["unsupported", str(error)]
    except BaseException as error:
        reply = ["raise", type(error).__name__, str(error)[:2000] + code_line(error.__traceback__, "solution.py")]
    try:
        encode(reply)
    except (ValueError, RecursionError):
        reply = ["unsupported", "a value JSON cannot carry"]
    return reply


def serve(sock: socket.socket, function: Any, perturbed: bool) -> None:  # pragma: no cover - in the sandbox
    """Answer ``["call", args, kwargs]`` and ``["batch", [[args, kwargs], ...]]`` until the
    driver closes the socket."""
    while True:
        try:
            message = json.loads(receive_message(sock))
        except EOFError:
            return
        if message[0] == "batch":
            send_message(sock, encode(["batch", [answer(function, call, perturbed) for call in message[1]]]))
        else:
            send_message(sock, encode(answer(function, message[1:], perturbed)))


# ------------------------------------------------------------------ the driver
class TestTimeout(BaseException):
    """The test ran past its time limit (a BaseException: ``except Exception`` in a test
    does not swallow it)."""


class Broken(BaseException):
    """The candidate crashed, hung or broke the protocol: the test fails whatever it catches."""


class Spoiled(BaseException):
    """A call got no usable result (a value outside the codec, an exit raised): the test
    fails whatever it catches; the candidate lives on."""


class CandidateError(Exception):
    """The function raised an exception that has no builtin counterpart."""


def call_key(args: Any, kwargs: Any) -> str:
    return json.dumps([args, kwargs], separators=(",", ":"), sort_keys=True)


class Channel:
    """The driver's end of the candidate process."""

    def __init__(self, sock: socket.socket, pid: int, entry_point: str, shown_chars: int) -> None:
        self.sock: socket.socket | None = sock
        self.pid = pid
        self.entry_point = entry_point
        self.shown_chars = shown_chars
        self.load_error: str | None = None
        self.broken: str | None = None  # why the candidate is gone (it answers no call any more)
        self.spoiled: str | None = None  # why the current test fails whatever it catches
        self.calls: list[tuple[Any, Any]] = []  # (args, result) of the current test's latest calls
        self.prefetched: dict[str, list[Any]] = {}  # call_key -> reply

    def wait_loaded(self) -> None:
        try:
            status = json.loads(self.receive())
        except TestTimeout:
            status = ["failed", "the code did not finish loading in time"]
        except BaseException:
            status = ["failed", "the code's process stopped while loading"]
        if status != ["loaded"]:
            self.load_error = clip(f"the code failed to load: {status[-1]}", self.shown_chars)
            self.stop()

    def receive(self) -> bytes:
        assert self.sock is not None
        return receive_message(self.sock)

    def stop(self) -> None:
        """Kill the candidate (it is this process's child, so the pid is its own)."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            self.sock.close()
        self.sock = None

    def fail(self, why: str) -> Broken:
        self.broken = why
        self.stop()
        return Broken(why)

    def spoil(self, why: str) -> Spoiled:
        self.spoiled = why
        return Spoiled(why)

    def prefetch(self, calls: list[list[Any]]) -> bool:
        """Make ``calls`` (all the tests' calls with literal arguments) in one round trip;
        False when the candidate did not answer them all (then no test was run)."""
        try:
            send_message(self.sock, encode(["batch", calls]))  # type: ignore[arg-type]
            kind, replies = json.loads(self.receive())
            if kind != "batch" or type(replies) is not list or len(replies) != len(calls):
                return False
        except BaseException:  # crashed, hung (the alarm), malformed
            return False
        self.prefetched = {call_key(*call): reply for call, reply in zip(calls, replies, strict=True)}
        return True

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            wire = [[to_wire(a) for a in args], {str(k): to_wire(v) for k, v in kwargs.items()}]
        except (Unsupported, ValueError, RecursionError) as error:
            raise TypeError(f"{self.entry_point} can only be called with plain data here: {error}") from None
        reply = self.prefetched.get(call_key(*wire)) if self.prefetched else None
        kind, value = self.interpret(self.live_call(wire) if reply is None else reply)
        if kind == "ok":
            self.calls = [*self.calls[1 - SHOWN_CALLS:], (args, value)]
            return value
        if kind == "raise":
            raise value
        raise self.spoil(value)

    def interpret(self, reply: Any) -> tuple[str, Any]:
        kind, value = interpret_reply(reply)
        if kind == "malformed":
            raise self.fail(value)
        return kind, value

    def live_call(self, wire: list[Any]) -> list[Any]:
        if self.sock is None:
            raise Broken(self.broken or "the function's process is gone")
        try:
            send_message(self.sock, encode(["call", *wire]))
            reply = json.loads(self.receive())
        except (EOFError, OSError):
            raise self.fail("the function's process exited during a call") from None
        except (ProtocolError, ValueError, RecursionError):
            raise self.fail("the function's process sent a malformed reply") from None
        if type(reply) is not list or not reply:
            raise self.fail("the function's process sent a malformed reply")
        return reply

    def describe_calls(self) -> str:
        limit = max(20, self.shown_chars // 4)
        lines = []
        for args, result in self.calls:
            shown_args = ", ".join(clip(repr(a), limit) for a in args)
            lines.append(f"{self.entry_point}({shown_args}) returned {clip(repr(result), limit)}")
        return "\n".join(lines)


def interpret_reply(reply: Any) -> tuple[str, Any]:
    """``("ok", result)``, ``("raise", exception)``, ``("spoil", why)`` or ``("malformed",
    why)`` for a reply that is outside the protocol."""
    try:
        kind = reply[0]
        if kind == "ok" and len(reply) == 2:
            return "ok", from_wire(reply[1])
        if kind == "unsupported" and len(reply) == 2:
            return "spoil", (f"the function returned {clip(str(reply[1]), 100)}, which is not plain data "
                             "(None, bool, int, float, complex, str, bytes, list, tuple, dict, set)")
        if kind == "raise" and len(reply) == 3 and type(reply[1]) is str and type(reply[2]) is str:
            error = builtin_exception(reply[1], reply[2])
            return ("spoil", str(error)) if isinstance(error, Spoiled) else ("raise", error)
    except (ProtocolError, RecursionError, TypeError, IndexError, KeyError):
        pass
    return "malformed", "the function's process sent a malformed reply"


def builtin_exception(name: str, message: str) -> BaseException:
    """The driver-side exception for one the function raised: the builtin of that name
    when it is an ``Exception`` subclass (so a test's ``except ValueError`` works), else
    :class:`CandidateError`; exits and interrupts (``SystemExit``...) spoil the test."""
    kind = getattr(builtins, name, None) if name.isidentifier() else None
    if isinstance(kind, type) and issubclass(kind, BaseException) and not issubclass(kind, Exception):
        return Spoiled(f"the function raised {name}")
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except TypeError:  # e.g. UnicodeDecodeError needs five arguments
            pass
    return CandidateError(f"{clip(name, 60)}: {message}")


def run_tests(channel: Channel, spec: dict[str, Any]) -> list[list[Any] | None]:
    """Each test's ``[passed, reason]``; None for the tests after one that left the
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
            verdicts.append([False, channel.load_error or clip(f"the test does not compile: {why}", limit)])
            continue
        if channel.sock is None:
            verdicts.append(None)
            continue
        channel.calls, channel.spoiled = [], None
        reason = ""
        armed[0] = True
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            namespace: dict[str, Any] = {"__name__": "__test__", "__builtins__": builtins}
            exec(preamble, namespace)
            namespace[entry_point] = candidate
            exec(marshal.loads(bytes.fromhex(compiled)), namespace)
        except TestTimeout:
            reason = f"timed out after {timeout:g} s"
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
        verdicts.append([not reason, clip(reason, limit)])
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


if __name__ == "__main__":
    main()
