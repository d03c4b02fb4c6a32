"""The environment registry: versioned ids mapped to env modules, imported lazily.

Each module exposes the PettingZoo trio ``env()``, ``raw_env`` and ``parallel_env()``
plus ``scripted_policy``. Registering a new env is one line in ``ENV_MODULES`` (or a
call to :func:`register` for envs that live outside this package).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
from types import ModuleType
from typing import Any

from pettingzoo import AECEnv, ParallelEnv

from pettingllm_envs.extras import extra_hint

ENV_MODULES: dict[str, str] = {
    "code_v0": "pettingllm_envs.code.code_env",
    "math_v0": "pettingllm_envs.math.math_env",
    "plan_path_v0": "pettingllm_envs.planning.plan_path",
    "research_v0": "pettingllm_envs.research.research_env",
    "sokoban_v0": "pettingllm_envs.planning.sokoban",
    "sudoku_v0": "pettingllm_envs.games.sudoku",
    "tictactoe_v0": "pettingllm_envs.games.tictactoe",
}

#: Envs that bridge an optional library: ``env_id -> (module, the package it needs, the extra
#: that installs it)``. Each is registered only when its package is installed, so a base install
#: lists, runs and tests only envs that work; :func:`missing_optional_envs` says what the rest need.
OPTIONAL_ENV_MODULES: dict[str, tuple[str, str, str]] = {
    "textarena_v0": ("pettingllm_envs.bridges.textarena_env", "textarena", "textarena"),
    "reasoning_gym_v0": ("pettingllm_envs.bridges.reasoning_gym_env", "reasoning_gym", "reasoning-gym"),
}
for _env_id, (_module, _package, _extra) in OPTIONAL_ENV_MODULES.items():
    if importlib.util.find_spec(_package) is not None:
        ENV_MODULES[_env_id] = _module


def missing_optional_envs() -> dict[str, str]:
    """``env_id -> extra`` for the optional envs that are not registered because their package is missing."""
    return {env_id: extra for env_id, (_, _, extra) in OPTIONAL_ENV_MODULES.items() if env_id not in ENV_MODULES}


def register(env_id: str, module: str) -> None:
    """Register an env module (one that defines ``env``, ``raw_env``, ``parallel_env``)."""
    if env_id in ENV_MODULES and ENV_MODULES[env_id] != module:
        raise ValueError(f"{env_id!r} is already registered to {ENV_MODULES[env_id]}")
    ENV_MODULES[env_id] = module


def list_envs() -> list[str]:
    """Every registered env id, sorted."""
    return sorted(ENV_MODULES)


def env_module(env_id: str) -> ModuleType:
    """The module that implements ``env_id``."""
    if env_id in missing_optional_envs():
        raise ValueError(f"{env_id} is not installed: it needs {extra_hint(missing_optional_envs()[env_id])}")
    if env_id not in ENV_MODULES:
        close = difflib.get_close_matches(env_id, ENV_MODULES, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown env id {env_id!r}{hint} (known: {', '.join(list_envs())})")
    return importlib.import_module(ENV_MODULES[env_id])


def make(env_id: str, **config: Any) -> AECEnv:
    """A wrapped AEC env: ``make("plan_path_v0", rows=8, alpha=0.5)``."""
    return env_module(env_id).env(**config)


def make_parallel(env_id: str, **config: Any) -> ParallelEnv:
    """The Parallel API view of ``make(env_id, **config)``."""
    return env_module(env_id).parallel_env(**config)
