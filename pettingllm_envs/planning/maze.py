"""A plan-path maze and its shortest paths: BFS distances to the goal and a shortest move list.

Pure, so that the env, its oracle and its demonstrations (:mod:`pettingllm_envs.planning.plan_path_demonstrations`)
share one search.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from pettingllm_envs.planning.moves import MOVES


@dataclass(frozen=True)
class Maze:
    """One plan-path problem. ``distance[r][c]`` is the BFS distance to the goal (-1: unreachable)."""

    grid: tuple[str, ...]
    start: tuple[int, int]
    goal: tuple[int, int]
    distance: tuple[tuple[int, ...], ...]

    @property
    def shortest(self) -> int:
        return self.distance[self.start[0]][self.start[1]]

    def open(self, row: int, col: int) -> bool:
        return 0 <= row < len(self.grid) and 0 <= col < len(self.grid[0]) and self.grid[row][col] != "#"

    def dist(self, pos: tuple[int, int]) -> int:
        return self.distance[pos[0]][pos[1]]


def bfs_distances(grid: tuple[str, ...], goal: tuple[int, int]) -> tuple[tuple[int, ...], ...]:
    rows, cols = len(grid), len(grid[0])
    dist = [[-1] * cols for _ in range(rows)]
    dist[goal[0]][goal[1]] = 0
    frontier = deque([goal])
    while frontier:
        r, c = frontier.popleft()
        for dr, dc in MOVES.values():
            nr, nc = r + dr, c + dc
            if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] != "#" and dist[nr][nc] < 0:
                dist[nr][nc] = dist[r][c] + 1
                frontier.append((nr, nc))
    return tuple(tuple(row) for row in dist)


def shortest_moves(maze: Maze, pos: tuple[int, int]) -> list[str]:
    """A shortest move list from ``pos`` to the goal (greedy descent on the distance map)."""
    moves = []
    while pos != maze.goal:
        for name, (dr, dc) in MOVES.items():
            nxt = (pos[0] + dr, pos[1] + dc)
            if maze.open(*nxt) and maze.dist(nxt) == maze.dist(pos) - 1:
                moves.append(name)
                pos = nxt
                break
    return moves
