"""Seeded program mutants of a problem's reference solution: the wrong programs a tester's
test must tell from the right one to earn credit in ``code_v0``.

**Why.** A wrong program is needed to tell a test that checks the task from one that checks
nothing. The reference with every result perturbed
(:func:`pettingllm_envs.code.judge.sandboxed.wire.perturb`) is not enough on its own: that
perturbation has one recognisable signature (strings gain ``"\\x00"``, lists repeat their last
element), so a test asserting only its absence would be "valid" while checking nothing about
the task (one generic test of that kind is valid on 50 of HumanEval's 128 train problems
against the perturbation alone).
Mutants are wrong programs with no common signature: each changes one place of the
reference (an operator, a comparison, a constant, a boundary, a condition, a method, a
statement, an early return), so a test kills one only by checking behaviour of this
problem. A test's worth grows with the share of mutants it kills (:func:`kill_credit`).

**How.** :func:`mutant_sources` lists every single-site mutation of the reference
(:class:`Mutator`, an :class:`ast.NodeTransformer`), keeps a seeded sample (the seed is a
hash of the problem id and reference, so the mutants are the same in every process and
run), judges each on the problem's hidden tests (one answering process per mutant, the judge's
cheapest run) and keeps the *plausible* wrong programs (:func:`_plausible`), those that pass
some hidden test first: those that return a value of the reference's type on at least
:data:`PLAUSIBLE_SHARE` of the hidden tests' calls, and still fail a hidden test once their
crashes and changes of type are repaired by the reference (:func:`repaired_source`), i.e. they
are wrong in their values. A mutant that passes every hidden test may be equivalent to the
reference and is not a wrong program we can certify; one that crashes on nearly every input
(a ``NameError`` that only a trivial empty case escapes) is killed by any test that merely
calls the function, the perturbation's weakness again, and is dropped (HumanEval/23 alone has
no plausible mutant left: its checking tests get full credit, as stdio tests do). Mutants
whose run does not answer every call (they loop or kill their process) are dropped too: every
test run against one would pay the time limit. Mutants with a pattern of hidden verdicts
not seen yet come first. The result is cached per problem for the process
(:func:`problem_screened`), so deep copies and episodes share it and a problem pays for its
mutants once (12 to 40 one-process sandbox runs: about 0.7 s a HumanEval problem,
up to 10 s where many mutants loop).

**Kills.** A test kills a mutant when both the mutant and its repaired copy fail it
(:func:`tests_worth`): a kill that only a crash or a change of type made, which any
call-and-check-the-type test would make too, earns nothing. Every program (reference,
mutants, repaired copies, the coder's code) is judged under the same time limit, printed the
same way (:func:`pettingllm_envs.code.judge.sources.printed`); a timeout tells a program from
the reference only where the reference ran that test in at most :data:`SLOW_SHARE` of the
limit (:func:`failed_in_time`). The hidden tests every kept mutant passes (``Screened.trivial``)
are no evidence of a fix in ``code_v0``'s ``really_passes``.

**Why not a library.** mutmut 3 and cosmic-ray 8 mutate files of a project on disk and
drive a test command (pytest) per mutant from a session, in subprocesses: neither gives
an in-process, deterministic "list the mutants of this source string" call, and both
would cost seconds per problem. Hypothesis generates inputs, not wrong programs (it
needs a strategy per signature). A small seeded ``ast`` mutator is deterministic, fast
(milliseconds per problem before judging) and has no dependency.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from threading import Lock
from typing import Any

from pettingllm_envs.code.datasets import AssertTest, CodeProblem, Test
from pettingllm_envs.code.judge.host_checks import answer_on_host
from pettingllm_envs.code.judge.limits import DEFAULT_LIMITS, JudgeLimits
from pettingllm_envs.code.judge.one_process import one_process_jobs, record_replies
from pettingllm_envs.code.judge.programs import ANSWER_PROGRAM
from pettingllm_envs.code.judge.replies import answer_stdin, read_replies
from pettingllm_envs.code.judge.suite import Outcome, Suite
from pettingllm_envs.sandbox import execute_many

__all__ = ["CANDIDATES", "FULL_CREDIT_SHARE", "MAX_MUTANTS", "Mutator", "Screened", "failed_in_time", "kill_credit",
           "mutant_sources", "problem_mutants", "problem_screened", "repaired_source", "screened", "tests_worth"]

#: Mutants sampled from all single-site mutations and judged on the hidden tests.
CANDIDATES = 40
#: Mutants kept per problem: every tester test that counts runs against each of them.
MAX_MUTANTS = 6
#: A test killing this share of the mutants (rounded up, at least one) earns full credit;
#: fewer kills earn proportionally less, none earns nothing.
FULL_CREDIT_SHARE = 1 / 3
#: CPU seconds for all of a mutant's hidden-test calls, and wall-clock seconds for its run,
#: when screening it: one that loops is dropped, and costs no more than this.
SCREEN_CPU = 0.4
SCREEN_WALL = 1.0
#: Candidates screened per sandbox batch; screening stops once enough mutants are kept.
SCREEN_BATCH = 12
#: A kept mutant returns a value of the reference's type on at least this share of the
#: hidden tests' calls: one that crashes on nearly every input is killed by any test that calls it.
PLAUSIBLE_SHARE = 0.5
#: A timeout tells a program from the reference only where the reference ran the same test in
#: at most this share of the same limit.
SLOW_SHARE = 0.5

_BINARY_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Add: (ast.Sub, ast.Mult), ast.Sub: (ast.Add,), ast.Mult: (ast.Add, ast.FloorDiv),
    ast.Div: (ast.Mult, ast.FloorDiv), ast.FloorDiv: (ast.Div, ast.Mult), ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,), ast.BitAnd: (ast.BitOr,), ast.BitOr: (ast.BitAnd,), ast.BitXor: (ast.BitOr,),
    ast.LShift: (ast.RShift,), ast.RShift: (ast.LShift,),
}
_COMPARE_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt), ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.In: (ast.NotIn,), ast.NotIn: (ast.In,), ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
}
_NAME_SWAPS = {"min": "max", "max": "min", "any": "all", "all": "any", "sorted": "list"}
_METHOD_SWAPS = {
    "upper": ("lower",), "lower": ("upper",), "swapcase": ("upper", "lower"), "isupper": ("islower",),
    "islower": ("isupper",), "startswith": ("endswith",), "endswith": ("startswith",), "lstrip": ("rstrip",),
    "rstrip": ("lstrip",), "strip": ("lstrip",), "find": ("rfind",), "rfind": ("find",), "isdigit": ("isalpha",),
    "isalpha": ("isdigit",), "index": ("count",), "count": ("index",), "append": ("insert",),
}

Variant = Callable[[ast.AST], ast.AST | list[ast.stmt]]


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _variants(node: ast.AST) -> Iterator[Variant]:
    """The single-site mutations of ``node`` (each builds a new node from a copy)."""
    if isinstance(node, ast.BinOp | ast.AugAssign):
        for op in _BINARY_SWAPS.get(type(node.op), ()):
            yield lambda n, op=op: _replaced(n, op=op())
    elif isinstance(node, ast.Compare):
        for i, current in enumerate(node.ops):
            for op in _COMPARE_SWAPS.get(type(current), ()):
                yield lambda n, i=i, op=op: _replaced(n, ops=[*n.ops[:i], op(), *n.ops[i + 1:]])
    elif isinstance(node, ast.BoolOp):
        yield lambda n: _replaced(n, op=ast.Or() if isinstance(n.op, ast.And) else ast.And())
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        yield lambda n: n.operand
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        yield lambda n: ast.Constant(n.value + 1)
        yield lambda n: ast.Constant(n.value - 1)
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield lambda n: ast.Constant(not n.value)
    elif isinstance(node, ast.Constant) and type(node.value) is str:
        yield lambda n: ast.Constant(n.value[1:] if n.value else " ")
    elif isinstance(node, ast.Name) and node.id in _NAME_SWAPS:
        yield lambda n: ast.Name(_NAME_SWAPS[n.id], n.ctx)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        for name in _METHOD_SWAPS.get(node.func.attr, ()):
            yield lambda n, name=name: _replaced(n, func=_replaced(n.func, attr=name))
        if not node.args and not node.keywords:  # ``x.strip()`` -> ``x``
            yield lambda n: n.func.value
    elif isinstance(node, ast.If | ast.While):
        yield lambda n: _replaced(n, test=ast.UnaryOp(ast.Not(), n.test))
    elif isinstance(node, ast.For):
        yield lambda n: _replaced(n, body=[*n.body, ast.Break()])  # the loop runs once
    elif isinstance(node, ast.Assign | ast.AugAssign | ast.Expr | ast.Return) and not _is_docstring(node):
        yield lambda n: ast.Pass()  # the statement is dropped
    if isinstance(node, ast.FunctionDef) and node.args.args:  # early return of the first argument
        yield lambda n: _replaced(n, body=[*_docstring(n), ast.Return(ast.Name(n.args.args[0].arg, ast.Load())),
                                           *n.body[len(_docstring(n)):]])


def _docstring(node: ast.FunctionDef) -> list[ast.stmt]:
    return node.body[:1] if node.body and _is_docstring(node.body[0]) else []


def _replaced(node: ast.AST, **fields: object) -> ast.AST:
    new = copy.copy(node)
    for name, value in fields.items():
        setattr(new, name, value)
    return new


class Mutator(ast.NodeTransformer):
    """Applies the ``target``-th single-site mutation of a tree (post-order numbering) and
    counts the sites; ``target=-1`` only counts."""

    def __init__(self, target: int = -1) -> None:
        self.target = target
        self.sites = 0

    def visit(self, node: ast.AST) -> ast.AST | list[ast.stmt]:
        if _is_docstring(node):
            return node
        node = self.generic_visit(node)
        for variant in _variants(node):
            if self.sites == self.target:
                self.sites += 1
                return variant(node)
            self.sites += 1
        return node


def _all_mutations(reference: str) -> list[str]:
    """Every single-site mutant of ``reference`` that compiles and differs from it, once each."""
    try:
        tree = ast.parse(reference)
    except SyntaxError:
        return []
    counter = Mutator()
    counter.visit(copy.deepcopy(tree))
    original = ast.unparse(tree)
    found: dict[str, None] = {}
    for site in range(counter.sites):
        mutated = Mutator(site).visit(copy.deepcopy(tree))
        try:
            source = ast.unparse(ast.fix_missing_locations(mutated))
            compile(source, "mutant.py", "exec")
        except (SyntaxError, ValueError, TypeError, AttributeError, RecursionError):
            continue
        if source != original:
            found[source] = None
    return list(found)


@dataclass(frozen=True)
class Screened:
    """A problem's mutants and what the screen learnt of them."""

    sources: tuple[str, ...]
    """The kept mutants (at most :data:`MAX_MUTANTS`)."""
    trivial: tuple[bool, ...]
    """Per hidden test: every kept mutant passes it, so passing it shows no fix."""


