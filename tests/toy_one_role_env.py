"""The toy env (``tests/toy_env.py``) with its first role only: one agent step per episode, the
prompt a system message (the role's instructions) and a user message (``Problem i. Turn 0.``).

The trainer-step benchmark (``benchmarks/trainer_step.py``) trains on it because it is exactly
the single-turn work a TRL ``GRPOTrainer`` step does on the same two messages: the same prompts,
completions and trained tokens, one to one."""

from __future__ import annotations

from typing import Any, ClassVar

from toy_env import raw_env as toy_raw_env

from pettingllm_envs.core import TextAECEnv, wrap_env


class raw_env(toy_raw_env):
    """The toy env with the role ``first`` alone (module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {**toy_raw_env.metadata, "name": "toy_one_role_v0"}
    roles = ("first",)


def env(**config: Any) -> TextAECEnv:
    return wrap_env(raw_env(**config))
