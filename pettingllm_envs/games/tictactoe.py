"""Tic-tac-toe: two competing agents, player_x and player_o, play out a seeded opening.

| Property            | Value                                                                        |
|---------------------|------------------------------------------------------------------------------|
| Id / import         | `tictactoe_v0` / `from pettingllm_envs.games import tictactoe_v0`            |
| Roles (turn order)  | `player_x` (X, moves first every turn), `player_o` (O)                        |
| Observation         | `TextObservation` (a `str`): role instructions, board, moves, opponent's move |
| Action              | `UnicodeText(max_action_chars)`: free text ending with a line `MOVE: <cell>`  |
| Cells               | `1`..`9` in reading order (1 top left, 9 bottom right) or `a1`..`c3`          |
|                     | (letter = column a..c left to right, digit = row 1..3 top to bottom)          |
| Team state G        | zero-sum, from the player's own side: +1 win, -1 loss, 0 draw or ongoing     |
| Local reward        | +0.1 for a legal move; -0.5 for an illegal one (occupied cell, no `MOVE:`); |
|                     | a winning move also earns +0.1 for each move the win saved the winner        |
| Reward bounds       | local per action in `[-max(format, illegal), 0.1 * 5]`; a player's legal-    |
|                     | move credits sum to at most `0.1 * 5` per game; global in `{-1, 0, 1}`        |
| Illegal move        | penalised and explained in infos; the player loses its move (a pass)         |
| Termination         | three in a row, or a full board (draw)                                        |
| Truncation          | `max_turns` turns (default 5); an unfinished game scores as a draw            |
| Config              | `TicTacToeConfig`: opening_plies, forced_win, legal_move_reward, ...          |

**Zero-sum rewards in an AEC env.** The base class pays every player, after each action,
``alpha`` times the change of its :meth:`raw_env.team_state`, here the game outcome from
that player's own side. So the winning move pays the winner ``alpha * 1`` and, in the same
step's ``rewards``, the loser ``alpha * -1`` (PettingZoo's usual end-of-game reward): over
an episode the two players' global parts sum to zero. ``infos[agent]["game"]`` holds the
mark and outcome.

**Winning later never pays more.** A legal move earns ``legal_move_reward``, so a player
that delays a forced win would collect one more per extra move. The winning move therefore
also earns ``legal_move_reward`` for each move the winner would still have made had the
board been filled (``empty cells // 2``): every win of a position pays the winner the
same legal-move credit however fast it comes, and the outcome (+1) on top.

**Instances are openings.** An empty board is one position and a draw under perfect play,
so it can be neither split into train and test nor won by an oracle. An instance is the
board after ``opening_plies`` seeded random moves (an even number, so X is to move and the
fixed X-then-O turn order of the base class holds), kept only when the game is not over
and, with ``forced_win`` (default), X has a forced win. Instances are drawn from
``Random(data_seed + index)`` and split by a hash of the board, so train and test never
share a position. The scripted policy is minimax (perfect play, preferring the fastest win)
and wins every such opening; :func:`random_policy` is the other scripted opponent.

**Self-play with agent-wise groups.** One shared policy can play both sides. AT-GRPO
groups samples by (problem, agent, turn), so X's and O's candidates are never normalised
together even with shared weights: each side's advantage compares moves made from the same
position, by the same side, with opposite incentives kept apart.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from pettingllm_envs.core import ActionResult, TextAECEnv, TextEnvConfig, make_parallel_env, wrap_env

MARKS = {"player_x": "X", "player_o": "O"}
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MOVE_LINE = re.compile(r"^[ \t*`>#-]*move[ \t*`]*:(.*)$", re.IGNORECASE | re.MULTILINE)
CELL = re.compile(r"([a-c])\s*([1-3])|([1-9])", re.IGNORECASE)
BOARD_ROW = re.compile(r"^([1-3])  ([XO.]) \| ([XO.]) \| ([XO.])", re.MULTILINE)


def cell_name(cell: int) -> str:
    """``a1``-style name of a 0-based cell index, with its number: ``b2 (5)``."""
    return f"{'abc'[cell % 3]}{cell // 3 + 1} ({cell + 1})"


def parse_cell(text: str) -> tuple[int | None, str | None]:
    """The 0-based cell of the last ``MOVE:`` line of ``text``, or ``(None, reason)``."""
    matches = MOVE_LINE.findall(text)
    if not matches:
        return None, "no line of the form 'MOVE: <cell>' was found (cells: 1-9 or a1..c3)"
    body = matches[-1].strip().strip("*`'\".()[] \t")
    match = CELL.fullmatch(body)
    if match is None:
        return None, f"unknown cell {body[:20]!r}; use 1-9 (reading order) or a1..c3 (column, row)"
    if match.group(3):
        return int(match.group(3)) - 1, None
    return (int(match.group(2)) - 1) * 3 + "abc".index(match.group(1).lower()), None


def winner(board: str) -> str | None:
    """``"X"`` or ``"O"`` when that mark has three in a row, else None."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


