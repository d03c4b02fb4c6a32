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
   branches of S *after* the previous agent's selection (N - 1 deep copies and S itself);
   each reward is read from the branch its completion was applied to.
3. *Groups mixing problems*: every sample carries its problem id, and every group key
   contains it (:mod:`trainers.maths.advantages`).
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
import typing
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pettingzoo import AECEnv

Messages = list[dict[str, str]]
#: Which branch continues in the tree: ``greedy`` (highest reward, first on ties, as AT-GRPO) or
#: ``random`` (an unbiased on-policy continuation, an ablation).
Selection = Literal["greedy", "random"]


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
    reward_later: float = 0.0
    """Of ``reward``: what the env paid this sample's role after the action, while other roles
    acted, up to the role's next action or the episode's end (a loss the opponent's winning
    move inflicts, a teammate's tests that expose this code's bugs); :func:`bystander_credit`
    says which payments count. Only an action whose future was played (the selected branch in
    tree mode) has any."""
    group: str = ""
    advantage: float = 0.0
    degenerate: bool = False

    @property
    def text(self) -> str:
        return self.completion.text

    @property
    def prompt_truncated(self) -> bool:
        """The prompt lost part of its history to ``max_prompt_tokens`` (the trainer's sampler
        sets it on the completion, :meth:`trainers.models.prompts.PromptEncoder.encode_prompt`)."""
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
    paid_before_acting: dict[str, float] = field(default_factory=dict)
    """Per role, summed over the rollout's episodes: what the env paid the role before its first
    action of an episode (see :func:`bystander_credit`). No action of the role caused it, so no
    sample carries it."""

    def credit_later(self, latest: Sample | None, agent: str, amount: float) -> None:
        """Add ``amount``, paid to ``agent`` while others acted, to its ``latest`` sample in that
        episode, or to :attr:`paid_before_acting` when it has not acted yet."""
        if latest is None:
            self.paid_before_acting[agent] = self.paid_before_acting.get(agent, 0.0) + amount
        else:
            latest.reward += amount
            latest.reward_later += amount


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


def select_branch(rewards: Sequence[float], selection: str, rng: random.Random) -> int:
    """Index of the branch that continues: the first best reward, or a uniformly random one."""
    if selection == "greedy":
        return max(range(len(rewards)), key=lambda i: (rewards[i], -i))
    if selection == "random":
        return rng.randrange(len(rewards))
    raise ValueError(f"selection must be 'greedy' or 'random', got {selection!r}")


def _turn_of(env: AECEnv, agent: str, counter: Counter[str]) -> int:
    turn = env.infos.get(agent, {}).get("turn")
    return int(turn) if turn is not None else counter[agent]


def _reset(env_fn: Callable[[], AECEnv], problem: int, split: str) -> AECEnv:
    env = env_fn()
    env.reset(seed=problem, options={"split": split})
    return env


@dataclass
class Node:
    """A problem of a tree rollout whose live state waits for ``agent`` to act: the next node
    to expand. ``messages`` is the agent's prompt there, the same for all N branches."""

    problem: int
    agent: str
    turn: int
    messages: Messages


@dataclass
class Expansion:
    """The samples of one expanded node, the new live state's selected branch among them,
    the seconds of tree work (deep copies and selection) it took, and what the selected
    branch's step paid the other roles (:func:`bystander_credit`)."""

    samples: list[Sample]
    seconds_tree: float
    bystanders: dict[str, float] = field(default_factory=dict)


class TreeStates(Protocol):
    """The live states of a tree rollout's problems, wherever they are held: in this process
    (:class:`LocalTree`) or on rollout-worker actors (:mod:`trainers.distributed.rollout`).
    :func:`drive_tree` runs the algorithm against this interface, so both give the same samples."""

    def live(self) -> list[Node]:
        """After stepping done agents with None (:func:`advance_dead`), one node per problem
        that has a live agent, in problem order."""
        ...

    def expand(self, nodes: Sequence[Node], completions: Sequence[Sequence[Completion]],
               chosen: Sequence[int | None]) -> list[Expansion]:
        """Branch every node N ways (one branch per completion, all but the last a deep copy),
        continue from branch ``chosen[k]`` or, where it is None, the first best reward; one
        expansion per node."""
        ...

    def successes(self) -> list[bool]:
        """:func:`episode_success` of every problem's final state, in problem order."""
        ...


