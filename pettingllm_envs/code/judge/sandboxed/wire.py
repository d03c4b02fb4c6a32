"""What travels on the candidate socket of a driver run of code_v0's judge: values in a
data-only codec (never pickle), messages as a 4-byte length and that many bytes, and
:func:`perturb`, which moves every result the candidate returns when the env asks for it.

The host uses the codec too: a test's literal call is keyed (:func:`call_key`) and sent as
wire trees before the tests run (the driver's prefetch).
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

MESSAGE = struct.Struct("!I")
#: Largest call or reply on a candidate socket, bytes.
MAX_MESSAGE = 32 << 20
#: Integers at least this large travel as hexadecimal (decimal conversion is capped by Python).
BIG_INT = 1 << 64


class Unsupported(Exception):
    """A value that is not plain data (the codec's types)."""


class ProtocolError(Exception):
    """A malformed message on a candidate socket."""


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


def call_key(args: Any, kwargs: Any) -> str:
    return json.dumps([args, kwargs], separators=(",", ":"), sort_keys=True)


# ------------------------------------------------------------------ socket messages
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
