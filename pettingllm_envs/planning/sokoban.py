"""Sokoban: a tool agent and a planner push every box onto a goal.

| Property            | Value                                                                  |
|---------------------|------------------------------------------------------------------------|
| Id / import         | `sokoban_v0` / `from pettingllm_envs.planning import sokoban_v0`       |
| Roles (turn order)  | `tool`, `planner`                                                      |
| Observation         | `TextObservation` (a `str`): role instructions, board, history         |
| Action              | `UnicodeText(max_action_chars)`: free text                             |
| tool's action       | a ```` ```python ```` block whose program prints `MOVES: U R ...`      |
| planner's action    | text ending with a line `MOVES: U R R D` (U/D/L/R or up/down/...)      |
| Team state G        | solved: 0.7 + 0.3 * optimal/moves; else 0.5 * share of the boxes that  |
|                     | started off a goal and are now on one (0 at the start)                 |
| Local reward        | push progress of the role's moves (tool: simulated on a copy)          |
| Reward bounds       | local per action in `[-max(format, tool_error, deadlock, illegal +     |
|                     | M / h_start, waste * M / optimal), 1]` with M = max_moves_per_action;  |
|                     | the planner's push progress sums to at most 1 over an episode, and so  |
|                     | do the tool's progress credits; global in `[0, 1]`                     |
| Penalties           | format, tool program error, illegal move, deadlock, wasted moves       |
| Termination         | every box is on a goal, or a box is deadlocked (`end_on_deadlock`)     |
| Truncation          | `max_turns` turns (default 4)                                          |
| Config              | `SokobanConfig`: rows, cols, num_boxes, wall_density, min_moves, ...   |

Each turn the **tool** writes a Python program; it runs in the sandbox and the moves it
prints are *simulated* on a copy of the state to score the proposal. The **planner**
then sees the program and its output (same-turn visibility) and emits the moves that
are applied to the real board. Moves stop at the first illegal one (walking into a
wall, pushing a box into a wall or another box), at the push that deadlocks a box, or
once every box is on a goal.

Levels are made by *reverse play*: a random room and goals are drawn, then a
breadth-first search runs backwards from the solved states (the player walks and may
pull the box behind it; each pull undoes a legal push). Every state it reaches is
solvable by construction and comes with an optimal (fewest moves) solution; the start
is drawn among those needing ``min_moves..max_moves`` moves. The optimum gives the
shortest-path bonus; a forward BFS solver over (player, boxes) states (node cap, dead
squares pruned) re-solves any board, for the waste penalty and the oracle. The board logic
(moves, push distances, both searches, level generation) is
:mod:`pettingllm_envs.planning.sokoban_board`.

*Push progress* uses the push distance of each box to its nearest goal, ignoring the
other boxes (a reverse BFS from the goals): ``(h_before - h_after) / h_start`` where
``h`` sums it over the boxes. A cell from which no goal can be reached (a corner, a
wall edge without a goal) is a *dead square*; a push onto one is a simple deadlock and
scores ``-deadlock_penalty``. A move list that solves the level with more moves than
the optimum from where it started loses ``waste_penalty * extra / optimal``. The tool is
credited only for push progress past the lowest ``h`` its earlier proposals were credited
for, so proposing the same pushes every turn while the planner waits earns nothing more.
Instances are drawn from ``Random(data_seed + index)`` and split between train and test
by a hash of the board (with the player moved to a canonical cell of its region, so
boards that differ only in where the player stands in one region share a split).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from pettingllm_envs.core import ActionResult, TextAECEnv, make_parallel_env, wrap_env
from pettingllm_envs.core.tools import ToolEnvConfig, ToolRun, team_history_lines
from pettingllm_envs.planning.moves import apply_move_action, describe_moves, move_team_instructions
from pettingllm_envs.planning.sokoban_board import (
    FLOOR,
    LEGEND,
    WALL,
    Cell,
    Level,
    Simulation,
    board_text,
    generate_level,
    player_region,
    simulate,
    solve,
)


@dataclass
class SokobanConfig(ToolEnvConfig):
    """Configuration of ``sokoban_v0``."""

    rows: int = 6
    """Board height, the outer wall ring included (6 leaves a 4 x 4 room)."""
    cols: int = 6
    """Board width, the outer wall ring included."""
    num_boxes: int = 2
    """Boxes (and goals) on the board."""
    wall_density: float = 0.1
    """Probability that a cell inside the room is a wall (the room stays connected)."""
    min_moves: int = 8
    """Fewest moves an optimal solution must need, so that no instance is trivial."""
    max_moves: int = 40
    """Most moves an optimal solution may need (the start is drawn uniformly among the
    reachable states whose optimal length lies in ``min_moves..max_moves``)."""
    max_moves_per_action: int = 100
    """Moves beyond this many in one action are ignored (bounds the work of junk actions)."""
    solver_node_limit: int = 200_000
    """States the solvers may visit: reverse play stops exploring there (levels are drawn
    from what it reached), and the env's forward solver gives up (no waste penalty)."""
    illegal_move_penalty: float = 0.2
    """Subtracted once from a role's local reward when its moves hit a wall or push a box
    into a wall or another box."""
    deadlock_penalty: float = 0.3
    """A role's local reward when its moves push a box onto a dead square (its progress is void)."""
    waste_penalty: float = 0.5
    """Weight of the extra moves of a solving move list beyond the optimum (relative to the
    level's optimal length)."""
    end_on_deadlock: bool = True
    """End the episode (terminated, not successful) once a real box is deadlocked: it can
    never be solved, so further turns only cost compute."""

    def validate(self) -> None:
        super().validate()
        if self.rows < 4 or self.cols < 4:
            raise ValueError("rows and cols must be at least 4 (a 2 x 2 room inside the wall ring)")
        if self.num_boxes < 1:
            raise ValueError("num_boxes must be at least 1")
        if (self.rows - 2) * (self.cols - 2) < 2 * self.num_boxes + 2:
            raise ValueError("the room is too small for num_boxes boxes and their goals")
        if not 0.0 <= self.wall_density <= 0.4:
            raise ValueError("wall_density must be in [0, 0.4]")
        if not 1 <= self.min_moves <= self.max_moves or self.max_moves_per_action < 1:
            raise ValueError("need 1 <= min_moves <= max_moves and max_moves_per_action >= 1")
        if self.solver_node_limit < 1000:
            raise ValueError("solver_node_limit must be at least 1000")


