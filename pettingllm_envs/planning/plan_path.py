"""Plan-path: a tool agent and a planner move a walker to the goal of a grid maze.

| Property            | Value                                                                  |
|---------------------|------------------------------------------------------------------------|
| Id / import         | `plan_path_v0` / `from pettingllm_envs.planning import plan_path_v0`   |
| Roles (turn order)  | `tool`, `planner`                                                      |
| Observation         | `TextObservation` (a `str`): role instructions, grid, history          |
| Action              | `UnicodeText(max_action_chars)`: free text                             |
| tool's action       | a ```` ```python ```` block whose program prints `MOVES: U R ...`      |
| planner's action    | text ending with a line `MOVES: U R R D` (U/D/L/R or up/down/...)      |
| Team state G        | reached: 0.7 + 0.3 * shortest/steps; else 0.5 * progress toward goal   |
| Local reward        | progress of the role's moves (tool: simulated on a copy) minus waste   |
| Reward bounds       | local per action in `[-(illegal + waste * cells / shortest), 1]`; the  |
|                     | planner's local rewards sum to at most 1 over an episode, and so do    |
|                     | the tool's progress credits; global in `[0, 1]`                        |
| Penalties           | format (no code/MOVES), tool program error, illegal move               |
| Termination         | the walker stands on the goal                                          |
| Truncation          | `max_turns` turns (default 4)                                          |
| Config              | `PlanPathConfig`: rows, cols, obstacle_density, min_distance, ...      |

Each turn the **tool** writes a Python program; it runs in the sandbox
(:func:`pettingllm_envs.sandbox.execute`) and the moves it prints are *simulated* on a
copy of the state to score the proposal. The **planner** then sees the program and its
output (same-turn visibility) and emits the moves that are applied to the real grid.
Moves stop at the first one that hits a wall or leaves the grid.

Distances are true shortest-path lengths (BFS from the goal), so *progress* is
``(d_before - d_after) / d_start`` and a move that does not bring the walker closer is
*wasted*. The tool is credited only for progress past the closest point its earlier
proposals were credited for, so proposing the same path every turn while the planner
waits earns it nothing more (its progress credits sum to at most 1 per episode).
Instances are drawn from ``Random(data_seed + index)``, reachable by construction (BFS),
and split between train and test by a hash of the grid.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from pettingllm_envs.core import ActionResult, TextAECEnv, make_parallel_env, wrap_env
from pettingllm_envs.core.tools import ToolEnvConfig, ToolRun, team_history_lines
from pettingllm_envs.planning.maze import Maze, bfs_distances, shortest_moves
from pettingllm_envs.planning.moves import MOVES, apply_move_action, describe_moves, move_team_instructions
from pettingllm_envs.planning.plan_path_demonstrations import ORACLE as DEMONSTRATION_ORACLE


@dataclass
class PlanPathConfig(ToolEnvConfig):
    """Configuration of ``plan_path_v0``."""

    rows: int = 6
    """Grid height."""
    cols: int = 6
    """Grid width."""
    obstacle_density: float = 0.25
    """Probability that a cell is a wall."""
    min_distance: int = 3
    """Smallest start-to-goal shortest-path length, so that no instance is trivial."""
    illegal_move_penalty: float = 0.2
    """Subtracted once from a role's local reward when its moves hit a wall or leave the grid."""
    waste_penalty: float = 0.5
    """Weight of moves that do not bring the walker closer (relative to the start distance)."""

    def validate(self) -> None:
        super().validate()
        if self.rows < 2 or self.cols < 2:
            raise ValueError("rows and cols must be at least 2")
        if not 0.0 <= self.obstacle_density <= 0.6:
            raise ValueError("obstacle_density must be in [0, 0.6] so that mazes stay solvable")
        if not 1 <= self.min_distance <= self.rows + self.cols - 2:
            raise ValueError("min_distance must be between 1 and rows + cols - 2")


