"""The move vocabulary, parser and action protocol shared by the grid planning envs
(plan_path, sokoban).

One parser means a model trained on one grid env writes moves the other accepts:
``MOVES: U R R D`` with U/D/L/R, the words up/down/left/right, or run-together letters.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pettingllm_envs.core import ActionResult
from pettingllm_envs.core.tools import ToolEnvConfig, ToolRun, read_tool_output

#: Move letter -> (row delta, col delta); row 0 is the top of the grid.
MOVES: dict[str, tuple[int, int]] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
#: Accepted spellings (upper-cased) of each move.
MOVE_WORDS: dict[str, str] = {
    "U": "U", "D": "D", "L": "L", "R": "R", "UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"
}
#: A ``MOVES:`` line, tolerating markdown decoration (``**Moves:**``, ``- moves:``, ``> MOVES:``).
MOVES_LINE = re.compile(r"^[ \t*`>#-]*moves?[ \t*`]*:(.*)$", re.IGNORECASE | re.MULTILINE)


def parse_moves(text: str, *, require_prefix: bool) -> tuple[list[str] | None, str | None]:
    """Moves from the last ``MOVES:`` line of ``text`` (or its last non-empty line when the
    prefix is optional). Returns ``(moves, None)`` or ``(None, reason)``."""
    matches = MOVES_LINE.findall(text)
    if matches:
        body = matches[-1]
    elif require_prefix:
        return None, "no line of the form 'MOVES: U R D L' was found"
    else:
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            return None, "the output is empty"
        body = lines[-1]
    moves = []
    for token in re.findall(r"[A-Za-z0-9]+", body):
        word = token.upper()
        if word in MOVE_WORDS:
            moves.append(MOVE_WORDS[word])
        elif set(word) <= set(MOVES):
            moves.extend(word)
        else:
            return None, f"unknown move {token[:20]!r}; use U, D, L, R"
    if not moves:
        return None, "the move list is empty"
    return moves, None


def describe_moves(result: ActionResult) -> str:
    """One line about a move action for the history view: the moves and why they were penalised."""
    parsed = result.parsed if isinstance(result.parsed, dict) else {}
    text = f"moves {parsed['moves']}" if "moves" in parsed else "no moves"
    if result.invalid_reason:
        text += f" ({'invalid' if not result.valid else 'penalised'}: {result.invalid_reason})"
    return text


def move_team_instructions(agent: str, rules: str, *, tool_task: str, board: str) -> str:
    """``agent``'s instructions in a move team: the game's ``rules`` (they start "You are on a
    team of two agents, a tool agent and a planner, "), then the role's part of the protocol:
    the tool's program ``tool_task`` (e.g. "searches for a solution from the current board")
    and prints ``MOVES:``; the planner's ``MOVES:`` line is applied to the real ``board``."""
    if agent == "tool":
        return rules + (
            "\nYou are the tool agent. Write a Python program in a ```python code block that "
            f"{tool_task} and prints it on its last line as `MOVES: U R R D`. The program runs in a sandbox; "
            "the planner sees its code and output."
        )
    return rules + (
        "\nYou are the planner. Decide the moves to make now, using the tool agent's program "
        "and output if they help. End your reply with a line `MOVES: U R R D`; those moves "
        f"are applied to the real {board}."
    )


def apply_move_action(agent: str, text: str, config: ToolEnvConfig, *,
                      tool: Callable[[list[str], ToolRun], ActionResult],
                      planner: Callable[[list[str]], ActionResult]) -> ActionResult:
    """One action of a move team (``tool``, ``planner``): the moves the tool's program
    printed go to ``tool`` (with the run; the env scores them on a copy of the state), the
    moves of the planner's ``MOVES:`` line to ``planner`` (the env applies them). A missing
    code block, a failed program, output without moves and a reply without a ``MOVES:`` line
    are penalised here, the same way in both envs."""
    if agent == "tool":
        outcome = read_tool_output(text, config, lambda output: parse_moves(output, require_prefix=False))
        return outcome if isinstance(outcome, ActionResult) else tool(*outcome)
    moves, reason = parse_moves(text, require_prefix=True)
    if moves is None:
        return ActionResult(-config.format_penalty, valid=False, invalid_reason=reason)
    return planner(moves)
