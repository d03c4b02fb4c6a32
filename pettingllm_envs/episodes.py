"""Play whole episodes of any AEC env with a policy, and summarise them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import AECEnv

from pettingllm_envs.policies import Policy


@dataclass
class Episode:
    """What happened in one episode."""

    observations: list[tuple[str, str]] = field(default_factory=list)
    actions: list[tuple[str, str]] = field(default_factory=list)
    rewards: list[tuple[str, float]] = field(default_factory=list)
    final_infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    valid: list[bool | None] = field(default_factory=list)
    """Per action (same order as ``actions``): the env's ``infos[agent]["last_action"]["valid"]``
    right after it, None for an env that does not report it."""
    seconds: float = 0.0

    @property
    def success(self) -> bool:
        """True when the final infos say the task was solved (any agent, for games: a win)."""
        return any(info.get("success", False) for info in self.final_infos.values())

    def total_reward(self, agent: str) -> float:
        return sum(r for a, r in self.rewards if a == agent)

    @property
    def valid_action_rate(self) -> float | None:
        """Share of the actions the env accepted as valid (None when it reports no validity)."""
        known = [v for v in self.valid if v is not None]
        return sum(known) / len(known) if known else None

    @property
    def turns(self) -> int:
        """Turns played, the last one counted even when the episode ended before every role acted
        in it (a game won by the first mover's move): one more than the turn of the last action.
        Envs that report no actions in ``infos`` count their ``turn`` (the turns completed)."""
        acted = [info["last_action"]["turn"] for info in self.final_infos.values() if info.get("last_action")]
        if acted:
            return max(acted) + 1
        return max((info.get("turn", 0) for info in self.final_infos.values()), default=0)


def play_episode(
    env: AECEnv, policy: Policy | dict[str, Policy], *, seed: int | None = None,
    options: dict[str, Any] | None = None, max_steps: int = 10_000,
) -> Episode:
    """Reset ``env`` and play until every agent is done. ``policy`` is one policy for all
    roles or a dict role -> policy."""
    start = time.perf_counter()
    env.reset(seed=seed, options=options)
    episode = Episode()
    for agent in env.agent_iter(max_iter=max_steps):
        obs, reward, terminated, truncated, info = env.last()
        episode.rewards.append((agent, float(reward)))
        if terminated or truncated:
            episode.final_infos[agent] = info
            env.step(None)
            continue
        act = policy[agent] if isinstance(policy, dict) else policy
        action = act(obs, agent, info)
        episode.observations.append((agent, str(obs)))
        episode.actions.append((agent, action))
        env.step(action)
        last_action = (env.infos.get(agent) or {}).get("last_action") or {}
        episode.valid.append(last_action.get("valid"))
    episode.seconds = time.perf_counter() - start
    return episode
