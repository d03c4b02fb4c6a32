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
squares pruned) re-solves any board, for the waste penalty and the oracle.

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
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

from pettingllm_envs.core import ActionResult, TextAECEnv, make_parallel_env, wrap_env
from pettingllm_envs.core.tools import ToolEnvConfig, team_history_lines
from pettingllm_envs.planning.moves import MOVES, describe_moves, parse_moves, run_move_program

Cell = tuple[int, int]
#: Rooms tried per instance before the config is declared impossible (instead of looping forever).
MAX_ROOMS = 1000
WALL, FLOOR = "#", "-"
#: Board symbols, the usual Sokoban (XSB) ones with ``-`` for floor so no line is blank.
LEGEND = "# wall, - floor, . goal, $ box, * box on goal, @ player, + player on goal"


def _step(cell: Cell, move: str) -> Cell:
    dr, dc = MOVES[move]
    return cell[0] + dr, cell[1] + dc


def _floor(grid: tuple[str, ...], cell: Cell) -> bool:
    r, c = cell
    return 0 <= r < len(grid) and 0 <= c < len(grid[0]) and grid[r][c] != WALL


def push_distances(grid: tuple[str, ...], goals: tuple[Cell, ...]) -> tuple[tuple[int, ...], ...]:
    """Fewest pushes that bring a lone box from each cell to some goal (-1: never, a dead square).

    Reverse BFS from the goals: a box reaches ``y`` from ``x = y - d`` when ``x`` is floor
    and the player can stand on ``x - d`` to push it. Other boxes can only obstruct, so a
    box on a dead square can never be solved, whatever the rest of the board."""
    dist = [[-1] * len(grid[0]) for _ in grid]
    frontier = deque(goals)
    for r, c in goals:
        dist[r][c] = 0
    while frontier:
        y = frontier.popleft()
        for dr, dc in MOVES.values():
            x = (y[0] - dr, y[1] - dc)
            stand = (x[0] - dr, x[1] - dc)
            if _floor(grid, x) and _floor(grid, stand) and dist[x[0]][x[1]] < 0:
                dist[x[0]][x[1]] = dist[y[0]][y[1]] + 1
                frontier.append(x)
    return tuple(tuple(row) for row in dist)


def solve(
    grid: tuple[str, ...], goals: tuple[Cell, ...], boxes: tuple[Cell, ...], player: Cell, *, node_limit: int
) -> str | None:
    """A fewest-moves solution (a string of U/D/L/R), or None when the level is unsolvable
    or more than ``node_limit`` states were reached.

    Breadth-first search over (player, boxes) states; cells are flat indices of the grid
    padded with a wall ring (so no bounds checks), and pushes onto dead squares are pruned."""
    width = len(grid[0]) + 2
    dead = push_distances(grid, goals)
    floor = set()
    live = set()
    for r, row in enumerate(grid):
        for c, ch in enumerate(row):
            if ch != WALL:
                floor.add((r + 1) * width + c + 1)
                if dead[r][c] >= 0:
                    live.add((r + 1) * width + c + 1)
    deltas = [(name, dr * width + dc) for name, (dr, dc) in MOVES.items()]
    goal_set = frozenset((r + 1) * width + c + 1 for r, c in goals)
    start_boxes = tuple(sorted((r + 1) * width + c + 1 for r, c in boxes))
    if frozenset(start_boxes) == goal_set:
        return ""
    start = ((player[0] + 1) * width + player[1] + 1, start_boxes)
    parent: dict[tuple[int, tuple[int, ...]], tuple[Any, str] | None] = {start: None}
    frontier = deque([start])
    while frontier:
        state = frontier.popleft()
        pos, box_tuple = state
        for name, delta in deltas:
            nxt = pos + delta
            if nxt not in floor:
                continue
            new_boxes = box_tuple
            if nxt in box_tuple:
                target = nxt + delta
                if target not in live or target in box_tuple:
                    continue
                new_boxes = tuple(sorted(target if b == nxt else b for b in box_tuple))
            child = (nxt, new_boxes)
            if child in parent:
                continue
            parent[child] = (state, name)
            if new_boxes is not box_tuple and frozenset(new_boxes) == goal_set:
                path = []
                link = parent[child]
                while link is not None:
                    state_before, move = link
                    path.append(move)
                    link = parent[state_before]
                return "".join(reversed(path))
            if len(parent) > node_limit:
                return None
            frontier.append(child)
    return None


