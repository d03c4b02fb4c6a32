"""One-process runs: each trusted suite's tests whose calls are known in advance (recorded on
the host) are judged with one sandbox run that only answers those calls (no driver, no fork:
the cheapest run), then decided on the host (:mod:`.host_checks`). Where a run did not answer
every call, its tests stay undecided and go to the driver (:mod:`.scheduler`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pettingllm_envs.code.judge.host_checks import answer_on_host, host_plan, host_plans
from pettingllm_envs.code.judge.limits import JudgeLimits
from pettingllm_envs.code.judge.programs import ANSWER_PROGRAM, RUN_SLACK_SECONDS
from pettingllm_envs.code.judge.replies import answer_stdin, read_replies
from pettingllm_envs.code.judge.sandboxed.loading import clip
from pettingllm_envs.code.judge.sources import compiled_hex
from pettingllm_envs.code.judge.suite import OneProcessJob, Outcome, Suite
from pettingllm_envs.sandbox import ExecutionResult, execute_many


def one_process_jobs(suites: Sequence[Suite], outcomes: list[list[Outcome | None]]) -> list[OneProcessJob]:
    """For each trusted suite that can load: its tests whose calls are known in advance
    (recorded on the host) and those calls, for the tests not decided yet, with the reply
    lines its :class:`.host_checks.HostCheck` tests expect."""
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


def answer_in_one_process(suites: Sequence[Suite], outcomes: list[list[Outcome | None]], limits: JudgeLimits) -> None:
    """Judge the trusted tests whose calls are known in advance with one process per suite
    that only answers those calls (no driver, no fork: the cheapest run), on its own."""
    jobs = one_process_jobs(suites, outcomes)
    stdins = [answer_stdin(suites[i], list(calls), limits.timeout) for i, _, calls, _ in jobs]
    results = execute_many([ANSWER_PROGRAM] * len(jobs), stdins=stdins, workers=limits.workers,
                           timeout=limits.timeout + RUN_SLACK_SECONDS, memory_mb=limits.memory_mb)
    for job, result in zip(jobs, results, strict=True):
        record_replies(job, result, suites[job[0]], outcomes, limits.shown_chars)


def one_process_inputs(suite: Suite, job: OneProcessJob, timeout: float) -> tuple[str, str]:
    return ANSWER_PROGRAM, answer_stdin(suite, list(job[2]), timeout)


def one_process_done(job: OneProcessJob, suite: Suite, outcomes: list[list[Outcome | None]],
                     still: list[tuple[int, list[int], bool]], shown_chars: int, result: ExecutionResult) -> None:
    record_replies(job, result, suite, outcomes, shown_chars)
    unanswered = [j for j in job[1] if outcomes[job[0]][j] is None]
    if unanswered:
        still.append((job[0], unanswered, True))
