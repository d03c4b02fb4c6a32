"""Hierarchical rollouts for M-GRPO: K independent episodes per question, main and sub interleaved.

Unlike AT-GRPO's tree, M-GRPO compares whole rollouts of one question (the main agent's
group) and the sub-trajectories within them (the sub-agent's group, after alignment), so
every ``(question, rollout)`` is a plain episode. The env decides who acts next
(``research_v0``: ``main`` until it delegates, then ``sub`` until it reports). All live
episodes step in lockstep and each agent's prompts of one step go to its sampler as one
batch; the sampler of a role may be local (a policy in this process) or remote (another
process, through the store).

Everything is read through the AEC API and the env's
:class:`~pettingllm_envs.capabilities.Delegation` capability (which role is the main agent,
which the sub-agent, which delegation a sub action served, each delegation's reward); no
torch here.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import AECEnv

from pettingllm_envs.capabilities import Delegation
from trainers.rollout.episodes import (
    Completion,
    Messages,
    acting_reward,
    advance_dead,
    agent_prompt,
    bystander_credit,
    episode_over,
    episode_success,
)

Key = tuple[int, int]
"""(question, rollout)."""

#: ``sampler(agent, prompts, keys)``: one completion per prompt; ``keys[i]`` is the
#: (question, rollout) of ``prompts[i]`` (a remote sampler sends it along).
RoleSampler = Callable[[str, Sequence[Messages], Sequence[Key]], list[Completion]]


@dataclass
class Turn:
    """One action of one agent in one rollout: a training sample of that agent's policy."""

    question: int
    rollout: int
    agent: str
    completion: Any
    reward: float
    delegation: int | None
    """For the sub-agent: the delegation this action belongs to; None for the main agent."""


@dataclass
class Outcome:
    """The scalar summary of one finished rollout: what the two trainers exchange."""

    main_reward: float
    """What the env paid the main agent over the rollout, less shared team credit
    (:func:`trainers.rollout.episodes.bystander_credit`): its answer's a1 * format + a2 * correct plus the
    penalties of its invalid actions, so a malformed step before a right answer costs it."""
    correct: bool
    delegation_rewards: list[float]
    """Per served delegation (one the sub-agent acted in), in order: the sub's own rewards plus
    its share of the final correctness."""
    sub_delegations: list[int]
    """The delegation of each sub action, in order, as an index into ``delegation_rewards``
    (links the sub side's samples to delegations)."""

    def to_json(self) -> dict[str, Any]:
        return {"main_reward": self.main_reward, "correct": self.correct,
                "delegation_rewards": self.delegation_rewards, "sub_delegations": self.sub_delegations}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        return cls(float(data["main_reward"]), bool(data["correct"]), [float(r) for r in data["delegation_rewards"]],
                   [int(d) for d in data["sub_delegations"]])


@dataclass
class HierarchicalRollout:
    turns: list[Turn] = field(default_factory=list)
    outcomes: dict[Key, Outcome] = field(default_factory=dict)
    seconds_generate: float = 0.0
    seconds_env: float = 0.0


def hierarchical_rollout(
    env_fn: Callable[[], AECEnv],
    questions: Sequence[int],
    k: int,
    samplers: Mapping[str, RoleSampler],
    *,
    delegation: Delegation,
    split: str = "train",
    max_steps: int = 10_000,
) -> HierarchicalRollout:
    """``k`` episodes of every question (env seed = question id), every agent step batched
    per agent across the live episodes; returns the turns and each rollout's outcome.
    ``samplers`` has one entry per role; ``delegation`` is the env's capability."""
    result = HierarchicalRollout()
    keys = [(q, r) for q in questions for r in range(k)]
    envs: dict[Key, AECEnv] = {}
    for key in keys:
        envs[key] = env_fn()
        envs[key].reset(seed=key[0], options={"split": split})
    main_return: dict[Key, float] = dict.fromkeys(keys, 0.0)
    sub_delegations: dict[Key, list[int]] = defaultdict(list)
    for _ in range(max_steps + 1):
        by_agent: dict[str, list[Key]] = defaultdict(list)
        for key in keys:
            advance_dead(envs[key])  # the AEC protocol: a done agent's turn is a None step
            if not episode_over(envs[key]):
                by_agent[envs[key].agent_selection].append(key)
        if not by_agent:
            break
        for agent, live in by_agent.items():
            prompts = [agent_prompt(envs[key], agent) for key in live]
            start = time.perf_counter()
            completions = samplers[agent](agent, prompts, live)
            result.seconds_generate += time.perf_counter() - start
            start = time.perf_counter()
            for key, completion in zip(live, completions, strict=True):
                env = envs[key]
                env.step(completion.text)
                reward = acting_reward(env, agent)[0]
                served = None
                if agent == delegation.manager:
                    main_return[key] += reward
                else:
                    main_return[key] += bystander_credit(env, agent).get(delegation.manager, 0.0)
                    served = delegation.served(env)
                    sub_delegations[key].append(served)
                result.turns.append(Turn(key[0], key[1], agent, completion, reward, served))
            result.seconds_env += time.perf_counter() - start
    else:
        raise RuntimeError(f"episodes did not end within max_steps={max_steps} agent steps")
    for key in keys:
        env = envs[key]
        rewards, served = served_delegations(delegation.rewards(env), sub_delegations[key])
        result.outcomes[key] = Outcome(main_return[key], episode_success(env), rewards, served)
    return result


def served_delegations(rewards: Sequence[float], served: Sequence[int]) -> tuple[list[float], list[int]]:
    """The rewards of the delegations the sub-agent acted in, and ``served`` (each sub action's
    delegation) re-indexed into them (pure). A delegation the episode ended on before the
    sub-agent acted (``research_v0``: the main agent's last allowed step was a ``DELEGATE``) is
    no sub-trajectory: kept, it would be an alignment slot without a sample whose reward still
    moved its group's mean and std."""
    kept = sorted(set(served))
    index = {old: new for new, old in enumerate(kept)}
    return [float(rewards[i]) for i in kept], [index[d] for d in served]
