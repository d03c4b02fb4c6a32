"""How raw environments are wrapped for users, the PettingZoo way."""

from __future__ import annotations

from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils import wrappers
from pettingzoo.utils.conversions import turn_based_aec_to_parallel


def wrap_env(raw: AECEnv) -> AECEnv:
    """Order enforcing: calling ``step`` before ``reset`` and similar misuse raise clear errors."""
    return wrappers.OrderEnforcingWrapper(raw)


def make_parallel_env(aec: AECEnv) -> ParallelEnv:
    """The Parallel API view of a turn-based env.

    Roles act sequentially and a later role sees the earlier roles' output of the same
    turn, so one parallel ``step`` applies the action of the agent whose turn it is
    (``infos[agent]["active_agent"]`` names it) and ignores the others. This keeps the
    AEC semantics exactly; a simultaneous-move view would hide same-turn actions.
    """
    return turn_based_aec_to_parallel(aec)