def mutant_sources(problem: CodeProblem, limits: JudgeLimits = DEFAULT_LIMITS) -> tuple[str, ...]:
    """Up to :data:`MAX_MUTANTS` seeded plausible wrong programs made from ``problem``'s
    reference (see the module docstring)."""
    return screened(problem, limits).sources


def screened(problem: CodeProblem, limits: JudgeLimits = DEFAULT_LIMITS) -> Screened:
    """:func:`mutant_sources` with the hidden tests every kept mutant passes. The screen runs
    under ``limits``' memory and parallelism but its own short time limits (:data:`SCREEN_CPU`,
    :data:`SCREEN_WALL`): a mutant that does not answer within them is dropped."""
    candidates = _all_mutations(problem.reference)
    seed = hashlib.sha256(f"{problem.problem_id}\0{problem.reference}".encode()).digest()
    random.Random(seed).shuffle(candidates)
    (answerable, reference), = _screen(problem, [problem.reference], limits)
    if not any(v is not None for v in answerable):
        return Screened((), (False,) * len(problem.tests))
    distinct: list[tuple[str, tuple[bool | None, ...]]] = []  # the first mutant of each pattern of hidden verdicts
    repeats: list[tuple[str, tuple[bool | None, ...]]] = []
    seen: set[tuple[bool | None, ...]] = set()
    for start in range(0, min(len(candidates), CANDIDATES), SCREEN_BATCH):
        batch = candidates[start: min(start + SCREEN_BATCH, CANDIDATES)]
        for code, (verdicts, replies) in zip(batch, _screen(problem, batch, limits), strict=True):
            if [v is not None for v in verdicts] != [v is not None for v in answerable]:
                continue  # it did not answer every call: it loops or dies
            if not _plausible(problem, verdicts, reference, replies):
                continue
            pattern = tuple(verdicts)
            (repeats if pattern in seen or not any(pattern) else distinct).append((code, pattern))
            seen.add(pattern)
        if len(distinct) >= MAX_MUTANTS:
            break
    kept = (distinct + repeats)[:MAX_MUTANTS]
    trivial = tuple(bool(kept) and all(verdicts[j] for _, verdicts in kept) for j in range(len(problem.tests)))
    return Screened(tuple(code for code, _ in kept), trivial)


