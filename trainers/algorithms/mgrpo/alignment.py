"""M-GRPO's trajectory alignment and hierarchical group-relative advantages (pure functions).

A main agent delegates a *variable* number of times per rollout, so the sub-agent's
sub-trajectories per rollout vary (0 to ``max_delegations``). M-GRPO aligns every rollout
to a fixed ``d_max`` sub-trajectories so that the sub-agent's batch has a fixed size:

* fewer than ``d_max``: pad by duplicating sub-trajectories *of the same rollout*, drawn
  uniformly with a seeded RNG; duplicates are flagged ``padded``;
* more than ``d_max``: drop the surplus, either the last ones (``trim="last"``) or a
  seeded uniform choice (``trim="random"``), keeping the survivors in their order;
* none at all: nothing can be duplicated without mixing rollouts, so the rollout yields
  ``d_max`` empty slots (``source is None``) that carry no sample and no weight.

Advantages (GRPO, Shao et al. 2024, applied at both levels):

* main: per question, the main agent's final-action reward of each rollout relative to
  the other rollouts of the same question;
* sub: per question, the reward of each aligned (non-empty) slot relative to every
  aligned slot of that question across its rollouts; padded duplicates count, as they
  are in the batch.

Every training batch is a list of :class:`PolicySample` (completion, advantage, and whether
its group was degenerate), what :func:`trainers.learning.update.ppo_update` reads. No torch, no I/O:
the invariants are tested directly.
"""

from __future__ import annotations

import random
import typing
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trainers.algorithms.mgrpo.rollout import Key, Outcome, Turn
from trainers.maths.advantages import AdvantageStats, group_advantages

Trim = Literal["random", "last"]
TRIMS: tuple[Trim, ...] = typing.get_args(Trim)


@dataclass(frozen=True)
class Slot:
    """One of the ``d_max`` aligned sub-trajectory positions of a rollout."""

    question: Hashable
    rollout: int
    position: int
    """0 .. d_max - 1."""
    source: int | None
    """Index of the rollout's sub-trajectory (its delegation) in this slot; None: empty slot."""
    padded: bool
    """True for a duplicate added to reach ``d_max``."""

    @property
    def empty(self) -> bool:
        return self.source is None


