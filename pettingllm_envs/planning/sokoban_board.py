"""Sokoban's board logic, for ``sokoban_v0``: cells and moves, push distances and dead
squares, the forward solver, reverse play, and the generation of levels solvable by
construction. Pure functions of immutable boards; the env module keeps the rules of the
team (who moves, what is paid) and the views.

A board is a tuple of rows of ``#`` (wall) and ``-`` (floor); goals, boxes and the player
are kept apart as ``(row, col)`` cells, boxes sorted.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any

from pettingllm_envs.planning.moves import MOVES

Cell = tuple[int, int]
#: Rooms tried per instance before the config is declared impossible (instead of looping forever).
MAX_ROOMS = 1000
WALL, FLOOR = "#", "-"
#: Board symbols, the usual Sokoban (XSB) ones with ``-`` for floor so no line is blank.
LEGEND = "# wall, - floor, . goal, $ box, * box on goal, @ player, + player on goal"


def step(cell: Cell, move: str) -> Cell:
    """The cell one ``move`` (U/D/L/R) away."""
    dr, dc = MOVES[move]
    return cell[0] + dr, cell[1] + dc


def is_floor(grid: tuple[str, ...], cell: Cell) -> bool:
    """``cell`` is on the board and not a wall."""
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
            if is_floor(grid, x) and is_floor(grid, stand) and dist[x[0]][x[1]] < 0:
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
            target = step(player, move)
            if not is_floor(grid, target) or target in box_tuple:
                continue
            behind = step(player, opposite[move])
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
            nxt = step(cell, move)
            if is_floor(grid, nxt) and nxt not in blocked and nxt not in seen:
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


def simulate(level: Level, player: Cell, boxes: tuple[Cell, ...], moves: list[str]) -> Simulation:
    """Play ``moves`` from (``player``, ``boxes``) on ``level``: they stop at the first
    illegal one (walking into a wall, pushing a box into a wall or another box), at the push
    that deadlocks a box, or once every box is on a goal."""
    goals = set(level.goals)
    box_set = set(boxes)
    applied = pushes = 0
    illegal: str | None = None
    deadlock: Cell | None = None
    for i, move in enumerate(moves):
        if box_set == goals:
            break
        target = step(player, move)
        if not is_floor(level.grid, target):
            illegal = f"move {i + 1} ({move}) from {player} walks into a wall"
            break
        if target in box_set:
            beyond = step(target, move)
            if not is_floor(level.grid, beyond) or beyond in box_set:
                what = "a wall" if not is_floor(level.grid, beyond) else "another box"
                illegal = f"move {i + 1} ({move}) from {player} pushes the box at {target} into {what}"
                break
            box_set.remove(target)
            box_set.add(beyond)
            pushes += 1
            player = target
            applied += 1
            if level.is_dead(beyond):
                deadlock = beyond
                break
            continue
        player = target
        applied += 1
    return Simulation(player, tuple(sorted(box_set)), applied, pushes, illegal, deadlock)


def random_room(rng: random.Random, rows: int, cols: int, wall_density: float, num_boxes: int) -> tuple[str, ...]:
    """A walled room whose floor is connected and has room for ``num_boxes`` boxes, their
    goals and the player."""
    while True:
        grid = tuple(
            "".join(
                WALL if r in (0, rows - 1) or c in (0, cols - 1) or rng.random() < wall_density
                else FLOOR
                for c in range(cols)
            )
            for r in range(rows)
        )
        cells = [(r, c) for r in range(rows) for c in range(cols) if grid[r][c] == FLOOR]
        if len(cells) >= 2 * num_boxes + 2 and len(player_region(grid, (), cells[0])) == len(cells):
            return grid


def generate_level(rng: random.Random, *, rows: int, cols: int, num_boxes: int, wall_density: float,
                   min_moves: int, max_moves: int, node_limit: int) -> Level:
    """A level whose optimal solution needs ``min_moves..max_moves`` moves: random goals in a
    random room, then a start drawn among the states reverse play reached from the solved
    ones (solvable by construction, each with its optimal solution)."""
    for _ in range(MAX_ROOMS):
        grid = random_room(rng, rows, cols, wall_density, num_boxes)
        cells = [(r, c) for r in range(rows) for c in range(cols) if grid[r][c] == FLOOR]
        goals = tuple(sorted(rng.sample(cells, num_boxes)))
        solutions = reverse_play(grid, goals, node_limit=node_limit)
        candidates = [state for state, moves in solutions.items() if min_moves <= len(moves) <= max_moves]
        if candidates:
            player, boxes = rng.choice(sorted(candidates))
            return Level(grid, goals, boxes, player, solutions[(player, boxes)], push_distances(grid, goals))
    raise RuntimeError(
        f"no level needing {min_moves}..{max_moves} moves in {MAX_ROOMS} rooms; "
        "widen that range or enlarge the board"
    )
