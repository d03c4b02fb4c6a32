"""Incremental chat observations, for chat libraries that append to one conversation per role
(and keep its prefix in a KV cache) instead of sending a fresh prompt every turn.

Besides its full chat ``infos[a]["messages"]``, every role's info carries ``kept_messages`` (k)
and ``new_messages``: the chat at this turn is the chat the role was shown at its previous turn
P cut to its first k messages, plus the new ones (``messages == P[:k] + new_messages``; on a
role's first turn k is 0 and ``new_messages`` the whole chat). ``prompt_reset`` is True when
k < len(P): part of P was rewritten (a task view shows the current state, so it is rewritten
whenever the state changed) and a caller that kept P must drop its tail. A message that did not
change (the role's instructions) is always kept: the increment never lies about what is new.
"""

from __future__ import annotations

from typing import Any

#: A chat as stored between turns: immutable, so that deep copies of an env can share it.
FrozenChat = tuple[tuple[str, str], ...]


def freeze(messages: list[dict[str, str]]) -> FrozenChat:
    return tuple((m["role"], m["content"]) for m in messages)


def increment(previous: FrozenChat, messages: list[dict[str, str]]) -> dict[str, Any]:
    """``kept_messages``, ``new_messages`` and ``prompt_reset`` of ``messages`` against the chat
    ``previous`` (empty on a role's first turn)."""
    current = freeze(messages)
    kept = 0
    while kept < min(len(previous), len(current)) and previous[kept] == current[kept]:
        kept += 1
    return {"new_messages": [dict(m) for m in messages[kept:]], "kept_messages": kept,
            "prompt_reset": kept < len(previous)}
