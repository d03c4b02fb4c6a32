"""Judging a stdio-style program: the code is the program, the test's input its stdin; its
output is compared token by token here, outside the sandbox."""

from __future__ import annotations

from pettingllm_envs.code.datasets import IOTest
from pettingllm_envs.code.judge.limits import JudgeLimits
from pettingllm_envs.code.judge.sandboxed.loading import clip
from pettingllm_envs.code.judge.suite import Outcome, error_tail
from pettingllm_envs.sandbox import ExecutionResult


def tokens(text: str) -> list[str]:
    return text.split()


def judge_stdio(test: IOTest, result: ExecutionResult, limits: JudgeLimits) -> Outcome:
    limit = limits.shown_chars
    if result.timed_out:
        return Outcome(False, f"timed out after {limits.timeout:g} s")
    if not result.passed:
        why = result.stop_reason or f"exit code {result.returncode}"
        return Outcome(False, clip(f"failed ({why}):\n{error_tail(result.stderr, limit)}", limit))
    if tokens(result.stdout) == tokens(test.output):
        return Outcome(True)
    half = limit // 2 - 20
    return Outcome(False, f"wrong answer: expected {clip(test.output, half)!r}, got {clip(result.stdout, half)!r}")
