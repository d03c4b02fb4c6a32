"""Shared by the reward-attack files of the non-code envs (``test_env_attacks.py`` states the
invariants they check): small configurations of each env, episodes played by an attack in one role
and the oracle in the others, and the readers of what each action earned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pettingllm_envs
from pettingllm_envs.episodes import Episode, play_episode
from pettingllm_envs.policies import scripted_policy

Policy = Callable[[str, str, dict[str, Any]], str]
NON_CODE_ENVS = ("math_v0", "plan_path_v0", "research_v0", "sokoban_v0", "sudoku_v0", "tictactoe_v0")
#: Small, fast configurations of each env.
CONFIGS: dict[str, dict[str, Any]] = {
    "math_v0": {}, "plan_path_v0": {}, "research_v0": {"hops": 2}, "sokoban_v0": {},
    "sudoku_v0": {"size": 4}, "tictactoe_v0": {},
}
SEEDS = range(3)


def play(env_id: str, policy: Policy | dict[str, Policy], seed: int, **config: Any) -> Episode:
    return play_episode(pettingllm_envs.make(env_id, **{**CONFIGS[env_id], **config}), policy, seed=seed)


def local_totals(env_id: str, policy: Policy | dict[str, Policy], seed: int, **config: Any) -> dict[str, float]:
    """Per role, the sum of its local rewards over one episode (the part each env controls)."""
    env = pettingllm_envs.make(env_id, **{**CONFIGS[env_id], **config})
    play_episode(env, policy, seed=seed)
    totals = dict.fromkeys(env.unwrapped.possible_agents, 0.0)
    for record in env.unwrapped.history:
        totals[record.agent] += record.reward_local
    return totals


def with_role(env_id: str, role: str, attack: Policy) -> dict[str, Policy]:
    """The attack for ``role``, the oracle for every other role."""
    oracle = scripted_policy(env_id)
    roles = pettingllm_envs.make(env_id, **CONFIGS[env_id]).possible_agents
    return {r: (attack if r == role else oracle) for r in roles}


def constant(text: str) -> Policy:
    return lambda observation, agent, info: text


def raw(env_id: str, seed: int = 0, **config: Any) -> Any:
    env = pettingllm_envs.make(env_id, **{**CONFIGS[env_id], **config}).unwrapped
    env.reset(seed=seed)
    return env


def last(env: Any, agent: str) -> dict[str, Any]:
    return env.infos[agent]["last_action"]


def program(*lines: str) -> str:
    return "```python\n" + "\n".join(lines) + "\n```"
