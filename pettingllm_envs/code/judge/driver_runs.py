"""The host's end of a driver run (:mod:`.sandboxed.driver`): its stdin, two frames (the
code, then the tests with the run's token), and its verdicts, read from the run's last line.

Before the tests run, the driver makes all their calls with literal arguments in one round
trip (:func:`prefetch_calls`): a round trip per call was most of a run's latency.
"""

from __future__ import annotations

import ast
import functools
import json

from pettingllm_envs.code.datasets import AssertTest
from pettingllm_envs.code.judge.limits import JudgeLimits
from pettingllm_envs.code.judge.sandboxed.loading import FRAME_DIGITS, clip
from pettingllm_envs.code.judge.sandboxed.wire import Unsupported, call_key, to_wire
from pettingllm_envs.code.judge.sources import compiled_hex, test_source
from pettingllm_envs.code.judge.suite import Outcome, Suite, error_tail
from pettingllm_envs.sandbox import ExecutionResult


def frame(payload: dict) -> str:
    text = json.dumps(payload)  # ASCII (lone surrogates escaped), so characters are bytes
    return f"{len(text):0{FRAME_DIGITS}d}{text}"


@functools.lru_cache(maxsize=8192)
def literal_calls(source: str, names: tuple[str, ...]) -> tuple[tuple[str, list], ...]:
    """The calls of ``names`` in ``source`` whose arguments are all literals, as (key,
    wire ``[args, kwargs]``) in source order: the driver makes them all in one round trip
    before the tests run (a round trip per call was most of a run's latency)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    calls = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        try:
            wire = [[to_wire(ast.literal_eval(a)) for a in node.args],
                    {k.arg: to_wire(ast.literal_eval(k.value)) for k in node.keywords}]
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, Unsupported):
            continue
        calls.append(((node.lineno, node.col_offset), call_key(*wire), wire))
    return tuple((key, wire) for _, key, wire in sorted(calls, key=lambda c: c[0]))


def prefetch_calls(suite: Suite) -> list[list]:
    """The literal calls of all the suite's tests, each once, in test order."""
    names = ("candidate", suite.problem.entry_point)
    unique: dict[str, list] = {}
    for test in suite.tests:
        assert isinstance(test, AssertTest)
        for key, wire in literal_calls(test_source(test), names):
            unique.setdefault(key, wire)
    return list(unique.values())


def driver_stdin(suite: Suite, token: str, limits: JudgeLimits, prefetch: bool = True) -> str:
    """Frame 1 (for the code's process) then frame 2 (for the driver, read after the fork: the
    tests and the limits the driver applies, ``limits.timeout`` per test)."""
    problem = suite.problem
    tests = []
    for test in suite.tests:
        assert isinstance(test, AssertTest)
        tests.append(list(compiled_hex(test_source(test), "test.py")))
    preamble, why = compiled_hex(problem.preamble, "prompt.py")
    if preamble is None:
        raise ValueError(f"the preamble of {problem.problem_id} does not compile: {why}")
    code = {"preamble": preamble, "code": compiled_hex(suite.code, "solution.py")[0],
            "entry_point": problem.entry_point, "perturb": suite.perturb}
    judged = {"token": token, "preamble": preamble, "entry_point": problem.entry_point, "tests": tests,
              "timeout": limits.timeout, "shown_chars": limits.shown_chars,
              "prefetch": prefetch_calls(suite) if prefetch else []}
    return frame(code) + frame(judged)


def read_verdicts(result: ExecutionResult, token: str, count: int, limit: int) -> list[Outcome | None]:
    """The driver's per-test verdicts (None: not run, because an earlier test left the
    candidate broken), or the same failure for every test when the run did not end with a
    well-formed verdict line carrying ``token``."""
    lines = result.stdout.rstrip("\n").rsplit("\n", 1)
    head, _, body = lines[-1].partition(" ")
    if result.returncode == 0 and not result.timed_out and head == token:
        try:
            verdicts = json.loads(body)["verdicts"]
            if len(verdicts) == count:
                return [None if v is None else Outcome(bool(v[0]), "" if v[0] else clip(str(v[1]), limit),
                                                       bool(v[2]), float(v[3])) for v in verdicts]
        except (ValueError, TypeError, KeyError, IndexError):
            pass
    if result.timed_out:
        why = "the run timed out"
    else:
        why = f"the judge stopped before its verdict ({result.stop_reason or f'exit code {result.returncode}'})"
    return [Outcome(False, clip(f"{why}:\n{error_tail(result.stderr, limit)}", limit), result.timed_out)] * count
