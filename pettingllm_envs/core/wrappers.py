"""How raw environments are wrapped for users, the PettingZoo way."""

from __future__ import annotations

import copy
from typing import Any

from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils import wrappers
from pettingzoo.utils.conversions import turn_based_aec_to_parallel


class OrderEnforcingWrapper(wrappers.OrderEnforcingWrapper):
    """PettingZoo's order enforcing wrapper, with a direct ``deepcopy``. The generic one looks up
    special methods the wrapper lacks (``__deepcopy__``, ``__getnewargs_ex__``, ``__setstate__``),
    and its ``__getattr__`` answers each with a raised error: together as slow as copying the env
    itself, which a tree rollout does for every branch."""

    def __deepcopy__(self, memo: dict[int, Any]) -> OrderEnforcingWrapper:
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__dict__.update({name: copy.deepcopy(value, memo) for name, value in self.__dict__.items()})
        return clone


def wrap_env(raw: AECEnv) -> AECEnv:
    """Order enforcing: calling ``step`` before ``reset`` and similar misuse raise clear errors."""
    return OrderEnforcingWrapper(raw)


def make_parallel_env(aec: AECEnv) -> ParallelEnv:
    """The Parallel API view of a turn-based env.

    Roles act sequentially and a later role sees the earlier roles' output of the same
    turn, so one parallel ``step`` applies the action of the agent whose turn it is
    (``infos[agent]["active_agent"]`` names it) and ignores the others. This keeps the
    AEC semantics exactly; a simultaneous-move view would hide same-turn actions.
    """
    return turn_based_aec_to_parallel(aec)
