"""What both sandbox programs of code_v0's judge start with: reading a stdin frame with
unbuffered reads, loading the code under test as module ``solution``, and :func:`clip` for
their failure messages.

Failure messages carry no line number: a line depends on how a program is printed, and a
tester's test, which reads the messages of the exceptions the function raises, must not tell
the reference from its mutants or the coder's code by anything but their results.

A frame is a :data:`FRAME_DIGITS`-digit ASCII length and that many bytes of ASCII JSON.
"""

from __future__ import annotations

import builtins
import json
import marshal
import os
import sys
import types
from typing import Any

FRAME_DIGITS = 16


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


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 15)] + " [... cut ...]"


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
        return None, ["failed", f"{type(error).__name__}: {error}"]
