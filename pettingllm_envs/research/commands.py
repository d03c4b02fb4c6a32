"""How research_v0 reads an action: the last command line of the reply, for the role that wrote it.

Each role has its own commands (``main``: ``DELEGATE``/``ANSWER``; ``sub``: ``SEARCH``/``LOOKUP``/
``REPORT``). Only the last command line counts, so a reply may reason first; a command of the
other role, a missing or over-long argument is invalid and says why. The same reading gives
self-consistency voting its keys (:func:`command_keys`), so two replies vote together exactly
when the env would read them as the same action.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pettingzoo import AECEnv

from pettingllm_envs.research.knowledge_base import normalize

COMMANDS: dict[str, tuple[str, ...]] = {"main": ("DELEGATE", "ANSWER"), "sub": ("SEARCH", "LOOKUP", "REPORT")}
#: A command line: optional markdown decoration, the command, a colon, one line of argument.
COMMAND_LINE = re.compile(
    r"^[ \t>*#_-]*(DELEGATE|ANSWER|SEARCH|LOOKUP|REPORT)[ \t*_]*:[ \t*_]*(.*?)[ \t*_]*$", re.MULTILINE | re.I
)
#: Longest accepted command argument (a sub-question, a query or an entity name).
MAX_ARGUMENT_CHARS = 300


def parse_command(agent: str, text: str) -> tuple[str | None, str, str | None]:
    """(command, argument, reason it is invalid) of the last command line in ``text`` for ``agent``."""
    matches = COMMAND_LINE.findall(text)
    allowed = COMMANDS[agent]
    if not matches:
        return None, "", f"no command line was found; write one line starting with {' or '.join(allowed)}:"
    command, argument = matches[-1][0].upper(), matches[-1][1].strip()
    if command not in allowed:
        return command, argument, f"the {agent} agent cannot use {command}; its commands are {', '.join(allowed)}"
    if not argument:
        return command, argument, f"{command}: needs an argument"
    if len(argument) > MAX_ARGUMENT_CHARS:
        return command, argument[:MAX_ARGUMENT_CHARS], (
            f"the {command} argument has {len(argument)} characters, more than {MAX_ARGUMENT_CHARS}")
    return command, argument, None


def command_keys(env: AECEnv, agent: str, texts: Sequence[str]) -> list[tuple[str, str] | None]:
    """The vote of each candidate action: its command and normalised argument (two answers
    naming one entity are one vote, as the env judges them), None for an invalid action."""
    keys: list[tuple[str, str] | None] = []
    for text in texts:
        command, argument, reason = parse_command(agent, text)
        keys.append((command, normalize(argument)) if command is not None and reason is None else None)
    return keys
