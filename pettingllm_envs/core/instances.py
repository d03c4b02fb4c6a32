"""Deterministic, split-disjoint problem instances for procedural environments.

Instance ``index`` of a split is drawn from ``random.Random(data_seed + index)``.
Which split an instance belongs to is decided by a hash of its *content* (its
canonical key), not by its index: two different seeds that happen to generate the
same puzzle always land in the same split, so train and test can never share a puzzle
(trap 6 of docs/design.md: overlapping splits).
"""

from __future__ import annotations

import hashlib
import random
import typing
from collections.abc import Callable
from typing import Literal, TypeVar

Split = Literal["train", "test"]
SPLITS: tuple[Split, ...] = typing.get_args(Split)

InstanceT = TypeVar("InstanceT")

#: How many candidates ``draw_instance`` tries before giving up. With a 20 % test share
#: the chance that 1,000 draws all miss the wanted split is below 1e-96.
MAX_DRAWS = 1000


def split_of(key: str, test_percent: int) -> Split:
    """The split that an instance with canonical ``key`` belongs to."""
    bucket = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % 100
    return "test" if bucket < test_percent else "train"


def draw_instance(
    generate: Callable[[random.Random], InstanceT],
    key: Callable[[InstanceT], str],
    *,
    data_seed: int,
    index: int,
    split: Split,
    test_percent: int,
) -> InstanceT:
    """Instance ``index`` of ``split``: the first candidate from ``Random(data_seed + index)``
    whose content hashes into ``split``."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    rng = random.Random(data_seed + index)
    for _ in range(MAX_DRAWS):
        instance = generate(rng)
        if split_of(key(instance), test_percent) == split:
            return instance
    raise RuntimeError(
        f"no {split!r} instance in {MAX_DRAWS} draws (index {index}); "
        "the generator's instance space is too small for this test_percent"
    )