def expand_node(state: AECEnv, node: Node, completions: Sequence[Completion], chosen: int | None
                ) -> tuple[AECEnv, Expansion]:
    """The N branches of ``node`` (live state ``state``): every completion applied to its own
    branch, its reward read from that branch (trap 2); returns the branch that continues
    (``chosen``, or the first best reward when None) and the samples.

    The first N - 1 branches are deep copies of ``state``, made before it is stepped; the last is
    ``state`` itself. The caller replaces ``state`` with the returned branch and never reads it
    again, and a faithful deep copy steps exactly as the original does, so one copy per node is
    saved without a change in the samples."""
    seconds_tree = 0.0
    branches, samples = [], []
    last = len(completions) - 1
    for i, completion in enumerate(completions):
        copy_start = time.perf_counter()
        branch = state if i == last else copy.deepcopy(state)
        seconds_tree += time.perf_counter() - copy_start
        branch.step(completion.text)
        reward, reward_global, reward_local = acting_reward(branch, node.agent)
        branches.append(branch)
        samples.append(Sample(node.problem, i, node.agent, node.turn, node.messages, completion, reward,
                              reward_global, reward_local))
    select_start = time.perf_counter()
    best = chosen if chosen is not None else select_branch([s.reward for s in samples], "greedy", _NO_RNG)
    samples[best].selected = True
    seconds_tree += time.perf_counter() - select_start
    return branches[best], Expansion(samples, seconds_tree, bystander_credit(branches[best], node.agent))


#: Greedy selection draws nothing; random choices are drawn by :func:`drive_tree`, in problem order.
_NO_RNG = random.Random(0)


class LocalTree:
    """:class:`TreeStates` in this process: one live env per problem, which *is* the selected
    branch (trap 1), and per-problem turn counters for envs that do not report turns."""

    def __init__(self, env_fn: Callable[[], AECEnv], problems: Sequence[int], split: str) -> None:
        self.states = {p: _reset(env_fn, p, split) for p in problems}
        self.counters: dict[int, Counter[str]] = {p: Counter() for p in problems}

    def live(self) -> list[Node]:
        nodes = []
        for p, state in self.states.items():
            advance_dead(state)
            if not episode_over(state):
                agent = state.agent_selection
                nodes.append(Node(p, agent, _turn_of(state, agent, self.counters[p]), agent_prompt(state, agent)))
        return nodes

    def expand(self, nodes: Sequence[Node], completions: Sequence[Sequence[Completion]],
               chosen: Sequence[int | None]) -> list[Expansion]:
        expansions = []
        for node, group, choice in zip(nodes, completions, chosen, strict=True):
            self.states[node.problem], expansion = expand_node(self.states[node.problem], node, group, choice)
            self.counters[node.problem][node.agent] += 1
            expansions.append(expansion)
        return expansions

    def replay(self, problem: int, actions: Sequence[str]) -> None:
        """Bring ``problem``'s state to where the selected ``actions`` (in order) lead from its
        reset: how a replacement rollout worker recovers the problems of one that died (env
        steps are deterministic given the seed and the actions, PettingZoo's ``seed_test``)."""
        state = self.states[problem]
        for action in actions:
            advance_dead(state)
            self.counters[problem][state.agent_selection] += 1
            state.step(action)

    def successes(self) -> list[bool]:
        return [episode_success(state) for state in self.states.values()]


