"""The options every text environment has (:class:`TextEnvConfig`); each env subclasses it
with its own fields and checks them in ``validate``, which the base class calls before the env
is built, so a bad configuration fails at construction with a clear message, not mid-episode."""

from __future__ import annotations

from dataclasses import dataclass

from pettingllm_envs.core.instances import SPLITS, Split
from pettingllm_envs.core.observations import CUT_MARKER


@dataclass
class TextEnvConfig:
    """Options that every text environment has. Each env subclasses this with its own fields."""

    alpha: float = 1.0
    """Weight of the team reward in ``alpha * global + local``. AT-GRPO (Zhao et al., 2025)
    mixes a shared task reward, which rewards coordination, with a role-specific reward,
    which gives each role a signal that varies with its own action."""

    max_turns: int = 4
    """Turns before the episode is truncated; a turn is every role acting once (at most once
    for envs that choose the next agent themselves, see ``TextAECEnv.next_agent``)."""

    split: Split = "train"
    """Which split ``reset`` draws problems from (``options={"split": ...}`` overrides it)."""

    data_seed: int = 0
    """Problem ``i`` is generated from ``random.Random(data_seed + i)``."""

    test_percent: int = 20
    """Share of the instance space (by content hash) that belongs to the test split."""

    format_penalty: float = 0.5
    """Subtracted from the local reward of an action that is not a string, is too long,
    or cannot be parsed; the reason is in ``infos``."""

    max_action_chars: int = 32768
    """Longest accepted action; longer ones are invalid (they also lie outside the action space)."""

    max_observation_chars: int = 65536
    """Longest observation; longer prompts are cut in the middle, keeping the task and the latest events."""

    def validate(self) -> None:
        """Raise ``ValueError`` on an inconsistent configuration."""
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")
        if not 1 <= self.test_percent <= 99:
            raise ValueError(f"test_percent must be in 1..99, got {self.test_percent}")
        if self.format_penalty < 0:
            raise ValueError(f"format_penalty must be >= 0, got {self.format_penalty}")
        if self.max_action_chars < 1 or self.max_observation_chars < 2 * len(CUT_MARKER):
            raise ValueError("max_action_chars and max_observation_chars are too small")
