"""Hidden tests decided on the host, on the decoded replies of a one-process run: the run never
holds a test or an expected value, and the verdict is computed outside it.

A one-call assert (``assert f(<literals>) == <literal>`` and kin: 1042 of HumanEval's 1133
tests) is decided by evaluating its condition on the reply, exactly as the test would
(:class:`HostCheck`; a reply line that is the expected value's own ``repr`` needs no parsing);
any other test whose calls were recorded (:mod:`.recording`) is run here with every call
answered from the replies (:func:`answer_on_host`). A test that replays a call it did not
record goes to the driver. What the host knows of each hidden test is made once per problem
(:func:`host_plans`).
"""

from __future__ import annotations

import ast
import copy
import functools
from dataclasses import dataclass
from typing import Any

from pettingllm_envs.code.datasets import AssertTest, CodeProblem, Test
from pettingllm_envs.code.judge.recording import NotAnswered, call_text, host_namespace, recorded_calls
from pettingllm_envs.code.judge.replies import read_reply
from pettingllm_envs.code.judge.sandboxed.channel import Spoiled, builtin_exception
from pettingllm_envs.code.judge.sandboxed.loading import clip
from pettingllm_envs.code.judge.sources import compiled, test_source
from pettingllm_envs.code.judge.suite import Outcome


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
        error = builtin_exception(reply[1], reply[2])
        if isinstance(error, Spoiled):
            spoiled.append(str(error))
        raise error

    try:
        exec(compiled(test_source(test), "test.py"), host_namespace(problem, candidate))
    except NotAnswered:
        return None
    except Spoiled as error:
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
    """The call, as the run reads it (:func:`.recording.call_text`)."""
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
    """Its calls (:func:`.recording.recorded_calls`), or None when they are not known in advance."""
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
