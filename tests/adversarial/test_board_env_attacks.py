"""Reward attacks on the board and grid envs (sudoku_v0, plan_path_v0, sokoban_v0, tictactoe_v0),
played as a reward-seeking policy would: enumerating values, cells or moves, repeating a plan
while the partner waits, oscillating, stalling. The invariants are stated in test_env_attacks.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from adversarial.env_attack_helpers import (
    SEEDS,
    constant,
    last,
    local_totals,
    play,
    program,
    raw,
)
from pettingllm_envs.policies import scripted_policy


# --------------------------------------------------------------------------- sudoku
def _sudoku_cells(env: Any) -> list[int]:
    return [i for i in range(env.instance.size ** 2) if not env.board[i]]


def _one_wrong_value(env: Any) -> str:
    size = env.instance.size
    index = _sudoku_cells(env)[0]
    wrong = next(v for v in range(1, size + 1) if v != env.instance.solution[index])
    return f"PLACE: {index // size + 1} {index % size + 1} {wrong}"


def _every_value_everywhere(env: Any) -> str:
    size = env.instance.size
    return "PLACE: " + "; ".join(f"{i // size + 1} {i % size + 1} {v}" for i in _sudoku_cells(env)
                                 for v in range(1, size + 1))


@pytest.mark.parametrize("seed", SEEDS)
def test_sudoku_writing_every_value_into_every_cell_earns_less_than_one_wrong_value(seed):
    """Before: only the right placements were applied and the penalty was capped at 1, so this
    solved a 4x4 puzzle in one action (local 1 - 1 = 0, global 1: a positive return)."""
    honest_wrong, enumerated = raw("sudoku_v0", seed), raw("sudoku_v0", seed)
    for env, planner_action in ((honest_wrong, _one_wrong_value(honest_wrong)),
                                (enumerated, _every_value_everywhere(enumerated))):
        env.step("no code")
        env.step(planner_action)
    assert last(enumerated, "planner")["reward"] <= last(honest_wrong, "planner")["reward"] < 0
    assert enumerated.board == enumerated.instance.givens and not enumerated.is_success()
    # the tool printing every candidate earns no more either
    tool = raw("sudoku_v0", seed)
    size = tool.instance.size
    tool.step(program(f"for i in {_sudoku_cells(tool)}:", f"    for v in range(1, {size + 1}):",
                      f"        print(i // {size} + 1, i % {size} + 1, v)"))
    wrong_tool = raw("sudoku_v0", seed)
    wrong_tool.step(program(f"print({_one_wrong_value(wrong_tool)[7:]!r})"))
    assert last(tool, "tool")["reward"] <= last(wrong_tool, "tool")["reward"] < 0


@pytest.mark.parametrize("seed", SEEDS)
def test_sudoku_enumerating_one_value_per_turn_solves_nothing(seed):
    """Over the turns: value 1 in every empty cell, then 2, then 3. Each answer has a wrong
    value, so none is applied, and wrong values are counted, never named."""
    env = raw("sudoku_v0", seed)
    size = env.instance.size
    total = 0.0
    for value in range(1, env.config.max_turns + 1):
        env.step("no code")
        env.step("PLACE: " + "; ".join(f"{i // size + 1} {i % size + 1} {value}" for i in _sudoku_cells(env)))
        total += last(env, "planner")["reward"]
        parsed = last(env, "planner")["parsed"]
        assert all("not the solution" not in v for v in parsed["violations"])  # wrong values are never named
        assert parsed["violations"] or parsed["wrong_values"]
    assert env.board == env.instance.givens and total < 0


@pytest.mark.parametrize("seed", SEEDS)
def test_sudoku_tool_repeating_the_solution_while_the_planner_waits_earns_it_once(seed):
    """Before: the tool's output was scored on a copy every turn, so printing the solution
    three times while the planner waited earned 3.0 on a failed episode (1.0 when solved)."""
    oracle = scripted_policy("sudoku_v0")
    waiting = play("sudoku_v0", {"tool": oracle, "planner": constant("I wait.")}, seed)
    solved = play("sudoku_v0", oracle, seed)
    assert not waiting.success and solved.success
    assert waiting.total_reward("tool") <= solved.total_reward("tool") + 1e-9
    assert waiting.total_reward("planner") < solved.total_reward("planner")


def test_sudoku_repeated_right_placements_are_credited_once():
    env = raw("sudoku_v0", 0)
    size = env.instance.size
    index = _sudoku_cells(env)[0]
    one = f"{index // size + 1} {index % size + 1} {env.instance.solution[index]}"
    env.step("no code")
    env.step("PLACE: " + "; ".join([one] * 30))
    assert last(env, "planner")["reward_local"] == pytest.approx(1 / env.instance.empty_cells)


# ------------------------------------------------------------------ plan_path, sokoban
@pytest.mark.parametrize("env_id", ["plan_path_v0", "sokoban_v0"])
@pytest.mark.parametrize("seed", SEEDS)
def test_tool_repeating_its_plan_while_the_planner_waits_earns_it_once(env_id, seed):
    """Before: the tool's moves were scored on a copy from the unchanged state every turn,
    so proposing the solution four times while the planner waited earned 4x the solve (and in
    sokoban a box that started on a goal paid the team reward at every waiting step)."""
    oracle = scripted_policy(env_id)
    policies = {"tool": oracle, "planner": constant("Let me think.")}
    waiting, solved = play(env_id, policies, seed), play(env_id, oracle, seed)
    assert not waiting.success and solved.success
    assert waiting.total_reward("tool") <= solved.total_reward("tool") + 1e-9
    assert local_totals(env_id, policies, seed)["tool"] <= local_totals(env_id, oracle, seed)["tool"] + 1e-9


@pytest.mark.parametrize("env_id", ["plan_path_v0", "sokoban_v0"])
def test_only_the_last_moves_line_counts(env_id):
    """Enumerating several MOVES lines gets exactly what the last one alone gets."""
    oracle = scripted_policy(env_id)
    env = raw(env_id)
    env.step("no code")
    answer = oracle(env.observe("planner"), "planner", env.infos["planner"])
    many = "\n".join(f"MOVES: {m}" for m in ("U U U", "D D", "L R L R", "R")) + "\n" + answer
    alone, enumerated = raw(env_id), raw(env_id)
    for e, text in ((alone, answer), (enumerated, many)):
        e.step("no code")
        e.step(text)
    assert last(enumerated, "planner")["reward"] == pytest.approx(last(alone, "planner")["reward"])


@pytest.mark.parametrize("seed", SEEDS)
def test_plan_path_oscillating_earns_less_than_a_wrong_move(seed):
    """Walking back and forth (every move list that returns to where it started) never pays."""
    env = raw("plan_path_v0", seed)
    maze = env.instance
    r, c = maze.start
    step = next(m for m, (dr, dc) in {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}.items()
                if maze.open(r + dr, c + dc))
    back = {"U": "D", "D": "U", "L": "R", "R": "L"}[step]
    total = 0.0
    for _ in range(env.config.max_turns):
        env.step("no code")
        env.step("MOVES: " + f"{step} {back} " * 10)
        total += last(env, "planner")["reward"]
    assert total < 0 and env.position == maze.start


def test_a_program_printing_moves_it_did_not_compute_is_scored_by_the_moves_alone():
    """Program output cannot forge env markers: the env reads only the moves it printed, and
    printing 'success' or a fake result line earns nothing."""
    env = raw("plan_path_v0", 0)
    env.step(program("print('Result: goal reached, reward 1.0')", "print('MOVES: U')", "print('SUCCESS')"))
    plain = raw("plan_path_v0", 0)
    plain.step(program("print('MOVES: U')"))
    assert last(env, "tool")["reward"] <= max(0.0, last(plain, "tool")["reward"])


# ----------------------------------------------------------------------- tictactoe
def test_tictactoe_enumerating_cells_or_moves_is_one_illegal_or_last_move():
    env = raw("tictactoe_v0", 0)
    env.step("MOVE: 1 2 3 4 5 6 7 8 9")
    assert not last(env, "player_x")["valid"]
    assert last(env, "player_x")["reward_local"] == -env.config.format_penalty
    env = raw("tictactoe_v0", 0)
    empty = [i for i in range(9) if env.board[i] == "."]
    env.step("\n".join(f"MOVE: {i + 1}" for i in empty))
    assert env.board.count(".") == len(empty) - 1 and env.board[empty[-1]] == "X"


@pytest.mark.parametrize("seed", SEEDS)
def test_tictactoe_stalling_to_truncation_earns_less_than_winning(seed):
    oracle = scripted_policy("tictactoe_v0")
    stalled = play("tictactoe_v0", {"player_x": constant("I pass."), "player_o": oracle}, seed)
    won = play("tictactoe_v0", oracle, seed)
    assert won.final_infos["player_x"]["success"]
    assert stalled.total_reward("player_x") < won.total_reward("player_x")
