"""Rollouts: AT-GRPO's tree-structured best-of-N, and N independent episodes.

Tree mode, exactly as docs/design.md §4 (Zhao et al. 2025)::

    S = env reset with the problem's seed
    for turn t, for each agent a in turn order (until S terminates):
        obs = S's observation for a                    # identical in all branches
        N completions ~ policy_a(obs)                  # ONE batched call for all problems
        branch_i = deepcopy(S); branch_i.step(completion_i); r_i = reward of a in branch_i
        record N samples with group key (problem, a, t)
        every branch_i played forward to a's next turn; what it paid a is added to r_i
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
5. *Only the selected branch has a future*: what the env pays a role while others act (a
   loss at the opponent's winning move) would reach the selected branch's sample only, and a
   legal move that loses would rank below its junk siblings. Every branch is played forward
   to its actor's next turn with the same policies and seats (:mod:`trainers.rollout.continuation`).

Everything here goes through the PettingZoo AEC API (``agent_selection``, ``step``,
``rewards``, ``infos``, ``terminations``/``truncations``) plus ``deepcopy``, so any AEC env
that deep-copies can be trained. Agents may finish at different times: as PettingZoo's
``agent_iter`` protocol requires, an agent that is done when selected is stepped with
``None`` (no sample) and the episode goes on while any agent is live
(:func:`~trainers.rollout.aec.advance_dead`).
The sampler is any callable (the trainer passes the LLM policies); this module does not
import torch.
"""

from __future__ import annotations

import copy
import random
import time
import typing
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pettingzoo import AECEnv

from pettingllm_envs.policies import Policy
from trainers.rollout.aec import (
    Advance,
    Completion,
    Messages,
    Sampler,
    acting_reward,
    advance_dead,
    agent_prompt,
    bystander_credit,
    credit,
    episode_over,
    episode_success,
)
from trainers.rollout.continuation import (
    Continuation,
    ContinuationCost,
    Continuations,
    ContinuedTree,
    Waiting,
    continue_branches,
    play_seats,
)

#: Which branch continues in the tree: ``greedy`` (highest reward, first on ties, as AT-GRPO) or
#: ``random`` (an unbiased on-policy continuation, an ablation).
Selection = Literal["greedy", "random"]


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
    move inflicts, a teammate's tests that expose this code's bugs);
    :func:`~trainers.rollout.aec.bystander_credit` says which payments count. In tree mode every
    branch's is its own continuation's (:mod:`trainers.rollout.continuation`)."""
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
    """Of ``seconds_env``: the tree's own work (deep copies, branch selection, continuations' steps)."""
    seconds_continuation: float = 0.0
    """Of ``seconds_generate`` plus ``seconds_tree``: the continuations' (tree mode)."""
    continuation_generations: int = 0
    """Completions generated for continuations (tree mode), one per branch and trained move."""
    paid_before_acting: dict[str, float] = field(default_factory=dict)
    """Per role, summed over the rollout's episodes: what the env paid the role before its first
    action of an episode (see :func:`~trainers.rollout.aec.bystander_credit`). No action of the
    role caused it, so no sample carries it."""

    def credit_later(self, latest: Sample | None, agent: str, amount: float) -> None:
        """Add ``amount``, paid to ``agent`` while others acted, to its ``latest`` sample in that
        episode, or to :attr:`paid_before_acting` when it has not acted yet."""
        if latest is None:
            self.paid_before_acting[agent] = self.paid_before_acting.get(agent, 0.0) + amount
        else:
            latest.reward += amount
            latest.reward_later += amount


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
    """The samples of one expanded node, the new live state's selected branch among them, the
    seconds of tree work it took (deep copies, selection, starting the continuations), and what
    the live path paid the other roles from the selected action to the next trained role's turn:
    its own step (less team credit, :func:`~trainers.rollout.aec.bystander_credit`) and the
    seats' moves after it (all of it). :func:`drive_tree` gives a role that has not acted yet
    this as paid before acting; a role that has acted had it valued by its own continuation."""

    samples: list[Sample]
    seconds_tree: float
    bystanders: dict[str, float] = field(default_factory=dict)
    seconds_continuation: float = 0.0
    """Of ``seconds_tree``: starting the continuations (their copies, unsampled steps)."""