class raw_env(TextAECEnv[Level]):
    """The Sokoban environment (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "sokoban_v0", "is_parallelizable": False
    }
    roles = ("tool", "planner")
    human_role = "planner"  # `pettingllm play`'s default: a person plans moves, the tool agent writes Python
    config_class = SokobanConfig
    config: SokobanConfig

    # ----------------------------------------------------------- instances
    def generate_instance(self, rng: random.Random) -> Level:
        cfg = self.config
        return generate_level(rng, rows=cfg.rows, cols=cfg.cols, num_boxes=cfg.num_boxes,
                              wall_density=cfg.wall_density, min_moves=cfg.min_moves, max_moves=cfg.max_moves,
                              node_limit=cfg.solver_node_limit)

    def instance_key(self, level: Level) -> str:
        canonical_player = min(player_region(level.grid, level.boxes, level.player))
        return board_text(level.grid, level.goals, level.boxes, canonical_player)

    def start_episode(self, level: Level) -> None:
        self.player = level.player
        self.boxes = level.boxes
        self.steps_taken = 0
        self.pushes = 0
        self.deadlock: Cell | None = None
        self.tool_record = level.heuristic(level.boxes)
        self.started_on_goals = len(set(level.boxes) & set(level.goals))
        """Boxes on goals at the start: the team reward counts only what the team adds, so an
        episode that makes no progress pays no team reward (as in every other env)."""
        """The lowest push distance ``h`` that the tool's proposals have been credited down to."""

    # -------------------------------------------------------------- actions
    def _simulate(self, moves: list[str]) -> Simulation:
        """Play ``moves`` (at most ``max_moves_per_action``) from the current state without changing it."""
        return simulate(self.instance, self.player, self.boxes, moves[: self.config.max_moves_per_action])

    def _score(self, sim: Simulation, record: int | None = None) -> tuple[float, str | None]:
        """The local reward of a simulated move list and the reason for any penalty. With
        ``record`` (the tool's), progress counts only below that ``h``, so it is credited once."""
        cfg, level = self.config, self.instance
        if sim.deadlock is not None:
            return -cfg.deadlock_penalty, (
                f"the push onto {sim.deadlock} deadlocks that box: no goal can be reached from there"
            )
        after = level.heuristic(sim.boxes)
        gained = level.heuristic(self.boxes) - after
        if record is not None and gained > 0:
            gained = min(gained, max(0, record - after))
        score = gained / level.heuristic(level.boxes)
        reason = sim.illegal
        if sim.illegal is not None:
            score -= cfg.illegal_move_penalty
        elif set(sim.boxes) == set(level.goals):
            best = self._optimal_from_here()
            if best is not None and sim.applied > best:
                score -= cfg.waste_penalty * (sim.applied - best) / level.optimal
                reason = f"solved with {sim.applied} moves where {best} suffice"
        return score, reason

    def _optimal_from_here(self) -> int | None:
        """Fewest moves that solve the level from the current state (None past the node cap)."""
        level = self.instance
        if (self.player, self.boxes) == (level.player, level.boxes):
            return level.optimal
        solution = solve(level.grid, level.goals, self.boxes, self.player, node_limit=self.config.solver_node_limit)
        return None if solution is None else len(solution)

    def apply_action(self, agent: str, text: str) -> ActionResult:
        return apply_move_action(agent, text, self.config, tool=self._tool_moves, planner=self._planner_moves)

    def _tool_moves(self, moves: list[str], run: ToolRun) -> ActionResult:
        """The tool's moves, scored on a copy of the state (progress credited once)."""
        sim = self._simulate(moves)
        score, reason = self._score(sim, record=self.tool_record)
        if sim.deadlock is None:
            self.tool_record = min(self.tool_record, self.instance.heuristic(sim.boxes))
        parsed = {"code": run.code, "moves": "".join(moves), "simulated": _state_json(sim)}
        return ActionResult(score, valid=sim.illegal is None, parsed=parsed, invalid_reason=reason,
                            feedback=run.feedback)

    def _planner_moves(self, moves: list[str]) -> ActionResult:
        """The planner's moves, applied to the real state."""
        sim = self._simulate(moves)
        score, reason = self._score(sim)
        self.player, self.boxes = sim.player, sim.boxes
        self.steps_taken += sim.applied
        self.pushes += sim.pushes
        if sim.deadlock is not None:
            self.deadlock = sim.deadlock
        parsed = {"moves": "".join(moves), **_state_json(sim)}
        return ActionResult(score, valid=sim.illegal is None, parsed=parsed, invalid_reason=reason)

    # ------------------------------------------------------------ rewards
    def boxes_on_goals(self) -> int:
        return len(set(self.boxes) & set(self.instance.goals))

    def global_reward(self) -> float:
        level = self.instance
        if self.is_success():
            return 0.7 + 0.3 * level.optimal / max(self.steps_taken, level.optimal)
        added = max(0, self.boxes_on_goals() - self.started_on_goals)
        return 0.5 * added / (len(level.goals) - self.started_on_goals)

    def is_success(self, agent: str | None = None) -> bool:
        return self.boxes_on_goals() == len(self.instance.goals)

    def is_done(self) -> bool:
        return self.is_success() or (self.config.end_on_deadlock and self.deadlock is not None)

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        rules = (
            "You are on a team of two agents, a tool agent and a planner, playing Sokoban: the "
            "player (@) must push every box ($) onto a goal (.) in as few moves as possible. "
            "Moves: U (row - 1), D (row + 1), L (col - 1), R (col + 1). Walking into a box pushes "
            "it one cell; boxes cannot be pulled, and a box cannot be pushed into a wall or another "
            "box. An illegal move stops the remaining moves. A box pushed into a corner or along a "
            "wall with no goal can never reach a goal (a deadlock)."
        )
        return move_team_instructions(
            agent, rules, tool_task="searches for a solution from the current board", board="board")

    def task_view(self, agent: str) -> str:
        level = self.instance
        parts = [
            f"Board ({len(level.grid)} rows x {len(level.grid[0])} cols; {LEGEND}; row 0 is the top):",
            board_text(level.grid, level.goals, self.boxes, self.player),
            "",
            f"Player at (row, col) = {self.player}; boxes at {list(self.boxes)}; goals at {list(level.goals)}; "
            f"{self.boxes_on_goals()} of {len(level.goals)} boxes on goals.",
            f"Turn {self.turn + 1} of {self.config.max_turns}; {self.steps_taken} moves "
            f"({self.pushes} pushes) made so far.",
        ]
        if self.deadlock is not None:
            parts.append(f"The box at {self.deadlock} is deadlocked: the level can no longer be solved.")
        parts.extend(team_history_lines(self, agent, describe_moves))
        return "\n".join(parts)

    def render_state(self) -> str:
        level = self.instance
        return (
            f"{board_text(level.grid, level.goals, self.boxes, self.player)}\n"
            f"turn {self.turn} moves {self.steps_taken} boxes on goals {self.boxes_on_goals()}/{len(level.goals)}"
        )


