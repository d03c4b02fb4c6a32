"""Rollouts: AT-GRPO's tree-structured best-of-N, and N independent episodes.

Tree mode, exactly as docs/design.md §4 (Zhao et al. 2025)::

    S = env reset with the problem's seed
    for turn t, for each agent a in turn order (until S terminates):
        obs = S's observation for a                    # identical in all branches
        N completions ~ policy_a(obs)                  # ONE batched call for all problems
        branch_i = deepcopy(S); branch_i.step(completion_i); r_i = reward of a in branch_i
        record N samples with group key (problem, a, t)
        S = branch_best   (argmax r_i; a random branch when selection="random")

How each trap of the reference implementation is avoided, by construction:

1. *Stale copies*: there is one live state per problem, ``states[p]``; it *is* the selected
   branch, and every later prompt is read from it, so prompts and termination always
   reflect the selection.
2. *N identical copies*: agent ``a``'s N completions are generated from S and applied to N
   fresh deep copies of S *after* the previous agent's selection; each reward is read from
   the branch its completion was applied to.
3. *Groups mixing problems*: every sample carries its problem id, and every group key
   contains it (:mod:`trainers.advantages`).
4. *Same-turn blindness*: agents act one at a time on the live state; the env builds a
   later agent's observation after the earlier agent's action has been applied.

Everything here goes through the PettingZoo AEC API (``agent_selection``, ``step``,
``rewards``, ``infos``, ``terminations``/``truncations``) plus ``deepcopy``, so any AEC env
that deep-copies can be trained. Agents may finish at different times: as PettingZoo's
``agent_iter`` protocol requires, an agent that is done when selected is stepped with
``None`` (no sample) and the episode goes on while any agent is live (:func:`advance_dead`).
The sampler is any callable (the trainer passes the LLM policies); this module does not
import torch.
"""

from __future__ import annotations

import copy
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pettingzoo import AECEnv

Messages = list[dict[str, str]]


class Completion(Protocol):
    """What a sampler returns per completion: at least the text (the action)."""

    text: str


#: ``sampler(agent, prompts, n)`` returns, for every prompt (a chat message list), ``n``
#: completions. It is called once per agent step with every problem's prompt: one batch.
Sampler = Callable[[str, Sequence[Messages], int], list[list[Completion]]]


@dataclass
class Sample:
    """One completion with its context and reward: a training sample."""

    problem: int
    branch: int
    agent: str
    turn: int
    messages: Messages
    completion: Any
    reward: float
    reward_global: float | None
    reward_local: float | None
    selected: bool = False
    """True for the branch that continued (tree mode); always True in independent mode."""
    group: str = ""
    advantage: float = 0.0
    degenerate: bool = False

    @property
    def text(self) -> str:
        return self.completion.text

    @property
    def prompt_truncated(self) -> bool:
        """The prompt lost part of its history to ``max_prompt_tokens`` (the trainer's sampler
        sets it on the completion, :meth:`trainers.policy.PolicySet.encode_prompt`)."""
        return bool(getattr(self.completion, "prompt_truncated", False))


@dataclass
class RolloutResult:
    """Samples of one rollout, how each episode ended, and where the time went."""

    samples: list[Sample] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)
    """One per finished episode (per problem in tree mode, per problem x branch otherwise)."""
    returns: list[dict[str, float]] = field(default_factory=list)
    """Independent mode: every episode's return per role (the sum of the rewards PettingZoo's
    ``last()`` reports to it), in the order of ``successes``."""
    success_metric: str = "rollout/success_rate"
    """The name the success rate of ``successes`` is logged under. Tree rollouts use
    ``tree/success_rate``: their episodes follow the best of N branches at every step, so it
    measures the best-of-N search, not the policy."""
    seconds_generate: float = 0.0
    seconds_env: float = 0.0
    seconds_tree: float = 0.0
    """Of ``seconds_env``: the tree's own work (deep copies and branch selection)."""


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


def episode_success(env: AECEnv) -> bool:
    """``infos[agent]["success"]`` of any agent (docs/design.md §2)."""
    return any(bool(info.get("success", False)) for info in env.infos.values())


def select_branch(rewards: Sequence[float], selection: str, rng: random.Random) -> int:
    """Index of the branch that continues: the first best reward, or a uniformly random one."""
    if selection == "greedy":
        return max(range(len(rewards)), key=lambda i: (rewards[i], -i))
    if selection == "random":
        return rng.randrange(len(rewards))
    raise ValueError(f"selection must be 'greedy' or 'random', got {selection!r}")


def _turn_of(env: AECEnv, agent: str, counter: Counter) -> int:
    turn = env.infos.get(agent, {}).get("turn")
    return int(turn) if turn is not None else counter[agent]


def _reset(env_fn: Callable[[], AECEnv], problem: int, split: str) -> AECEnv:
    env = env_fn()
    env.reset(seed=problem, options={"split": split})
    return env


