"""sokoban_v0: generation, solvers, splits, move mechanics and the reward of each role."""

from __future__ import annotations

import copy
import time

import pytest

import pettingllm_envs
from pettingllm_envs.planning import moves as shared_moves
from pettingllm_envs.planning import plan_path
from pettingllm_envs.planning.sokoban import SokobanConfig, raw_env, read_board, scripted_policy
from pettingllm_envs.planning.sokoban_board import Level, board_text, push_distances, reverse_play, solve
from pettingllm_envs.testing import check_split_disjointness, check_truncation

HEADER = "Board (0 rows x 0 cols; legend):"

#: Player left of a box, goal two cells right of it: optimal "RR"; pushing the box down deadlocks it.
LINE = ["#######", "#-----#", "#@$-.-#", "#-----#", "#######"]
#: Two boxes in a row: pushing right drives the first box into the second.
TWO_BOXES = ["#######", "#-----#", "#@$$.-#", "#---.-#", "#######"]
#: A wall right of the box: pushing right is illegal, going around solves it.
WALLED = ["#######", "#-----#", "#-----#", "#@$#.-#", "#-----#", "#-----#", "#######"]


def make_level(rows: list[str]) -> Level:
    grid, goals, boxes, player = read_board(HEADER + "\n" + "\n".join(rows))
    solution = solve(grid, goals, boxes, player, node_limit=100_000)
    assert solution is not None
    return Level(grid, goals, boxes, player, solution, push_distances(grid, goals))


def env_on(rows: list[str], **config) -> raw_env:
    """An env in its first turn on a hand-made level."""
    env = raw_env(**config)
    env.reset(seed=0)
    env.instance = make_level(rows)
    env.start_episode(env.instance)
    return env


def tool_program(moves: str) -> str:
    return f"```python\nprint('MOVES: {moves}')\n```"


def planner_step(env: raw_env, moves: str) -> dict:
    env.step(tool_program(moves))
    env.step(f"MOVES: {moves}")
    return env.infos["planner"]["last_action"]


def replay(level: Level, solution: str) -> bool:
    env = raw_env()
    env.reset(seed=0)
    env.instance = level
    env.start_episode(level)
    sim = env._simulate(list(solution))
    return sim.illegal is None and sim.deadlock is None and set(sim.boxes) == set(level.goals)


def test_instances_are_solvable_and_the_solver_confirms_the_optimum():
    env = raw_env(rows=7, cols=8, num_boxes=2, min_moves=6, max_moves=30)
    for index in range(60):
        env.reset(seed=index)
        level = env.instance
        assert len(level.grid) == 7 and len(level.grid[0]) == 8
        assert len(level.boxes) == len(level.goals) == 2
        assert all(level.grid[0][c] == "#" and level.grid[-1][c] == "#" for c in range(8))
        assert 6 <= level.optimal <= 30
        assert set(level.boxes) != set(level.goals)
        assert not any(level.is_dead(box) for box in level.boxes)
        forward = solve(level.grid, level.goals, level.boxes, level.player, node_limit=1_000_000)
        assert forward is not None and len(forward) == level.optimal
        assert replay(level, level.solution) and replay(level, forward)
        assert not replay(level, level.solution[:-1])


def test_reverse_play_distances_match_the_forward_solver():
    level = make_level(TWO_BOXES)
    solutions = reverse_play(level.grid, level.goals, node_limit=100_000)
    assert len(solutions[(level.player, level.boxes)]) == level.optimal
    for (player, boxes), moves in list(solutions.items())[::7]:
        assert len(solve(level.grid, level.goals, boxes, player, node_limit=100_000)) == len(moves)


def test_unsolvable_board_and_node_limit():
    level = make_level(LINE)
    dead_box = ((3, 1),)  # bottom-left corner
    assert solve(level.grid, level.goals[:1], dead_box, (1, 1), node_limit=100_000) is None
    big = raw_env(rows=8, cols=8, num_boxes=3, solver_node_limit=20_000)
    big.reset(seed=0)
    hard = big.instance
    assert solve(hard.grid, hard.goals, hard.boxes, hard.player, node_limit=10) is None


def test_push_distances_mark_corners_and_goalless_walls_dead():
    level = make_level(LINE)
    assert level.push_distance[2][4] == 0 and level.push_distance[2][2] == 2
    for cell in [(1, 1), (1, 5), (3, 1), (3, 5), (1, 3), (3, 3)]:
        assert level.is_dead(cell), cell
    assert not level.is_dead((2, 3))