def _state_json(sim: Simulation) -> dict[str, Any]:
    return {
        "applied": sim.applied,
        "pushes": sim.pushes,
        "player": list(sim.player),
        "boxes": [list(box) for box in sim.boxes],
        "deadlock": list(sim.deadlock) if sim.deadlock is not None else None,
    }


def env(**config) -> TextAECEnv:
    """The wrapped AEC environment (order enforcing), the usual entry point."""
    return wrap_env(raw_env(**config))


def parallel_env(**config):
    """The Parallel API view: one parallel step is one agent's action (see pettingllm_envs.core)."""
    return make_parallel_env(env(**config))


# ---------------------------------------------------------------- oracle
BOARD_HEADER = re.compile(r"^Board \(\d+ rows x \d+ cols;")
BOARD_LINE = re.compile(r"^[#\-.$*@+]+$")
ORACLE_NODE_LIMIT = 2_000_000

ORACLE_PROGRAM = '''from collections import deque
grid = {grid!r}
goals = frozenset({goals!r})
start = ({player!r}, tuple(sorted({boxes!r})))
steps = {{"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}}

def free(cell):
    r, c = cell
    return 0 <= r < len(grid) and 0 <= c < len(grid[r]) and grid[r][c] != "#"

came = {{start: None}}
queue = deque([start])
end = start if frozenset(start[1]) == goals else None
while queue and end is None:
    state = queue.popleft()
    (r, c), boxes = state
    for name, (dr, dc) in steps.items():
        nxt = (r + dr, c + dc)
        if not free(nxt):
            continue
        if nxt in boxes:
            pushed = (nxt[0] + dr, nxt[1] + dc)
            if not free(pushed) or pushed in boxes:
                continue
            boxes_after = tuple(sorted(pushed if b == nxt else b for b in boxes))
        else:
            boxes_after = boxes
        child = (nxt, boxes_after)
        if child not in came:
            came[child] = (state, name)
            if frozenset(boxes_after) == goals:
                end = child
                break
            queue.append(child)
path = []
while end is not None and came[end] is not None:
    end, name = came[end]
    path.append(name)
print("MOVES: " + " ".join(reversed(path)))
'''


