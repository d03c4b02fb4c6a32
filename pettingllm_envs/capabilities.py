"""What an env declares for the tools that need more than the PettingZoo AEC API.

The AEC API is enough to play, bench and train an env. A few tools need knowledge that only
the env has: self-consistency must know when two sampled actions are *the same answer*
(``1/2`` and ``0.5`` are; two programs that behave alike are). Such knowledge is not kept in
tables keyed by env id inside the tools: the env module declares it, as a module attribute
next to ``scripted_policy``::

    voting = Voting(keys=boxed_answers, same=verified_equal)

A tool asks for it with :func:`capability` (``capability("math_v0", Voting)``) when a run
starts. An env that does not declare it raises :class:`MissingCapability`, one message that
names the env, its module, the attribute it lacks, what needs it and which envs do declare
it, so a run fails before any model is loaded, not after a rollout.

A new capability is a frozen dataclass that subclasses :class:`Capability` and sets the two
class variables ``attribute`` (the module attribute the env defines) and ``purpose`` (what
needs it, for the error message). Envs registered from outside the package declare
capabilities the same way, in their own module.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from pettingzoo import AECEnv

from pettingllm_envs.registry import env_module, list_envs


class MissingCapability(LookupError):
    """An env does not declare a capability a tool needs (a usage error on the command line)."""


@dataclass(frozen=True)
class Capability:
    """Base of every capability; subclasses set ``attribute`` and ``purpose``."""

    attribute: ClassVar[str]
    """The name of the env module's attribute that holds the capability."""
    purpose: ClassVar[str]
    """What needs the capability, as the end of "..., which <purpose> needs"."""


@dataclass(frozen=True)
class Voting(Capability):
    """How sampled actions of one agent become votes (self-consistency, Wang et al. 2023).

    ``keys(env, agent, texts)`` gives, for each candidate action text of ``agent`` in the
    state ``env`` is in (``agent`` is the one to act), the answer it votes for, or None when
    it casts no vote (no answer can be extracted). It must not step ``env``. ``same(a, b)``
    says whether two keys are one answer; it need not be transitive (numeric tolerance is
    not), so a vote is compared with each bucket's first member.
    """

    attribute: ClassVar[str] = "voting"
    purpose: ClassVar[str] = "self-consistency's majority vote"

    keys: Callable[[AECEnv, str, Sequence[str]], list[Hashable | None]]
    same: Callable[[Any, Any], bool] = operator.eq


@dataclass(frozen=True)
class Delegation(Capability):
    """How a manager role hands sub-tasks to a worker role (M-GRPO's main agent and sub-agent,
    Hong et al. 2025, "Multi-Agent Deep Research: Training Multi-Agent Systems with M-GRPO").

    The env has exactly these two roles. The manager opens delegations (0, 1, ... in order);
    the worker acts until it reports back and control returns to the manager. ``served(env)``,
    read right after the worker acted, is the index of the delegation that action belongs to;
    ``rewards(env)``, read when the episode is over, is each delegation's reward in that order
    (what the worker earned for it, its share of the outcome included). Neither steps ``env``.
    """

    attribute: ClassVar[str] = "delegation"
    purpose: ClassVar[str] = "M-GRPO's hierarchical rollouts and trajectory alignment"

    manager: str
    """The role that delegates and answers (M-GRPO's main agent)."""
    worker: str
    """The role that serves the delegations (the sub-agent)."""
    served: Callable[[AECEnv], int]
    rewards: Callable[[AECEnv], list[float]]


@dataclass(frozen=True)
class Demonstrations(Capability):
    """The oracle's actions as demonstrations for a warm start (supervised fine-tuning before
    RL: a random model gives RL only degenerate groups, docs/design.md §4), worked out from the
    env's state (its instance and board), never from prompt text.

    ``act(env, agent, rng, mistake_rate)`` is the demonstrated action of ``agent`` (the one to
    act) in the state ``env`` is in, and whether it is a mistake: with probability
    ``mistake_rate`` a plausible, well-formed wrong one (drawn from ``rng``), so that a warm
    policy stays imperfect and RL has something left to fix. ``partner(env, agent)`` is the
    oracle's clean action in its shortest form, for a role played by the oracle beside a trained
    one. Neither steps ``env``; both accept a wrapped env.
    """

    attribute: ClassVar[str] = "demonstrations"
    purpose: ClassVar[str] = "a warm start's supervised demonstrations (and scripted partners)"

    act: Callable[[AECEnv, str, random.Random, float], tuple[str, bool]]
    partner: Callable[[AECEnv, str], str]


CapabilityT = TypeVar("CapabilityT", bound=Capability)


def declares(env_id: str, kind: type[Capability]) -> bool:
    """Whether the module of ``env_id`` declares a ``kind`` capability."""
    return isinstance(getattr(env_module(env_id), kind.attribute, None), kind)


def capability(env_id: str, kind: type[CapabilityT]) -> CapabilityT:
    """The ``kind`` capability that ``env_id``'s module declares; :class:`MissingCapability`
    (naming the env, the attribute and the envs that do declare it) when it does not."""
    module = env_module(env_id)
    value = getattr(module, kind.attribute, None)
    if isinstance(value, kind):
        return value
    found = "has none" if value is None else f"has a {type(value).__name__}, not a {kind.__name__}"
    others = [other for other in list_envs() if other != env_id and declares(other, kind)]
    raise MissingCapability(
        f"{env_id} does not declare {kind.attribute}, which {kind.purpose} needs: its module {module.__name__} "
        f"{found} (a {__name__}.{kind.__name__} named {kind.attribute!r}, next to scripted_policy); "
        f"envs that declare it: {', '.join(others) or 'none'}")


def declared_capabilities(env_id: str) -> list[str]:
    """The attribute names of every capability ``env_id`` declares, for listings."""
    return [kind.attribute for kind in Capability.__subclasses__() if declares(env_id, kind)]


__all__ = ["Capability", "Delegation", "Demonstrations", "MissingCapability", "Voting", "capability",
           "declared_capabilities", "declares"]
