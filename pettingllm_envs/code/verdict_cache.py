"""Verdicts of ``code_v0`` judged once per env family: a bounded, thread-safe LRU of
:class:`~pettingllm_envs.code.judge.suite.Outcome` keyed by everything a verdict depends on
(problem, code, test, perturbed, time limit, memory limit, reason length), in front of
:func:`~pettingllm_envs.code.judge.scheduler.judge_jobs`.

An env and all its deep copies share one cache, so AT-GRPO's branches that write the same
code (or the same tests) do not rerun it in the sandbox. A verdict depends only on its key
(the judge is deterministic for a given problem, code and test), which is what makes
sharing it between episodes sound. A pickled cache carries only its size and its family's
token: unpickled copies attach to the family's cache of the loading process (the very
object in the process that pickled it; see :mod:`pettingllm_envs.core.process_shared`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from threading import Lock
from typing import Any
from uuid import uuid4

from pettingllm_envs.code.datasets import CodeProblem, Test
from pettingllm_envs.code.judge.limits import JudgeLimits
from pettingllm_envs.code.judge.scheduler import judge_jobs
from pettingllm_envs.code.judge.suite import Outcome
from pettingllm_envs.core.process_shared import reduce_to_key

__all__ = ["CacheKey", "OutcomeCache"]

#: What the cache is keyed by: (problem id, code, test, perturbed results, the limits a verdict
#: depends on (:meth:`JudgeLimits.verdict_key`: time, memory, shown_chars)): a verdict judged
#: under other limits is another verdict.
CacheKey = tuple[str, str, Test, bool, tuple[float, int, int]]


class OutcomeCache:
    """A bounded, thread-safe map :data:`CacheKey` -> :class:`Outcome`."""

    def __init__(self, size: int, family: str | None = None) -> None:
        self.size = size
        #: Names the env family that shares this cache, across pickles and processes.
        self.family = family or uuid4().hex
        self._items: OrderedDict[CacheKey, Outcome] = OrderedDict()
        self._lock = Lock()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return reduce_to_key(self, OutcomeCache, self.size, self.family)

    def get(self, key: CacheKey) -> Outcome | None:
        with self._lock:
            outcome = self._items.get(key)
            if outcome is not None:
                self._items.move_to_end(key)
            return outcome

    def put(self, key: CacheKey, outcome: Outcome) -> None:
        if self.size == 0:
            return
        with self._lock:
            self._items[key] = outcome
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def judge(self, problem: CodeProblem, jobs: Sequence[tuple[str, Test]], perturbed: Sequence[Test] = (), *,
              limits: JudgeLimits) -> list[Outcome]:
        """Verdicts of (code, test) pairs of ``problem``, then of its reference on the
        ``perturbed`` tests with every result it returns perturbed, all under ``limits``;
        cached verdicts are reused, the rest (deduplicated) run in one batch."""
        wanted = [(code, test, False) for code, test in jobs] + [(problem.reference, t, True) for t in perturbed]
        verdict_limits = limits.verdict_key()
        keys: list[CacheKey] = [(problem.problem_id, code, test, flag, verdict_limits) for code, test, flag in wanted]
        known = {key: self.get(key) for key in keys}
        missing = [key for key, outcome in known.items() if outcome is None]
        outcomes = judge_jobs(problem, [(code, test, flag) for _, code, test, flag, _ in missing], limits)
        for key, outcome in zip(missing, outcomes, strict=True):
            known[key] = outcome
            self.put(key, outcome)
        return [known[key] for key in keys]  # type: ignore[misc]
