"""Tree rollouts whose envs live on rollout-worker actors.

The algorithm is :func:`trainers.rollout.episodes.drive_tree`, the one the local path runs; only the
states move. :class:`RemoteTree` implements :class:`trainers.rollout.episodes.TreeStates` over
:class:`RolloutWorker` actors, each holding a :class:`trainers.rollout.episodes.LocalTree` of a
contiguous share of the step's problems (its envs and sandboxes warm across steps). At every
agent step the controller gathers every worker's live nodes, makes **one** batched sampler
call for all problems (the generation engines), and sends each worker the N completion
*texts* of its nodes with the branch choices the controller drew (random selection draws in
problem order, as locally); workers branch, score and select, and return the samples, whose
completions the controller swaps back for the full generations (ids, log-probs). Every branch's
continuation (:mod:`trainers.rollout.continuation`) is played the same way: the workers report
the continuations waiting for a trained role, the controller makes one batched call of one
completion each per role to move and sends the texts back. Samples, groups and advantages are
therefore the local path's for the same seeds.

**Failures.** Every call waits at most ``call_timeout_s``, once the worker is up: a new actor's
process start (its creation task: a process, imports, the env factory) is waited for up to
:data:`~trainers.distributed.cluster.ACTOR_START_TIMEOUT_S`, since on a loaded machine it takes longer
than a call that is sized to catch a hung env step (a 4 s ``call_timeout_s`` timed out a replacement's
start on 2 busy cores).
A worker that died or did not answer is killed and replaced by a new actor on its bundle, to which the
controller sends again every call its predecessor answered in this rollout (the reset, the expansions with their texts,
the continuations' actions: env steps are deterministic given the problem's seed and the actions,
PettingZoo's ``seed_test``, so its live states and continuations are the lost ones); the failed
call is then sent again, so the step completes with the same samples. More than ``max_worker_restarts``
replacements in one rollout fail it with :class:`~trainers.distributed.cluster.ActorFailed`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import AECEnv

from trainers.distributed.cluster import ActorFailed, Slot, get, import_ray, kill_all, wait_started
from trainers.distributed.config import DistributedConfig
from trainers.rollout.continuation import Waiting
from trainers.rollout.episodes import Completion, Expansion, LocalTree, Node, RolloutResult


@dataclass(frozen=True)
class EnvFactory:
    """A picklable ``env_fn``: ``pettingllm_envs.make(env_id, **kwargs)``. ``module`` is the
    driver's registry entry for ``env_id``, registered on the worker when missing there, so
    an env registered at run time (a plug-in, a test's env) is made the same way on actors."""

    env_id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    module: str | None = None

    @classmethod
    def of(cls, env_id: str, kwargs: dict[str, Any]) -> EnvFactory:
        from pettingllm_envs.registry import ENV_MODULES

        return cls(env_id, dict(kwargs), ENV_MODULES.get(env_id))

    def __call__(self) -> AECEnv:
        import pettingllm_envs
        from pettingllm_envs.registry import ENV_MODULES

        if self.module is not None:
            ENV_MODULES.setdefault(self.env_id, self.module)
        return pettingllm_envs.make(self.env_id, **self.kwargs)


@dataclass(frozen=True)
class TextCompletion:
    """What a worker needs of a completion: its text (the action). Token ids and log-probs
    stay with the controller."""

    text: str


class RolloutWorker:
    """The actor: a :class:`~trainers.rollout.episodes.LocalTree` of its share of a step's problems."""

    def __init__(self, env_fn: EnvFactory) -> None:
        self.env_fn = env_fn
        self.tree: LocalTree | None = None

    def start(self, problems: list[int], split: str) -> None:
        """Reset the problems of a new rollout."""
        self.tree = LocalTree(self.env_fn, problems, split)

    def live(self) -> list[Node]:
        return self._tree().live()

    def expand(self, nodes: list[Node], texts: list[list[str]], chosen: list[int | None]) -> list[Expansion]:
        completions = [[TextCompletion(t) for t in group] for group in texts]
        return self._tree().expand(nodes, completions, chosen)

    def waiting(self) -> list[Waiting]:
        return self._tree().waiting()

    def answer(self, waiting: list[Waiting], texts: list[str]) -> None:
        self._tree().answer(waiting, texts)

    def continued(self) -> dict[tuple[int, int], float]:
        return self._tree().continued()

    def settle(self) -> RolloutResult:
        """This worker's problems' successes and returns, and what was paid before acting."""
        result = RolloutResult()
        self._tree().settle(result)
        return result

    def pid(self) -> int:
        import os

        return os.getpid()

    def _tree(self) -> LocalTree:
        if self.tree is None:
            raise RuntimeError("start() the rollout first")
        return self.tree


class RolloutPool:
    """The rollout-worker actors of a run, each on its bundle, replaced when one fails."""

    def __init__(self, config: DistributedConfig, slots: Sequence[Slot], env_fn: EnvFactory) -> None:
        self.config = config
        self.slots = list(slots)
        self.env_fn = env_fn
        self.workers = [self._spawn(slot) for slot in self.slots]
        self.wait_started(self.workers)
        self.restarts = 0
        """Workers replaced in the current rollout."""

    def _spawn(self, slot: Slot) -> Any:
        ray = import_ray()
        return ray.remote(RolloutWorker).options(**slot.options(), max_restarts=0).remote(self.env_fn)

    @staticmethod
    def wait_started(workers: Sequence[Any]) -> None:
        wait_started(workers, "rollout workers")

    def replace(self, index: int, reason: ActorFailed) -> Any:
        """Kill worker ``index`` (it may be hung, not dead) and start a new one on its bundle."""
        if self.restarts >= self.config.max_worker_restarts:
            raise ActorFailed(f"{reason}; max_worker_restarts={self.config.max_worker_restarts} replacements were "
                              "already made in this rollout, giving up") from reason
        self.restarts += 1
        return self.respawn(index)

    def respawn(self, index: int) -> Any:
        """Kill worker ``index`` and start a new one on its bundle (not counted in ``restarts``)."""
        kill_all([self.workers[index]])
        self.workers[index] = self._spawn(self.slots[index])
        return self.workers[index]

    def tree(self, problems: Sequence[int], split: str) -> RemoteTree:
        """A new rollout of ``problems`` on the workers."""
        self.restarts = 0
        return RemoteTree(self, problems, split)

    def shutdown(self) -> None:
        kill_all(self.workers)
        self.workers = []


class RemoteTree:
    """:class:`trainers.rollout.episodes.TreeStates` on a :class:`RolloutPool` (module docstring)."""

    def __init__(self, pool: RolloutPool, problems: Sequence[int], split: str) -> None:
        self.pool = pool
        self.split = split
        self.problems = list(problems)
        count = len(pool.workers)
        bounds = [len(self.problems) * k // count for k in range(count + 1)]
        self.shares = [self.problems[bounds[k]:bounds[k + 1]] for k in range(count)]
        self.owner = {p: k for k, share in enumerate(self.shares) for p in share}
        self.answered: dict[int, list[tuple[str, tuple[Any, ...]]]] = {k: [] for k in range(count)}
        """Every call each worker answered in this rollout, in order: what a replacement is sent again."""
        self._call_all({k: ("start", (share, split)) for k, share in enumerate(self.shares)})

    def _call_all(self, calls: dict[int, tuple[str, tuple[Any, ...]]]) -> dict[int, Any]:
        """Call ``method(*args)`` on every worker ``k`` of ``calls`` at once, within one
        deadline; a failed worker is replaced (its answered calls sent again) and its call sent again."""
        timeout = self.pool.config.call_timeout_s
        refs = {k: getattr(self.pool.workers[k], method).remote(*args) for k, (method, args) in calls.items()}
        deadline = time.monotonic() + timeout
        results: dict[int, Any] = {}
        for k, ref in refs.items():
            method, args = calls[k]
            try:
                results[k] = get(ref, max(0.0, deadline - time.monotonic()), f"rollout worker {k} ({method})")
            except ActorFailed as failure:
                results[k] = self._retry(k, method, args, failure)
            self.answered[k].append((method, args))
        return results

    def _retry(self, k: int, method: str, args: tuple[Any, ...], failure: ActorFailed) -> Any:
        timeout = self.pool.config.call_timeout_s
        while True:
            worker = self.pool.replace(k, failure)
            try:
                self.pool.wait_started([worker])
                for answered, answered_args in self.answered[k]:
                    get(getattr(worker, answered).remote(*answered_args), timeout,
                        f"replacement rollout worker {k} ({answered})")
                return get(getattr(worker, method).remote(*args), timeout, f"replacement rollout worker {k} ({method})")
            except ActorFailed as again:
                failure = again

    def live(self) -> list[Node]:
        results = self._call_all({k: ("live", ()) for k in range(len(self.shares)) if self.shares[k]})
        nodes = {node.problem: node for k in sorted(results) for node in results[k]}
        return [nodes[p] for p in self.problems if p in nodes]

    def expand(self, nodes: Sequence[Node], completions: Sequence[Sequence[Completion]],
               chosen: Sequence[int | None]) -> list[Expansion]:
        per_worker: dict[int, list[int]] = {}
        for index, node in enumerate(nodes):
            per_worker.setdefault(self.owner[node.problem], []).append(index)
        calls = {k: ("expand", ([nodes[i] for i in indices], [[c.text for c in completions[i]] for i in indices],
                                [chosen[i] for i in indices]))
                 for k, indices in per_worker.items()}
        results = self._call_all(calls)
        expansions: list[Expansion | None] = [None] * len(nodes)
        for k, indices in per_worker.items():
            for i, expansion in zip(indices, results[k], strict=True):
                for sample in expansion.samples:  # the controller's full generation, not the worker's text
                    sample.completion = completions[i][sample.branch]
                expansions[i] = expansion
        return [e for e in expansions if e is not None]

    def _workers_with_problems(self) -> list[int]:
        return [k for k in range(len(self.shares)) if self.shares[k]]

    def waiting(self) -> list[Waiting]:
        results = self._call_all({k: ("waiting", ()) for k in self._workers_with_problems()})
        return sorted((w for k in sorted(results) for w in results[k]), key=lambda w: (w.problem, w.branch))

    def answer(self, waiting: Sequence[Waiting], texts: Sequence[str]) -> None:
        per_worker: dict[int, tuple[list[Waiting], list[str]]] = {}
        for where, text in zip(waiting, texts, strict=True):
            mine, theirs = per_worker.setdefault(self.owner[where.problem], ([], []))
            mine.append(where)
            theirs.append(text)
        self._call_all({k: ("answer", args) for k, args in per_worker.items()})

    def continued(self) -> dict[tuple[int, int], float]:
        results = self._call_all({k: ("continued", ()) for k in self._workers_with_problems()})
        return {where: paid for k in sorted(results) for where, paid in results[k].items()}

    def settle(self, result: RolloutResult) -> None:
        results = self._call_all({k: ("settle", ()) for k in self._workers_with_problems()})
        successes, returns = {}, {}
        for k in sorted(results):
            for p, success, problem_returns in zip(self.shares[k], results[k].successes, results[k].returns,
                                                   strict=True):
                successes[p], returns[p] = success, problem_returns
            for role, amount in results[k].paid_before_acting.items():
                result.credit_later(None, role, amount)
        result.successes = [successes[p] for p in self.problems]
        result.returns = [returns[p] for p in self.problems]
