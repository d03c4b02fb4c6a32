"""Sudoku: a tool agent and a planner fill a 4x4 or 9x9 sudoku with a unique solution.

| Property            | Value                                                                       |
|---------------------|-----------------------------------------------------------------------------|
| Id / import         | `sudoku_v0` / `from pettingllm_envs.games import sudoku_v0`                 |
| Roles (turn order)  | `tool`, `planner`                                                           |
| Observation         | `TextObservation` (a `str`): role instructions, grid, history               |
| Action              | `UnicodeText(max_action_chars)`: free text                                  |
| tool's action       | a ```` ```python ```` block printing the filled grid or `r c v` placements   |
| planner's action    | text ending with `PLACE: r c v; r c v ...` or `GRID:` and the grid rows     |
| Team state G        | 0.7 * share of the empty cells filled correctly + 0.3 when solved           |
| Local reward        | correct new cells / empty cells at the start when every placement of the    |
|                     | action is right; else nothing is applied and 0.1 per rejected placement is  |
|                     | subtracted (capped at `max_violation_penalty`)                              |
| Reward bounds       | local per action in `[-max(format, tool_error, max_violation), 1]`; each     |
|                     | role's positive local credit sums to at most 1 over an episode (a cell is   |
|                     | credited once to each role); global in `[0, 1]`                             |
| Penalties           | format (no code/answer), tool program error, rejected placements            |
| Termination         | every cell holds its (unique) solution value                                |
| Truncation          | `max_turns` turns (default 3)                                               |
| Config              | `SudokuConfig`: size (4 or 9), givens, violation_penalty, tool_timeout, ... |

Coordinates are 1-based: ``r c v`` puts value ``v`` in row ``r`` (top = 1), column ``c``
(left = 1). **An action is a commitment**: its placements are applied only when every one
of them is right, so the board always agrees with the unique solution. Otherwise nothing
is applied and each wrong placement costs ``violation_penalty``:

* out of range (row, column or value outside ``1..size``),
* overwriting a given with another value,
* a conflict (the value already stands in the same row, column or box),
* a wrong value (no conflict yet, but not the solution's value, so it leads to a dead end).

The first three are explained one by one in ``infos[agent]["last_action"]["parsed"]
["violations"]`` (the board shows them anyway); wrong values are only counted
(``parsed["wrong_values"]``), so that the env never tells which legal-looking value is
not the solution's (that would make it a solving oracle). Writing every value into every
empty cell therefore applies nothing and costs the capped penalty: enumeration earns less
than one honest wrong placement. Placing a value a cell already holds (e.g. the givens of
a full grid) changes nothing and costs nothing. Each turn the **tool** writes a Python program that runs in the sandbox;
its output (a grid or placements) is scored on a *copy* of the board, and each cell is
credited to the tool once per episode (printing the same solution every turn while the
planner waits earns it nothing more). The **planner** sees the program and its output
(same-turn visibility) and places values on the real board.

Instances (:mod:`pettingllm_envs.games.sudoku_board`, with the solver and the placement
rule): a full grid is filled by the backtracking solver with a candidate order shuffled by
``Random(data_seed + index)``; givens are then removed in a shuffled order while
``count_solutions`` (bitmask backtracking that stops at 2 solutions) confirms the solution
stays unique, until exactly ``givens`` remain. Fewer givens = harder. Train and test are
split by a hash of the puzzle text. Generating a 9x9 puzzle takes about 15 ms
with 32 givens and 85 ms with 24 (the fewest allowed; 4x4: about 1 ms, down to 4 givens).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from pettingllm_envs.core import ActionResult, TextAECEnv, make_parallel_env, wrap_env
from pettingllm_envs.core.tools import ToolEnvConfig, read_tool_output, team_history_lines
from pettingllm_envs.games.sudoku_board import (
    BOX,
    DEFAULT_GIVENS,
    MIN_GIVENS,
    Grid,
    Outcome,
    Puzzle,
    apply_placements,
    generate_puzzle,
    solve,
)
from pettingllm_envs.games.sudoku_demonstrations import ORACLE as DEMONSTRATION_ORACLE

ANSWER_MARKER = re.compile(r"^[ \t*`>#-]*(place(?:ments?)?|grid)[ \t*`]*:", re.IGNORECASE | re.MULTILINE)
BOARD_ROW = re.compile(r"^r([1-9]) +([1-9.| ]+)$", re.MULTILINE)
#: ASCII digits only: ``str.isdigit`` and ``\d`` also accept ``³`` and ``٣``, and ``int`` of a
#: 5,000-digit run raises (Python's int-string limit).
NUMBER = re.compile(r"[0-9]+")
#: Longest number token read as its value; a longer one is out of range for any grid anyway.
MAX_NUMBER_DIGITS = 4
#: The value given to a number token longer than ``MAX_NUMBER_DIGITS`` (out of range).
TOO_LONG_NUMBER = 10 ** MAX_NUMBER_DIGITS


# --------------------------------------------------------------- parsing
def _cells_of(line: str) -> list[int]:
    """The cells of one grid row: digits, with ``.``, ``0`` and ``_`` for empty cells."""
    return [0 if ch in "._0" else ord(ch) - ord("0") for ch in line if ch in "0123456789._"]


def _parse_grid(lines: list[str], size: int) -> tuple[list[tuple[int, int, int]] | None, str | None]:
    rows = [cells for cells in (_cells_of(line) for line in lines) if cells]
    if len(rows) != size or any(len(row) != size for row in rows):
        shape = ", ".join(str(len(row)) for row in rows[: size + 2])
        return None, f"a grid needs {size} rows of {size} cells, got {len(rows)} rows (cells per row: {shape})"
    return [(r + 1, c + 1, v) for r, row in enumerate(rows) for c, v in enumerate(row) if v], None


def _parse_triples(body: str, size: int) -> tuple[list[tuple[int, int, int]] | None, str | None]:
    numbers = [int(token) if len(token) <= MAX_NUMBER_DIGITS else TOO_LONG_NUMBER
               for token in NUMBER.findall(body)]
    if not numbers:
        return None, "no placements were found; write `PLACE: r c v; r c v`"
    if len(numbers) % 3:
        return None, f"placements come in triples `r c v`, but {len(numbers)} numbers were found"
    if len(numbers) > 3 * 3 * size * size:
        return None, f"{len(numbers) // 3} placements are far more than the {size * size} cells"
    return [tuple(numbers[i:i + 3]) for i in range(0, len(numbers), 3)], None  # type: ignore[misc]


def parse_answer(
    text: str, size: int, *, require_marker: bool
) -> tuple[list[tuple[int, int, int]] | None, str | None]:
    """Placements ``(row, col, value)`` (1-based) from ``text``, or ``(None, reason)``.

    The answer starts at the last ``PLACE:`` or ``GRID:`` marker. ``PLACE:`` is followed by
    triples ``r c v`` in any separators (``1 2 3; 2 4 1`` or ``(1,2)=3``); ``GRID:`` by
    ``size`` rows of ``size`` cells (``.`` or ``0`` = leave empty; ``|`` and rule lines are
    ignored). Without a marker (allowed for program output) the text is a grid when it has
    exactly ``size`` rows of ``size`` cells, else a list of triples.
    """
    markers = list(ANSWER_MARKER.finditer(text))
    if markers:
        last = markers[-1]
        body = text[last.end():]
        if last.group(1).lower() == "grid":
            return _parse_grid(body.splitlines(), size)
        return _parse_triples(body, size)
    if require_marker:
        return None, "no `PLACE: r c v; ...` line or `GRID:` block was found"
    lines = [line for line in text.splitlines() if _cells_of(line)]
    if not lines:
        return None, "the output has no grid and no placements"
    if len(lines) == size and all(len(_cells_of(line)) == size for line in lines):
        return _parse_grid(lines, size)
    return _parse_triples(text, size)


# ------------------------------------------------------------------- env
@dataclass
class SudokuConfig(ToolEnvConfig):
    """Configuration of ``sudoku_v0``."""

    max_turns: int = 3
    """Turns before truncation; an oracle needs one, a model gets two more to fix mistakes."""
    size: int = 9
    """Grid side: 4 (2x2 boxes) or 9 (3x3 boxes)."""
    givens: int | None = None
    """Number of givens (fewer = harder); None picks 6 for 4x4 and 32 for 9x9."""
    violation_penalty: float = 0.1
    """Subtracted from a role's local reward per violating placement (see the module docstring)."""
    max_violation_penalty: float = 1.0
    """Cap on the total violation penalty of one action, so rewards stay bounded."""

    @property
    def num_givens(self) -> int:
        return DEFAULT_GIVENS[self.size] if self.givens is None else self.givens

    def validate(self) -> None:
        super().validate()
        if self.size not in BOX:
            raise ValueError(f"size must be one of {sorted(BOX)}, got {self.size}")
        if not MIN_GIVENS[self.size] <= self.num_givens < self.size * self.size:
            raise ValueError(
                f"givens must be in {MIN_GIVENS[self.size]}..{self.size * self.size - 1} for size {self.size}"
            )
        if self.violation_penalty < 0 or self.max_violation_penalty < 0:
            raise ValueError("penalties must be >= 0")