class raw_env(TextAECEnv[Maze]):
    """The plan-path environment (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "plan_path_v0", "is_parallelizable": False
    }
    roles = ("tool", "planner")
    human_role = "planner"  # `pettingllm play`'s default: a person plans moves, the tool agent writes Python
    config_class = PlanPathConfig
    config: PlanPathConfig

    # ----------------------------------------------------------- instances
    def generate_instance(self, rng: random.Random) -> Maze:
        cfg = self.config
        while True:
            grid = tuple(
                "".join("#" if rng.random() < cfg.obstacle_density else "." for _ in range(cfg.cols))
                for _ in range(cfg.rows)
            )
            cells = [(r, c) for r in range(cfg.rows) for c in range(cfg.cols) if grid[r][c] == "."]
            if len(cells) < 2:
                continue
            goal = rng.choice(cells)
            distance = bfs_distances(grid, goal)
            starts = [p for p in cells if distance[p[0]][p[1]] >= cfg.min_distance]
            if starts:
                return Maze(grid, rng.choice(starts), goal, distance)

    def instance_key(self, maze: Maze) -> str:
        return "/".join(maze.grid) + f"|{maze.start}|{maze.goal}"

    def start_episode(self, maze: Maze) -> None:
        self.position = maze.start
        self.steps_taken = 0
        self.tool_record = maze.shortest
        """The smallest distance to the goal that the tool's proposals have been credited down to."""

    # -------------------------------------------------------------- actions
    def _simulate(self, moves: list[str]) -> tuple[tuple[int, int], int, str | None]:
        """Walk ``moves`` from the current position; stop at the first illegal move."""
        maze = self.instance
        pos = self.position
        for i, move in enumerate(moves[: maze_area(maze)]):
            if pos == maze.goal:
                return pos, i, None
            dr, dc = MOVES[move]
            nxt = (pos[0] + dr, pos[1] + dc)
            if not maze.open(*nxt):
                return pos, i, f"move {i + 1} ({move}) from {pos} hits a wall or leaves the grid"
            pos = nxt
        return pos, min(len(moves), maze_area(maze)), None

    def _score_moves(
        self, moves: list[str], record: int | None = None
    ) -> tuple[float, tuple[int, int], int, str | None]:
        """Score ``moves`` from the current position. With ``record`` (the tool's), progress
        counts only below that distance, so the same progress is never credited twice."""
        cfg, maze = self.config, self.instance
        end, applied, illegal = self._simulate(moves)
        gained = maze.dist(self.position) - maze.dist(end)
        wasted = applied - gained
        credited = gained if record is None or gained <= 0 else min(gained, max(0, record - maze.dist(end)))
        score = (credited - cfg.waste_penalty * wasted) / maze.shortest
        if illegal:
            score -= cfg.illegal_move_penalty
        return score, end, applied, illegal

    def apply_action(self, agent: str, text: str) -> ActionResult:
        return apply_move_action(agent, text, self.config, tool=self._tool_moves, planner=self._planner_moves)

    def _tool_moves(self, moves: list[str], run: ToolRun) -> ActionResult:
        """The tool's moves, scored on a copy of the state (progress credited once)."""
        score, end, _, illegal = self._score_moves(moves, record=self.tool_record)
        self.tool_record = min(self.tool_record, self.instance.dist(end))
        parsed = {"code": run.code, "moves": "".join(moves), "simulated_end": list(end)}
        return ActionResult(score, valid=illegal is None, parsed=parsed, invalid_reason=illegal,
                            feedback=run.feedback)

    def _planner_moves(self, moves: list[str]) -> ActionResult:
        """The planner's moves, applied to the real state."""
        score, end, applied, illegal = self._score_moves(moves)
        self.position = end
        self.steps_taken += applied
        parsed = {"moves": "".join(moves), "applied": applied, "position": list(end)}
        return ActionResult(score, valid=illegal is None, parsed=parsed, invalid_reason=illegal)

    # ------------------------------------------------------------ rewards
    def global_reward(self) -> float:
        maze = self.instance
        if self.position == maze.goal:
            return 0.7 + 0.3 * maze.shortest / max(self.steps_taken, maze.shortest)
        return 0.5 * max(0.0, 1.0 - maze.dist(self.position) / maze.shortest)

    def is_success(self, agent: str | None = None) -> bool:
        return self.position == self.instance.goal

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        rules = (
            "You are on a team of two agents, a tool agent and a planner, that moves a walker "
            "through a grid maze to the goal in as few moves as possible. Moves: U (row - 1), "
            "D (row + 1), L (col - 1), R (col + 1). Moving into a wall (#) or off the grid stops "
            "the remaining moves."
        )
        return move_team_instructions(
            agent, rules, tool_task="computes a shortest path from the walker's position to the goal", board="maze")

    def board_text(self) -> str:
        maze = self.instance
        rows = []
        for r, line in enumerate(maze.grid):
            cells = list(line)
            if r == maze.goal[0]:
                cells[maze.goal[1]] = "G"
            if r == self.position[0]:
                cells[self.position[1]] = "A"
            rows.append("".join(cells))
        return "\n".join(rows)

    def task_view(self, agent: str) -> str:
        maze = self.instance
        parts = [
            f"Grid ({len(maze.grid)} rows x {len(maze.grid[0])} cols; A = walker, G = goal, "
            "# = wall, . = free; row 0 is the top):",
            self.board_text(),
            "",
            f"Walker at (row, col) = {self.position}; goal at {maze.goal}. "
            f"Turn {self.turn + 1} of {self.config.max_turns}; {self.steps_taken} moves made so far.",
        ]
        parts.extend(team_history_lines(self, agent, describe_moves))
        return "\n".join(parts)

    def render_state(self) -> str:
        return f"{self.board_text()}\nturn {self.turn} position {self.position} goal {self.instance.goal}"