def drive_tree(tree: TreeStates, n: int, sampler: Sampler, *, selection: Selection = "greedy",
               rng: random.Random | None = None, max_steps: int = 10_000) -> RolloutResult:
    """The tree rollout's loop over ``tree`` (see the module docstring): at every agent step,
    one batched sampler call with every live problem's prompt, then every node expanded.
    Random selection draws its choices here, one per node in problem order, so where the
    states live does not change them. More than ``max_steps`` agent steps means an env that
    never ends: an error, not a hang."""
    if selection not in typing.get_args(Selection):
        raise ValueError(f"selection must be one of {typing.get_args(Selection)}, got {selection!r}")
    rng = rng or random.Random(0)
    result = RolloutResult()
    latest: dict[tuple[int, str], Sample] = {}  # each role's latest selected sample, per problem
    for _ in range(max_steps + 1):
        nodes = tree.live()
        if not nodes:
            break
        by_agent: dict[str, list[Node]] = defaultdict(list)
        for node in nodes:  # in lockstep every problem has the same agent to move; stay general anyway
            by_agent[node.agent].append(node)
        for agent, agent_nodes in by_agent.items():
            start = time.perf_counter()
            completions = sampler(agent, [node.messages for node in agent_nodes], n)
            result.seconds_generate += time.perf_counter() - start
            for group in completions:
                if len(group) != n:
                    raise ValueError(f"the sampler returned {len(group)} completions, expected {n}")
            chosen = [rng.randrange(n) if selection == "random" else None for _ in agent_nodes]
            start = time.perf_counter()
            for node, expansion in zip(agent_nodes, tree.expand(agent_nodes, completions, chosen), strict=True):
                result.samples.extend(expansion.samples)
                result.seconds_tree += expansion.seconds_tree
                latest[node.problem, agent] = next(s for s in expansion.samples if s.selected)
                for role, amount in expansion.bystanders.items():
                    result.credit_later(latest.get((node.problem, role)), role, amount)
            result.seconds_env += time.perf_counter() - start
    else:
        raise RuntimeError(f"episodes did not end within max_steps={max_steps} agent steps")
    result.successes = tree.successes()
    result.success_metric = "tree/success_rate"
    return result


def tree_rollout(
    env_fn: Callable[[], AECEnv],
    problems: Sequence[int],
    n: int,
    sampler: Sampler,
    *,
    split: str = "train",
    selection: Selection = "greedy",
    rng: random.Random | None = None,
    max_steps: int = 10_000,
) -> RolloutResult:
    """AT-GRPO's tree rollout of every problem in this process (see the module docstring)."""
    return drive_tree(LocalTree(env_fn, problems, split), n, sampler, selection=selection, rng=rng,
                      max_steps=max_steps)


def independent_rollout(
    env_fn: Callable[[], AECEnv],
    problems: Sequence[int],
    n: int,
    sampler: Sampler,
    *,
    split: str = "train",
    max_steps: int = 10_000,
    advance: Advance | None = None,
) -> RolloutResult:
    """N whole episodes per problem, no tree (plain GRPO baseline, evaluation). Each agent
    step still generates for every live episode in one batched call. ``advance`` steps the
    agents the sampler does not act for (default: :func:`advance_dead`; seated roles:
    :func:`trainers.rollout.seated.play_seats`); what it pays a role reaches the role's latest sample."""
    result = RolloutResult()
    keys = [(p, i) for p in problems for i in range(n)]
    envs = {key: _reset(env_fn, key[0], split) for key in keys}
    counters: dict[tuple[int, int], Counter[str]] = {key: Counter() for key in keys}
    returns: dict[tuple[int, int], dict[str, float]] = {key: {} for key in keys}
    latest: dict[tuple[int, int, str], Sample] = {}  # each role's latest sample, per episode
    for _ in range(max_steps + 1):
        for key, env in envs.items():
            if advance is None:
                advance_dead(env, returns[key])
            else:
                def pay(role: str, amount: float, key: tuple[int, int] = key) -> None:
                    result.credit_later(latest.get((key[0], key[1], role)), role, amount)
                advance(env, returns[key], pay)
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
                sample = Sample(key[0], key[1], agent, turn, messages, completion, reward, reward_global,
                                reward_local, selected=True)
                result.samples.append(sample)
                latest[key[0], key[1], agent] = sample
                for role, amount in bystander_credit(envs[key], agent).items():
                    result.credit_later(latest.get((key[0], key[1], role)), role, amount)
            result.seconds_env += time.perf_counter() - start
    else:
        raise RuntimeError(f"episodes did not end within max_steps={max_steps} agent steps")
    for key, env in envs.items():  # rewards still pending for the agents left at the end
        for agent in env.agents:
            credit(env, agent, returns[key])
    result.successes = [episode_success(envs[key]) for key in keys]
    result.returns = [returns[key] for key in keys]
    return result
