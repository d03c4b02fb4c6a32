"""What the base class shows a role beyond its env's own text: the cut of an over-long
observation (:func:`fit_observation`) and the summary of its last action in
``infos[agent]["last_action"]`` (:func:`last_action_info`).

An observation longer than ``max_observation_chars`` is cut in the middle, keeping a quarter
from its start (the instructions and the task) and the rest from its end (the latest events),
because those are what a policy needs to act; the marker says where text was dropped.
"""

from __future__ import annotations

from typing import Any

from pettingllm_envs.core.actions import ActionRecord

#: Marker inserted where an over-long observation was cut.
CUT_MARKER = "\n[... cut to fit max_observation_chars ...]\n"


def fit_observation(text: str, limit: int) -> str:
    """``text`` cut in the middle to at most ``limit`` characters (unchanged when it fits)."""
    if len(text) <= limit:
        return text
    keep = limit - len(CUT_MARKER)
    head = keep // 4
    return text[:head] + CUT_MARKER + text[len(text) - (keep - head) :]


def last_action_info(record: ActionRecord | None, alpha: float) -> dict[str, Any] | None:
    """``infos[agent]["last_action"]``: the role's latest action, how it was read and what it
    was paid (None before its first action)."""
    if record is None:
        return None
    return {
        "turn": record.turn,
        "valid": record.result.valid,
        "parsed": record.result.parsed,
        "invalid_reason": record.result.invalid_reason,
        "reward": record.reward,
        "reward_global": record.reward_global,
        "reward_local": record.reward_local,
        "team_state": record.team_state,
        "alpha": alpha,
    }