def test_generation_is_fast_and_deterministic():
    env = raw_env()
    start = time.perf_counter()
    for index in range(50):
        env.reset(seed=index)
    assert time.perf_counter() - start < 10.0  # measured ~3 ms per default instance
    env.reset(seed=3)
    first = env.instance
    env.reset(seed=3)
    assert env.instance == first


def test_splits_are_disjoint_and_keys_canonical():
    env = raw_env()
    check_split_disjointness(env, 200)
    level = make_level(LINE)
    moved = Level(level.grid, level.goals, level.boxes, (3, 5), level.solution, level.push_distance)
    assert env.instance_key(moved) == env.instance_key(level)


def test_config_validation():
    with pytest.raises(ValueError):
        SokobanConfig(rows=3).validate()
    with pytest.raises(ValueError):
        SokobanConfig(rows=4, cols=4, num_boxes=2).validate()
    with pytest.raises(ValueError):
        SokobanConfig(min_moves=10, max_moves=5).validate()
    with pytest.raises(TypeError):
        raw_env(no_such_option=1)


def test_move_vocabulary_is_shared_with_plan_path():
    from pettingllm_envs.planning import sokoban, sokoban_board

    assert sokoban.apply_move_action is shared_moves.apply_move_action is plan_path.apply_move_action
    assert sokoban_board.MOVES is plan_path.MOVES is shared_moves.MOVES


@pytest.mark.parametrize("env_id", ["plan_path_v0", "sokoban_v0"])
def test_both_move_envs_penalise_bad_actions_the_same_way(env_id):
    """The move-team protocol (planning.moves.apply_move_action): a tool program that fails,
    one whose output holds no moves, a reply without code and a planner reply without a
    ``MOVES:`` line each get the same penalty and reason in both envs; nothing moves."""
    def first_action(agent_text: dict[str, str]) -> dict[str, dict]:
        env = pettingllm_envs.make(env_id, split="test").unwrapped
        env.reset(seed=0)
        start = copy.deepcopy(env)
        results = {}
        for agent in ("tool", "planner"):
            env.step(agent_text[agent])
            results[agent] = env.infos[agent]["last_action"]
        state = ("position",) if env_id == "plan_path_v0" else ("player", "boxes")
        assert all(getattr(env, name) == getattr(start, name) for name in state)
        return results

    cfg = pettingllm_envs.make(env_id).unwrapped.config
    failed = first_action({"tool": "```python\nraise SystemExit(3)\n```", "planner": "I would go right"})
    silent = first_action({"tool": "```python\nprint('no moves here')\n```", "planner": "no code, no moves"})
    assert failed["tool"]["reward_local"] == -cfg.tool_error_penalty and "failed" in failed["tool"]["invalid_reason"]
    assert silent["tool"]["reward_local"] == -cfg.format_penalty
    assert silent["tool"]["invalid_reason"].startswith("program output: unknown move")
    for planner in (failed["planner"], silent["planner"]):
        assert planner["reward_local"] == -cfg.format_penalty and "MOVES:" in planner["invalid_reason"]
        assert not planner["valid"]


def test_optimal_solve_partial_progress_and_rewards():
    env = env_on(LINE)
    last = planner_step(env, "R")
    assert last["reward_local"] == pytest.approx(0.5) and last["reward_global"] == 0.0
    assert env.boxes == ((2, 3),) and not env.terminations["planner"]
    env = env_on(LINE)
    last = planner_step(env, "RR")
    assert last["reward_local"] == pytest.approx(1.0) and last["reward_global"] == pytest.approx(1.0)
    assert env.terminations["planner"] and env.infos["planner"]["success"] and env.infos["tool"]["success"]


def test_wasted_moves_cost_local_and_global_reward():
    env = env_on(LINE)
    last = planner_step(env, "DURR")
    assert env.is_success()
    assert last["reward_local"] == pytest.approx(1.0 - 0.5 * 2 / 2)
    assert last["reward_global"] == pytest.approx(0.7 + 0.3 * 2 / 4)
    assert "2 suffice" in last["invalid_reason"] and last["valid"]


def test_waste_is_measured_from_the_current_state():
    env = env_on(LINE)
    planner_step(env, "R")
    env.step(tool_program("DUR"))
    tool = env.infos["tool"]["last_action"]
    assert tool["reward_local"] == pytest.approx(0.5 - 0.5 * 2 / 2)


def test_illegal_moves_stop_and_are_explained():
    env = env_on(WALLED)
    last = planner_step(env, "L R")
    assert not last["valid"] and "walks into a wall" in last["invalid_reason"]
    assert last["parsed"]["applied"] == 0 and last["reward_local"] == pytest.approx(-0.2)
    env = env_on(WALLED)
    last = planner_step(env, "R")
    assert "pushes the box at (3, 2) into a wall" in last["invalid_reason"]
    assert env.player == (3, 1) and env.boxes == ((3, 2),)
    env = env_on(TWO_BOXES)
    last = planner_step(env, "RU")
    assert "into another box" in last["invalid_reason"] and last["parsed"]["applied"] == 0


