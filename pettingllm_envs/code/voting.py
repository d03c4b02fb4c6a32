"""How ``code_v0``'s actions are voted on (its :class:`~pettingllm_envs.capabilities.Voting`).

Two coder programs are one vote when they *behave* the same on the problem's public
examples: what each prints for every example call of the statement (its ``>>>`` doctest
lines), run in the sandbox, as AlphaCode clusters programs by outputs. Hidden tests are
never consulted, so a vote says nothing the coder could not have checked itself. A problem
without public examples (stdin/stdout style, or a statement without ``>>>`` lines) votes on
the whitespace-normalised code. Two tester actions are one vote when they state the same set
of tests. An action the env would reject as malformed casts no vote.
"""

from __future__ import annotations

import doctest
from collections.abc import Hashable, Sequence

from pettingzoo import AECEnv

from pettingllm_envs.capabilities import Voting
from pettingllm_envs.code.datasets import CodeProblem
from pettingllm_envs.code.tester_tests import parse_tests
from pettingllm_envs.core.parsing import extract_code_block

__all__ = ["action_keys", "behaviour_program", "doctest_probes", "voting"]


def doctest_probes(statement: str) -> list[str]:
    """The public example calls of a function-style problem: the sources of its ``>>>`` lines."""
    try:
        return [example.source.strip() for example in doctest.DocTestParser().get_examples(statement)]
    except ValueError:  # a malformed docstring example: no public probes
        return []


def behaviour_program(preamble: str, code: str, probes: Sequence[str]) -> str:
    """A program that defines ``code`` after the problem's preamble and prints the repr of
    every probe's value (or the exception's type), one line each. The probes are the
    dataset's example calls, never model output, and the program runs in the sandbox."""
    lines = [preamble, code, ""]
    for probe in probes:
        lines += ["try:", f"    print(repr({probe}))", "except BaseException as _e:",
                  "    print('raised', type(_e).__name__)"]
    return "\n".join(lines)


def coder_keys(env: AECEnv, problem: CodeProblem, texts: Sequence[str]) -> list[Hashable | None]:
    """Each program's behaviour on the public examples (see the module docstring)."""
    from pettingllm_envs.sandbox import execute_many

    codes = [extract_code_block(text) for text in texts]
    probes = doctest_probes(problem.statement) if problem.style == "function" else []
    if not probes:
        return [" ".join(code.split()) if code else None for code in codes]
    limits = env.unwrapped.config.judge_limits()
    jobs = [i for i, code in enumerate(codes) if code]
    results = execute_many([behaviour_program(problem.preamble or problem.statement, codes[i], probes) for i in jobs],
                           timeout=limits.timeout, memory_mb=limits.memory_mb, workers=limits.workers)
    keys: list[Hashable | None] = [None] * len(texts)
    for i, result in zip(jobs, results, strict=True):
        if result.returncode == 0 and not result.timed_out:
            keys[i] = result.stdout
    return keys


def tester_keys(problem: CodeProblem, texts: Sequence[str]) -> list[Hashable | None]:
    """Each tester action's set of tests, as the env parses them."""
    keys: list[Hashable | None] = []
    for text in texts:
        tests, _ignored, reason = parse_tests(problem, text)
        keys.append(frozenset(tests) if reason is None and tests else None)
    return keys


def action_keys(env: AECEnv, agent: str, texts: Sequence[str]) -> list[Hashable | None]:
    """The vote of each candidate action of ``agent`` in the problem ``env`` is playing."""
    problem: CodeProblem = env.unwrapped.instance
    return coder_keys(env, problem, texts) if agent == "coder" else tester_keys(problem, texts)


voting = Voting(keys=action_keys)