def to_move(board: str) -> str:
    """The mark to move next in an opening (X moves first and nobody has passed yet)."""
    return "X" if board.count("X") == board.count("O") else "O"


def other_mark(mark: str) -> str:
    return "O" if mark == "X" else "X"


@functools.cache
def minimax(board: str, mark: str) -> int:
    """The value of ``board`` for ``mark``, to move: ``10 - plies`` to a forced win, the
    negative of that for a forced loss, 0 for a draw (so faster wins score higher).

    The side to move is an argument, not derived from the counts of X and O, because a
    player who made an illegal move passes and the counts no longer alternate."""
    if winner(board) is not None:
        return -10  # the previous move won
    if "." not in board:
        return 0
    return max(_move_values(board, mark).values())


def _move_values(board: str, mark: str) -> dict[int, int]:
    values = {}
    for cell in range(9):
        if board[cell] == ".":
            value = -minimax(board[:cell] + mark + board[cell + 1:], other_mark(mark))
            values[cell] = value - 1 if value > 0 else value + 1 if value < 0 else 0
    return values


def best_move(board: str, mark: str) -> int:
    """A perfect move for ``mark`` (the lowest cell among the best) on a board with a free cell."""
    values = _move_values(board, mark)
    return max(values, key=lambda cell: (values[cell], -cell))


@dataclass(frozen=True)
class Opening:
    """One instance: the board after the opening moves (9 chars of ``X``, ``O``, ``.``)."""

    board: str


@dataclass
class TicTacToeConfig(TextEnvConfig):
    """Configuration of ``tictactoe_v0``."""

    max_turns: int = 5
    """Turns (an X move and an O move each) before truncation; 5 finishes any opening with a spare turn."""
    opening_plies: tuple[int, ...] = (2, 4)
    """Numbers of random opening moves to choose from (even, 0..6, not only 0): the instance space."""
    forced_win: bool = True
    """Keep only openings where X, to move, has a forced win (so a perfect player always wins)."""
    legal_move_reward: float = 0.1
    """Local reward of a legal move."""
    illegal_move_penalty: float = 0.5
    """Subtracted from the local reward of a move to an occupied cell (the move is lost)."""

    def validate(self) -> None:
        super().validate()
        if not self.opening_plies or any(p % 2 or not 0 <= p <= 6 for p in self.opening_plies):
            raise ValueError(f"opening_plies must be even numbers in 0..6, got {self.opening_plies}")
        if set(self.opening_plies) == {0}:
            raise ValueError("opening_plies=(0,) is a single position, which cannot be split into train and test")
        if self.legal_move_reward < 0 or self.illegal_move_penalty < 0:
            raise ValueError("legal_move_reward and illegal_move_penalty must be >= 0")


