"""Group-relative advantages (GRPO, Shao et al. 2024) with AT-GRPO's agent- and turn-wise groups.

Pure functions over plain Python values: no torch, trivially testable.

GRPO replaces a learned critic by the mean reward of a group of samples that answer the
*same prompt*. In a multi-agent, multi-turn episode the prompt depends on the problem,
the agent and the turn, so AT-GRPO (Zhao et al. 2025) groups by ``(problem, agent, turn)``.
The coarser keys are ablations; every key keeps the problem, so a group never mixes
problems (the reference implementation's trap 3).
"""

from __future__ import annotations

import math
import typing
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

#: What a group shares besides the problem (AT-GRPO's ``problem_agent_turn``; the others are ablations).
GroupBy = Literal["problem_agent_turn", "problem_agent", "problem"]
GROUP_KEYS: tuple[str, ...] = typing.get_args(GroupBy)
#: ``mean_std``: GRPO's ``(r - mean) / (std + eps)``; ``mean``: Dr. GRPO's ``r - mean``.
Normalize = Literal["mean_std", "mean"]
NORMALIZATIONS: tuple[str, ...] = typing.get_args(Normalize)

#: Rewards closer than this count as equal when deciding that a group is degenerate.
DEGENERATE_TOL = 1e-9


def group_key(problem: Hashable, agent: str, turn: int, group_by: GroupBy) -> str:
    """The group a sample belongs to, as a readable string (it goes into sample dumps)."""
    if group_by == "problem_agent_turn":
        return f"p{problem}/{agent}/t{turn}"
    if group_by == "problem_agent":
        return f"p{problem}/{agent}"
    if group_by == "problem":
        return f"p{problem}"
    raise ValueError(f"group_by must be one of {GROUP_KEYS}, got {group_by!r}")


@dataclass(frozen=True)
class AdvantageStats:
    """What the grouping did, for logging."""

    groups: int
    degenerate: int

    @property
    def degenerate_frac(self) -> float:
        return self.degenerate / self.groups if self.groups else 0.0


def group_advantages(
    rewards: Sequence[float], keys: Sequence[Hashable], *, normalize: Normalize = "mean_std", eps: float = 1e-6
) -> tuple[list[float], list[bool], AdvantageStats]:
    """Advantages of ``rewards`` relative to their group (same key).

    ``mean_std``: ``(r - mean) / (std + eps)`` with the population std; ``mean``: ``r - mean``
    (Dr. GRPO). A degenerate group (one sample, or all rewards equal) carries no learning
    signal: its advantages are exactly 0 and it is counted. Returns the advantages, a
    per-sample "in a degenerate group" flag, and the counts.
    """
    if len(rewards) != len(keys):
        raise ValueError(f"{len(rewards)} rewards but {len(keys)} keys")
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        members[key].append(i)
    advantages = [0.0] * len(rewards)
    degenerate_flags = [False] * len(rewards)
    degenerate = 0
    for indices in members.values():
        values = [float(rewards[i]) for i in indices]
        if max(values) - min(values) <= DEGENERATE_TOL:
            degenerate += 1
            for i in indices:
                degenerate_flags[i] = True
            continue
        mean = math.fsum(values) / len(values)
        scale = 1.0
        if normalize == "mean_std":
            std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
            scale = std + eps
        for i, v in zip(indices, values, strict=True):
            advantages[i] = (v - mean) / scale
    return advantages, degenerate_flags, AdvantageStats(groups=len(members), degenerate=degenerate)
