"""Junk never earns more than a well-formed wrong attempt, in every registered env and role.

"Think like the policy": if an action the env cannot read ever pays more than an honest wrong
attempt, the trainer learns that breaking the format is the safe fallback. math_v0 and
reasoning_gym_v0 did exactly that once the team's answer was right: a wrong answer replaced
it (alpha * ΔG = -1) while junk left it standing and paid only its 0.5 penalty (-0.5 against
-1.0 at alpha 1; in reasoning_gym_v0 -0.5 against -2.0 when the role's own right answer was
replaced, as it also lost its L). Now every action replaces its role's answer
(``core/answer_team.py``): junk there costs -1.5.

For every env of ``pettingllm_envs.list_envs()`` (the bridges included) and every role, from
the states before that role's actions in oracle play and in play where the role errs (so
math's and reasoning-gym's "team answer already right" states are among them), each junk
action (empty, random printable, binary-ish, over-long) is compared with the env's trivial
wrong attempt (:data:`WRONG`): its step reward, and the role's return from that state when
it keeps repeating the action while the other roles play the oracle
(``pettingllm_envs.testing.check_junk_never_beats_wrong``, the probe any env's author runs).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from reasoning_gym_play import wrong_answer

import pettingllm_envs
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.testing import check_junk_never_beats_wrong
from pettingllm_envs.testing.integrity import junk_replies, step_reward

Action = Callable[[Any, str], str]
#: Small configurations (the bridges' defaults: ConnectFour, basic_arithmetic).
CONFIGS: dict[str, dict[str, Any]] = {"research_v0": {"hops": 2}, "sudoku_v0": {"size": 4}}
#: States per role compared (the first ones met), and seeds.
STATES_PER_ROLE = 3
SEEDS = (0, 1)
WRONG_NUMBER = "-987654321"


def program_printing(text: str) -> str:
    return f"```python\nprint({text!r})\n```"


def _one_wrong_value(env: Any) -> str:
    size = env.instance.size
    index = next(i for i in range(size ** 2) if not env.board[i])
    wrong = next(v for v in range(1, size + 1) if v != env.instance.solution[index])
    return f"PLACE: {index // size + 1} {index % size + 1} {wrong}"


def _wrong_single_move(env: Any, agent: str) -> str:
    """A trivially wrong plan: of the four single moves (U, D, L, R) that make no progress (pay
    the acting role nothing or less), the one that pays most. A move away from the goal can pay
    less than junk (plan_path's waste penalty: -0.67 against -0.5 when the goal is 3 steps away),
    an illegal move or one that goes nowhere pays -0.2 or 0."""
    def paid(move: str) -> float:
        probe = copy.deepcopy(env)
        plan = f"MOVES: {move}"
        probe.step(program_printing(plan) if agent == "tool" else plan)
        return probe.infos[agent]["last_action"]["reward"]
    rewards = {move: paid(move) for move in "UDLR"}
    wrong = [move for move, reward in rewards.items() if reward <= 0.0] or list(rewards)
    plan = "MOVES: " + max(wrong, key=rewards.__getitem__)
    return program_printing(plan) if agent == "tool" else plan


def _other_legal_cell(env: Any, agent: str) -> str:
    """A free cell other than the oracle's move (a legal, non-best move)."""
    oracle = scripted_policy("tictactoe_v0")(env.observe(agent), agent, env.infos[agent])
    free = [i + 1 for i in range(9) if env.board[i] is None or env.board[i] == "."]
    other = [cell for cell in free if f"MOVE: {cell}" not in oracle]
    return f"MOVE: {(other or free or [1])[0]}"


def _math(env: Any, agent: str) -> str:
    return program_printing(WRONG_NUMBER) if agent == "tool" else f"\\boxed{{{WRONG_NUMBER}}}"


def _reasoning_gym(env: Any, agent: str) -> str:
    wrong = wrong_answer(env)
    return program_printing(wrong) if agent == "tool" else f"<answer>{wrong}</answer>"


def _sudoku(env: Any, agent: str) -> str:
    return program_printing(_one_wrong_value(env)) if agent == "tool" else _one_wrong_value(env)


def _research(env: Any, agent: str) -> str:
    return "ANSWER: Nobody Atall" if agent == "main" else "REPORT: Nobody Atall"


def _another_problems_action(env: Any, agent: str) -> str:
    """code_v0: the oracle's action for another problem (code or tests for another function)."""
    other = pettingllm_envs.make("code_v0").unwrapped
    other.reset(seed=100)
    while other.agent_selection != agent:
        acting = other.agent_selection
        other.step(scripted_policy("code_v0")(other.observe(acting), acting, other.infos[acting]))
    return scripted_policy("code_v0")(other.observe(agent), agent, other.infos[agent])


def _oracle_move(env_id: str) -> Action:
    """Competitive games: a legal move (the oracle's) is the well-formed attempt."""
    return lambda env, agent: scripted_policy(env_id)(env.observe(agent), agent, env.infos[agent])


#: The trivial wrong attempt of each env: the answer format with a wrong answer, or one wrong move.
WRONG: dict[str, Action] = {
    "code_v0": _another_problems_action,
    "math_v0": _math,
    "plan_path_v0": _wrong_single_move,
    "reasoning_gym_v0": _reasoning_gym,
    "research_v0": _research,
    "sokoban_v0": _wrong_single_move,
    "sudoku_v0": _sudoku,
    "textarena_v0": _oracle_move("textarena_v0"),
    "tictactoe_v0": _other_legal_cell,
}


def make(env_id: str) -> Any:
    return pettingllm_envs.make(env_id, **CONFIGS.get(env_id, {})).unwrapped


#: Envs where junk still beats the trivial wrong attempt, and why (strict: fixing one fails the test).
OPEN: dict[str, str] = {}  # env id -> why junk still beats a wrong attempt there (a strict xfail until fixed)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [
    pytest.param(env_id, marks=pytest.mark.xfail(strict=True, reason=OPEN[env_id])) if env_id in OPEN else env_id
    for env_id in pettingllm_envs.list_envs()])
def test_junk_earns_no_more_than_a_wrong_attempt_per_step_and_per_episode(env_id):
    assert set(WRONG) >= set(pettingllm_envs.list_envs()), "a new env needs its trivial wrong attempt in WRONG"
    check_junk_never_beats_wrong(lambda: make(env_id), WRONG[env_id],
                                 policy=scripted_policy(env_id), seeds=SEEDS, per_role=STATES_PER_ROLE)


@pytest.mark.parametrize("env_id", ["math_v0", "reasoning_gym_v0"])
def test_junk_after_a_right_team_answer_costs_more_than_a_wrong_answer(env_id):
    """The hole this file closes: the reasoner is right, then the tool answers. Before, junk
    kept the team's right answer (reward -0.5) and a wrong answer lost it (-1.0 with math,
    -2.0 with reasoning-gym's own potential), so junk was the safe fallback."""
    env = make(env_id)
    env.reset(seed=0)
    env.step(scripted_policy(env_id)(env.observe("reasoner"), "reasoner", env.infos["reasoner"]))
    assert env.team_correct and env.agent_selection == "tool"
    wrong = step_reward(env, "tool", WRONG[env_id](env, "tool"))
    for name, junk in junk_replies(env).items():
        branch = copy.deepcopy(env)
        branch.step(junk)
        assert not branch.team_correct and branch.answers["tool"] is None, name
        assert branch.infos["tool"]["last_action"]["reward"] < wrong, (name, wrong)
