"""Sudoku's board logic, for ``sudoku_v0``: the grid geometry, a bitmask backtracking
solver (which also counts solutions), the generator of puzzles with a unique solution, and
the all-or-nothing rule that applies a list of placements. Pure functions of immutable
grids; the env module keeps the action format, the rewards and the views.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

#: Box shape (rows, columns) per supported grid size.
BOX = {4: (2, 2), 9: (3, 3)}
#: Default number of givens per size: about the middle of the range a removal pass reaches quickly.
DEFAULT_GIVENS = {4: 6, 9: 32}
#: Fewest givens the generator accepts per size; below this, unique puzzles get rare and slow to find.
MIN_GIVENS = {4: 4, 9: 24}
#: How many full grids the generator tries before giving up on reaching ``givens``.
MAX_GRIDS = 200

Grid = tuple[int, ...]
"""A board in row-major order, ``0`` for an empty cell."""


@functools.cache
def neighbours(size: int) -> tuple[frozenset[int], ...]:
    """For each cell, the other cells that share its row, column or box."""
    units = peers(size)
    return tuple(
        frozenset(other for other in range(size * size) if other != index and set(units[other]) & set(units[index]))
        for index in range(size * size)
    )


@functools.cache
def peers(size: int) -> tuple[tuple[int, ...], ...]:
    """For each cell, the row, column and box index it belongs to (box index = 2 * size + box)."""
    box_rows, box_cols = BOX[size]
    return tuple(
        (index // size, size + index % size,
         2 * size + (index // size) // box_rows * box_rows + (index % size) // box_cols)
        for index in range(size * size)
    )


def _search(grid: Grid, size: int, limit: int, rng: random.Random | None) -> list[Grid]:
    """Up to ``limit`` solutions of ``grid`` by backtracking on bitmasks.

    ``used[u]`` is the set of values (bit ``v``) in unit ``u`` (rows, columns, boxes). The
    next cell is always the one with the fewest candidates, so a forced cell is filled
    before any branching. ``rng`` shuffles the candidate order (used to draw full grids).
    """
    if size not in BOX or len(grid) != size * size:
        raise ValueError(f"expected a {size}x{size} grid of a supported size {sorted(BOX)}")
    units = peers(size)
    used = [0] * (3 * size)
    cells = list(grid)
    empty = []
    for index, value in enumerate(cells):
        if value == 0:
            empty.append(index)
            continue
        if not 1 <= value <= size:
            return []
        bit = 1 << value
        row, col, box = units[index]
        if (used[row] | used[col] | used[box]) & bit:
            return []  # two equal givens in a unit: no solution
        used[row] |= bit
        used[col] |= bit
        used[box] |= bit
    full = sum(1 << v for v in range(1, size + 1))
    solutions: list[Grid] = []

    def recurse(remaining: list[int]) -> bool:
        if not remaining:
            solutions.append(tuple(cells))
            return len(solutions) >= limit
        best_pos, best_mask, best_count = -1, 0, size + 1
        for pos, index in enumerate(remaining):
            row, col, box = units[index]
            mask = full & ~(used[row] | used[col] | used[box])
            count = mask.bit_count()
            if count < best_count:
                best_pos, best_mask, best_count = pos, mask, count
                if count <= 1:
                    break
        if best_count == 0:
            return False
        index = remaining[best_pos]
        rest = remaining[:best_pos] + remaining[best_pos + 1:]
        row, col, box = units[index]
        values = [v for v in range(1, size + 1) if best_mask >> v & 1]
        if rng is not None:
            rng.shuffle(values)
        for value in values:
            bit = 1 << value
            cells[index] = value
            used[row] |= bit
            used[col] |= bit
            used[box] |= bit
            stop = recurse(rest)
            used[row] ^= bit
            used[col] ^= bit
            used[box] ^= bit
            if stop:
                return True
        cells[index] = 0
        return False

    recurse(empty)
    return solutions


def count_solutions(grid: Grid, size: int, limit: int = 2) -> int:
    """How many solutions ``grid`` has, counting no further than ``limit`` (2 decides uniqueness)."""
    return len(_search(grid, size, limit, None))


def solve(grid: Grid, size: int) -> Grid | None:
    """The first solution of ``grid`` in the solver's order, or None when it has none."""
    found = _search(grid, size, 1, None)
    return found[0] if found else None


@dataclass(frozen=True)
class Puzzle:
    """One sudoku problem: the givens (``0`` = empty) and its unique solution."""

    size: int
    givens: Grid
    solution: Grid

    @property
    def empty_cells(self) -> int:
        return self.givens.count(0)


def generate_puzzle(rng: random.Random, size: int, givens: int) -> Puzzle:
    """A puzzle with exactly ``givens`` givens and a unique solution (see the module docstring)."""
    for _ in range(MAX_GRIDS):
        solution = _search((0,) * (size * size), size, 1, rng)[0]
        cells = list(solution)
        order = list(range(size * size))
        rng.shuffle(order)
        remaining = size * size
        for index in order:
            if remaining == givens:
                break
            cells[index] = 0
            if count_solutions(tuple(cells), size) == 1:
                remaining -= 1
            else:
                cells[index] = solution[index]
        if remaining == givens:
            return Puzzle(size, tuple(cells), solution)
    raise RuntimeError(f"no unique {size}x{size} puzzle with {givens} givens in {MAX_GRIDS} grids")


@dataclass(frozen=True)
class Outcome:
    """What a list of placements does to a board: the new board, counts and violations."""

    board: Grid
    """The board after the action: the old one when any placement was rejected."""
    new_cells: frozenset[int]
    """Indices of the cells the action filled (empty when it was rejected)."""
    unchanged: int
    violations: tuple[str, ...]
    """The explained rejections: out of range, overwritten givens, conflicts."""
    wrong_values: int
    """Placements that break no rule but are not the solution's value (counted, never named)."""

    @property
    def rejected(self) -> int:
        return len(self.violations) + self.wrong_values

    @property
    def correct(self) -> int:
        return len(self.new_cells)


def apply_placements(puzzle: Puzzle, board: Grid, placements: list[tuple[int, int, int]]) -> Outcome:
    """Apply ``placements`` in order to ``board``, all or nothing: the new board when every
    placement is right (or already there), else the old board and the rejections."""
    size = puzzle.size
    near = neighbours(size)
    cells = list(board)
    new_cells: set[int] = set()
    unchanged = wrong_values = 0
    violations = []
    for row, col, value in placements:
        where = f"r{row} c{col} = {value}"
        if not (1 <= row <= size and 1 <= col <= size and 1 <= value <= size):
            violations.append(f"{where}: out of range (rows, columns and values are 1..{size})")
            continue
        index = (row - 1) * size + col - 1
        if cells[index] == value:
            unchanged += 1
            continue
        if puzzle.givens[index]:
            violations.append(f"{where}: overwrites the given {puzzle.givens[index]}")
            continue
        clash = next((other for other in sorted(near[index]) if cells[other] == value), None)
        if clash is not None:
            violations.append(f"{where}: conflicts with the {value} at r{clash // size + 1} c{clash % size + 1}")
            continue
        if puzzle.solution[index] != value:
            wrong_values += 1
            continue
        cells[index] = value
        new_cells.add(index)
    if violations or wrong_values:
        return Outcome(board, frozenset(), unchanged, tuple(violations), wrong_values)
    return Outcome(tuple(cells), frozenset(new_cells), unchanged, (), 0)
