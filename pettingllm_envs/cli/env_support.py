"""What the env commands (``list``, ``run``, ``play``, ``bench``) know about a registered env,
read through PettingZoo's public AEC API only, so that any registered PettingZoo env works
(``register("tictactoe_v3", "pettingzoo.classic.tictactoe_v3")``), not just this package's.

An env module must define ``env(**config)``; the rest is optional and each command says,
in one line, what it needs that an env lacks: ``scripted_policy`` (the oracle ``run`` and
``play`` use) and text actions (``play`` reads a person's move as text, ``bench`` evaluates
text policies). What is only a convenience falls back: the roles come from ``possible_agents``
of a built env when the env class declares none, and the description from the first line of
any docstring the module or the env class has.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.spaces import Space, Text
from pettingzoo import AECEnv

from pettingllm_envs.commandline.errors import UsageError, terminal_text
from pettingllm_envs.policies import Policy, random_policy, scripted_policy
from pettingllm_envs.registry import env_module, make

#: A policy for any env: ``(observation, agent, info) -> action`` (for text envs a :data:`Policy`).
AnyPolicy = Callable[[Any, str, dict[str, Any]], Any]


def env_roles(env_id: str) -> list[str]:
    """The agents of ``env_id`` in turn order: the env class's declared ``roles`` when it has
    them (no env is built), else ``possible_agents`` of a freshly built env."""
    declared = getattr(getattr(env_module(env_id), "raw_env", None), "roles", None)
    if declared:
        return list(declared)
    env = make(env_id)
    try:
        return list(env.possible_agents)
    finally:
        env.close()


def env_description(env_id: str) -> str:
    """The first line of the env module's docstring, else of its env class's or of the module
    that defines that class (PettingZoo's classic envs document themselves there), followed by
    what the module's ``listing_note()`` adds, if it has one (a bridge: how many games it plays);
    Sphinx markup as plain text."""
    module = env_module(env_id)
    raw = getattr(module, "raw_env", None)
    owner = sys.modules.get(getattr(raw, "__module__", ""))
    first = ""
    for doc in (module.__doc__, getattr(raw, "__doc__", None), getattr(owner, "__doc__", None)):
        lines = [line.strip().lstrip("#").strip() for line in (doc or "").splitlines()]
        first = next((line for line in lines if line), "")
        if first:
            break
    note = getattr(module, "listing_note", None)
    return terminal_text(f"{first} ({note()})" if callable(note) else first)


def split_config(env_id: str, split: str) -> dict[str, str]:
    """``{"split": split}`` for an env whose config has a ``split`` field (this package's envs),
    else nothing: an env without splits is built with its own config only."""
    config_class = getattr(getattr(env_module(env_id), "raw_env", None), "config_class", None)
    fields = getattr(config_class, "__dataclass_fields__", {})
    return {"split": split} if "split" in fields else {}


def oracle(env_id: str, needed_by: str) -> Policy:
    """The env's scripted oracle; a one-line error naming ``needed_by`` when its module has none."""
    if not callable(getattr(env_module(env_id), "scripted_policy", None)):
        raise UsageError(f"{needed_by} needs the scripted oracle of {env_id}, but its module "
                         f"{env_module(env_id).__name__} defines no scripted_policy(observation, agent, info)")
    return scripted_policy(env_id)


def text_actions(env: AECEnv) -> bool:
    """Whether every agent of ``env`` acts with text (a ``gymnasium.spaces.Text`` action space)."""
    return all(isinstance(env.action_space(agent), Text) for agent in env.possible_agents)


def require_text_actions(env_id: str, env: AECEnv, needed_by: str) -> None:
    """A one-line error when ``env``'s actions are not text: ``needed_by`` works with text only."""
    if not text_actions(env):
        spaces = ", ".join(f"{agent}: {env.action_space(agent)}" for agent in env.possible_agents)
        raise UsageError(f"{needed_by} works with text actions, but {env_id}'s are not text ({spaces})")


def _legal_actions(observation: Any, info: dict[str, Any]) -> np.ndarray | None:
    """PettingZoo's action mask of the agent to act: ``observation["action_mask"]`` or ``info["action_mask"]``."""
    if isinstance(observation, dict) and "action_mask" in observation:
        return np.asarray(observation["action_mask"], dtype=np.int8)
    if "action_mask" in info:
        return np.asarray(info["action_mask"], dtype=np.int8)
    return None


def random_actions(env: AECEnv, seed: int) -> AnyPolicy:
    """The random baseline of any env: random printable text for text envs (what the envs of
    this package must survive), else a uniform sample of the agent's action space within its
    action mask, from the env's own spaces copied and seeded (the env's are left alone)."""
    if text_actions(env):
        return random_policy(seed)
    spaces: dict[str, Space] = {}
    for offset, agent in enumerate(env.possible_agents):
        spaces[agent] = copy.deepcopy(env.action_space(agent))
        spaces[agent].seed(seed + offset)

    def act(observation: Any, agent: str, info: dict[str, Any]) -> Any:
        mask = _legal_actions(observation, info)
        return spaces[agent].sample(mask) if mask is not None else spaces[agent].sample()

    return act


__all__ = ["AnyPolicy", "env_description", "env_roles", "oracle", "random_actions", "require_text_actions",
           "split_config", "text_actions"]
