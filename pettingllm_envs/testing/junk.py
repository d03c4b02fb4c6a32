"""Junk actions: what a model can emit that no env may crash on.

A policy being trained emits empty replies, control characters, megabytes of text, lone
surrogates, and through a buggy runner bytes, None or numbers. An env that raises on any of
them kills a rollout of thousands of episodes; the contract (docs/design.md §3) is that junk
costs a documented penalty, is explained in ``infos``, and the episode goes on.
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from typing import Any

from pettingzoo import AECEnv

from pettingllm_envs.core import TextObservation
from pettingllm_envs.testing.specs import ConformanceError, EnvSpec, env_name, factory, require, shown, text_env

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

RULE = "junk never raises: it costs a penalty explained in infos, and the episode goes on"


def random_printable(rng: random.Random, count: int, max_chars: int) -> list[str]:
    """``count`` strings of up to ``max_chars`` random printable characters."""
    return ["".join(rng.choice(string.printable) for _ in range(rng.randint(0, max_chars))) for _ in range(count)]


def step_junk_actions(env: AECEnv, actions: Sequence[Any], *, reset_seed: int) -> list[dict[str, Any]]:
    """Step ``actions`` in turn (a new episode seeded ``reset_seed`` whenever the agent to act is
    done), checking after each step that the reward is a float, an invalid action says why and
    the next observation lies in its space. Returns the ``infos[agent]["last_action"]`` of every
    action that is not None (None is the PettingZoo action of a done agent)."""
    name = env_name(env)
    records = []
    for action in actions:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env.reset(seed=reset_seed)
            agent = env.agent_selection
        try:
            env.step(action)
        except Exception as error:  # the rule is that nothing is raised: say what was
            raise ConformanceError(f"{name} breaks '{RULE}': step({shown(action)}) by {agent!r} raised "
                                   f"{type(error).__name__}: {error}") from error
        info = env.infos.get(agent)
        if info is not None and info.get("last_action") is not None and action is not None:
            last = info["last_action"]
            require(isinstance(last["reward"], float), name, "infos[agent]['last_action']['reward'] is a float",
                    f"after step({shown(action)}) it is {last['reward']!r}")
            require(bool(last["valid"] or last["invalid_reason"]), name, "an invalid action is explained",
                    f"step({shown(action)}) was invalid with no invalid_reason")
            records.append(last)
        observed = env.observe(env.agent_selection)
        require(isinstance(observed, TextObservation), name, "an observation is a TextObservation",
                f"after step({shown(action)}) observe() gave a {type(observed).__name__}")
        require(env.observation_space(env.agent_selection).contains(observed), name,
                "an observation lies in its observation space",
                f"after step({shown(action)}) the observation of {env.agent_selection!r} has {len(observed)} "
                "characters, outside the space")
    return records


def check_junk_actions(env: EnvSpec, *, rounds: int = 3, random_count: int = 10, random_chars: int = 300) -> None:
    """Each of ``rounds`` episodes (seeded 0, 1, ...) is stepped with every :data:`JUNK_ACTIONS`
    entry and ``random_count`` random printable strings of up to ``random_chars`` characters
    (:func:`step_junk_actions`): nothing raises, every reward is a float, every invalid action
    is explained and every observation lies in its space."""
    instance = factory(env)()
    rng = random.Random(0)
    for round_ in range(rounds):
        instance.reset(seed=round_)
        step_junk_actions(instance, [*JUNK_ACTIONS, *random_printable(rng, random_count, random_chars)],
                          reset_seed=round_ + 100)


def check_non_string_penalty(env: EnvSpec) -> None:
    """A non-string action (a number) is invalid because it is not a string, and costs exactly
    the config's ``format_penalty`` as the local reward (a TextAECEnv rule)."""
    instance = factory(env)()
    raw = text_env(instance, "the non-string penalty check")
    name = env_name(instance)
    instance.reset(seed=1)
    agent = instance.agent_selection
    instance.step(12345)
    last = instance.infos[agent]["last_action"]
    require(not last["valid"] and "string" in (last["invalid_reason"] or ""), name,
            "a non-string action is invalid and says it must be a string",
            f"step(12345) gave valid={last['valid']}, invalid_reason={last['invalid_reason']!r}")
    require(last["reward_local"] == -raw.config.format_penalty, name,
            "a non-string action costs the format penalty",
            f"step(12345) paid reward_local={last['reward_local']}, not -format_penalty="
            f"{-raw.config.format_penalty}")
