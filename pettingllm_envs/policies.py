"""Reference policies: ``scripted_policy(env_id)`` is each env's oracle, and
``random_policy`` a baseline. A policy maps ``(observation, agent, info)`` to an action."""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from typing import Any

from pettingllm_envs.registry import env_module

Policy = Callable[[str, str, dict[str, Any]], str]
#: The policies named without a model (``run --policy``, ``bench --policy``): the env's oracle and random text.
NAMED_POLICIES: tuple[str, ...] = ("scripted", "random")


def scripted_policy(env_id: str) -> Policy:
    """The oracle of ``env_id``: it solves every instance from the observation and the infos
    entry alone (dataset envs rebuild the instance's ground truth from the problem the entry
    names), so it works in any process: a Ray worker, a policy server, a fresh interpreter."""
    return env_module(env_id).scripted_policy


def random_policy(seed: int = 0, max_chars: int = 200) -> Policy:
    """Random printable text: the floor every trained policy should beat."""
    rng = random.Random(seed)

    def act(observation: str, agent: str, info: dict[str, Any]) -> str:
        return "".join(rng.choice(string.printable) for _ in range(rng.randint(0, max_chars)))

    return act