def test_deadlock_is_penalised_and_ends_the_episode():
    env = env_on(LINE)
    last = planner_step(env, "URDRR")
    assert last["parsed"]["deadlock"] == [3, 2] and last["parsed"]["applied"] == 3
    assert last["reward_local"] == pytest.approx(-0.3) and "deadlock" in last["invalid_reason"]
    assert all(env.terminations.values()) and not env.infos["planner"]["success"]
    assert "deadlocked" in env.observe("tool")
    env = env_on(LINE, end_on_deadlock=False)
    planner_step(env, "URD")
    assert not any(env.terminations.values()) and env.deadlock == (3, 2)
    last = planner_step(env, "L")
    assert env.deadlock == (3, 2) and last["reward_local"] == pytest.approx(0.0)


def test_tool_is_simulated_on_a_copy_and_scored():
    rewards = {}
    for name, action in {
        "optimal": tool_program("RR"),
        "partial": tool_program("R"),
        "crash": "```python\nraise RuntimeError('boom')\n```",
        "prose": "push the box right twice",
    }.items():
        env = env_on(LINE)
        env.step(action)
        assert env.player == (2, 1) and env.boxes == ((2, 2),)
        rewards[name] = env.infos["tool"]["last_action"]
    assert rewards["optimal"]["reward_local"] == pytest.approx(1.0)
    assert rewards["optimal"]["parsed"]["simulated"]["boxes"] == [[2, 4]]
    assert rewards["optimal"]["reward_local"] > rewards["partial"]["reward_local"] > 0
    assert rewards["crash"]["reward_local"] == pytest.approx(-0.5) and "failed" in rewards["crash"]["invalid_reason"]
    assert rewards["prose"]["reward_local"] == pytest.approx(-0.5)
    assert "code block" in rewards["prose"]["invalid_reason"]


def test_planner_sees_the_tools_output_of_the_same_turn():
    env = env_on(LINE)
    env.step("```python\nprint('MOVES: R')\nprint('marker-from-tool-42')\n```")
    assert "marker-from-tool-42" not in env.observe("tool")
    view = env.observe("planner")
    assert "This turn the tool agent wrote" in view and "marker-from-tool-42" in view
    env.step("MOVES: R")
    assert "turn 1, planner: moves R" in env.observe("tool")


def test_board_round_trips_through_the_observation():
    env = raw_env(num_boxes=3, rows=6, cols=7)
    for index in range(20):
        env.reset(seed=index)
        level = env.instance
        board = read_board(str(env.observe("planner")))
        assert board == (level.grid, level.goals, level.boxes, level.player)
        assert board_text(*board) in env.observe("tool")


def test_oracle_answers_with_an_optimal_solution():
    env = raw_env(split="test")
    for index in range(20):
        env.reset(seed=index)
        action = scripted_policy(str(env.observe("tool")), "tool", env.infos["tool"])
        env.step(action)
        assert env.infos["tool"]["last_action"]["reward_local"] == pytest.approx(1.0)
        action = scripted_policy(str(env.observe("planner")), "planner", env.infos["planner"])
        assert len(action.split()) - 1 == env.instance.optimal
        env.step(action)
        assert env.is_success()
    assert scripted_policy("no board here", "planner", {}) == "MOVES: U"


def test_truncation_at_max_turns_and_alpha():
    check_truncation(pettingllm_envs.make("sokoban_v0", max_turns=2), by_truncation=True)
    env = env_on(LINE, alpha=0.25)
    last = planner_step(env, "RR")
    assert last["reward"] == pytest.approx(0.25 * last["reward_global"] + last["reward_local"])


def test_ending_the_episode_by_a_deadlock_earns_less_than_waiting():
    """Exit early: deadlocking a box on purpose ends the episode, but costs more than walking
    about without pushing (free) until truncation, so a failing policy gains nothing by it."""
    deadlocked, waited = env_on(LINE), env_on(LINE)
    deadlocked.step(tool_program("L"))
    deadlocked.step("MOVES: URD")
    total_deadlocked = deadlocked.infos["planner"]["last_action"]["reward"]
    total_waited = 0.0
    while not (waited.terminations["planner"] or waited.truncations["planner"]):
        waited.step(tool_program("L"))
        waited.step("MOVES: U D")
        total_waited += waited.infos["planner"]["last_action"]["reward"]
    assert all(deadlocked.terminations.values())
    assert total_deadlocked < total_waited <= 0.0
