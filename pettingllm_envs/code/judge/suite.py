"""What the judge judges and what it decides: a :class:`Suite` (tests of one problem judged
against one code in one sandbox run) and an :class:`Outcome` (the verdict of one (code, test)
pair), with :func:`error_tail`, the reason given when a run ended without a verdict."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pettingllm_envs.code.datasets import CodeProblem, Test
from pettingllm_envs.code.judge.sandboxed.loading import clip


@dataclass(frozen=True)
class Outcome:
    """The verdict of one (code, test) pair."""

    passed: bool
    reason: str = ""
    """Why it failed (the exception and the function's latest calls, a wrong answer, a
    timeout); empty when it passed. Bounded by ``shown_chars``."""
    timed_out: bool = False
    """It failed because it ran past its time limit (or its run did)."""
    seconds: float = field(default=0.0, compare=False)
    """Wall-clock seconds the test ran in a driver run (0 where it was not measured)."""


@dataclass(frozen=True)
class Suite:
    """Tests of one problem judged against one code in one sandbox run."""

    problem: CodeProblem
    code: str
    tests: tuple[Test, ...]
    perturb: bool = False
    trusted: bool = False
    """The tests are the problem's own (hidden) tests: those whose calls are all known in
    advance may run on the host, on the code's replies (:func:`.host_checks.answer_on_host`)."""


#: A one-process run: (suite index, its tests' indices, the calls they make, in order, and
#: the reply lines its tests expect, by call: see :func:`.replies.read_replies`).
OneProcessJob = tuple[int, list[int], dict[str, None], dict[str, tuple[str, tuple[str, Any]]]]


def error_tail(stderr: str, limit: int) -> str:
    """The last lines of a traceback, without the sandbox's temporary paths."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    text = re.sub(r'File "[^"]*"', 'File "program.py"', "\n".join(lines[-4:]))
    return clip(text, limit) if text else "no error message"
