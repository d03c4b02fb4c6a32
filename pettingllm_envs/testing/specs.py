"""What every check of the conformance battery is given, and how it fails.

A check is given the env as a registered id (``"tictactoe_v0"``) or as a factory, a callable
that takes no arguments and returns a fresh, wrapped AEC env (``lambda: my_env(max_turns=3)``):
the checks make several envs (two for a seed test, one per episode) and must never share one.
A registered id also brings its module's oracle (``scripted_policy``); a factory's oracle is
passed as ``policy=``.

A broken rule raises :class:`ConformanceError`, an ``AssertionError`` (so pytest shows it as a
failed assertion) whose message names the env, the rule and what broke it; a check that cannot
run on the env it was given (it reads the state of :class:`~pettingllm_envs.core.TextAECEnv`,
or needs an oracle that was not given) raises :class:`NotApplicable` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from pettingzoo import AECEnv

from pettingllm_envs.core import TextAECEnv
from pettingllm_envs.policies import Policy
from pettingllm_envs.registry import env_module, make

EnvFactory: TypeAlias = Callable[[], AECEnv]
#: A registered env id, or a factory of fresh wrapped envs.
EnvSpec: TypeAlias = str | EnvFactory


class ConformanceError(AssertionError):
    """An env broke a rule of the conformance battery; the message says which rule and how."""


class NotApplicable(Exception):
    """A check does not apply to the env it was given; the message says why."""


def factory(env: EnvSpec) -> EnvFactory:
    """A factory of fresh envs for ``env`` (an id is made with ``pettingllm_envs.make``)."""
    if isinstance(env, str):
        env_id = env
        env_module(env_id)  # an unknown id fails here, with the known ids and a close match
        return lambda: make(env_id)
    if isinstance(env, AECEnv):
        raise TypeError("the checks make several fresh envs: pass a factory (lambda: my_env()), not an env")
    if not callable(env):
        raise TypeError(f"an env is a registered id or a factory (a callable returning a fresh env), got {env!r}")
    return env


def instance(env: EnvSpec | AECEnv) -> AECEnv:
    """``env`` itself when it is an env (raw or wrapped), else a fresh one from its spec."""
    return env if isinstance(env, AECEnv) else factory(env)()


def env_name(env: AECEnv) -> str:
    """The name the checks' messages give ``env``: its ``metadata["name"]`` (a registered env's id)."""
    return str(getattr(env, "metadata", {}).get("name", type(env.unwrapped).__name__))


def oracle(env: EnvSpec, policy: Policy | None) -> Policy | None:
    """``policy`` when given, else the registered module's ``scripted_policy`` (None when it has none)."""
    if policy is not None or not isinstance(env, str):
        return policy
    found = getattr(env_module(env), "scripted_policy", None)
    return found if callable(found) else None


def require_oracle(env: EnvSpec, policy: Policy | None, check: str) -> Policy:
    found = oracle(env, policy)
    if found is None:
        raise NotApplicable(f"{check} needs the env's oracle: pass policy=, a function (observation, agent, info) "
                            "-> action that solves the task (a registered env's module names it scripted_policy)")
    return found


def text_env(env: AECEnv, check: str) -> TextAECEnv[Any]:
    """The unwrapped :class:`TextAECEnv` of ``env``; :class:`NotApplicable` for any other env."""
    raw = env.unwrapped
    if not isinstance(raw, TextAECEnv):
        raise NotApplicable(f"{check} reads the state of a pettingllm_envs.core.TextAECEnv (its config, history "
                            f"and infos['last_action']); {type(raw).__name__} is not one")
    return raw


def require(condition: bool, env: str, rule: str, detail: str) -> None:
    """Raise :class:`ConformanceError` ``"<env> breaks '<rule>': <detail>"`` unless ``condition``."""
    if not condition:
        raise ConformanceError(f"{env} breaks '{rule}': {detail}")


def shown(action: Any, limit: int = 60) -> str:
    """``repr(action)``, cut to ``limit`` characters, for messages (junk can be a megabyte)."""
    text = repr(action)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