class raw_env(TextAECEnv[Puzzle]):
    """The sudoku environment (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "sudoku_v0", "is_parallelizable": False
    }
    roles = ("tool", "planner")
    human_role = "planner"  # `pettingllm play`'s default: a person plans moves, the tool agent writes Python
    config_class = SudokuConfig
    config: SudokuConfig

    # ----------------------------------------------------------- instances
    def generate_instance(self, rng: random.Random) -> Puzzle:
        return generate_puzzle(rng, self.config.size, self.config.num_givens)

    def instance_key(self, puzzle: Puzzle) -> str:
        return f"{puzzle.size}:" + "".join(str(v) for v in puzzle.givens)

    def start_episode(self, puzzle: Puzzle) -> None:
        self.board: Grid = puzzle.givens
        self.tool_credited: frozenset[int] = frozenset()
        """Cells the tool's output has already been credited for (once per episode)."""

    # -------------------------------------------------------------- actions
    def _score(self, outcome: Outcome, credited_cells: int) -> float:
        cfg = self.config
        if outcome.rejected:
            return -min(cfg.max_violation_penalty, cfg.violation_penalty * outcome.rejected)
        return credited_cells / self.instance.empty_cells

    def _summary(self, outcome: Outcome, placements: list[tuple[int, int, int]]) -> dict[str, Any]:
        return {
            "placements": len(placements),
            "correct": outcome.correct,
            "unchanged": outcome.unchanged,
            "violations": list(outcome.violations),
            "wrong_values": outcome.wrong_values,
        }

    def _violation_reason(self, outcome: Outcome) -> str | None:
        if not outcome.rejected:
            return None
        parts = list(outcome.violations[:5])
        if len(outcome.violations) > 5:
            parts.append(f"+{len(outcome.violations) - 5} more")
        if outcome.wrong_values:
            parts.append(f"{outcome.wrong_values} value(s) break no rule yet but are not the solution's (dead ends)")
        return f"{outcome.rejected} placement(s) rejected, so none of this action was applied: {'; '.join(parts)}"

    def apply_action(self, agent: str, text: str) -> ActionResult:
        if agent == "tool":
            return self._apply_tool(text)
        return self._apply_planner(text)

    def _apply_tool(self, text: str) -> ActionResult:
        read = read_tool_output(text, self.config,
                                lambda output: parse_answer(output, self.instance.size, require_marker=False))
        if isinstance(read, ActionResult):
            return read
        placements, run = read
        outcome = apply_placements(self.instance, self.board, placements)  # on a copy: the board stays
        credited = outcome.new_cells - self.tool_credited
        self.tool_credited |= credited
        parsed = {"code": run.code, **self._summary(outcome, placements), "credited": len(credited)}
        reason = self._violation_reason(outcome)
        return ActionResult(self._score(outcome, len(credited)), valid=reason is None, parsed=parsed,
                            invalid_reason=reason, feedback=run.feedback)

    def _apply_planner(self, text: str) -> ActionResult:
        placements, reason = parse_answer(text, self.instance.size, require_marker=True)
        if placements is None:
            return ActionResult(-self.config.format_penalty, valid=False, invalid_reason=reason)
        outcome = apply_placements(self.instance, self.board, placements)
        self.board = outcome.board
        reason = self._violation_reason(outcome)
        return ActionResult(self._score(outcome, outcome.correct), valid=reason is None,
                            parsed=self._summary(outcome, placements), invalid_reason=reason)

    # ------------------------------------------------------------ rewards
    def filled_share(self) -> float:
        """Share of the initially empty cells that now hold their solution value."""
        filled = sum(1 for given, now in zip(self.instance.givens, self.board, strict=True) if now and not given)
        return filled / self.instance.empty_cells

    def global_reward(self) -> float:
        return 0.7 * self.filled_share() + (0.3 if self.is_success() else 0.0)

    def is_success(self, agent: str | None = None) -> bool:
        return self.board == self.instance.solution

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        size = self.config.size
        box_rows, box_cols = BOX[size]
        common = (
            f"You are on a team of two agents, a tool agent and a planner, solving a {size}x{size} sudoku: "
            f"fill every empty cell (.) with 1..{size} so that each row, column and {box_rows}x{box_cols} box "
            f"holds every value once. The solution is unique. Rows and columns are numbered 1..{size} from the "
            "top left. An answer is applied only when every placement in it is right; one conflict, wrong "
            "value or overwritten given rejects the whole answer, and each wrong placement is penalised."
        )
        if agent == "tool":
            return common + (
                "\nYou are the tool agent. Write a Python program in a ```python code block that solves "
                f"the sudoku and prints the completed grid ({size} lines of {size} digits) or placements "
                "`r c v`, one per line. It runs in a sandbox; the planner sees its code and output."
            )
        return common + (
            "\nYou are the planner. Decide the values to place now, using the tool agent's program and "
            "output if they help. End your reply with either a line `PLACE: r c v; r c v; ...` "
            f"(row, column, value) or a line `GRID:` followed by the {size} rows of the completed grid."
        )

    def board_text(self) -> str:
        size = self.instance.size
        box_rows, box_cols = BOX[size]
        lines = []
        for r in range(size):
            if r and r % box_rows == 0:
                lines.append("   " + "+".join(["-" * (2 * box_cols + 1)] * (size // box_cols)))
            row = self.board[r * size:(r + 1) * size]
            groups = [" ".join(str(v) if v else "." for v in row[c:c + box_cols]) for c in range(0, size, box_cols)]
            lines.append(f"r{r + 1}  " + " | ".join(groups))
        return "\n".join(lines)

    def task_view(self, agent: str) -> str:
        puzzle = self.instance
        empty = self.board.count(0)
        parts = [
            f"Board ({puzzle.size}x{puzzle.size}; rN = row N, columns 1..{puzzle.size} left to right, "
            ". = empty):",
            self.board_text(),
            "",
            f"{puzzle.size * puzzle.size - puzzle.empty_cells} givens, "
            f"{puzzle.empty_cells - empty} cells filled by the team, {empty} empty. "
            f"Turn {self.turn + 1} of {self.config.max_turns}.",
        ]
        parts.extend(team_history_lines(self, agent, describe, result_label="Result (checked on a copy of the board)"))
        return "\n".join(parts)

    def render_state(self) -> str:
        return f"{self.board_text()}\nturn {self.turn}, {self.board.count(0)} empty"


def describe(result: ActionResult) -> str:
    parsed = result.parsed if isinstance(result.parsed, dict) else {}
    if "placements" in parsed:
        rejected = len(parsed["violations"]) + parsed["wrong_values"]
        text = (f"{parsed['placements']} placements: {parsed['correct']} correct new, "
                f"{parsed['unchanged']} unchanged, {rejected} rejected")
    else:
        text = "no placements"
    if result.invalid_reason:
        text += f" (invalid: {result.invalid_reason})"
    return text


def env(**config) -> TextAECEnv:
    """The wrapped AEC environment (order enforcing), the usual entry point."""
    return wrap_env(raw_env(**config))


def parallel_env(**config):
    """The Parallel API view: one parallel step is one agent's action (see pettingllm_envs.core)."""
    return make_parallel_env(env(**config))


# ---------------------------------------------------------------- oracle
ORACLE_PROGRAM = '''size, box_rows, box_cols = {size}, {box_rows}, {box_cols}
grid = {grid!r}


def candidates(i):
    r, c = divmod(i, size)
    seen = {{grid[r * size + k] for k in range(size)}} | {{grid[k * size + c] for k in range(size)}}
    br, bc = r - r % box_rows, c - c % box_cols
    seen |= {{grid[(br + a) * size + bc + b] for a in range(box_rows) for b in range(box_cols)}}
    return [v for v in range(1, size + 1) if v not in seen]


def search():
    empty = [i for i in range(size * size) if grid[i] == 0]
    if not empty:
        return True
    cell = min(empty, key=lambda i: len(candidates(i)))
    for value in candidates(cell):
        grid[cell] = value
        if search():
            return True
    grid[cell] = 0
    return False


search()
for r in range(size):
    print(" ".join(str(v) for v in grid[r * size:(r + 1) * size]))
'''


def read_board(observation: str) -> tuple[Grid, int] | None:
    """The board and its size from an observation (the ``rN`` lines), or None."""
    rows: dict[int, list[int]] = {}
    for number, body in BOARD_ROW.findall(observation):
        rows.setdefault(ord(number) - ord("0"), _cells_of(body))
    size = len(rows)
    if size not in BOX or sorted(rows) != list(range(1, size + 1)) or any(len(r) != size for r in rows.values()):
        return None
    return tuple(v for r in range(1, size + 1) for v in rows[r]), size


def scripted_policy(observation: str, agent: str, info: dict) -> str:
    """Oracle: reads the board from the observation and solves it (the tool writes a
    backtracking program; the planner places every missing value with ``PLACE:``)."""
    read = read_board(observation)
    if read is None:
        return "PLACE: 1 1 1"
    board, size = read
    if agent == "tool":
        box_rows, box_cols = BOX[size]
        program = ORACLE_PROGRAM.format(size=size, box_rows=box_rows, box_cols=box_cols, grid=list(board))
        return f"```python\n{program}```"
    solution = solve(board, size)
    if solution is None:
        return "PLACE: 1 1 1"
    placements = [f"{i // size + 1} {i % size + 1} {v}" for i, (v, old) in enumerate(zip(solution, board, strict=True))
                  if not old]
    return "PLACE: " + "; ".join(placements)


#: The oracle's demonstrations for a warm start, from the env's state (sudoku_demonstrations).
demonstrations = DEMONSTRATION_ORACLE.demonstrations
