"""The driver's end of the candidate process in a driver run of code_v0's judge: a test's
call of the function goes out through :class:`Channel` and its reply comes back decoded into
plain builtin values (or a builtin exception), so the test's own ``==`` compares data the
driver built. The exceptions here end a test whatever it catches (:class:`TestTimeout`,
:class:`Broken`, :class:`Spoiled`)."""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import signal
import socket
from typing import Any

from .loading import clip
from .wire import ProtocolError, Unsupported, call_key, encode, from_wire, receive_message, send_message, to_wire

#: How many of a test's latest calls a failure reason lists.
SHOWN_CALLS = 3


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
