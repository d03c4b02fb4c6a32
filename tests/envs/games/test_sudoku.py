"""sudoku_v0: solver, generator, splits, parsing and the reward of each role."""

from __future__ import annotations

import random
import time

import pytest

import pettingllm_envs
from pettingllm_envs.games.sudoku import SudokuConfig, parse_answer, raw_env
from pettingllm_envs.games.sudoku_board import BOX, count_solutions, generate_puzzle, solve
from pettingllm_envs.testing import check_reset_repeats, check_split_disjointness

# A well-known 9x9 puzzle with a unique solution (30 givens).
CLASSIC = tuple(int(ch) for ch in (
    "530070000600195000098000060800060003400803001700020006060000280000419005000080079"
))


def is_valid_solution(grid: tuple[int, ...], size: int) -> bool:
    box_rows, box_cols = BOX[size]
    full = set(range(1, size + 1))
    rows = [set(grid[r * size:(r + 1) * size]) for r in range(size)]
    cols = [{grid[r * size + c] for r in range(size)} for c in range(size)]
    boxes = [
        {grid[(br + a) * size + bc + b] for a in range(box_rows) for b in range(box_cols)}
        for br in range(0, size, box_rows) for bc in range(0, size, box_cols)
    ]
    return all(unit == full for unit in rows + cols + boxes)


def fresh(seed: int = 0, **config) -> raw_env:
    env = raw_env(**config)
    env.reset(seed=seed)
    return env


