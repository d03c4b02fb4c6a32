"""The limits every judged program runs under (:class:`JudgeLimits`): one immutable value that
code_v0's config builds and the judge's entry points take, instead of four loose arguments."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "JudgeLimits"]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class JudgeLimits:
    """Time, memory, parallelism and message length of the judge's runs; a bad value raises
    ``ValueError`` naming the field at construction."""

    timeout: float = 5.0
    """Seconds one (code, test) program may run."""
    memory_mb: int = 512
    """Address-space limit of one program, in MiB."""
    workers: int = 2
    """Programs run at the same time."""
    shown_chars: int = 400
    """Longest failure reason or test text a verdict carries."""

    def __post_init__(self) -> None:
        timeout = self.timeout
        is_number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
        if not is_number or not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        for name, least in (("memory_mb", 16), ("workers", 1), ("shown_chars", 20)):
            value = getattr(self, name)
            if not _is_int(value) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")

    def verdict_key(self) -> tuple[float, int, int]:
        """The limits a verdict depends on, for a cache key: all but ``workers``, which sets only
        how many programs run at once."""
        return (self.timeout, self.memory_mb, self.shown_chars)


#: The limits of a default ``code_v0`` config.
DEFAULT_LIMITS = JudgeLimits()