def maze_area(maze: Maze) -> int:
    return len(maze.grid) * len(maze.grid[0])


def env(**config) -> TextAECEnv:
    """The wrapped AEC environment (order enforcing), the usual entry point."""
    return wrap_env(raw_env(**config))


def parallel_env(**config):
    """The Parallel API view: one parallel step is one agent's action (see pettingllm_envs.core)."""
    return make_parallel_env(env(**config))


# ---------------------------------------------------------------- oracle
GRID_LINE = re.compile(r"^[.#AG]+$")
POSITION = re.compile(r"Walker at \(row, col\) = \((\d+), (\d+)\); goal at \((\d+), (\d+)\)")

ORACLE_PROGRAM = '''from collections import deque
grid = {grid!r}
start, goal = {start!r}, {goal!r}
moves = {{"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}}
prev = {{start: None}}
queue = deque([start])
while queue:
    cell = queue.popleft()
    if cell == goal:
        break
    for name, (dr, dc) in moves.items():
        r, c = cell[0] + dr, cell[1] + dc
        if 0 <= r < len(grid) and 0 <= c < len(grid[0]) and grid[r][c] != "#" and (r, c) not in prev:
            prev[(r, c)] = (cell, name)
            queue.append((r, c))
path = []
cell = goal
while prev[cell] is not None:
    cell, name = prev[cell]
    path.append(name)
print("MOVES: " + " ".join(reversed(path)))
'''


def scripted_policy(observation: str, agent: str, info: dict) -> str:
    """Oracle: reads the maze from the observation and answers with a shortest path
    (the tool writes a BFS program; the planner solves it directly)."""
    # The grid is the block of grid lines right under the env's "Grid (" header: later lines
    # (a tool program's output in the history) may look like grid rows too.
    rows = observation.splitlines()
    start = next((i + 1 for i, line in enumerate(rows) if line.startswith("Grid (")), len(rows))
    lines = list(itertools.takewhile(GRID_LINE.match, rows[start:]))
    match = POSITION.search(observation)  # the env's own line comes before any history
    if not lines or match is None:
        return "MOVES: U"
    r, c, gr, gc = map(int, match.groups())
    grid = tuple(line.replace("A", ".").replace("G", ".") for line in lines)
    if agent == "tool":
        program = ORACLE_PROGRAM.format(grid=grid, start=(r, c), goal=(gr, gc))
        return f"```python\n{program}```"
    maze = Maze(grid, (r, c), (gr, gc), bfs_distances(grid, (gr, gc)))
    return "MOVES: " + " ".join(shortest_moves(maze, (r, c)))


#: The oracle's demonstrations for a warm start, from the env's state (plan_path_demonstrations).
demonstrations = DEMONSTRATION_ORACLE.demonstrations