class raw_env(TextAECEnv[Opening]):
    """The tic-tac-toe environment (see the module docstring)."""

    roles_compete = True  # each player's team_state is its own side of the game's outcome

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "tictactoe_v0", "is_parallelizable": False
    }
    roles = ("player_x", "player_o")
    config_class = TicTacToeConfig
    config: TicTacToeConfig

    # ----------------------------------------------------------- instances
    def generate_instance(self, rng: random.Random) -> Opening:
        while True:
            board = "." * 9
            for _ in range(rng.choice(self.config.opening_plies)):
                cell = rng.choice([i for i in range(9) if board[i] == "."])
                board = board[:cell] + to_move(board) + board[cell + 1:]
            if winner(board) is None and (not self.config.forced_win or minimax(board, "X") > 0):
                return Opening(board)

    def instance_key(self, opening: Opening) -> str:
        return opening.board

    def start_episode(self, opening: Opening) -> None:
        self.board = opening.board
        self.moves: list[tuple[str, int]] = []

    # -------------------------------------------------------------- actions
    def apply_action(self, agent: str, text: str) -> ActionResult:
        cfg = self.config
        cell, reason = parse_cell(text)
        if cell is None:
            return ActionResult(-cfg.format_penalty, valid=False,
                                invalid_reason=f"{reason}; you lost this move")
        if self.board[cell] != ".":
            return ActionResult(-cfg.illegal_move_penalty, valid=False, parsed={"cell": cell + 1},
                                invalid_reason=f"cell {cell_name(cell)} is taken by {self.board[cell]}; "
                                               "you lost this move")
        self.board = self.board[:cell] + MARKS[agent] + self.board[cell + 1:]
        self.moves.append((agent, cell))
        saved_moves = self.board.count(".") // 2 if winner(self.board) == MARKS[agent] else 0
        return ActionResult(cfg.legal_move_reward * (1 + saved_moves), parsed={"cell": cell + 1})

    # ------------------------------------------------------------ rewards
    def outcome(self, agent: str) -> float:
        """+1 when ``agent`` has won, -1 when it has lost, 0 otherwise (draw or ongoing)."""
        mark = winner(self.board)
        if mark is None:
            return 0.0
        return 1.0 if mark == MARKS[agent] else -1.0

    def global_reward(self) -> float:
        """The outcome from the side of the player to move (what ``render`` and a team view
        would show); rewards use :meth:`team_state`, each player's own side."""
        return self.outcome(self.agent_selection)

    def team_state(self, agent: str) -> float:
        return self.outcome(agent)

    def is_success(self, agent: str | None = None) -> bool:
        mark = winner(self.board)
        return mark is not None and (agent is None or mark == MARKS[agent])

    def is_done(self) -> bool:
        return winner(self.board) is not None or "." not in self.board

    def extra_info(self, agent: str) -> dict[str, Any]:
        return {
            "game": {
                "mark": MARKS[agent],
                "board": self.board,
                "outcome": self.outcome(agent) if self.is_done() else None,
            }
        }

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        mark = MARKS[agent]
        other = "O" if mark == "X" else "X"
        return (
            f"You are {agent}, playing {mark} against {other} at tic-tac-toe. Three of your marks in a "
            "row, column or diagonal win. Cells are numbered 1-9 in reading order (1 = top left, "
            "3 = top right, 9 = bottom right) or named a1..c3 (letter = column a-c left to right, "
            "digit = row 1-3 top to bottom). End your reply with a line `MOVE: <cell>`, e.g. `MOVE: 5` "
            "or `MOVE: b2`. A move to a taken cell or a reply without a MOVE line is penalised and "
            "you lose that move. Win: +1, loss: -1, draw: 0."
        )

    def board_text(self) -> str:
        rows = [f"{r + 1}  " + " | ".join(self.board[3 * r:3 * r + 3]) for r in range(3)]
        return "   a   b   c\n" + "\n  ---+---+---\n".join(rows)

    def task_view(self, agent: str) -> str:
        opening = self.instance.board
        parts = [
            "Board (X, O, . = empty; rows 1-3 top to bottom, columns a-c left to right):",
            self.board_text(),
            "",
            f"You are {MARKS[agent]}. Opening (given): {describe_board(opening)}.",
        ]
        if self.moves:
            parts.append("Moves since: " + ", ".join(f"{MARKS[a]} {cell_name(c)}" for a, c in self.moves) + ".")
        other = next(a for a in self.possible_agents if a != agent)
        last = self.last_record(other)
        if last is not None:
            if last.result.valid:
                parts.append(f"Your opponent's last move: {cell_name(last.result.parsed['cell'] - 1)}.")
            else:
                parts.append(f"Your opponent's last action was invalid ({last.result.invalid_reason}).")
        free = [str(i + 1) for i in range(9) if self.board[i] == "."]
        parts.append(f"Free cells: {', '.join(free) or 'none'}. Turn {self.turn + 1} of {self.config.max_turns}.")
        return "\n".join(parts)

    def render_state(self) -> str:
        # Numbered from 1 as in the players' prompts ("Turn 1 of 5"): the turn of the last move.
        when = f"after turn {self.history[-1].turn + 1}" if self.history else "before turn 1"
        return f"{self.board_text()}\n{when} of {self.config.max_turns}, winner {winner(self.board) or '-'}"


def describe_board(board: str) -> str:
    taken = [f"{board[i]} {cell_name(i)}" for i in range(9) if board[i] != "."]
    return ", ".join(taken) or "empty board"


def env(**config) -> TextAECEnv:
    """The wrapped AEC environment (order enforcing), the usual entry point."""
    return wrap_env(raw_env(**config))


def parallel_env(**config):
    """The Parallel API view: one parallel step is one agent's action (see pettingllm_envs.core)."""
    return make_parallel_env(env(**config))


# ------------------------------------------------------------- opponents
def read_board(observation: str) -> str | None:
    """The 9-character board shown in an observation, or None."""
    rows = BOARD_ROW.findall(observation)
    if len(rows) < 3 or [r[0] for r in rows[:3]] != ["1", "2", "3"]:
        return None
    return "".join("".join(r[1:]) for r in rows[:3])


def scripted_policy(observation: str, agent: str, info: dict) -> str:
    """Minimax (perfect play) from the board in the observation: never loses, and wins
    every forced-win opening, taking the fastest win."""
    board = read_board(observation)
    if board is None or winner(board) is not None or "." not in board:
        return "MOVE: 1"
    cell = best_move(board, MARKS[agent])
    return f"I play {cell_name(cell)}.\nMOVE: {cell + 1}"


def random_policy(seed: int = 0):
    """A scripted opponent that plays a uniformly random free cell (seeded)."""
    rng = random.Random(seed)

    def act(observation: str, agent: str, info: dict) -> str:
        board = read_board(observation)
        free = [i for i in range(9) if board is not None and board[i] == "."]
        return f"MOVE: {rng.choice(free) + 1}" if free else "MOVE: 1"

    return act
