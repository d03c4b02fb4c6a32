"""Scripted opponents for ``textarena_v0``, read from ``infos[agent]["game"]`` alone: the env lists
the legal and (in games of perfect information) the winning candidate moves of the player to move,
so these policies see only what that player's seat sees. TextArena has no solver for its games, so
:func:`scripted_policy` is a decisive, reproducible opponent, not an oracle."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from typing import Any


def _stable_index(text: str, count: int) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "replace")).digest()[:8], "big") % count


def scripted_policy(observation: str, agent: str, info: dict[str, Any]) -> str:
    """A winning move when one exists, else a legal move chosen by a hash of the observation
    (reproducible, and varied across positions); games without a move generator get a reply
    the game judges itself (usually an invalid move)."""
    game = info.get("game") or {}
    if game.get("winning_actions"):
        return game["winning_actions"][0]
    legal = game.get("legal_actions") or []
    if legal:
        return legal[_stable_index(str(observation), len(legal))]
    return "[pass]"


def random_legal_policy(seed: int = 0) -> Callable[[str, str, dict[str, Any]], str]:
    """A seeded opponent that plays a uniformly random legal move (games with a move generator)."""
    rng = random.Random(seed)

    def act(observation: str, agent: str, info: dict[str, Any]) -> str:
        legal = (info.get("game") or {}).get("legal_actions") or []
        return rng.choice(legal) if legal else "[pass]"

    return act
