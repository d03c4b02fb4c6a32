"""The reasoning-gym datasets that ``reasoning_gym_v0`` plays, the ones it does not (with the
reason), and their problems: one dataset object per configuration, items cached.

reasoning-gym (``pip install -e '.[reasoning-gym]'``, version 0.1.25) is imported on first
use, so listing envs never needs it. Item ``k`` of a reasoning-gym dataset is a function of
its seed and ``k``; the env asks for items ``0 .. pool_size(name) - 1`` of the dataset seeded with
``data_seed``, so a problem is the same in every process (``tests/envs/bridges/test_reasoning_gym_env.py``
checks it across hash seeds for every bridged dataset).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib
import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any

#: The version the bridge was checked against (the lists below are facts about it).
REASONING_GYM_VERSION = "0.1.25"
#: Items a dataset object is asked for (reasoning-gym's ``size``): large, so that a long run rarely
#: draws one item twice (5,000 draws from 10,000 items give only about 3,900 distinct problems).
POOL_SIZE = 1 << 20
#: Datasets that generate every item of their pool up front, with a pool they make in seconds
#: (acre: 2.8 s for 10,000 items, 457 s for 2^20).
SMALL_POOLS = {"acre": 10_000}
#: Items kept generated per process (a reset then costs a dictionary look-up).
ITEM_CACHE_SIZE = 4096

#: Datasets the bridge refuses, with the reason (checked by tests/envs/bridges/test_reasoning_gym_env.py).
_SYMPY = ("score_answer evaluates the answer with SymPy's parse_expr (Python eval) and simplifies it: code in an "
          "answer would run, and a short answer can take unbounded time")
_NO_ANSWER = ("items carry no reference answer (None; the scorer checks a solution by simulating it): "
              "the bridge has no oracle")
_HASH_SEED = "items depend on PYTHONHASHSEED (set order): the same index is a different problem in another process"
#: Datasets with items that draw unseeded randomness, and one such item of seed 0 (found by generating
#: items 0-29 of every dataset under two hash seeds).
UNSEEDED_ITEMS = {"codeio": 26, "list_functions": 0}
_UNSEEDED = ("some items draw unseeded randomness: item {item} of seed 0 is a different problem each time it is "
             "generated")
UNSUPPORTED: dict[str, str] = {
    "boxnet": _NO_ANSWER,
    "codeio": _UNSEEDED.format(item=UNSEEDED_ITEMS["codeio"]),
    "coin_flip": "score_answer's partial credit divides by the shorter string, so the answer 0 scores 1.0 for every "
                 "probability below 1 (186 of 200 items)",
    "composite": "a mixture that needs its datasets in dataset_config: bridge each dataset by name instead",
    "game_of_life_halting": "score_answer compares bool(answer) with bool(gold): any non-empty answer scores 1.0",
    "graph_color": _NO_ANSWER,
    "intermediate_integration": _SYMPY,
    "isomorphic_strings": _HASH_SEED,
    "knight_swap": _HASH_SEED,
    "list_functions": _UNSEEDED.format(item=UNSEEDED_ITEMS["list_functions"]),
    "polynomial_multiplication": _SYMPY,
    "propositional_logic": _NO_ANSWER,
    "puzzle24": "score_answer accepts any expression of four numbers in range that makes 24, not only the problem's "
                "numbers: one constant answer (6+6+6+6) scores every problem",
    "ransom_note": _HASH_SEED,
    "rubiks_cube": _NO_ANSWER,
    "rush_hour": _NO_ANSWER,
    "simple_integration": _SYMPY,
    "word_ladder": _HASH_SEED,
}


@dataclass(frozen=True)
class Problem:
    """One reasoning-gym item, read-only (shared by deep copies of an env)."""

    dataset: str
    question: str
    answer: str
    """The dataset's reference answer (the oracle's)."""
    entry: dict[str, Any]
    """The item as reasoning-gym made it, for its ``score_answer``; never mutated."""
    item_index: int
    uid: str
    """A hash of the dataset name and the question: the same problem has the same id in every process."""


def reasoning_gym() -> ModuleType:
    """The reasoning-gym package, or an ImportError that says how to install it."""
    try:
        return importlib.import_module("reasoning_gym")
    except ImportError as error:
        raise ImportError(f"reasoning_gym_v0 needs reasoning-gym {REASONING_GYM_VERSION}: "
                          "pip install -e '.[reasoning-gym]'") from error


def all_datasets() -> list[str]:
    """Every dataset name reasoning-gym registers, sorted."""
    reasoning_gym()
    from reasoning_gym.factory import DATASETS

    return sorted(DATASETS)


def supported_datasets() -> list[str]:
    """The datasets ``reasoning_gym_v0`` plays: all of them but :data:`UNSUPPORTED`."""
    return [name for name in all_datasets() if name not in UNSUPPORTED]


def check_dataset(name: str) -> None:
    """Raise ``ValueError`` for an unknown or unsupported dataset (with a close match or the reason)."""
    known = all_datasets()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"reasoning-gym has no dataset {name!r}{hint} ({len(known)} datasets: "
                         "pettingllm_envs.bridges.reasoning_gym_datasets.supported_datasets())")
    if name in UNSUPPORTED:
        raise ValueError(f"reasoning-gym dataset {name!r} is not bridged: {UNSUPPORTED[name]}")


@functools.cache
def load_dataset(name: str, config_json: str, seed: int) -> Any:
    """The reasoning-gym dataset ``name`` with the options ``config_json`` (a JSON object)
    and ``seed``, made once per process. Raises ``ValueError`` on an option it lacks."""
    check_dataset(name)
    reasoning_gym()
    from reasoning_gym.factory import DATASETS, create_dataset

    options = json.loads(config_json)
    fields = set(DATASETS[name][1].__dataclass_fields__) - {"seed", "size"}
    if set(options) - fields:
        raise ValueError(f"dataset_config of {name!r} has unknown option(s) {sorted(set(options) - fields)}; "
                         f"options: {', '.join(sorted(fields)) or 'none'} (seed and size are the env's: data_seed)")
    try:
        return create_dataset(name, **options, seed=seed, size=pool_size(name))
    except (AssertionError, TypeError, ValueError) as error:  # reasoning-gym validates with asserts
        raise ValueError(f"dataset_config {options} is not valid for {name!r}: {error}") from error


def pool_size(name: str) -> int:
    """How many items of dataset ``name`` the env draws its problems from."""
    return SMALL_POOLS.get(name, POOL_SIZE)


@functools.lru_cache(maxsize=ITEM_CACHE_SIZE)
def load_problem(name: str, config_json: str, seed: int, item_index: int) -> Problem:
    """Item ``item_index`` of :func:`load_dataset` as a :class:`Problem`."""
    entry = load_dataset(name, config_json, seed)[item_index]
    question = str(entry["question"])
    uid = hashlib.sha256(f"{name}\n{question}".encode()).hexdigest()[:16]
    return Problem(name, question, str(entry["answer"]), entry, item_index, uid)


def config_key(dataset_config: dict[str, Any] | None) -> str:
    """The canonical JSON of a dataset configuration (its cache key); ``ValueError`` if it is not JSON."""
    try:
        return json.dumps(dataset_config or {}, sort_keys=True)
    except TypeError as error:
        raise ValueError(f"dataset_config must be JSON-like (numbers, strings, lists, dicts): {error}") from error
