"""Reward attacks on the non-code envs, played as a reward-seeking policy would.

Each test is one attack on one role: it asserts the hack earns no more than a trivial
wrong answer (or than the honest solve), and where it was a real hole the comment says
what it earned before the fix. The invariants, per env and role:

* a wrong or empty action never earns more than a correct one;
* no role's return on a failed episode exceeds its return on a solved one (the oracle's);
* repeated or enumerated actions earn no extra credit;
* local rewards stay within the bounds of the env's module docstring (``Reward bounds``).

This file checks them across every env (junk, unclosed blocks, the reward bounds, stalling, failed
against solved episodes); the attacks on one env are in test_board_env_attacks.py (sudoku, plan_path,
sokoban, tictactoe) and test_math_and_research_attacks.py. code_v0 and the sandbox have their own
corpus; tests/adversarial/test_fuzz.py checks that no string makes ``env.step`` raise.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

import pettingllm_envs
from adversarial.env_attack_helpers import (
    CONFIGS,
    NON_CODE_ENVS,
    SEEDS,
    Policy,
    constant,
    last,
    play,
    raw,
    with_role,
)
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.games.sudoku import read_board
from pettingllm_envs.policies import scripted_policy

# ------------------------------------------------------------ every env, every role
JUNK = ["", "   \n\t", "\x00" * 50, "🙂" * 200, "MOVES: MOVE: PLACE: ANSWER: DELEGATE: REPORT: \\boxed{",
        "```python\nprint(1)\n", "```\n```", "9" * 5000]


@pytest.mark.parametrize("env_id", NON_CODE_ENVS)
def test_junk_and_empty_actions_earn_no_more_than_a_wrong_answer_and_stay_in_bounds(env_id):
    """Every role: junk, empty and over-long actions are penalised (never rewarded), and
    the oracle's first action earns at least as much as any of them."""
    env = raw(env_id)
    for agent in env.possible_agents:
        env = raw(env_id)
        while env.agent_selection != agent:  # let the oracle bring the episode to this role's turn
            env.step(scripted_policy(env_id)(env.observe(env.agent_selection), env.agent_selection,
                                              env.infos[env.agent_selection]))
        oracle_action = scripted_policy(env_id)(env.observe(agent), agent, env.infos[agent])
        honest = copy.deepcopy(env)
        honest.step(oracle_action)
        honest_reward = last(honest, agent)["reward_local"]
        for junk in [*JUNK, "x" * (env.config.max_action_chars + 1)]:
            attacked = copy.deepcopy(env)
            attacked.step(junk)
            reward = last(attacked, agent)["reward_local"]
            assert reward <= 0.0, (agent, junk[:30], reward)
            assert reward <= honest_reward
            assert reward >= -max(attacked.config.format_penalty, getattr(attacked.config, "tool_error_penalty", 0))


def test_unclosed_boxed_answer_is_reported_as_unclosed():
    env = raw("math_v0", 0)
    env.step("So the answer is \\boxed{42")
    assert "not closed" in last(env, "reasoner")["invalid_reason"]
    assert last(env, "reasoner")["reward_local"] == -env.config.format_penalty


def test_unclosed_code_block_is_reported_as_unclosed():
    env = raw("plan_path_v0", 0)
    env.step("```python\nprint('MOVES: U')\n")
    assert "not closed" in last(env, "tool")["invalid_reason"]
    env = raw("plan_path_v0", 0)
    env.step("I would go up.")
    assert "no ```python code block" in last(env, "tool")["invalid_reason"]
    for env_id in ("math_v0", "sudoku_v0", "sokoban_v0"):
        env = raw(env_id, 0)
        if env.agent_selection != "tool":
            env.step("\\boxed{0}")
        env.step("```python\nprint(1)\n")
        assert "not closed" in last(env, "tool")["invalid_reason"], env_id
    env = pettingllm_envs.make("code_v0").unwrapped  # the coder's code and the tester's tests
    env.reset(seed=0)
    env.step("```python\ndef f(x):\n    return x\n")
    assert "not closed" in env.infos["coder"]["last_action"]["invalid_reason"]
    env.step("```python\nassert f(1) == 1\n")
    assert "not closed" in env.infos["tester"]["last_action"]["invalid_reason"]


