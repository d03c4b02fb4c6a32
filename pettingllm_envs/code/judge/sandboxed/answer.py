"""The one-process run of code_v0's judge: for trusted tests whose calls the host knows in
advance, the run is only the code answering a list of calls; the host runs the tests on the
replies (:mod:`pettingllm_envs.code.judge.replies`), so this process, the code's own, never
sees a test. Its program loads only this module and :mod:`.loading`, so that it starts as
fast as a bare program (these runs are most runs)."""

from __future__ import annotations

import ast
import os
import resource
import sys
from typing import Any

from .loading import load_candidate, read_frame


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
            return repr(("raise", type(error).__name__, str(error)[:2000]))
        except BaseException:
            return "('unreadable',)"
