"""Where a step's seconds go: :class:`PhaseTimer`, named wall-clock phases, and the process's current timer.

Code at a phase boundary writes ``with phase("backward"): ...`` (or :func:`add_seconds` for time it
measured itself, as a rollout does) and :func:`count` for tokens; the run's step profile
(:mod:`trainers.harness.profile`) installs a :class:`PhaseTimer` for the length of a step
(:func:`installed`) and reads it back. No timer is installed unless a run asks for a profile, and
then :func:`phase` returns one shared do-nothing context manager: the cost of an unprofiled phase is
a function call and an attribute read.

Phases are **exclusive**: a phase opened inside another, and seconds added inside one, are
subtracted from the outer phase, so the phases of a step never count a second twice and their sum
is at most the step's wall time. An outer phase keeps what its inner phases did not measure
(``update`` is the part of an update that is neither scoring, backward, optimizer nor weight sync).

This is the bottom layer, below ``maths``, because every layer times its own work (the learning
layer its backward, the algorithms their logging and checkpoints): it imports only the standard
library, so any module of ``trainers`` can import it.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager


class PhaseTimer:
    """Exclusive wall-clock seconds per named phase and counters (module docstring).

    ``synchronize`` runs before each clock read (the step profile passes CUDA's, so that a phase is
    charged for the kernels it launched, not the next phase); ``annotate(name)`` is entered around each
    phase (the step profile passes ``torch.profiler.record_function`` when it records a trace)."""

    enabled = True

    def __init__(self, *, synchronize: Callable[[], None] | None = None,
                 annotate: Callable[[str], AbstractContextManager[object]] | None = None) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.counts: defaultdict[str, float] = defaultdict(float)
        self._synchronize = synchronize
        self._annotate = annotate
        self._inner_seconds: list[float] = []  # per open phase: seconds its inner phases took

    def _now(self) -> float:
        if self._synchronize is not None:
            self._synchronize()
        return time.perf_counter()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the block's wall time, less its inner phases', to ``name``."""
        with self._annotate(name) if self._annotate is not None else contextlib.nullcontext():
            start = self._now()
            self._inner_seconds.append(0.0)
            try:
                yield
            finally:
                elapsed = self._now() - start
                inner = self._inner_seconds.pop()
                self.seconds[name] += elapsed - inner
                if self._inner_seconds:
                    self._inner_seconds[-1] += elapsed

    def add(self, name: str, seconds: float) -> None:
        """Charge ``seconds`` measured elsewhere to ``name`` (and take them from the open phase)."""
        self.seconds[name] += seconds
        if self._inner_seconds:
            self._inner_seconds[-1] += seconds

    def count(self, name: str, amount: float) -> None:
        self.counts[name] += amount


class _NoTimer:
    """The timer when no profile was asked for: every call does nothing."""

    enabled = False
    _NOTHING = contextlib.nullcontext()

    def phase(self, name: str) -> AbstractContextManager[None]:
        return self._NOTHING

    def add(self, name: str, seconds: float) -> None:
        pass

    def count(self, name: str, amount: float) -> None:
        pass


NO_TIMER = _NoTimer()
_current: PhaseTimer | _NoTimer = NO_TIMER


def current() -> PhaseTimer | _NoTimer:
    """The installed timer, or :data:`NO_TIMER`."""
    return _current


def phase(name: str) -> AbstractContextManager[None]:
    """The current timer's phase ``name`` (nothing happens without a profile)."""
    return _current.phase(name)


def add_seconds(name: str, seconds: float) -> None:
    """Charge ``seconds`` measured elsewhere to phase ``name`` of the current timer."""
    _current.add(name, seconds)


def count(name: str, amount: float) -> None:
    """Add ``amount`` to the current timer's counter ``name`` (``tokens/generated``, ``tokens/trained``)."""
    _current.count(name, amount)


@contextlib.contextmanager
def installed(timer: PhaseTimer) -> Iterator[PhaseTimer]:
    """Make ``timer`` the current one for the block (the previous one comes back after)."""
    global _current
    previous, _current = _current, timer
    try:
        yield timer
    finally:
        _current = previous


__all__ = ["NO_TIMER", "PhaseTimer", "add_seconds", "count", "current", "installed", "phase"]