def missing(env: raw_env) -> list[tuple[int, int, int]]:
    size = env.instance.size
    return [(i // size + 1, i % size + 1, v) for i, v in enumerate(env.instance.solution) if not env.board[i]]


def place(triples) -> str:
    return "PLACE: " + "; ".join(f"{r} {c} {v}" for r, c, v in triples)


# ---------------------------------------------------------------- solver
def test_solver_solves_and_counts():
    solution = solve(CLASSIC, 9)
    assert solution is not None and is_valid_solution(solution, 9)
    assert all(g in (0, s) for g, s in zip(CLASSIC, solution, strict=True))
    assert count_solutions(CLASSIC, 9) == 1
    assert count_solutions((0,) * 16, 4) == 2  # stops at the limit
    assert count_solutions((0,) * 16, 4, limit=1000) == 288  # every 4x4 sudoku
    assert count_solutions((1, 1) + (0,) * 14, 4) == 0  # two equal givens in a row
    assert solve((1, 1) + (0,) * 14, 4) is None


def test_removing_a_needed_given_breaks_uniqueness():
    puzzle = generate_puzzle(random.Random(3), 9, 30)
    broken = sum(count_solutions((*puzzle.givens[:i], 0, *puzzle.givens[i + 1:]), 9) > 1
                 for i in range(81) if puzzle.givens[i])
    assert broken > 0  # the generator stops only when removals start to matter


@pytest.mark.parametrize(("size", "givens"), [(4, 4), (4, 6), (4, 10), (9, 24), (9, 32), (9, 45)])
def test_generated_puzzles_are_unique_and_have_exactly_the_givens(size, givens):
    for seed in range(8):
        puzzle = generate_puzzle(random.Random(seed), size, givens)
        assert len(puzzle.givens) == size * size
        assert size * size - puzzle.empty_cells == givens
        assert is_valid_solution(puzzle.solution, size)
        assert all(g in (0, s) for g, s in zip(puzzle.givens, puzzle.solution, strict=True))
        assert count_solutions(puzzle.givens, size) == 1


def test_9x9_generator_is_fast():
    start = time.perf_counter()
    for seed in range(20):
        generate_puzzle(random.Random(seed), 9, 32)
    ms = (time.perf_counter() - start) / 20 * 1000
    print(f"9x9 with 32 givens: {ms:.1f} ms per puzzle")
    assert ms < 500  # measured about 15 ms on one core; generous for shared CI machines


def test_splits_are_disjoint_and_deterministic():
    env = raw_env(size=4)
    assert len(check_split_disjointness(env, 200)["test"]) > 50  # many distinct test puzzles, not one repeated
    check_reset_repeats(env, 7)


def test_config_validation():
    assert SudokuConfig(size=4).num_givens == 6 and SudokuConfig().num_givens == 32
    for bad in ({"size": 6}, {"size": 9, "givens": 17}, {"size": 4, "givens": 16}, {"violation_penalty": -1}):
        with pytest.raises(ValueError):
            SudokuConfig(**bad).validate()


# --------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    ("text", "marker", "expected"),
    [
        ("PLACE: 1 2 3; 4 4 1", True, [(1, 2, 3), (4, 4, 1)]),
        ("thinking...\n**Placements:** (1,2)=3, r4c4=1", True, [(1, 2, 3), (4, 4, 1)]),
        ("GRID:\n12|34\n3 4 1 2\n--+--\n2 1 4 3\n4 3 . .", True,
         [(1, 1, 1), (1, 2, 2), (1, 3, 3), (1, 4, 4), (2, 1, 3), (2, 2, 4), (2, 3, 1), (2, 4, 2),
          (3, 1, 2), (3, 2, 1), (3, 3, 4), (3, 4, 3), (4, 1, 4), (4, 2, 3)]),
        ("PLACE: 1 2", True, None),
        ("GRID:\n1234\n3412", True, None),
        ("1 2 3", True, None),
        ("1 2 3\n2 3 4", False, [(1, 2, 3), (2, 3, 4)]),
        ("1234\n3412\n2143\n4321", False, [(1, 1, 1), (1, 2, 2), (1, 3, 3), (1, 4, 4), (2, 1, 3), (2, 2, 4),
                                          (2, 3, 1), (2, 4, 2), (3, 1, 2), (3, 2, 1), (3, 3, 4), (3, 4, 3),
                                          (4, 1, 4), (4, 2, 3), (4, 3, 2), (4, 4, 1)]),
        ("no numbers", False, None),
    ],
)
def test_parse_answer(text, marker, expected):
    assert parse_answer(text, 4, require_marker=marker)[0] == expected


# --------------------------------------------------------------- rewards
def test_planner_solving_in_one_action_gets_full_rewards():
    env = fresh(1, size=4)
    env.step("no code")
    env.step(place(missing(env)))
    last = env.infos["planner"]["last_action"]
    assert last["valid"] and last["reward_global"] == pytest.approx(1.0)
    assert last["reward_local"] == pytest.approx(1.0)
    assert env.terminations["planner"] and all(info["success"] for info in env.infos.values())


def test_partial_progress_is_rewarded_in_proportion():
    env = fresh(2)
    todo = missing(env)
    env.step("no code")
    env.step(place(todo[:10]))
    last = env.infos["planner"]["last_action"]
    share = 10 / len(todo)
    assert last["reward_local"] == pytest.approx(share)
    assert last["reward_global"] == pytest.approx(0.7 * share)
    assert not env.is_success() and sum(1 for v in env.board if v) == 32 + 10


def test_each_rule_violation_is_rejected_penalised_and_explained():
    env = fresh(3, size=4)
    puzzle = env.instance
    given = next(i for i in range(16) if puzzle.givens[i])
    empty = next(i for i in range(16) if not puzzle.givens[i])
    r, c = divmod(empty, 4)
    # a value that already stands in the empty cell's row: a conflict
    row_values = [v for v in puzzle.givens[r * 4:(r + 1) * 4] if v]
    wrong_values = [v for v in range(1, 5) if v != puzzle.solution[empty]]
    env.step("no code")
    cases = [
        (5, 1, 1),  # out of range
        (given // 4 + 1, given % 4 + 1, puzzle.givens[given] % 4 + 1),  # overwrites a given
    ]
    if row_values:
        cases.append((r + 1, c + 1, row_values[0]))
    env.step(place(cases))
    last = env.infos["planner"]["last_action"]
    violations = last["parsed"]["violations"]
    assert not last["valid"] and len(violations) == len(cases)
    assert "out of range" in violations[0] and "given" in violations[1]
    if row_values:
        assert "conflicts" in violations[2]
    assert last["reward_local"] == pytest.approx(-0.1 * len(cases))
    assert env.board == puzzle.givens  # nothing was applied
    # any wrong value is rejected, whichever rule it breaks
    for value in wrong_values:
        env = fresh(3, size=4)
        env.step("no code")
        env.step(place([(r + 1, c + 1, value)]))
        assert env.infos["planner"]["last_action"]["invalid_reason"] and env.board == puzzle.givens


def test_wrong_but_legal_placement_is_a_dead_end_violation():
    for seed in range(30):
        env = fresh(seed)
        puzzle = env.instance
        for index in range(81):
            if puzzle.givens[index]:
                continue
            r, c = divmod(index, 9)
            near = {puzzle.givens[r * 9 + k] for k in range(9)} | {puzzle.givens[k * 9 + c] for k in range(9)}
            br, bc = r - r % 3, c - c % 3
            near |= {puzzle.givens[(br + a) * 9 + bc + b] for a in range(3) for b in range(3)}
            legal_wrong = [v for v in range(1, 10) if v not in near and v != puzzle.solution[index]]
            if legal_wrong:
                env.step("no code")
                env.step(place([(r + 1, c + 1, legal_wrong[0])]))
                last = env.infos["planner"]["last_action"]
                assert "dead end" in last["invalid_reason"]
                assert last["reward_local"] == pytest.approx(-0.1)
                return
    pytest.fail("no legal-but-wrong placement found")


def test_violation_penalty_is_capped_and_repeats_are_free():
    env = fresh(4, size=4)
    env.step("no code")
    env.step("PLACE: " + "; ".join(["9 9 9"] * 30))
    assert env.infos["planner"]["last_action"]["reward_local"] == pytest.approx(-1.0)
    env = fresh(4, size=4)
    env.step("no code")
    full = "\n".join(" ".join(str(v) for v in env.instance.solution[r * 4:(r + 1) * 4]) for r in range(4))
    env.step(f"GRID:\n{full}")  # givens repeated unchanged cost nothing
    last = env.infos["planner"]["last_action"]
    assert last["valid"] and last["parsed"]["unchanged"] == 6 and last["reward_local"] == pytest.approx(1.0)


def test_tool_is_scored_on_a_copy_and_its_failures_are_penalised():
    env = fresh(5, size=4)
    program = "```python\n" + "\n".join(f"print({r}, {c}, {v})" for r, c, v in missing(env)) + "\n```"
    env.step(program)
    good = env.infos["tool"]["last_action"]
    assert good["valid"] and good["reward_local"] == pytest.approx(1.0)
    assert env.board == env.instance.givens  # the real board did not change
    assert good["reward_global"] == pytest.approx(0.0)
    env = fresh(5, size=4)
    env.step("```python\nraise RuntimeError('boom')\n```")
    failed = env.infos["tool"]["last_action"]
    assert not failed["valid"] and "failed" in failed["invalid_reason"]
    assert failed["reward_local"] == -env.config.tool_error_penalty
    env = fresh(5, size=4)
    env.step("I would place a 3")
    assert env.infos["tool"]["last_action"]["reward_local"] == -env.config.format_penalty


def test_planner_sees_the_tools_output_of_the_same_turn():
    env = fresh(6, size=4)
    env.step("```python\nprint('1 1 1')\nprint('marker-from-tool-42')\n```")
    assert "marker-from-tool-42" not in env.observe("tool")
    view = env.observe("planner")
    assert "marker-from-tool-42" in view and "This turn the tool agent wrote" in view


def test_truncation_and_alpha():
    env = pettingllm_envs.make("sudoku_v0", size=4, max_turns=2, alpha=0.25)
    env.reset(seed=1)
    raw = env.unwrapped
    todo = missing(raw)
    env.step("nothing")
    env.step(place(todo[:2]))
    last = env.infos["planner"]["last_action"]
    assert last["reward"] == pytest.approx(0.25 * last["reward_global"] + last["reward_local"])
    env.step("nothing")
    env.step("nothing")
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert all(info["success"] is False for info in env.infos.values())


@pytest.mark.parametrize("text", [
    "PLACE: 1 1 ٣",  # Arabic-Indic three: \d and int() accept it
    "PLACE: 1 1 ³",  # superscript three: str.isdigit() accepts it, int() raises
    "GRID:\n1 2 3 ³\n. . . .\n. . . .\n. . . .",
    "PLACE: 1 1 " + "9" * 5000,  # int() of more than 4300 digits raises
    "GRID:\n" + "\n".join(["9" * 5000] * 4),
])
def test_non_ascii_digits_and_huge_numbers_are_answers_not_crashes(text):
    env = fresh(1, size=4)
    env.step("no code")
    env.step(text)
    last = env.infos["planner"]["last_action"]
    assert last["reward_local"] < 0 and not last["valid"]
    assert env.board == env.instance.givens


def test_one_wrong_placement_rejects_the_whole_answer():
    env = fresh(2)
    todo = missing(env)
    r, c, v = todo[0]
    env.step("no code")
    env.step(place([*todo[1:10], (r, c, v % 9 + 1)]))
    last = env.infos["planner"]["last_action"]
    assert not last["valid"] and "none of this action was applied" in last["invalid_reason"]
    assert last["reward_local"] < 0 and env.board == env.instance.givens


def test_the_tool_is_credited_for_each_cell_once():
    env = fresh(5, size=4)
    program = "```python\n" + "\n".join(f"print({r}, {c}, {v})" for r, c, v in missing(env)) + "\n```"
    env.step(program)
    env.step("PLACE: nothing")
    env.step(program)
    assert env.infos["tool"]["last_action"]["reward_local"] == 0.0
    assert env.infos["tool"]["last_action"]["parsed"]["credited"] == 0