class TreeStates(ContinuedTree, Protocol):
    """The live states of a tree rollout's problems, wherever they are held: in this process
    (:class:`LocalTree`) or on rollout-worker actors (:mod:`trainers.distributed.rollout`).
    :func:`drive_tree` runs the algorithm against this interface, so both give the same samples."""

    def live(self) -> list[Node]:
        """After stepping done agents with None (:func:`~trainers.rollout.aec.advance_dead`), one
        node per problem that has a live agent, in problem order."""
        ...

    def expand(self, nodes: Sequence[Node], completions: Sequence[Sequence[Completion]],
               chosen: Sequence[int | None]) -> list[Expansion]:
        """Branch every node N ways (one branch per completion, all but the last a deep copy),
        continue from branch ``chosen[k]`` or, where it is None, the first best reward, and start
        every branch's continuation (:mod:`trainers.rollout.continuation`); one expansion per node."""
        ...

    def settle(self, result: RolloutResult) -> None:
        """Put every problem's episode success, every role's return along the live path, and what
        seats paid before any trained action into ``result``."""
        ...


def expand_node(state: AECEnv, node: Node, completions: Sequence[Completion], chosen: int | None
                ) -> tuple[list[AECEnv], int, Expansion]:
    """The N branches of ``node`` (live state ``state``): every completion applied to its own
    branch, its reward read from that branch (trap 2); returns the branches, the index of the one
    that continues (``chosen``, or the first best reward when None) and the samples.

    The first N - 1 branches are deep copies of ``state``, made before it is stepped; the last is
    ``state`` itself. The caller replaces ``state`` with the selected branch and never reads it
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
    return branches, best, Expansion(samples, seconds_tree, bystander_credit(branches[best], node.agent))


#: Greedy selection draws nothing; random choices are drawn by :func:`drive_tree`, in problem order.
_NO_RNG = random.Random(0)


class LocalTree:
    """:class:`TreeStates` in this process: one live env per problem, which *is* the selected
    branch (trap 1), per-problem turn counters for envs that do not report turns, and every role's
    return along the live path. ``seats`` roles are played by their seats, never branched
    (:mod:`trainers.rollout.seated`)."""

    def __init__(self, env_fn: Callable[[], AECEnv], problems: Sequence[int], split: str,
                 seats: Mapping[str, Policy] | None = None) -> None:
        self.states = {p: _reset(env_fn, p, split) for p in problems}
        self.counters: dict[int, Counter[str]] = {p: Counter() for p in problems}
        self.seats = dict(seats or {})
        self.returns: dict[int, dict[str, float]] = {p: {} for p in problems}
        self.paid_before_acting: dict[str, float] = {}
        self.continuations = Continuations(self.seats)
        for problem, state in self.states.items():  # seats that move first, before any trained role
            play_seats(self.seats, state, self.returns[problem], self._paid_before_acting)

    def _paid_before_acting(self, role: str, amount: float) -> None:
        self.paid_before_acting[role] = self.paid_before_acting.get(role, 0.0) + amount

    def live(self) -> list[Node]:
        nodes = []
        for p, state in self.states.items():
            advance_dead(state, self.returns[p])
            if not episode_over(state):
                agent = state.agent_selection
                credit(state, agent, self.returns[p])  # paid since its previous turn, as PettingZoo's last()
                nodes.append(Node(p, agent, _turn_of(state, agent, self.counters[p]), agent_prompt(state, agent)))
        return nodes

    def expand(self, nodes: Sequence[Node], completions: Sequence[Sequence[Completion]],
               chosen: Sequence[int | None]) -> list[Expansion]:
        expansions = []
        for node, group, choice in zip(nodes, completions, chosen, strict=True):
            branches, best, expansion = expand_node(self.states[node.problem], node, group, choice)
            self.states[node.problem] = branches[best]
            self.counters[node.problem][node.agent] += 1
            start = time.perf_counter()
            self._continue(node, branches, best, expansion.bystanders)
            expansion.seconds_continuation = time.perf_counter() - start
            expansion.seconds_tree += expansion.seconds_continuation
            expansions.append(expansion)
        return expansions

    def _continue(self, node: Node, branches: list[AECEnv], best: int, bystanders: dict[str, float]) -> None:
        """Start every branch's continuation: the seats move on the live state for real (what they
        pay the actor is the selected branch's), the rest of its continuation runs on a copy."""
        live = branches[best]
        selected = Continuation(live, node.agent)

        def pay(role: str, amount: float) -> None:
            if role == node.agent:
                selected.paid += amount
            else:
                bystanders[role] = bystanders.get(role, 0.0) + amount
        play_seats(self.seats, live, self.returns[node.problem], pay)
        if not selected.over():
            selected.env = copy.deepcopy(live)
        self.continuations.start(node.problem, best, selected)
        for i, branch in enumerate(branches):
            if i != best:
                self.continuations.start(node.problem, i, Continuation(branch, node.agent))

    def waiting(self) -> list[Waiting]:
        return self.continuations.waiting()

    def answer(self, waiting: Sequence[Waiting], texts: Sequence[str]) -> None:
        self.continuations.answer(waiting, texts)

    def continued(self) -> dict[tuple[int, int], float]:
        return self.continuations.take()

    def settle(self, result: RolloutResult) -> None:
        for problem, state in self.states.items():  # rewards still pending for the agents left at the end
            for agent in state.agents:
                credit(state, agent, self.returns[problem])
        result.successes = [episode_success(state) for state in self.states.values()]
        result.returns = [self.returns[p] for p in self.states]
        for role, amount in self.paid_before_acting.items():
            result.credit_later(None, role, amount)


