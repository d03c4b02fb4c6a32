"""Conformance checks shared by the registry-wide tests and the bridges' own: junk actions a
model can emit, and the loop that steps them through an env checking it never raises."""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from typing import Any

from pettingllm_envs.core import TextObservation

#: Actions no env may crash on: empty, control characters, empty and failing programs, huge
#: outputs and texts, a lone surrogate, bytes, None and non-strings.
JUNK_ACTIONS: list[Any] = [
    "",
    " ",
    "\x00\x01\x02",
    "```python\n```",
    "```python\nraise SystemExit(3)\n```",
    "```python\nprint('MOVES: ' + 'U' * 100000)\n```",
    "MOVES: " + "X" * 1000,
    "\ud800 surrogate",
    "a" * (1024 * 1024),
    b"\xff\xfe bytes",
    None,
    12345,
    ["list"],
]


def random_printable(rng: random.Random, count: int, max_chars: int) -> list[str]:
    """``count`` strings of up to ``max_chars`` random printable characters."""
    return ["".join(rng.choice(string.printable) for _ in range(rng.randint(0, max_chars))) for _ in range(count)]


def step_junk_actions(env: Any, actions: Sequence[Any], *, reset_seed: int) -> list[dict[str, Any]]:
    """Step ``actions`` in turn (a new episode seeded ``reset_seed`` whenever the agent to act is
    done), asserting after each step that the reward is a float, an invalid action says why and
    the next observation lies in its space; the ``last_action`` info of every non-None action."""
    records = []
    for action in actions:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env.reset(seed=reset_seed)
            agent = env.agent_selection
        env.step(action)
        info = env.infos.get(agent)
        if info is not None and info["last_action"] is not None and action is not None:
            last = info["last_action"]
            assert isinstance(last["reward"], float)
            assert last["valid"] or last["invalid_reason"], "an invalid action must be explained"
            records.append(last)
        obs = env.observe(env.agent_selection)
        assert isinstance(obs, TextObservation)
        assert env.observation_space(env.agent_selection).contains(obs)
    return records