def _plausible(problem: CodeProblem, verdicts: list[bool | None], reference: dict[str, Any],
               replies: dict[str, Any]) -> bool:
    """A plausible wrong program: on most hidden calls it returns a value of the reference's
    type (it does not crash on nearly every input), and it is wrong in its values: with its
    crashes and changes of type repaired (:func:`repaired_source`) it still fails a hidden test."""
    passed = [v for v in verdicts if v is not None]
    if all(passed) or not reference:
        return False
    alike = {call: reply for call, reply in replies.items() if _alike(reply, reference[call])}
    if len(alike) < PLAUSIBLE_SHARE * len(reference):
        return False
    fixed = {**reference, **alike}
    for test in problem.tests:
        outcome = answer_on_host(problem, test, fixed, 40) if isinstance(test, AssertTest) else None
        if outcome is not None and not outcome.passed:
            return True
    return False


def _alike(reply: Any, expected: Any) -> bool:
    """``reply`` returned a value of the type of ``expected``'s, or both raised."""
    if reply[0] == "ok" and expected[0] == "ok":
        return type(reply[1]) is type(expected[1])
    return reply[0] == expected[0] == "raise"


def _screen(problem: CodeProblem, codes: list[str],
            limits: JudgeLimits) -> list[tuple[list[bool | None], dict[str, Any]]]:
    """Each code's verdict on each hidden test from one answering process per code (the
    judge's cheapest run, no driver), None where the run did not answer (it looped or died)
    or the test's calls are not known in advance, and its replies by call."""
    suites = [Suite(problem, code, problem.tests, trusted=True) for code in codes]
    outcomes: list[list[Outcome | None]] = [[None] * len(problem.tests) for _ in suites]
    replies: list[dict[str, Any]] = [{} for _ in suites]
    jobs = one_process_jobs(suites, outcomes)
    results = execute_many([ANSWER_PROGRAM] * len(jobs), stdins=[answer_stdin(suites[i], list(calls), SCREEN_CPU)
                                                                 for i, _, calls, _ in jobs],
                           workers=limits.workers, timeout=SCREEN_WALL, memory_mb=limits.memory_mb)
    for job, result in zip(jobs, results, strict=True):
        record_replies(job, result, suites[job[0]], outcomes, 40)
        answered = read_replies(result, list(job[2]), job[3])[1]
        if answered is not None:
            replies[job[0]] = dict(zip(job[2], answered, strict=True))
    return [([None if o is None else o.passed for o in mine], answers) for mine, answers in zip(outcomes, replies,
                                                                                               strict=True)]


