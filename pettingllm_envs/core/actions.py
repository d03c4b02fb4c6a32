"""What one action did (:class:`ActionResult`), its place in the episode history
(:class:`ActionRecord`), and how a raw action from a policy becomes text (:func:`coerce_action`).

Records are immutable so that deep copies of an env can share its history: a copy only
appends to its own list of them. :func:`coerce_action` is the one gate every action passes
before an env reads it, so a policy's junk (not a string, bytes, an over-long reply) gets a
reason and a penalty from the base class instead of reaching an env's parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ActionResult:
    """What one action did, as returned by ``apply_action``.

    ``parsed`` must be JSON-like and is never mutated afterwards (records are shared
    between deep copies of an env).
    """

    local_reward: float
    """The role's own contribution, penalties included."""
    valid: bool = True
    """False when the action could not be parsed or broke the rules."""
    parsed: Any = None
    """The structured action the env understood (a move list, code, an answer)."""
    invalid_reason: str | None = None
    """Why the action was invalid or penalised, for the model and the logs."""
    feedback: str = ""
    """Text that later observations may show (tool output, test results)."""


@dataclass(frozen=True)
class ActionRecord:
    """One action in the episode history (immutable, shared by deep copies)."""

    turn: int
    agent: str
    text: str
    result: ActionResult
    reward_global: float
    """The change of the acting role's team state G that this action made."""
    reward_local: float
    reward: float
    team_state: float
    """G after the action, from the acting role's side."""
    extra: dict[str, Any] = field(default_factory=dict)


def coerce_action(action: Any, max_action_chars: int) -> tuple[str, str | None]:
    """The action as text and why it cannot be read (None when it can): bytes are decoded,
    anything else that is not a string is refused, and a string longer than
    ``max_action_chars`` is refused (its text cut to that length)."""
    if isinstance(action, bytes):
        action = action.decode("utf-8", errors="replace")
    if not isinstance(action, str):
        return "", f"the action must be a string, got {type(action).__name__}"
    if len(action) > max_action_chars:
        return action[:max_action_chars], (
            f"the action has {len(action)} characters, more than max_action_chars={max_action_chars}"
        )
    return action, None