def align_rollout(
    question: Hashable, rollout: int, count: int, d_max: int, *, trim: Trim = "random", rng: random.Random
) -> list[Slot]:
    """Exactly ``d_max`` slots for a rollout with ``count`` sub-trajectories (module docstring).

    Originals come first in their order; pads follow. ``rng`` is only drawn from when
    padding, or trimming with ``trim="random"``.
    """
    if d_max < 1:
        raise ValueError(f"d_max must be >= 1, got {d_max}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if trim not in TRIMS:
        raise ValueError(f"trim must be one of {TRIMS}, got {trim!r}")
    if count == 0:
        return [Slot(question, rollout, i, None, False) for i in range(d_max)]
    if count >= d_max:
        kept = list(range(d_max)) if trim == "last" else sorted(rng.sample(range(count), d_max))
        return [Slot(question, rollout, i, source, False) for i, source in enumerate(kept)]
    pads = [rng.randrange(count) for _ in range(d_max - count)]
    sources = [(i, False) for i in range(count)] + [(p, True) for p in pads]
    return [Slot(question, rollout, i, source, padded) for i, (source, padded) in enumerate(sources)]


def align_batch(
    counts: dict[tuple[Hashable, int], int], d_max: int, *, trim: Trim = "random", seed: int = 0
) -> list[Slot]:
    """:func:`align_rollout` for every ``(question, rollout) -> count``, in sorted key order,
    each rollout with its own RNG seeded from ``seed`` and its key (so a rollout's alignment
    does not depend on which other rollouts are in the batch)."""
    slots: list[Slot] = []
    for question, rollout in sorted(counts, key=repr):
        rng = random.Random(f"{seed}/{question!r}/{rollout}")
        slots.extend(align_rollout(question, rollout, counts[question, rollout], d_max, trim=trim, rng=rng))
    return slots


def main_advantages(
    rewards: dict[tuple[Hashable, int], float], *, normalize: str = "mean_std", eps: float = 1e-6
) -> tuple[dict[tuple[Hashable, int], float], set[tuple[Hashable, int]], AdvantageStats]:
    """``(question, rollout) -> advantage`` of the main agent's final-action reward, grouped
    per question across its rollouts, and the keys whose group is degenerate (they get 0 and
    are counted)."""
    keys = list(rewards)
    advantages, degenerate, stats = group_advantages([rewards[k] for k in keys], [k[0] for k in keys],
                                                     normalize=normalize, eps=eps)
    return (dict(zip(keys, advantages, strict=True)),
            {k for k, flag in zip(keys, degenerate, strict=True) if flag}, stats)


def sub_advantages(
    slots: Sequence[Slot], rewards: dict[tuple[Hashable, int, int], float], *, normalize: str = "mean_std",
    eps: float = 1e-6,
) -> tuple[list[float], list[bool], AdvantageStats]:
    """One advantage per slot (0 for empty slots): the reward of the slot's source
    sub-trajectory, ``rewards[(question, rollout, source)]``, relative to the non-empty
    slots of the same question; and per slot whether its group is degenerate (False for
    empty slots, which are in no group)."""
    filled = [i for i, s in enumerate(slots) if not s.empty]
    values = [rewards[slots[i].question, slots[i].rollout, slots[i].source] for i in filled]
    advantages, degenerate, stats = group_advantages(values, [slots[i].question for i in filled],
                                                     normalize=normalize, eps=eps)
    out = [0.0] * len(slots)
    flags = [False] * len(slots)
    for i, adv, flag in zip(filled, advantages, degenerate, strict=True):
        out[i], flags[i] = adv, flag
    return out, flags, stats


# ------------------------------------------------------------- training batches
@dataclass(frozen=True)
class PolicySample:
    """One sample of a level's training batch (a :class:`trainers.learning.update.UpdateSample`)."""

    completion: Any
    """The action as the sampler returned it."""
    advantage: float
    degenerate: bool
    """Its group's rewards were all equal: the advantage is 0 and carries no policy gradient."""


@dataclass(frozen=True)
class BatchStats:
    """What building one level's batch did, for logging."""

    groups: int
    degenerate: int
    samples: int
    slots: int = 0
    padded: int = 0
    empty: int = 0
    dropped: int = 0
    """Sub-trajectories that trimming left out."""


def _rollout_level_batch(
    turns: Sequence[Turn], outcomes: Mapping[Key, Outcome], normalize: str, eps: float
) -> tuple[list[PolicySample], BatchStats]:
    """Every turn of ``turns`` with its rollout's main advantage."""
    advantages, degenerate, stats = main_advantages({k: o.main_reward for k, o in outcomes.items()},
                                                    normalize=normalize, eps=eps)
    batch = [PolicySample(t.completion, advantages[t.question, t.rollout], (t.question, t.rollout) in degenerate)
             for t in turns]
    return batch, BatchStats(stats.groups, stats.degenerate, len(batch))


def main_batch(
    turns: Sequence[Turn], outcomes: Mapping[Key, Outcome], *, normalize: str = "mean_std", eps: float = 1e-6
) -> tuple[list[PolicySample], BatchStats]:
    """Every main action (``delegation`` None) with its rollout's main advantage
    (:func:`main_advantages` of the outcomes' final-action rewards)."""
    return _rollout_level_batch([t for t in turns if t.delegation is None], outcomes, normalize, eps)


def single_agent_batch(
    turns: Sequence[Turn], outcomes: Mapping[Key, Outcome], *, normalize: str = "mean_std", eps: float = 1e-6
) -> tuple[list[PolicySample], BatchStats]:
    """Single-agent GRPO: every action of a rollout, main or sub, gets the rollout's main
    advantage (no sub-level credit, no alignment)."""
    return _rollout_level_batch(turns, outcomes, normalize, eps)


def sub_batch(
    sub_completions: Mapping[Key, Sequence[Any]], outcomes: Mapping[Key, Outcome], d_max: int, *,
    trim: Trim = "random", seed: int = 0, normalize: str = "mean_std", eps: float = 1e-6,
) -> tuple[list[PolicySample], BatchStats]:
    """The sub actions in the aligned slots with their slot's advantage: the rollout's sub
    completions (in order) are split by delegation with ``outcome.sub_delegations``, every
    rollout is aligned to ``d_max`` slots and every action of a slot's sub-trajectory gets
    the slot's advantage (an action of a duplicated sub-trajectory appears once per copy)."""
    by_delegation: dict[Key, dict[int, list[Any]]] = {}
    for key, outcome in outcomes.items():
        completions = sub_completions.get(key, ())
        if len(completions) != len(outcome.sub_delegations):
            raise ValueError(f"rollout {key}: {len(completions)} sub completions but the outcome lists "
                             f"{len(outcome.sub_delegations)} sub actions")
        groups: dict[int, list[Any]] = {}
        for completion, delegation in zip(completions, outcome.sub_delegations, strict=True):
            groups.setdefault(delegation, []).append(completion)
        by_delegation[key] = groups
    counts = {key: len(o.delegation_rewards) for key, o in outcomes.items()}
    slots = align_batch(counts, d_max, trim=trim, seed=seed)
    rewards = {(q, r, i): reward for (q, r), o in outcomes.items() for i, reward in enumerate(o.delegation_rewards)}
    advantages, degenerate, stats = sub_advantages(slots, rewards, normalize=normalize, eps=eps)
    batch = [PolicySample(completion, adv, flag)
             for slot, adv, flag in zip(slots, advantages, degenerate, strict=True) if not slot.empty
             for completion in by_delegation[slot.question, slot.rollout].get(slot.source, [])]
    dropped = sum(max(0, c - d_max) for c in counts.values())
    return batch, BatchStats(stats.groups, stats.degenerate, len(batch), slots=len(slots),
                             padded=sum(s.padded for s in slots), empty=sum(s.empty for s in slots), dropped=dropped)
