"""Tree mode values every branch of a group on the same footing: each one is played forward.

A branch's sample is valued by what its action paid at once *and* what the env paid the actor
afterwards while the other roles acted (a loss at the opponent's winning move, a teammate's tests
exposing its code's bugs). Played forward on the selected branch only, that later payment made a
legal move that loses (+0.1 - 1.0) rank below its junk siblings (-0.5, never played on). So
every branch of an expanded node, the selected one and its siblings alike, gets a
*continuation*: it is played forward to the actor's next turn (or the episode's end) with the same
policies and seats, and what the env paid the actor on the way is added to that branch's sample
(``Sample.reward_later``):

* done agents are stepped with None (they pay nothing a sample carries, as on the live path);
* seated roles act by their seats, and everything a seat's move pays the actor counts, shared
  team credit included (:func:`play_seats`);
* trained roles act by **one** completion each from the rollout's sampler, in one batched call
  per role to move across every node's branches (:func:`continue_branches`); what such a move pays
  the actor counts less the team credit the mover's own sample carries
  (:func:`~trainers.rollout.aec.bystander_credit`).

The siblings are played on themselves (they are discarded afterwards), so a continuation costs no
deep copy there. The selected branch is the live state: its seats move on it for real (the live
path *is* its continuation up to the next trained role's turn) and, when a trained role other than
the actor moves before the actor's next turn, the rest is played on one deep copy, since the live
state's next step is that role's own N-way expansion. Its best-of-N choice would value the
selected branch against a different opponent than its siblings met.

Cost per node, on top of the tree's N - 1 copies: one deep copy when a trained role other than the
actor moves before the actor's next turn, and per such move one extra batched generation of one
completion per branch; nothing but the seats' own calls where only seats move between turns.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pettingzoo import AECEnv

from pettingllm_envs.policies import Policy
from trainers.rollout.aec import (
    Messages,
    Sampler,
    advance_dead,
    agent_done,
    agent_prompt,
    bystander_credit,
    credit,
    episode_over,
)


def play_seats(seats: Mapping[str, Policy], env: AECEnv, returns: dict[str, float] | None,
               pay: Callable[[str, float], None], max_steps: int = 10_000) -> None:
    """Step every agent selected before the next live trained one: done agents with None
    (:func:`~trainers.rollout.aec.advance_dead`), seated ones with their seat's action.
    ``returns`` is credited as :func:`~trainers.rollout.aec.credit` does; ``pay(role, amount)``
    receives, per seat move, everything it paid each trained role, shared team credit included
    (a seat has no sample to carry it). More than ``max_steps`` seat moves in a row means an env
    that never ends."""
    for _ in range(max_steps + 1):
        advance_dead(env, returns)
        agent = env.agent_selection
        if episode_over(env) or agent not in seats:
            return
        credit(env, agent, returns)
        observation, _, _, _, info = env.last()
        env.step(seats[agent](observation, agent, info))
        for role, reward in env.rewards.items():
            if role not in seats and reward:
                pay(role, float(reward))
    raise RuntimeError(f"the seats made more than max_steps={max_steps} moves in a row without the episode ending")


@dataclass
class Waiting:
    """A continuation waiting for a trained role's action: where it is (problem, branch), the
    role to move and its prompt there."""

    problem: int
    branch: int
    agent: str
    messages: Messages


@dataclass
class Continuation:
    """One branch played forward from ``actor``'s action; ``paid`` is what the env has paid the
    actor since (module docstring)."""

    env: AECEnv
    actor: str
    paid: float = 0.0

    def over(self) -> bool:
        """The actor's next turn (live or done) has come, it has left, or the episode is over."""
        env = self.env
        return episode_over(env) or self.actor not in env.agents or env.agent_selection == self.actor

    def play_unsampled(self, seats: Mapping[str, Policy], max_steps: int = 10_000) -> bool:
        """Step done agents and seated ones until :meth:`over` (True) or a trained role is to move (False)."""
        env = self.env
        for _ in range(max_steps + 1):
            if self.over():
                return True
            agent = env.agent_selection
            if agent_done(env, agent):
                env.step(None)
            elif agent in seats:
                observation, _, _, _, info = env.last()
                env.step(seats[agent](observation, agent, info))
                self.paid += float(env.rewards.get(self.actor, 0.0))
            else:
                return False
        raise RuntimeError(f"a continuation took more than max_steps={max_steps} unsampled steps")

    def answer(self, text: str) -> None:
        """The trained role to move acts with ``text``."""
        mover = self.env.agent_selection
        self.env.step(text)
        self.paid += bystander_credit(self.env, mover).get(self.actor, 0.0)


