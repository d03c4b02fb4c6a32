"""The AEC steps every rollout shares: who is done, what a role is paid and when, its prompt.

Everything here goes through the PettingZoo AEC API (``agent_selection``, ``step``, ``rewards``,
``infos``, ``terminations``/``truncations``, ``_cumulative_rewards``), so any AEC env can be
rolled out. :mod:`trainers.rollout.episodes` builds the tree and independent rollouts on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from pettingzoo import AECEnv

Messages = list[dict[str, str]]


class Completion(Protocol):
    """What a sampler returns per completion: at least the text (the action)."""

    text: str


#: ``sampler(agent, prompts, n)`` returns, for every prompt (a chat message list), ``n``
#: completions. It is called once per agent step with every problem's prompt: one batch.
Sampler = Callable[[str, Sequence[Messages], int], list[list[Completion]]]


def agent_done(env: AECEnv, agent: str) -> bool:
    return bool(env.terminations[agent] or env.truncations[agent])


def episode_over(env: AECEnv) -> bool:
    """True when no agent is live: everyone left, or every remaining agent is terminated or
    truncated. The dead steps that would only remove those agents are not taken, so the final
    ``infos`` (the success flag) stay readable."""
    return all(agent_done(env, agent) for agent in env.agents)


def credit(env: AECEnv, agent: str, returns: dict[str, float] | None) -> None:
    """Add to ``returns[agent]`` what ``env.last()`` reports to ``agent`` now: its reward
    accumulated since its previous turn (PettingZoo's ``_cumulative_rewards``). Called at
    each of the agent's turns and once at the end, the sums are the AEC episode returns."""
    if returns is not None:
        returns[agent] = returns.get(agent, 0.0) + float(env._cumulative_rewards[agent])


def advance_dead(env: AECEnv, returns: dict[str, float] | None = None) -> None:
    """Step ``None`` for every done agent selected before the next live one (the AEC protocol:
    a terminated or truncated agent still gets its turn, with the action ``None``, which
    removes it). Afterwards ``agent_selection`` is live, unless the episode is over. With
    ``returns``, the removed agents' last rewards are credited first."""
    for _ in range(len(env.agents) + 1):
        if episode_over(env) or not agent_done(env, env.agent_selection):
            return
        credit(env, env.agent_selection, returns)
        env.step(None)
    # every None step removes one agent, so more steps than agents means an env that never does
    raise RuntimeError(f"the env kept selecting done agents ({env.agent_selection!r}); an AEC env removes a "
                       "terminated or truncated agent when it is stepped with None")


#: ``advance(env, returns, pay)`` steps every agent selected before the next one the sampler acts
#: for, credits ``returns`` as :func:`credit` does, and calls ``pay(role, amount)`` with what those
#: steps paid a role whose actions are sampled.
Advance = Callable[[AECEnv, dict[str, float], Callable[[str, float], None]], None]


def agent_prompt(env: AECEnv, agent: str) -> Messages:
    """The chat prompt of ``agent`` now: ``infos[agent]["messages"]`` when the env provides
    it (pettingllm envs do), else the observation as one user message."""
    messages = env.infos.get(agent, {}).get("messages")
    if messages:
        return [dict(m) for m in messages]
    return [{"role": "user", "content": str(env.observe(agent))}]


def acting_reward(env: AECEnv, agent: str) -> tuple[float, float | None, float | None]:
    """The reward of ``agent``'s last action in ``env`` and its global/local parts when known."""
    last = env.infos.get(agent, {}).get("last_action")
    if isinstance(last, dict) and "reward" in last:
        return float(last["reward"]), last.get("reward_global"), last.get("reward_local")
    return float(env.rewards[agent]), None, None


def bystander_credit(env: AECEnv, actor: str) -> dict[str, float]:
    """What the step ``actor`` just took in ``env`` paid each other role, less shared team
    credit: ``rewards[b] - infos[b]["team_credit"]`` where non-zero.

    An AEC env may pay any role at any step (a zero-sum game pays the loser at the winner's
    move). Such a payment is the consequence of the paid role's earlier actions, so it belongs
    in the training data of the role's latest action, as PettingZoo's ``last()`` reports it
    there. The exception is a cooperative env's team reward, paid to every role for the
    actor's own action: the actor's sample already carries it, and a bystander did not cause
    it. Envs state that part as ``infos[b]["team_credit"]`` (pettingllm envs do); for any other
    AEC env all of ``rewards[b]`` counts."""
    paid = {}
    for agent, reward in env.rewards.items():
        if agent != actor:
            amount = float(reward) - float(env.infos.get(agent, {}).get("team_credit", 0.0))
            if amount:
                paid[agent] = amount
    return paid


def episode_success(env: AECEnv) -> bool:
    """``infos[agent]["success"]`` of any agent (docs/design.md §2)."""
    return any(bool(info.get("success", False)) for info in env.infos.values())