def read_board(observation: str) -> tuple[tuple[str, ...], tuple[Cell, ...], tuple[Cell, ...], Cell] | None:
    """(walls grid, goals, boxes, player) from the board in an observation, or None."""
    lines = observation.splitlines()
    start = next((i for i, line in enumerate(lines) if BOARD_HEADER.match(line)), None)
    if start is None:
        return None
    rows = []
    for line in lines[start + 1:]:
        if not BOARD_LINE.match(line):
            break
        rows.append(line)
    goals, boxes, players = [], [], []
    for r, row in enumerate(rows):
        for c, ch in enumerate(row):
            if ch in ".*+":
                goals.append((r, c))
            if ch in "$*":
                boxes.append((r, c))
            if ch in "@+":
                players.append((r, c))
    if len(players) != 1 or not boxes or len(boxes) != len(goals):
        return None
    grid = tuple("".join(WALL if ch == WALL else FLOOR for ch in row) for row in rows)
    return grid, tuple(goals), tuple(sorted(boxes)), players[0]


def scripted_policy(observation: str, agent: str, info: dict) -> str:
    """Oracle: reads the board from the observation and answers with a fewest-moves solution
    (the tool writes a BFS program; the planner runs the solver directly)."""
    board = read_board(observation)
    if board is None:
        return "MOVES: U"
    grid, goals, boxes, player = board
    if agent == "tool":
        program = ORACLE_PROGRAM.format(grid=grid, goals=goals, boxes=boxes, player=player)
        return f"```python\n{program}```"
    solution = solve(grid, goals, boxes, player, node_limit=ORACLE_NODE_LIMIT)
    return "MOVES: " + " ".join(solution or "U")