def reverse_play(
    grid: tuple[str, ...], goals: tuple[Cell, ...], *, node_limit: int
) -> dict[tuple[Cell, tuple[Cell, ...]], str]:
    """Every (player, sorted boxes) state from which the level can be solved, each with a
    fewest-moves solution, found by breadth-first *reverse play* from the solved states.

    A reverse step walks the player to a free neighbour and may pull the box behind it;
    it undoes exactly one forward move (a walk, or a push in the opposite direction), so
    each state reached is solvable by construction and BFS order makes its solution
    optimal. Exploration stops after ``node_limit`` states; those found are still exact."""
    opposite = {"U": "D", "D": "U", "L": "R", "R": "L"}
    boxes = tuple(sorted(goals))
    solved = [
        ((r, c), boxes)
        for r, row in enumerate(grid) for c, ch in enumerate(row)
        if ch != WALL and (r, c) not in goals
    ]
    parent: dict[tuple[Cell, tuple[Cell, ...]], tuple[Any, str] | None] = dict.fromkeys(solved)
    frontier = deque(solved)
    while frontier and len(parent) < node_limit:
        state = frontier.popleft()
        player, box_tuple = state
        for move in MOVES:
            target = _step(player, move)
            if not _floor(grid, target) or target in box_tuple:
                continue
            behind = _step(player, opposite[move])
            children = [(target, box_tuple)]
            if behind in box_tuple:
                children.append((target, tuple(sorted(player if b == behind else b for b in box_tuple))))
            for child in children:
                if child not in parent:
                    parent[child] = (state, opposite[move])
                    frontier.append(child)
    solutions: dict[tuple[Cell, tuple[Cell, ...]], str] = {}
    for state in parent:  # insertion order is BFS order: a parent's solution is known first
        link = parent[state]
        solutions[state] = "" if link is None else link[1] + solutions[link[0]]
    return solutions


def board_text(grid: tuple[str, ...], goals: tuple[Cell, ...], boxes: tuple[Cell, ...], player: Cell) -> str:
    """The board in Sokoban symbols (see ``LEGEND``)."""
    cells = [list(row) for row in grid]
    for r, c in goals:
        cells[r][c] = "."
    for r, c in boxes:
        cells[r][c] = "*" if cells[r][c] == "." else "$"
    r, c = player
    cells[r][c] = "+" if cells[r][c] == "." else "@"
    return "\n".join("".join(row) for row in cells)


def player_region(grid: tuple[str, ...], boxes: tuple[Cell, ...], player: Cell) -> set[Cell]:
    """Cells the player can walk to without pushing."""
    blocked = set(boxes)
    seen = {player}
    frontier = deque([player])
    while frontier:
        cell = frontier.popleft()
        for move in MOVES:
            nxt = _step(cell, move)
            if _floor(grid, nxt) and nxt not in blocked and nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return seen


@dataclass(frozen=True)
class Level:
    """One Sokoban problem: the walls, goals, start position and an optimal solution."""

    grid: tuple[str, ...]
    """Rows of ``#`` (wall) and ``-`` (floor); goals, boxes and the player are kept apart."""
    goals: tuple[Cell, ...]
    boxes: tuple[Cell, ...]
    """Start cells of the boxes, sorted."""
    player: Cell
    solution: str
    """A fewest-moves solution from the start (U/D/L/R)."""
    push_distance: tuple[tuple[int, ...], ...]
    """``push_distances(grid, goals)``; -1 marks a dead square."""

    @property
    def optimal(self) -> int:
        return len(self.solution)

    def heuristic(self, boxes: tuple[Cell, ...]) -> int:
        """Sum of the boxes' push distances to their nearest goal. A deadlocked box counts -1:
        it can never leave the dead squares, so differences of ``heuristic`` stay meaningful."""
        return sum(self.push_distance[r][c] for r, c in boxes)

    def is_dead(self, cell: Cell) -> bool:
        return self.push_distance[cell[0]][cell[1]] < 0


