"""Seeds derived from a run's position, so that random streams never repeat and resume is exact.

A generation engine that takes one seed per request (vLLM) must get a *different* seed for
every (call, prompt, sample): with one seed per call, branch ``i`` of every problem would
draw the same random stream, and with a seed that restarts, streams would repeat across
steps. :class:`RequestSeeds` names every request by its position in the run, (stream, step,
call within the step, prompt, sample), and hashes that name into a seed. The step is
checkpointed and the call counter restarts with every step, so a resumed run derives the
same seeds as an uninterrupted one; the counter's state is checkpointed as well
(:meth:`RequestSeeds.state_dict`), so a checkpoint taken mid-step would resume exactly too.

The process-wide generators (python, numpy, torch) are seeded by :func:`seed_everything`
only, with a seed that is either the run's own or one :func:`derive_seed` names (M-GRPO's
main, sub and in-process sides each get ``derive_seed(seed, "mgrpo", side)``);
:func:`rng_state` / :func:`set_rng_state` checkpoint them and :func:`isolated_rng` runs a
block (an evaluation) in a stream of its own.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

#: vLLM hands request seeds to ``torch.Generator.manual_seed`` and numpy; 63 bits fit both.
SEED_BITS = 63


def derive_seed(*parts: int | str) -> int:
    """A ``SEED_BITS``-bit seed that is a pure function of ``parts`` (BLAKE2b of their repr):
    distinct names give unrelated seeds, not neighbouring ones."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - SEED_BITS)


class RequestSeeds:
    """Per-request seeds of one run (see the module docstring)."""

    def __init__(self, base_seed: int) -> None:
        self.base_seed = base_seed
        self.stream = "train"
        self.step = 0
        self.call = 0

    def begin(self, stream: str, step: int) -> None:
        """Start the calls of ``stream`` (``train`` rollouts, ``eval``) at ``step``."""
        self.stream, self.step, self.call = stream, step, 0

    def next_call(self, prompts: int, n: int) -> list[int]:
        """One seed per (prompt, sample) of the next call, prompt-major (prompt 0's n first)."""
        seeds = [derive_seed(self.base_seed, self.stream, self.step, self.call, p, i)
                 for p in range(prompts) for i in range(n)]
        self.call += 1
        return seeds

    def state_dict(self) -> dict[str, Any]:
        return {"base_seed": self.base_seed, "stream": self.stream, "step": self.step, "call": self.call}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.base_seed, self.stream = int(state["base_seed"]), str(state["stream"])
        self.step, self.call = int(state["step"]), int(state["call"])


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global generators (numpy takes 32 bits)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """Every global RNG the run touches, for exact resumption."""
    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(),
                             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Put back the generators :func:`rng_state` saved."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextmanager
def isolated_rng(seed: int) -> Iterator[None]:
    """Run the block with every global RNG seeded by ``seed``, then put the previous states
    back: an evaluation draws its own reproducible samples and leaves the training stream as
    if it had not run (so a run that evaluates resumes like one that does not)."""
    saved = rng_state()
    try:
        seed_everything(seed)
        yield
    finally:
        set_rng_state(saved)