class Continuations:
    """A tree's continuations under way and the values of the finished ones, by (problem, branch)."""

    def __init__(self, seats: Mapping[str, Policy]) -> None:
        self.seats = seats
        self.running: dict[tuple[int, int], Continuation] = {}
        self.finished: dict[tuple[int, int], float] = {}

    def start(self, problem: int, branch: int, continuation: Continuation) -> None:
        if continuation.play_unsampled(self.seats):
            self.finished[problem, branch] = continuation.paid
        else:
            self.running[problem, branch] = continuation

    def waiting(self) -> list[Waiting]:
        return [Waiting(problem, branch, c.env.agent_selection, agent_prompt(c.env, c.env.agent_selection))
                for (problem, branch), c in sorted(self.running.items())]

    def answer(self, waiting: Sequence[Waiting], texts: Sequence[str]) -> None:
        for where, text in zip(waiting, texts, strict=True):
            continuation = self.running.pop((where.problem, where.branch))
            continuation.answer(text)
            self.start(where.problem, where.branch, continuation)

    def take(self) -> dict[tuple[int, int], float]:
        """The finished continuations' values (what each paid its actor); forgets them."""
        if self.running:
            raise RuntimeError(f"{len(self.running)} continuations are still waiting for an action")
        finished, self.finished = self.finished, {}
        return finished


class ContinuedTree(Protocol):
    """The part of :class:`trainers.rollout.episodes.TreeStates` that plays continuations."""

    def waiting(self) -> list[Waiting]:
        """Every continuation waiting for a trained role's action, in (problem, branch) order."""
        ...

    def answer(self, waiting: Sequence[Waiting], texts: Sequence[str]) -> None:
        """Act with ``texts[k]`` in ``waiting[k]``'s continuation and play it on to its next wait or its end."""
        ...

    def continued(self) -> dict[tuple[int, int], float]:
        """Once nothing waits: what every continuation paid its actor, by (problem, branch)."""
        ...


@dataclass
class ContinuationCost:
    seconds_generate: float = 0.0
    seconds_env: float = 0.0
    generations: int = 0


def continue_branches(tree: ContinuedTree, sampler: Sampler, cost: ContinuationCost,
                      max_steps: int = 10_000) -> dict[tuple[int, int], float]:
    """Play every continuation the last expansions started to its end: per round, one batched
    ``sampler`` call of one completion per waiting branch for each role to move. Returns what each
    paid its actor, by (problem, branch); ``cost`` accumulates the time and generations spent."""
    for _ in range(max_steps + 1):
        waiting = tree.waiting()
        if not waiting:
            start = time.perf_counter()
            values = tree.continued()
            cost.seconds_env += time.perf_counter() - start
            return values
        by_agent: dict[str, list[Waiting]] = defaultdict(list)
        for where in waiting:
            by_agent[where.agent].append(where)
        for agent, group in by_agent.items():
            start = time.perf_counter()
            completions = sampler(agent, [where.messages for where in group], 1)
            cost.seconds_generate += time.perf_counter() - start
            cost.generations += len(group)
            start = time.perf_counter()
            tree.answer(group, [completion[0].text for completion in completions])
            cost.seconds_env += time.perf_counter() - start
    raise RuntimeError(f"continuations did not end within max_steps={max_steps} rounds")
