"""``sudoku_v0``'s demonstrations (:mod:`pettingllm_envs.core.tool_demonstrations`): the
tool's program is the board copied verbatim followed by a fixed solver (:data:`SUDOKU_SOLVER`,
290 bytes on a 4x4 board) that gives each empty cell the smallest digit absent from its row
and its column: the solution whenever no empty cell shares both its row and its column with
other empty cells (always so with two of them). A mis-copied cell is a given changed to
another digit or copied as empty. The oracle's answer is the puzzle's unique solution.
"""

from __future__ import annotations

import random
import re
from typing import Any

from pettingllm_envs.core.tool_demonstrations import TeamAnswers, ToolTeamOracle, miscopied

#: The sudoku tool's program after the board literal (``{digits}`` and ``{size}`` filled in).
SUDOKU_SOLVER = (
    "g=[[x for x in l[2:]if x in'.{digits}']for l in B.split('\\n')if'r'==l[0]]\n"
    "print('; '.join(f'{{r+1}} {{c+1}} {{min({{*\"{digits}\"}}-{{*g[r]}}-{{m[c]for m in g}})}}'"
    "for r in range({size})for c in range({size})if'.'==g[r][c]))"
)


def solution(env: Any) -> list[str]:
    """The solution's ``r c v`` placements for the empty cells of the board, row by row."""
    size = env.instance.size
    return [f"{i // size + 1} {i % size + 1} {v}"
            for i, (v, now) in enumerate(zip(env.instance.solution, env.board, strict=True)) if not now]


def corrupt_triples(triples: list[str], rng: random.Random, env: Any) -> list[str]:
    """The placements with one value changed to another in range."""
    changed = list(triples)
    i = rng.randrange(len(changed))
    r, c, v = changed[i].split()
    changed[i] = f"{r} {c} {rng.choice([x for x in range(1, env.instance.size + 1) if x != int(v)])}"
    return changed


def printed_triples(printed: str) -> list[str]:
    """The triples of a printed ``r c v; r c v`` line ([] unless the output is exactly that)."""
    return [t.strip() for t in printed.split(";")] if re.fullmatch(r"\d+ \d+ \d+(; \d+ \d+ \d+)*", printed) else []


def _grid(board: list[str], size: int) -> list[list[str]]:
    """The cells of the board copy's row lines (``.`` for an empty one), as the program reads them."""
    keep = set("123456789"[:size]) | {"."}
    return [[x for x in line[2:] if x in keep] for line in board if line.startswith("r")]


def still_solves(printed: list[str], solution: list[str], board: list[str], size: int) -> bool:
    """Whether placing ``printed`` on ``board`` solves it anyway: every solution triple is
    there and any other one only repeats a given."""
    grid = _grid(board, size)
    extra = [t.split() for t in set(printed) - set(solution)]
    return set(solution) <= set(printed) and all(grid[int(r) - 1][int(c) - 1] == v for r, c, v in extra)


def program_prints(board: list[str], size: int) -> list[str] | None:
    """What :data:`SUDOKU_SOLVER` prints for this board copy (the same steps in Python, so a
    mis-copy is checked without running anything), or None when it raises."""
    digits = set("123456789"[:size])
    grid = _grid(board, size)
    if len(grid) != size or any(len(row) != size for row in grid):
        return None
    printed = []
    for r in range(size):
        for c in range(size):
            if grid[r][c] == ".":
                left = digits - set(grid[r]) - {row[c] for row in grid}
                if not left:
                    return None
                printed.append(f"{r + 1} {c + 1} {min(left)}")
    return printed


def board_program(env: Any, rng: random.Random | None) -> tuple[str, list[str], bool] | None:
    """The board copied into the program, mis-copied when given an rng (see the module docstring)."""
    size = env.instance.size
    board = env.board_text().split("\n")
    printed = program_prints(board, size)
    if printed is None:
        return None
    digits = "123456789"[:size]
    corrupted = False
    if rng is not None:
        givens = [(r, i) for r, line in enumerate(board) if line.startswith("r")
                  for i, ch in enumerate(line) if i >= 2 and ch in digits]

        def miscopy(original: list[str]) -> list[str]:
            r, i = rng.choice(givens)
            line = original[r][:i] + rng.choice(digits.replace(original[r][i], "") + ".") + original[r][i + 1:]
            return [*original[:r], line, *original[r + 1:]]

        board, printed, corrupted = miscopied(board, printed, miscopy, lambda copy: program_prints(copy, size),
                                              lambda wrong: still_solves(wrong, printed, board, size))
    literal = "\n".join(board)
    program = f"```python\nB='''{literal}'''\n{SUDOKU_SOLVER.format(digits=digits, size=size)}\n```"
    return program, printed, corrupted


def placements_line(triples: list[str]) -> str:
    """What the one-line tool program prints."""
    return "; ".join(triples)


def place_reply(triples: list[str]) -> str:
    """The planner's ``PLACE:`` reply."""
    return "PLACE: " + "; ".join(triples)


ORACLE = ToolTeamOracle(TeamAnswers(solution=solution, corrupt=corrupt_triples, printed=printed_triples,
                                    tool_output=placements_line, planner_reply=place_reply,
                                    board_program=board_program))