# ------------------------------------------------------------------- reward bounds
def _bounds(env_id: str, env: Any) -> dict[str, tuple[float, float]]:
    """Per role, the local-reward bounds stated in the env's module docstring."""
    cfg = env.config
    penalties = [cfg.format_penalty, getattr(cfg, "tool_error_penalty", 0.0)]
    if env_id == "sudoku_v0":
        low = max(*penalties, cfg.max_violation_penalty)
        return dict.fromkeys(env.possible_agents, (-low, 1.0))
    if env_id == "plan_path_v0":
        maze = env.instance
        low = cfg.illegal_move_penalty + cfg.waste_penalty * len(maze.grid) * len(maze.grid[0]) / maze.shortest
        return dict.fromkeys(env.possible_agents, (-max(*penalties, low), 1.0))
    if env_id == "sokoban_v0":
        level, moves = env.instance, cfg.max_moves_per_action
        low = max(*penalties, cfg.deadlock_penalty, cfg.illegal_move_penalty + moves / level.heuristic(level.boxes),
                  cfg.waste_penalty * moves / level.optimal)
        return dict.fromkeys(env.possible_agents, (-low, 1.0))
    if env_id == "math_v0":
        return dict.fromkeys(env.possible_agents, (-max(penalties), 1.0))
    if env_id == "research_v0":
        return {"main": (-cfg.format_penalty, cfg.main_format_weight + cfg.main_correct_weight),
                "sub": (-cfg.format_penalty, max(cfg.tool_call_reward, cfg.report_reward))}
    return dict.fromkeys(env.possible_agents, (-max([*penalties, cfg.illegal_move_penalty]),
                                               cfg.legal_move_reward * 5))


def _episode_caps(env_id: str, env: Any) -> dict[str, float]:
    """Per role, the docstring's cap on the sum of its positive local rewards over an episode."""
    cfg = env.config
    if env_id in ("sudoku_v0", "math_v0"):
        return dict.fromkeys(env.possible_agents, 1.0)
    if env_id in ("plan_path_v0", "sokoban_v0"):
        return {"tool": 1.0, "planner": math.inf}  # the planner's progress nets to 1 (it can walk away and back)
    if env_id == "research_v0":
        hops = len(env.instance.chain)
        return {"main": cfg.main_format_weight + cfg.main_correct_weight,
                "sub": hops * (cfg.report_reward + cfg.tool_call_reward)}  # each hop's lookup is paid once
    return dict.fromkeys(env.possible_agents, cfg.legal_move_reward * 5)


@pytest.mark.parametrize("env_id", NON_CODE_ENVS)
def test_local_rewards_stay_within_the_documented_bounds(env_id):
    """Oracle, junk and attack episodes: every action's local reward lies within the bounds
    of the env's docstring, and a role's positive credit over an episode is bounded too."""
    from pettingllm_envs.policies import random_policy

    policies: list[Policy | dict[str, Policy]] = [scripted_policy(env_id), random_policy(1)]
    roles = pettingllm_envs.make(env_id, **CONFIGS[env_id]).possible_agents
    policies += [with_role(env_id, role, constant(junk)) for role in roles for junk in JUNK[:4]]
    for seed in SEEDS:
        for policy in policies:
            env = pettingllm_envs.make(env_id, **CONFIGS[env_id])
            play_episode(env, policy, seed=seed)
            bounds, caps = _bounds(env_id, env.unwrapped), _episode_caps(env_id, env.unwrapped)
            credit = dict.fromkeys(caps, 0.0)
            for record in env.unwrapped.history:
                low, high = bounds[record.agent]
                assert low - 1e-9 <= record.reward_local <= high + 1e-9, (record.agent, record.reward_local)
                credit[record.agent] += max(0.0, record.reward_local)
            assert all(credit[role] <= caps[role] + 1e-9 for role in caps), (credit, caps)


