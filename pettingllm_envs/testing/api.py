"""The API contract: PettingZoo's own tests, the env module's trio and docs, and the infos
every step carries (docs/design.md §2).

PettingZoo's ``api_test``, ``seed_test`` and ``parallel_api_test`` run unpatched, with actions
sampled from the env's action space (random printable text, which the env must treat as
invalid moves). Their failures are plain assertions; these wrappers say which test failed on
which env. They need nothing beyond PettingZoo itself (``pettingzoo.test`` imports pytest
and pygame only if they are installed).
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Callable
from typing import Any

from pettingzoo.test import api_test, parallel_api_test, seed_test

from pettingllm_envs.policies import Policy
from pettingllm_envs.registry import env_module
from pettingllm_envs.testing.specs import ConformanceError, EnvSpec, env_name, factory, oracle, require, text_env

#: What a registered env module's docstring documents (its property table), case-insensitive.
MODULE_DOC_HEADINGS = ("Roles", "Observation", "Action", "reward", "Termination", "Config")
#: PettingZoo's warnings about style choices that text envs make on purpose (string observations and
#: spaces, role names for agents); other warnings are left to the caller.
STYLE_WARNINGS = ("Observation is not a NumPy array", "Observation space for each agent probably",
                  "Action space for each agent probably", "We recommend agents to be named")
#: What ``infos[agent]["last_action"]`` holds after an action (a TextAECEnv's infos).
LAST_ACTION_KEYS = ("reward", "reward_global", "reward_local", "alpha", "valid", "parsed")


def _run(test: str, name: str, call: Callable[[], Any]) -> None:
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):  # its progress lines
            for message in STYLE_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=UserWarning)
            call()
    except AssertionError as error:
        raise ConformanceError(f"{name} fails PettingZoo's {test}: {error or type(error).__name__}") from error
    except Exception as error:  # the env raised inside the test: on a random action, a reset, a copy
        raise ConformanceError(f"{name} fails PettingZoo's {test}: the env raised {type(error).__name__}: "
                               f"{error}") from error


def check_api(env: EnvSpec, *, num_cycles: int = 1000) -> None:
    """PettingZoo's ``api_test`` on a fresh env."""
    made = factory(env)()
    _run("api_test", env_name(made), lambda: api_test(made, num_cycles=num_cycles))


def check_seed(env: EnvSpec, *, num_cycles: int = 100) -> None:
    """PettingZoo's ``seed_test``: two fresh envs reset with one seed act and observe alike."""
    make = factory(env)
    _run("seed_test", env_name(make()), lambda: seed_test(make, num_cycles=num_cycles))


def check_parallel_api(parallel_env_fn: Callable[[], Any], *, num_cycles: int = 200) -> None:
    """PettingZoo's ``parallel_api_test`` on a fresh Parallel API env from ``parallel_env_fn``."""
    made = parallel_env_fn()
    name = env_name(made.aec_env) if hasattr(made, "aec_env") else type(made).__name__
    _run("parallel_api_test", name, lambda: parallel_api_test(made, num_cycles=num_cycles))


def check_env_module(env_id: str) -> None:
    """The registered module of ``env_id`` exposes the PettingZoo trio (``env``, ``parallel_env``,
    ``raw_env`` named ``env_id`` in its metadata) and documents its property table."""
    module = env_module(env_id)
    require(callable(getattr(module, "env", None)) and callable(getattr(module, "parallel_env", None)), env_id,
            "an env module exposes env() and parallel_env()", f"{module.__name__} lacks one")
    raw_env = getattr(module, "raw_env", None)
    metadata_name = getattr(raw_env, "metadata", {}).get("name")
    require(metadata_name == env_id, env_id, "an env module's raw_env.metadata['name'] is its id",
            f"{module.__name__}.raw_env names itself {metadata_name!r}")
    doc = (module.__doc__ or "").lower()
    missing = [heading for heading in MODULE_DOC_HEADINGS if heading.lower() not in doc]
    require(not missing, env_id, "an env module's docstring documents roles, observation, action, rewards, "
            "termination and config", f"{module.__name__}'s docstring lacks {missing}")


def check_infos(env: EnvSpec, *, policy: Policy | None = None) -> None:
    """``infos`` as docs/design.md §2 lists them: after reset the agent to act sees its role,
    turn 0, no last action and a [system, user] chat that the observation starts with; after its
    action (the oracle's, else an empty one) ``last_action`` holds the reward and its parts, with
    ``reward == alpha * reward_global + reward_local``."""
    made = factory(env)()
    text_env(made, "the infos check")
    name = env_name(made)
    made.reset(seed=0)
    agent = made.agent_selection
    info = made.infos[agent]
    require(info.get("role") == agent and info.get("turn") == 0 and info.get("last_action") is None, name,
            "after reset infos[agent] names its role, turn 0 and no last action",
            f"role={info.get('role')!r}, turn={info.get('turn')!r}, last_action={info.get('last_action')!r}")
    roles = [message.get("role") for message in info.get("messages", [])]
    require(roles == ["system", "user"], name, "infos[agent]['messages'] is the prompt as [system, user] messages",
            f"its roles are {roles}")
    require(str(made.observe(agent)).startswith(info["messages"][0]["content"]), name,
            "the observation starts with the system message", "it does not")
    act = oracle(env, policy)
    made.step(act(made.observe(agent), agent, info) if act is not None else "")
    last = made.infos[agent]["last_action"]
    missing = [key for key in LAST_ACTION_KEYS if key not in last]
    require(not missing, name, "infos[agent]['last_action'] carries the reward and its parts", f"it lacks {missing}")
    expected = last["alpha"] * last["reward_global"] + last["reward_local"]
    require(math.isclose(last["reward"], expected, rel_tol=1e-6, abs_tol=1e-12), name,
            "reward == alpha * reward_global + reward_local",
            f"{last['reward']} != {last['alpha']} * {last['reward_global']} + {last['reward_local']}")
