"""Conformance checks shared by the registry-wide tests and the envs' own: junk actions a
model can emit and the loop that steps them through an env checking it never raises, and
the checks that train and test instances never meet and a reset is reproducible."""

from __future__ import annotations

import copy
import pickle
import random
import string
from collections.abc import Callable, Sequence
from typing import Any

import pettingllm_envs
from pettingllm_envs.core import SPLITS, TextObservation, split_of

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


def snapshot(env: Any) -> tuple[Any, ...]:
    """What a copy of ``env`` must reproduce: the agent to act, every live agent's observation,
    rewards, cumulative rewards, terminations, truncations and infos."""
    raw = env.unwrapped
    return (raw.agent_selection, list(raw.agents), {agent: str(raw.observe(agent)) for agent in raw.agents},
            dict(raw.rewards), dict(raw._cumulative_rewards), dict(raw.terminations), dict(raw.truncations),
            copy.deepcopy(raw.infos))  # later steps may change these infos in place


def mixed_policy(policy: Callable[[Any, str, dict[str, Any]], Any], *, junk_share: float = 0.3,
                 seed: int = 7) -> Callable[[Any, str, dict[str, Any]], Any]:
    """``policy``, replying junk instead with probability ``junk_share`` (seeded), so that
    copies of an env that wrongly share state diverge."""
    rng = random.Random(seed)
    return lambda obs, agent, info: "junk" if rng.random() < junk_share else policy(obs, agent, info)


def pickle_round_trip(env: Any) -> Any:
    return pickle.loads(pickle.dumps(env))


def continue_episode(env: Any, policy: Callable[[Any, str, dict[str, Any]], Any], steps: int, *,
                     reload: Callable[[Any], Any] | None = None) -> list[tuple[Any, ...]]:
    """The :func:`snapshot` before each of up to ``steps`` steps of ``policy`` (None for a done
    agent), ending early when no agent is left; ``reload`` (a pickle round trip, say) replaces
    the env before every snapshot."""
    trace = []
    for _ in range(steps):
        if reload is not None:
            env = reload(env)
        trace.append(snapshot(env))
        if not env.agents:
            break
        agent = env.agent_selection
        obs, _, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else policy(obs, agent, info))
    return trace


def split_keys(env: Any, count: int) -> dict[str, set[str]]:
    """The instance keys of the first ``count`` instances of each split, each asserted to hash
    into its split, and the two splits asserted to share none."""
    keys: dict[str, set[str]] = {}
    for split in SPLITS:
        keys[split] = set()
        for index in range(count):
            env.reset(options={"index": index, "split": split})
            key = env.instance_key(env.instance)
            assert split_of(key, env.config.test_percent) == split
            keys[split].add(key)
    assert not keys["train"] & keys["test"]
    return keys


def assert_reset_repeats(env: Any, index: int) -> None:
    """Resetting to test instance ``index`` twice gives the same instance."""
    env.reset(options={"index": index, "split": "test"})
    first = env.instance
    env.reset(options={"index": index, "split": "test"})
    assert env.instance == first


def assert_truncates_without_success(env_id: str, max_turns: int = 2) -> Any:
    """``env_id`` with ``max_turns``, every role stepping a reply that is no move until the
    turns run out: every role is truncated, none terminated, none successful. Returns the env."""
    env = pettingllm_envs.make(env_id, max_turns=max_turns)
    env.reset(seed=1)
    for _ in range(max_turns * len(env.possible_agents)):
        env.step("nothing")
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert all(info["success"] is False for info in env.infos.values())
    return env
