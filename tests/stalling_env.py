"""The toy env (``tests/toy_env.py``) with one stall: the first action applied while the file
``stall_file`` exists deletes the file and then sleeps ``stall_s`` seconds. The distributed
tests use it to hang one rollout worker once (its replacement replays the same actions
without the file, so it does not stall) and check that the controller times out instead of
waiting for ever."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from toy_env import ToyConfig
from toy_env import raw_env as toy_raw_env

from pettingllm_envs.core import ActionResult, TextAECEnv, wrap_env


@dataclass
class StallingConfig(ToyConfig):
    """The toy env's configuration plus the stall."""

    stall_file: str = ""
    """While this file exists, the next action applied removes it and sleeps ``stall_s``."""
    stall_s: float = 60.0


class raw_env(toy_raw_env):
    """The toy env that stalls once (module docstring)."""

    config_class = StallingConfig
    config: StallingConfig

    def apply_action(self, agent: str, text: str) -> ActionResult:
        if self.config.stall_file:
            try:  # removing the file is the claim: of workers that race here, exactly one stalls
                os.remove(self.config.stall_file)
            except FileNotFoundError:
                pass
            else:
                time.sleep(self.config.stall_s)
        return super().apply_action(agent, text)


def env(**config: Any) -> TextAECEnv:
    return wrap_env(raw_env(**config))