# ------------------------------------------------ the team reward: stalling in a partly solved state
def test_stalling_a_partly_solved_state_never_beats_finishing():
    """Sudoku: the planner fills half the cells, waits one turn (a free no-op: re-placing a
    given), then fills the rest; against filling everything at once."""
    def planner(split: bool) -> Policy:
        oracle = scripted_policy("sudoku_v0")
        calls = iter(range(100))

        def act(observation: str, agent: str, info: dict[str, Any]) -> str:
            answer = oracle(observation, agent, info)
            triples = answer.removeprefix("PLACE: ").split("; ")
            turn = next(calls)
            if not split or turn == 2:
                return answer
            if turn == 0:
                return "PLACE: " + "; ".join(triples[: len(triples) // 2])
            board, size = read_board(observation)
            given = next(i for i, v in enumerate(board) if v)
            return f"PLACE: {given // size + 1} {given % size + 1} {board[given]}"  # changes nothing, costs nothing
        return act

    stalled = play("sudoku_v0", {"tool": constant("no code"), "planner": planner(True)}, 0)
    direct = play("sudoku_v0", {"tool": constant("no code"), "planner": planner(False)}, 0)
    assert stalled.success and direct.success
    assert stalled.total_reward("tool") <= direct.total_reward("tool")
    assert stalled.total_reward("planner") <= direct.total_reward("planner")


# ------------------------------------------------------ failed never beats solved, generically
def _repeat_first(env_id: str) -> Policy:
    """The oracle's first action for each role, repeated every turn whatever happens."""
    oracle, first = scripted_policy(env_id), {}

    def act(observation: str, agent: str, info: dict[str, Any]) -> str:
        if agent not in first:
            first[agent] = oracle(observation, agent, info)
        return first[agent]
    return act


def _other_problems_answer(env_id: str, seed: int) -> Policy:
    """A fixed wrong answer in the right format: the oracle's first action on another problem."""
    return _repeat_first_of(env_id, seed + 100)


def _repeat_first_of(env_id: str, seed: int) -> Policy:
    env = raw(env_id, seed)
    oracle = scripted_policy(env_id)
    answers: dict[str, str] = {}
    for _ in range(20):
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent] or agent in answers:
            break
        answers[agent] = oracle(env.observe(agent), agent, env.infos[agent])
        env.step(answers[agent])
    return lambda observation, agent, info: answers.get(agent, "")


def _failed_episode_returns(env_id: str, alpha: float | None) -> list[tuple[str, str, int, float, float]]:
    """(attacking role, role, seed, failed return, solved return) of every failed attack episode."""
    config = {} if alpha is None else {"alpha": alpha}
    roles = pettingllm_envs.make(env_id, **CONFIGS[env_id]).possible_agents
    found = []
    for seed in SEEDS:
        solved = play(env_id, scripted_policy(env_id), seed, **config)
        assert solved.success
        for role in roles:
            attacks = [constant(""), constant("I wait."), constant(JUNK[4]), _repeat_first(env_id),
                       _other_problems_answer(env_id, seed)]
            for attack in attacks:
                episode = play(env_id, with_role(env_id, role, attack), seed, **config)
                if episode.success:
                    continue
                for other in roles:
                    if env_id == "tictactoe_v0" and other == "player_o":
                        continue  # competitive: X's failure is O's gain, not a team's
                    found.append((role, other, seed, episode.total_reward(other), solved.total_reward(other)))
    return found


@pytest.mark.parametrize("env_id", NON_CODE_ENVS)
def test_no_role_earns_more_locally_on_a_failed_episode_than_on_the_solved_one(env_id):
    """One role attacks (junk, waiting, the oracle's first action repeated, another problem's
    answer), the others play the oracle: whenever the episode fails, every role's return
    without the per-step team reward (alpha = 0) is at most the solved episode's."""
    for role, other, seed, failed, solved in _failed_episode_returns(env_id, alpha=0.0):
        assert failed <= solved + 1e-9, (role, other, seed, failed, solved)


@pytest.mark.parametrize("env_id", NON_CODE_ENVS)
def test_no_role_earns_more_on_a_failed_episode_than_on_the_solved_one(env_id):
    """The same with each env's default alpha: the team reward (each role paid the change of
    the team state G) sums to alpha * (G_final - G_start), highest when solved."""
    for role, other, seed, failed, solved in _failed_episode_returns(env_id, alpha=None):
        assert failed <= solved + 1e-9, (role, other, seed, failed, solved)
