"""A person's moves at a terminal: how ``pettingllm play`` and a ``human`` seat read them.

A move is one line; a move that starts with a code fence (```) continues until the closing fence
or a line holding only ``.``. :data:`RULE` separates the turns on screen. This module sits below
both :mod:`pettingllm_envs.seats` (whose ``HumanSeat`` reads moves) and :mod:`pettingllm_envs.cli.play`
(which seats a person), so neither imports the other's internals.
"""

from __future__ import annotations

from typing import TextIO

FENCE = "```"
#: The line printed between turns.
RULE = "=" * 72


def read_move(stream: TextIO, out: TextIO) -> str | None:
    """One move from ``stream``: a single line, or a fenced block (```` ```lang ```` ... ```` ``` ````,
    or ended by a line ``.``, which closes the fence). None at end of input."""
    first = stream.readline()
    if not first:
        return None
    first = first.rstrip("\n")
    if not first.strip().startswith(FENCE):
        return first
    lines = [first]
    for line in iter(stream.readline, ""):
        line = line.rstrip("\n")
        if line.strip() == ".":
            lines.append(FENCE)
            break
        lines.append(line)
        if line.strip() == FENCE:
            break
    else:
        print("(input ended inside the code block; it was closed for you)", file=out)
        lines.append(FENCE)
    return "\n".join(lines)