_cache: dict[tuple[str, str], Screened] = {}
_cache_lock = Lock()


def problem_screened(problem: CodeProblem, limits: JudgeLimits = DEFAULT_LIMITS) -> Screened:
    """:func:`screened`, computed once per problem and process (function style only; a stdio
    problem has no mutants: its tests compare the whole output)."""
    if problem.style != "function":
        return Screened((), (False,) * len(problem.tests))
    key = (problem.problem_id, hashlib.sha256(problem.reference.encode()).hexdigest())
    with _cache_lock:
        known = _cache.get(key)
    if known is None:
        known = screened(problem, limits)
        with _cache_lock:
            known = _cache.setdefault(key, known)
    return known


def problem_mutants(problem: CodeProblem, limits: JudgeLimits = DEFAULT_LIMITS) -> tuple[str, ...]:
    """:func:`mutant_sources`, computed once per problem and process."""
    return problem_screened(problem, limits).sources


def repaired_source(problem: CodeProblem, mutant: str) -> str:
    """``mutant`` with every crash and change of type repaired by the reference: where the
    reference returns and the mutant raises or returns a value of another type, it returns
    the reference's result; where the reference raises, it raises. What is left of the
    mutant is wrong only in its values, which no call-and-check-the-type test can see."""
    name = problem.entry_point
    return (f"import copy as _copy\n"
            f"_reference, _mutant = dict(globals()), dict(globals())\n"
            f"exec(compile({problem.reference!r}, 'solution.py', 'exec'), _reference)\n"
            f"exec(compile({mutant!r}, 'solution.py', 'exec'), _mutant)\n"
            f"def {name}(*args, **kwargs):\n"
            f"    expected = _reference[{name!r}](*_copy.deepcopy(args), **_copy.deepcopy(kwargs))\n"
            f"    try:\n"
            f"        result = _mutant[{name!r}](*args, **kwargs)\n"
            f"    except Exception:\n"
            f"        return expected\n"
            f"    return result if type(result) is type(expected) else expected\n")


