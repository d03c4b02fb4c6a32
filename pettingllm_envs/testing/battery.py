"""``check_env``: the whole conformance battery on one env, with a report of what ran.

Each check is one public function of :mod:`pettingllm_envs.testing`; the battery runs them
in order and stops at the first broken rule (a :class:`ConformanceError` naming it). A check
that does not apply to the env (it reads a TextAECEnv's state, needs the oracle, the
declared splits or a wrong attempt the env's author did not give) is skipped and listed with
the reason in the report, so a passing battery says exactly what it proved.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pettingllm_envs.capabilities import Demonstrations, capability, declares
from pettingllm_envs.core import make_parallel_env
from pettingllm_envs.policies import Policy
from pettingllm_envs.registry import make_parallel
from pettingllm_envs.testing.api import check_api, check_env_module, check_infos, check_parallel_api, check_seed
from pettingllm_envs.testing.continuation import (
    check_deepcopy_continuation,
    check_deepcopy_sharing,
    check_parallel_pickle,
    check_pickle_continuation,
)
from pettingllm_envs.testing.integrity import WrongAction, check_junk_never_beats_wrong
from pettingllm_envs.testing.junk import check_junk_actions, check_non_string_penalty
from pettingllm_envs.testing.oracle import check_demonstrations, check_oracle_solves
from pettingllm_envs.testing.reproducibility import (
    check_reset_repeats,
    check_same_seed_same_episode,
    check_split_disjointness,
    check_truncation,
    declares_splits,
)
from pettingllm_envs.testing.specs import EnvSpec, NotApplicable, env_name, factory


@dataclass
class ConformanceReport:
    """What :func:`check_env` ran on ``env``: the checks that passed (with their seconds) and the
    ones skipped, each with why."""

    env: str
    passed: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{self.env}: {len(self.passed)} checks passed, {len(self.skipped)} skipped"]
        lines += [f"  passed   {check}" for check in self.passed]
        lines += [f"  skipped  {check}: {why}" for check, why in self.skipped.items()]
        return "\n".join(lines)


def _parallel_factory(env: EnvSpec) -> Callable[[], Any]:
    """The registry's Parallel API view of a registered env, else PettingZoo's turn-based conversion."""
    if isinstance(env, str):
        env_id = env
        return lambda: make_parallel(env_id)
    make = factory(env)
    return lambda: make_parallel_env(make())


def check_env(env: EnvSpec, *, policy: Policy | None = None, wrong: WrongAction | None = None,
              parallel_env_fn: Callable[[], Any] | None = None, demonstrations: Demonstrations | None = None,
              oracle_episodes: int = 20, split_count: int = 50, api_cycles: int = 1000) -> ConformanceReport:
    """Run every check of the battery on ``env`` (a registered id, or a factory of fresh wrapped
    envs); raise :class:`ConformanceError` at the first broken rule.

    ``policy`` is the env's oracle, ``(observation, agent, info) -> action`` (a registered env's
    ``scripted_policy`` by default); without one the oracle checks are skipped and the others
    play random text. ``wrong(env, agent)`` is an honest wrong attempt of ``agent`` in the
    unwrapped ``env`` (the answer format with a wrong answer): with it the junk-versus-wrong
    reward probe runs. ``parallel_env_fn`` makes the env's Parallel API view (by default the
    registry's ``make_parallel``, or PettingZoo's turn-based conversion of a fresh env).
    ``demonstrations`` is the env's Demonstrations capability (a registered env's declared one
    by default). ``oracle_episodes``, ``split_count`` and ``api_cycles`` size the checks.
    """
    make = factory(env)
    report = ConformanceReport(env_name(make()))
    if parallel_env_fn is None:
        parallel_env_fn = _parallel_factory(env)
    declared = demonstrations
    if declared is None and isinstance(env, str) and declares(env, Demonstrations):
        declared = capability(env, Demonstrations)

    def splits() -> None:
        if not declares_splits(make()):
            raise NotApplicable("the env names no instances (a TextAECEnv's instance_key), so it has no splits")
        check_split_disjointness(make(), split_count)
        check_reset_repeats(make(), 0)

    def demonstrated() -> None:
        if declared is None:
            raise NotApplicable("the env declares no Demonstrations capability")
        check_demonstrations(env, declared)

    def junk_versus_wrong() -> None:
        if wrong is None:
            raise NotApplicable("pass wrong=, the env's honest wrong attempt (env, agent) -> action")
        check_junk_never_beats_wrong(env, wrong, policy=policy)

    def module() -> None:
        if not isinstance(env, str):
            raise NotApplicable("the env is not registered: no module to check")
        check_env_module(env)

    checks: dict[str, Callable[[], None]] = {
        "env module": module,
        "PettingZoo api_test": lambda: check_api(env, num_cycles=api_cycles),
        "PettingZoo seed_test": lambda: check_seed(env),
        "PettingZoo parallel_api_test": lambda: check_parallel_api(parallel_env_fn),
        "infos": lambda: check_infos(env, policy=policy),
        "junk actions": lambda: check_junk_actions(env),
        "non-string penalty": lambda: check_non_string_penalty(env),
        "deepcopy continuation": lambda: check_deepcopy_continuation(env, policy=policy),
        "deepcopy sharing": lambda: check_deepcopy_sharing(env),
        "pickle continuation": lambda: check_pickle_continuation(env, policy=policy),
        "parallel pickle": lambda: check_parallel_pickle(parallel_env_fn),
        "same seed, same episode": lambda: check_same_seed_same_episode(env, policy=policy),
        "splits": splits,
        "truncation": lambda: check_truncation(make()),
        "oracle solves": lambda: check_oracle_solves(env, policy=policy, episodes=oracle_episodes),
        "demonstrations": demonstrated,
        "junk never beats a wrong attempt": junk_versus_wrong,
    }
    for check_name, check in checks.items():
        start = time.perf_counter()
        try:
            check()
        except NotApplicable as why:
            report.skipped[check_name] = str(why)
        else:
            report.passed[check_name] = time.perf_counter() - start
    return report