def drive_tree(tree: TreeStates, n: int, sampler: Sampler, *, selection: Selection = "greedy",
               rng: random.Random | None = None, max_steps: int = 10_000,
               continuation_sampler: Sampler | None = None) -> RolloutResult:
    """The tree rollout's loop over ``tree`` (see the module docstring): at every agent step,
    one batched sampler call with every live problem's prompt, then every node expanded and every
    branch played forward (:func:`~trainers.rollout.continuation.continue_branches`, with
    ``continuation_sampler``, by default ``sampler``: the same policies). Random selection draws
    its choices here, one per node in problem order, so where the states live does not change
    them. More than ``max_steps`` agent steps means an env that never ends: an error, not a hang."""
    if selection not in typing.get_args(Selection):
        raise ValueError(f"selection must be one of {typing.get_args(Selection)}, got {selection!r}")
    rng = rng or random.Random(0)
    result = RolloutResult()
    acted: set[tuple[int, str]] = set()  # (problem, role) of every role that has acted
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
            expansions = tree.expand(agent_nodes, completions, chosen)
            result.seconds_env += time.perf_counter() - start
            _continue_and_credit(tree, agent_nodes, expansions, continuation_sampler or sampler, result, acted)
    else:
        raise RuntimeError(f"episodes did not end within max_steps={max_steps} agent steps")
    tree.settle(result)
    result.success_metric = "tree/success_rate"
    return result


def _continue_and_credit(tree: TreeStates, nodes: Sequence[Node], expansions: Sequence[Expansion],
                         sampler: Sampler, result: RolloutResult, acted: set[tuple[int, str]]) -> None:
    """Play the expansions' branches forward and add what each paid its actor to its sample; what
    the live path paid a role before its first action goes to ``result.paid_before_acting``."""
    cost = ContinuationCost()
    paid = continue_branches(tree, sampler, cost)
    result.seconds_generate += cost.seconds_generate
    result.seconds_env += cost.seconds_env
    result.seconds_tree += cost.seconds_env
    result.seconds_continuation += cost.seconds_generate + cost.seconds_env
    result.continuation_generations += cost.generations
    for node, expansion in zip(nodes, expansions, strict=True):
        result.samples.extend(expansion.samples)
        result.seconds_tree += expansion.seconds_tree
        result.seconds_continuation += expansion.seconds_continuation
        for sample in expansion.samples:
            amount = paid[sample.problem, sample.branch]
            sample.reward += amount
            sample.reward_later += amount
        acted.add((node.problem, node.agent))
        for role, amount in expansion.bystanders.items():
            if (node.problem, role) not in acted:
                result.credit_later(None, role, amount)


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
    continuation_sampler: Sampler | None = None,
) -> RolloutResult:
    """AT-GRPO's tree rollout of every problem in this process (see the module docstring)."""
    return drive_tree(LocalTree(env_fn, problems, split), n, sampler, selection=selection, rng=rng,
                      max_steps=max_steps, continuation_sampler=continuation_sampler)


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
