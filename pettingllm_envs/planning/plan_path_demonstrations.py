"""``plan_path_v0``'s demonstrations (:mod:`pettingllm_envs.core.tool_demonstrations`): the
tool's program is the grid copied verbatim followed by a breadth-first search
(:data:`MAZE_SOLVER`, 400 bytes in all on a 3x3 maze); a mis-copied cell is a free cell copied
as a wall or as the goal, or a wall as free or as the goal.

What the program prints is predicted with the env's own search (:mod:`pettingllm_envs.planning.maze`):
a BFS from the walker with the directions tried in the order U D L R finds the first shortest
path in that order, which is the one greedy descent on the distances to the goal takes.
"""

from __future__ import annotations

import random
import re
from typing import Any

from pettingllm_envs.core.tool_demonstrations import TeamAnswers, ToolTeamOracle, miscopied
from pettingllm_envs.planning.maze import Maze, bfs_distances, shortest_moves
from pettingllm_envs.planning.moves import MOVES

#: The plan-path tool's program after the grid literal: a breadth-first search.
MAZE_SOLVER = (
    "R,C=len(G),len(G[0])\n"
    "s=[(r,c)for r in range(R)for c in range(C)if G[r][c]=='A'][0]\n"
    "P={s:''};Q=[s]\n"
    "for r,c in Q:\n"
    " for d,a,b in('U',-1,0),('D',1,0),('L',0,-1),('R',0,1):\n"
    "  n=(r+a,c+b)\n"
    "  if 0<=n[0]<R and 0<=n[1]<C and G[n[0]][n[1]]!='#'and n not in P:P[n]=P[(r,c)]+d;Q.append(n)\n"
    "print('MOVES:',' '.join(P[[(r,c)for r in range(R)for c in range(C)if G[r][c]=='G'][0]]))"
)


def solution(env: Any) -> list[str]:
    """The oracle's moves: a shortest path from the walker to the goal."""
    return shortest_moves(env.instance, env.position)


def corrupt_moves(moves: list[str], rng: random.Random, env: Any) -> list[str]:
    """The moves with one of them changed to another direction."""
    changed = list(moves)
    i = rng.randrange(len(changed))
    changed[i] = rng.choice([d for d in MOVES if d != changed[i]])
    return changed


def printed_moves(printed: str) -> list[str]:
    """The moves of a printed ``MOVES: U R`` line ([] unless the output is exactly that)."""
    return printed.split()[1:] if re.fullmatch(r"MOVES:( [UDLR])+", printed) else []


def _cell(grid: list[str], mark: str) -> tuple[int, int]:
    return next((r, c) for r, row in enumerate(grid) for c, x in enumerate(row) if x == mark)


def program_prints(grid: list[str]) -> list[str] | None:
    """The moves :data:`MAZE_SOLVER` prints for this grid copy (its rows hold one ``A`` and
    one ``G``), or None when it raises (rows of unequal length, or no path)."""
    if len({len(row) for row in grid}) != 1:
        return None
    start, goal = _cell(grid, "A"), _cell(grid, "G")
    maze = Maze(tuple(grid), start, goal, bfs_distances(tuple(grid), goal))
    return shortest_moves(maze, start) if maze.shortest >= 0 else None


def walk_reaches_goal(grid: list[str], moves: list[str]) -> bool:
    """Whether walking ``moves`` on ``grid`` enters the goal before a wall or the edge stops it."""
    r, c = _cell(grid, "A")
    for move in moves:
        r, c = r + MOVES[move][0], c + MOVES[move][1]
        if not (0 <= r < len(grid) and 0 <= c < len(grid[0])) or grid[r][c] == "#":
            return False
        if grid[r][c] == "G":
            return True
    return False


def board_program(env: Any, rng: random.Random | None) -> tuple[str, list[str], bool] | None:
    """The grid copied into the program, mis-copied when given an rng (see the module docstring)."""
    grid = env.board_text().split("\n")
    printed = program_prints(grid)
    if printed is None:
        return None
    corrupted = False
    if rng is not None:
        cells = [(r, c) for r, row in enumerate(grid) for c, x in enumerate(row) if x in ".#"]

        def miscopy(original: list[str]) -> list[str]:
            r, c = rng.choice(cells)
            cell = rng.choice(".#G".replace(original[r][c], ""))
            changed = [row.replace("G", ".") if cell == "G" else row for row in original]
            changed[r] = changed[r][:c] + cell + changed[r][c + 1:]
            return changed

        grid, printed, corrupted = miscopied(grid, printed, miscopy, program_prints,
                                             lambda wrong: walk_reaches_goal(grid, wrong))
    literal = "\n".join(grid)
    return f"```python\nG='''{literal}'''.split()\n{MAZE_SOLVER}\n```", printed, corrupted


def moves_line(moves: list[str]) -> str:
    """The ``MOVES:`` line of the moves: what the one-line tool program prints and the planner replies."""
    return "MOVES: " + " ".join(moves)


ORACLE = ToolTeamOracle(TeamAnswers(solution=solution, corrupt=corrupt_moves, printed=printed_moves,
                                    tool_output=moves_line, planner_reply=moves_line, board_program=board_program))
