"""plan_path_v0: generation, splits and the reward of each role."""

from __future__ import annotations

import pytest

from pettingllm_envs.planning.moves import parse_moves
from pettingllm_envs.planning.plan_path import PlanPathConfig, bfs_distances, raw_env, shortest_moves
from pettingllm_envs.testing import check_reset_repeats, check_split_disjointness, check_truncation


def fresh(seed: int = 0, **config) -> raw_env:
    env = raw_env(**config)
    env.reset(seed=seed)
    return env


def tool_program(moves: str) -> str:
    return f"```python\nprint('MOVES: {moves}')\n```"


def test_instances_are_reachable_and_respect_min_distance():
    env = raw_env(rows=7, cols=9, obstacle_density=0.35, min_distance=4)
    for index in range(100):
        env.reset(seed=index)
        maze = env.instance
        assert len(maze.grid) == 7 and len(maze.grid[0]) == 9
        assert maze.shortest >= 4
        assert bfs_distances(maze.grid, maze.goal)[maze.start[0]][maze.start[1]] == maze.shortest
        assert len(shortest_moves(maze, maze.start)) == maze.shortest


def test_splits_are_disjoint_and_deterministic():
    env = raw_env()
    check_split_disjointness(env, 300)
    check_reset_repeats(env, 3)


def test_config_validation():
    with pytest.raises(ValueError):
        PlanPathConfig(obstacle_density=0.9).validate()
    with pytest.raises(ValueError):
        raw_env(max_turns=0)
    with pytest.raises(TypeError):
        raw_env(no_such_option=1)


@pytest.mark.parametrize(
    ("text", "prefix", "expected"),
    [
        ("MOVES: U D L R", True, list("UDLR")),
        ("thinking...\n**Moves:** up, right, RIGHT", True, list("URR")),
        ("moves: UURRD", True, list("UURRD")),
        ("MOVES: ['U', 'R']", True, list("UR")),
        ("no answer", True, None),
        ("MOVES: U X", True, None),
        ("MOVES:", True, None),
        ("R R D", False, list("RRD")),
    ],
)
def test_parse_moves(text, prefix, expected):
    assert parse_moves(text, require_prefix=prefix)[0] == expected


def test_planner_reward_orders_optimal_over_wasteful_over_illegal():
    env = fresh(4)
    optimal = "".join(shortest_moves(env.instance, env.position))
    scores = {}
    for name, moves in {"optimal": optimal, "first_half": optimal[: len(optimal) // 2]}.items():
        env = fresh(4)
        env.step(tool_program(optimal))
        env.step(f"MOVES: {moves}")
        scores[name] = env.infos["planner"]["last_action"]
    assert scores["optimal"]["reward_global"] == pytest.approx(1.0)
    assert scores["optimal"]["reward_local"] == pytest.approx(1.0)
    assert scores["optimal"]["reward"] > scores["first_half"]["reward"] > 0
    assert env.is_success() is False


def test_illegal_move_stops_and_is_penalised():
    env = fresh(6)
    maze = env.instance
    r, c = env.position
    blocked = next(m for m, (dr, dc) in {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}.items()
                   if not maze.open(r + dr, c + dc)) if any(
        not maze.open(r + dr, c + dc) for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))) else None
    if blocked is None:
        pytest.skip("start cell has no blocked neighbour in this instance")
    env.step(tool_program(blocked))
    tool = env.infos["tool"]["last_action"]
    assert not tool["valid"] and "wall" in tool["invalid_reason"]
    env.step(f"MOVES: {blocked} {blocked}")
    planner = env.infos["planner"]["last_action"]
    assert planner["parsed"]["applied"] == 0 and env.position == maze.start
    assert planner["reward_local"] == pytest.approx(-env.config.illegal_move_penalty)


def test_tool_reward_is_simulated_and_does_not_move_the_walker():
    env = fresh(8)
    optimal = "".join(shortest_moves(env.instance, env.position))
    env.step(tool_program(optimal))
    assert env.position == env.instance.start
    good = env.infos["tool"]["last_action"]["reward_local"]
    env = fresh(8)
    env.step(tool_program(optimal[:1]))
    partial = env.infos["tool"]["last_action"]["reward_local"]
    env = fresh(8)
    env.step("```python\nraise RuntimeError('boom')\n```")
    failed = env.infos["tool"]["last_action"]
    env = fresh(8)
    env.step("I would go right")
    unformatted = env.infos["tool"]["last_action"]
    assert good == pytest.approx(1.0)
    assert good > partial > 0 > failed["reward_local"]
    assert "failed" in failed["invalid_reason"]
    assert unformatted["reward_local"] == -env.config.format_penalty
    assert "code block" in unformatted["invalid_reason"]


def test_planner_sees_the_tools_output_of_the_same_turn():
    env = fresh(9)
    env.step("```python\nprint('MOVES: U')\nprint('marker-from-tool-42')\n```")
    assert "marker-from-tool-42" not in env.observe("tool")
    view = env.observe("planner")
    assert "print('marker-from-tool-42')" in view
    assert "This turn the tool agent wrote" in view


def test_truncation_at_max_turns_and_success_flag():
    check_truncation(raw_env(max_turns=2), by_truncation=True)


def test_alpha_weights_the_global_reward():
    env = fresh(4, alpha=0.25)
    optimal = "".join(shortest_moves(env.instance, env.position))
    env.step(tool_program(optimal))
    env.step(f"MOVES: {optimal}")
    last = env.infos["planner"]["last_action"]
    assert last["reward"] == pytest.approx(0.25 * last["reward_global"] + last["reward_local"])
    assert env.terminations["planner"] and env.infos["planner"]["success"]
