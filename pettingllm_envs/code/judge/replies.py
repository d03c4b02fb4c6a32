"""The host's end of a one-process run (:mod:`.sandboxed.answer`): the calls it is asked,
and the replies it gives, read back as plain data.

Arguments go in as JSON where JSON carries them exactly, else as ``repr`` (:func:`wire_call`);
replies come out as ``repr``, read back with ``ast.literal_eval``, which builds plain data only,
or, for a small int, None, a bool or a plain string, with a regular expression that gives the
same value (:data:`SIMPLE_REPLY`). A run that does not answer every call readably (it crashed,
hung, printed too much) decides nothing: its tests go to the driver.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from pettingllm_envs.code.judge.sandboxed.loading import FRAME_DIGITS
from pettingllm_envs.code.judge.sources import compiled_hex
from pettingllm_envs.code.judge.suite import Suite
from pettingllm_envs.sandbox import ExecutionResult


@functools.lru_cache(maxsize=1 << 16)
def wire_call(call: str) -> str:
    """A call (:func:`.recording.call_text`) as the one-process run reads it, JSON text: ``[args,
    kwargs]`` where JSON carries them exactly (lists, str-keyed dicts, strings, numbers,
    booleans, None: most calls), else the ``repr`` as a JSON string, which the run reads
    with ``ast.literal_eval``. Parsing a call with ``ast.literal_eval`` is a large part of a short run; JSON comes
    out of the run's one ``json.loads`` of its stdin already parsed."""
    args, kwargs = ast.literal_eval(call)
    plain = [list(args), kwargs]
    try:
        text = json.dumps(plain, allow_nan=False)
        exact = json.loads(text) == plain  # a tuple read back as a list, an int key as a str: not equal
    except (TypeError, ValueError, RecursionError):
        exact = False
    return text if exact else json.dumps(call)


def answer_stdin(suite: Suite, calls: Sequence[str], timeout: float) -> str:
    problem = suite.problem
    head = json.dumps({"preamble": compiled_hex(problem.preamble, "prompt.py")[0],
                       "code": compiled_hex(suite.code, "solution.py")[0], "entry_point": problem.entry_point,
                       "cpu_seconds": math.ceil(timeout)})
    # The calls' JSON is made once per call (wire_call), not once per run.
    text = f'{head[:-1]}, "calls": [{", ".join(map(wire_call, calls))}]}}'
    return f"{len(text):0{FRAME_DIGITS}d}{text}"


#: The first line of a one-process run whose code loaded.
LOADED_LINE = repr(("loaded",))


#: A reply of a small int, None, a bool or a printable-ASCII string without quotes or
#: backslashes, whose value is its text: read without ``ast.literal_eval`` (most replies).
SIMPLE_REPLY = re.compile(r"\('ok', (?:(None|True|False)|(-?(?:0|[1-9][0-9]{0,17}))|'([ -&(-\[\]-~]*)')\)")
SINGLETONS = {"None": None, "True": True, "False": False}


def read_reply(line: str) -> Any:
    """One reply line, read with ``ast.literal_eval`` (plain data only); None when it is not
    a well-formed ``("ok", value)`` or ``("raise", name, message)``."""
    simple = SIMPLE_REPLY.fullmatch(line)
    if simple is not None:
        singleton, number, string = simple.groups()
        return "ok", (SINGLETONS[singleton] if singleton is not None else int(number) if number is not None
                      else string)
    try:
        reply = ast.literal_eval(line)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if type(reply) is tuple and ((len(reply) == 2 and reply[0] == "ok") or (
            len(reply) == 3 and reply[0] == "raise" and type(reply[1]) is str and type(reply[2]) is str)):
        return reply
    return None


def read_replies(result: ExecutionResult, calls: Sequence[str],
                 known_lines: dict[str, tuple[str, tuple[str, Any]]]) -> tuple[str | None, list[Any] | None]:
    """The load failure (if any) and the replies of a one-process run to ``calls``, read
    with ``ast.literal_eval`` (plain data only); None for both when the run did not answer
    every call readably and in order (it crashed, hung, overflowed its output, returned a
    value ``repr`` does not carry). A reply line equal to its call's entry in
    ``known_lines`` (the ``repr`` of the reply a test expects) is that entry's reply, read
    back once when the test was prepared: the same value, without parsing it again."""
    if result.returncode != 0 or result.timed_out or result.stop_reason is not None:
        return None, None
    lines = result.stdout.split("\n")[:-1]
    if not lines:
        return None, None
    if lines[0] != LOADED_LINE:
        status = read_reply_status(lines)
        return (status, None) if status is not None else (None, None)
    if len(lines) != len(calls) + 1:
        return None, None
    replies = []
    for call, line in zip(calls, lines[1:], strict=True):
        known = known_lines.get(call)
        reply = known[1] if known is not None and line == known[0] else read_reply(line)
        if reply is None:
            return None, None
        replies.append(reply)
    return None, replies


def read_reply_status(lines: list[str]) -> str | None:
    """Why the code failed to load, when the run's only line says so."""
    if len(lines) != 1:
        return None
    try:
        status = ast.literal_eval(lines[0])
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if type(status) is tuple and len(status) == 2 and status[0] == "failed":
        return str(status[1])
    return None