def kill_credit(kills: int, mutants: int) -> float:
    """A valid test's credit in [0, 1] from how many of the problem's ``mutants`` it kills:
    full at :data:`FULL_CREDIT_SHARE` of them, proportionally less below, 0 for none."""
    if not mutants:
        return 1.0
    return min(1.0, kills / _full_credit_kills(mutants))


def _full_credit_kills(mutants: int) -> int:
    return max(1, math.ceil(FULL_CREDIT_SHARE * mutants))


def failed_in_time(outcome: Outcome, reference: Outcome, limit: float) -> bool:
    """``outcome`` is a failure that tells its code from the reference: not a timeout, or a
    timeout where the reference finished well inside the same limit (:data:`SLOW_SHARE`)."""
    return not outcome.passed and not (outcome.timed_out and reference.seconds > SLOW_SHARE * limit)


def tests_worth(problem: CodeProblem, mutants: Sequence[str], tests: Sequence[Test], reference: Sequence[Outcome],
                checking: Sequence[bool], limit: float,
                judge: Callable[[list[tuple[str, Test]]], list[Outcome]]) -> tuple[float, ...]:
    """Each test's credit: 0 unless ``checking`` (the reference passes it and it checks a
    result), else :func:`kill_credit` of the ``mutants`` it kills; ``judge`` gives the
    verdicts of (code, test) pairs under the time ``limit`` the ``reference`` outcomes had. A
    mutant is killed when both it and its :func:`repaired_source` fail the test
    (:func:`failed_in_time`): a kill that only a crash or a change of type made is not one.
    With no mutants (stdio) a checking test gets full credit. Credit stops growing at
    :func:`_full_credit_kills`, so the first that many mutants run first and the rest only
    against tests that did not kill them all."""
    need = _full_credit_kills(len(mutants))
    kills = dict.fromkeys((i for i, ok in enumerate(checking) if ok), 0)
    for wave in (mutants[:need], mutants[need:]):
        pending = [i for i, killed in kills.items() if killed < need]
        if not wave or not pending:
            continue
        codes = [code for m in wave for code in (m, repaired_source(problem, m))]
        verdicts = judge([(code, tests[i]) for i in pending for code in codes])
        for k, i in enumerate(pending):
            mine = [failed_in_time(o, reference[i], limit) for o in verdicts[k * len(codes): (k + 1) * len(codes)]]
            kills[i] += sum(mine[j] and mine[j + 1] for j in range(0, len(mine), 2))
    return tuple(kill_credit(kills[i], len(mutants)) if i in kills else 0.0 for i in range(len(tests)))