@dataclass(frozen=True)
class Simulation:
    """Where a move list leads from some state, and why it stopped."""

    player: Cell
    boxes: tuple[Cell, ...]
    applied: int
    pushes: int
    illegal: str | None
    deadlock: Cell | None


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
    def _random_room(self, rng: random.Random) -> tuple[str, ...]:
        cfg = self.config
        while True:
            grid = tuple(
                "".join(
                    WALL if r in (0, cfg.rows - 1) or c in (0, cfg.cols - 1) or rng.random() < cfg.wall_density
                    else FLOOR
                    for c in range(cfg.cols)
                )
                for r in range(cfg.rows)
            )
            cells = [(r, c) for r in range(cfg.rows) for c in range(cfg.cols) if grid[r][c] == FLOOR]
            if len(cells) >= 2 * cfg.num_boxes + 2 and len(player_region(grid, (), cells[0])) == len(cells):
                return grid

    def generate_instance(self, rng: random.Random) -> Level:
        cfg = self.config
        for _ in range(MAX_ROOMS):
            grid = self._random_room(rng)
            cells = [(r, c) for r in range(cfg.rows) for c in range(cfg.cols) if grid[r][c] == FLOOR]
            goals = tuple(sorted(rng.sample(cells, cfg.num_boxes)))
            solutions = reverse_play(grid, goals, node_limit=cfg.solver_node_limit)
            candidates = [state for state, moves in solutions.items() if cfg.min_moves <= len(moves) <= cfg.max_moves]
            if candidates:
                player, boxes = rng.choice(sorted(candidates))
                return Level(grid, goals, boxes, player, solutions[(player, boxes)], push_distances(grid, goals))
        raise RuntimeError(
            f"no level needing {cfg.min_moves}..{cfg.max_moves} moves in {MAX_ROOMS} rooms; "
            "widen that range or enlarge the board"
        )

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
        """Play ``moves`` from the current state without changing it."""
        level = self.instance
        goals = set(level.goals)
        player, boxes = self.player, set(self.boxes)
        applied = pushes = 0
        illegal: str | None = None
        deadlock: Cell | None = None
        for i, move in enumerate(moves[: self.config.max_moves_per_action]):
            if boxes == goals:
                break
            target = _step(player, move)
            if not _floor(level.grid, target):
                illegal = f"move {i + 1} ({move}) from {player} walks into a wall"
                break
            if target in boxes:
                beyond = _step(target, move)
                if not _floor(level.grid, beyond) or beyond in boxes:
                    what = "a wall" if not _floor(level.grid, beyond) else "another box"
                    illegal = f"move {i + 1} ({move}) from {player} pushes the box at {target} into {what}"
                    break
                boxes.remove(target)
                boxes.add(beyond)
                pushes += 1
                player = target
                applied += 1
                if level.is_dead(beyond):
                    deadlock = beyond
                    break
                continue
            player = target
            applied += 1
        return Simulation(player, tuple(sorted(boxes)), applied, pushes, illegal, deadlock)

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
        if agent == "tool":
            return self._apply_tool(text)
        return self._apply_planner(text)

    def _apply_tool(self, text: str) -> ActionResult:
        outcome = run_move_program(text, self.config)
        if isinstance(outcome, ActionResult):
            return outcome
        moves, run = outcome
        sim = self._simulate(moves)
        score, reason = self._score(sim, record=self.tool_record)
        if sim.deadlock is None:
            self.tool_record = min(self.tool_record, self.instance.heuristic(sim.boxes))
        parsed = {"code": run.code, "moves": "".join(moves), "simulated": _state_json(sim)}
        return ActionResult(score, valid=sim.illegal is None, parsed=parsed, invalid_reason=reason,
                            feedback=run.feedback)

    def _apply_planner(self, text: str) -> ActionResult:
        moves, reason = parse_moves(text, require_prefix=True)
        if moves is None:
            return ActionResult(-self.config.format_penalty, valid=False, invalid_reason=reason)
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
        common = (
            "You are on a team of two agents, a tool agent and a planner, playing Sokoban: the "
            "player (@) must push every box ($) onto a goal (.) in as few moves as possible. "
            "Moves: U (row - 1), D (row + 1), L (col - 1), R (col + 1). Walking into a box pushes "
            "it one cell; boxes cannot be pulled, and a box cannot be pushed into a wall or another "
            "box. An illegal move stops the remaining moves. A box pushed into a corner or along a "
            "wall with no goal can never reach a goal (a deadlock)."
        )
        if agent == "tool":
            return common + (
                "\nYou are the tool agent. Write a Python program in a ```python code block that "
                "searches for a solution from the current board and prints it on its last line as "
                "`MOVES: U R R D`. The program runs in a sandbox; the planner sees its code and output."
            )
        return common + (
            "\nYou are the planner. Decide the moves to make now, using the tool agent's program "
            "and output if they help. End your reply with a line `MOVES: U R R D`; those moves "
            "are applied to the real board."
        )

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
