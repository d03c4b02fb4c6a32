"""Recording a trusted (hidden) test's calls on the host, before any code is judged.

The host runs the test with :class:`Anything` as every result of the function and its asserts
raising nothing (:func:`recording_code`), and notes each call (:func:`recorded_calls`; all 1133
HumanEval tests qualify; a test whose arguments depend on a result does not). A test whose
calls are known in advance needs no driver: one run per code only answers those calls, and the
host decides the test on the replies (:mod:`pettingllm_envs.code.judge.host_checks`). A test
gets a private ``random`` seeded with :data:`HOST_RANDOM_SEED` both when it is recorded and
when it is replayed (:func:`host_namespace`), so the replay makes the calls it recorded.
"""

from __future__ import annotations

import ast
import builtins
import functools
import random
import types
from collections.abc import Callable
from typing import Any

from pettingllm_envs.code.datasets import AssertTest, CodeProblem
from pettingllm_envs.code.judge.replies import wire_call
from pettingllm_envs.code.judge.sources import compiled, test_source


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
