"""The single-agent baseline: one model writes every role's action in one reply.

Multi-agent setups are only worth their cost if they beat the same model doing the whole
job alone. Here the first role to act in a turn gets one prompt holding every role's
instructions and asks for one section per role (``### <role>``); the sections are handed
to the env in turn order. Later roles therefore do not see the same turn's earlier output:
that is exactly what the multi-agent setup adds.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

Complete = Callable[[list[dict[str, str]]], str]
SECTION = re.compile(r"^#{2,4}\s*([A-Za-z_][\w-]*)\s*$", re.MULTILINE)


def split_sections(reply: str, roles: Sequence[str]) -> dict[str, str]:
    """Split ``reply`` at ``### <role>`` headings; a missing role gets an empty action."""
    sections: dict[str, str] = {}
    matches = [m for m in SECTION.finditer(reply) if m.group(1) in roles]
    for match, following in zip(matches, [*matches[1:], None], strict=False):
        end = following.start() if following else len(reply)
        sections.setdefault(match.group(1), reply[match.end() : end].strip())
    return {role: sections.get(role, "") for role in roles}


def single_agent_prompt(roles: Sequence[str], instructions: dict[str, str], task_view: str) -> list[dict[str, str]]:
    """The one prompt of the single-agent baseline: every role's instructions in the system
    message, the task view as the user message (pure; also the observation of
    :class:`pettingllm_envs.evaluation.single_agent_env.SingleAgentEnv`)."""
    parts = [f"You play every role of a team alone: {', '.join(roles)}."]
    for role in roles:
        parts.append(f"### {role}\n{instructions[role]}")
    parts.append(
        "Reply with one section per role, in this order, each starting with a line "
        f"'### <role>' ({', '.join('### ' + r for r in roles)}), containing exactly what "
        "that role would answer."
    )
    return [{"role": "system", "content": "\n\n".join(parts)}, {"role": "user", "content": task_view}]


class SingleAgentPolicy:
    """Wraps a ``complete(messages) -> text`` function as a policy for every role."""

    def __init__(self, complete: Complete, roles: Sequence[str], instructions: dict[str, str]) -> None:
        self.complete = complete
        self.roles = list(roles)
        self.instructions = instructions
        self._pending: dict[tuple[Any, ...], dict[str, str]] = {}
        self._lock = threading.Lock()

    def prompt(self, task_view: str) -> list[dict[str, str]]:
        return single_agent_prompt(self.roles, self.instructions, task_view)

    def __call__(self, observation: str, agent: str, info: dict[str, Any]) -> str:
        key = (info.get("env_id"), info.get("index"), info.get("split"), info.get("turn"))
        with self._lock:
            pending = self._pending.get(key)
        if pending is None or agent == self.roles[0]:
            messages = info.get("messages") or [{"role": "user", "content": str(observation)}]
            pending = split_sections(self.complete(self.prompt(messages[-1]["content"])), self.roles)
            with self._lock:
                self._pending[key] = pending
        with self._lock:
            action = pending.pop(agent, "")
            if not pending:
                self._pending.pop(key, None)
        return action