def tree_rollout(
    env_fn: Callable[[], AECEnv],
    problems: Sequence[int],
    n: int,
    sampler: Sampler,
    *,
    split: str = "train",
    selection: str = "greedy",
    rng: random.Random | None = None,
    max_steps: int = 10_000,
) -> RolloutResult:
    """AT-GRPO's tree rollout of every problem (see the module docstring). More than
    ``max_steps`` agent steps means an env that never ends: an error, not a hang."""
    rng = rng or random.Random(0)
    result = RolloutResult()
    states = {p: _reset(env_fn, p, split) for p in problems}
    counters = {p: Counter() for p in problems}
    for _ in range(max_steps + 1):
        for state in states.values():
            advance_dead(state)
        active = [p for p in problems if not episode_over(states[p])]
        if not active:
            break
        by_agent: dict[str, list[int]] = defaultdict(list)
        for p in active:  # in lockstep every problem has the same agent to move; stay general anyway
            by_agent[states[p].agent_selection].append(p)
        for agent, group_problems in by_agent.items():
            prompts = [agent_prompt(states[p], agent) for p in group_problems]
            turns = [_turn_of(states[p], agent, counters[p]) for p in group_problems]
            start = time.perf_counter()
            completions = sampler(agent, prompts, n)
            result.seconds_generate += time.perf_counter() - start
            start = time.perf_counter()
            for p, messages, turn, group in zip(group_problems, prompts, turns, completions, strict=True):
                if len(group) != n:
                    raise ValueError(f"the sampler returned {len(group)} completions, expected {n}")
                branches, branch_samples = [], []
                for i, completion in enumerate(group):
                    copy_start = time.perf_counter()
                    branch = copy.deepcopy(states[p])
                    result.seconds_tree += time.perf_counter() - copy_start
                    branch.step(completion.text)
                    reward, reward_global, reward_local = acting_reward(branch, agent)
                    branches.append(branch)
                    branch_samples.append(Sample(p, i, agent, turn, messages, completion, reward, reward_global,
                                                 reward_local))
                select_start = time.perf_counter()
                best = select_branch([s.reward for s in branch_samples], selection, rng)
                branch_samples[best].selected = True
                states[p] = branches[best]
                counters[p][agent] += 1
                result.seconds_tree += time.perf_counter() - select_start
                result.samples.extend(branch_samples)
            result.seconds_env += time.perf_counter() - start
    else:
        raise RuntimeError(f"episodes did not end within max_steps={max_steps} agent steps")
    result.successes = [episode_success(states[p]) for p in problems]
    result.success_metric = "tree/success_rate"
    return result


def independent_rollout(
    env_fn: Callable[[], AECEnv],
    problems: Sequence[int],
    n: int,
    sampler: Sampler,
    *,
    split: str = "train",
    max_steps: int = 10_000,
) -> RolloutResult:
    """N whole episodes per problem, no tree (plain GRPO baseline, evaluation). Each agent
    step still generates for every live episode in one batched call."""
    result = RolloutResult()
    keys = [(p, i) for p in problems for i in range(n)]
    envs = {key: _reset(env_fn, key[0], split) for key in keys}
    counters = {key: Counter() for key in keys}
    returns: dict[tuple[int, int], dict[str, float]] = {key: {} for key in keys}
    for _ in range(max_steps + 1):
        for key, env in envs.items():
            advance_dead(env, returns[key])
        active = [key for key in keys if not episode_over(envs[key])]
        if not active:
            break
        by_agent: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for key in active:
            by_agent[envs[key].agent_selection].append(key)
        for agent, group_keys in by_agent.items():
            prompts = [agent_prompt(envs[key], agent) for key in group_keys]
            turns = [_turn_of(envs[key], agent, counters[key]) for key in group_keys]
            start = time.perf_counter()
            completions = sampler(agent, prompts, 1)
            result.seconds_generate += time.perf_counter() - start
            start = time.perf_counter()
            for key, messages, turn, (completion,) in zip(group_keys, prompts, turns, completions, strict=True):
                credit(envs[key], agent, returns[key])
                envs[key].step(completion.text)
                counters[key][agent] += 1
                reward, reward_global, reward_local = acting_reward(envs[key], agent)
                result.samples.append(Sample(key[0], key[1], agent, turn, messages, completion, reward,
                                             reward_global, reward_local, selected=True))
            result.seconds_env += time.perf_counter() - start
    else:
        raise RuntimeError(f"episodes did not end within max_steps={max_steps} agent steps")
    for key, env in envs.items():  # rewards still pending for the agents left at the end
        for agent in env.agents:
            credit(env, agent, returns[key])
    result.successes = [episode_success(envs[key]) for key in keys]
    result.returns = [returns[key] for key in keys]
    return result
