"""Reward attacks on TRL's environment_factory route (trainers/integrations/trl_env.py).

The model talks to the env only through the ``act`` tool, so it can also *not* call it: the
rollout then ends at TRL's side while the env waits. Paying the learner's return so far made
silence the best policy wherever the seats' moves pay the learner (a team reward) and honest
wrong actions cost a penalty: never calling the tool earned 0.0 on plan_path_v0's planner, 1.0
on math_v0's tool and code_v0's tester, against -2.0, -2.0 and -1.0 for answering
"I am not sure." every turn. Now the episode is played out with empty actions first.
"""

from __future__ import annotations

import pytest

from pettingllm_envs import list_envs, make
from pettingllm_envs.policies import scripted_policy
from trainers.integrations.trl_env import EPISODE_OVER, environment_factory

ENV_ROLES = [(env_id, role) for env_id in list_envs() for role in make(env_id).possible_agents]
WRONG = "I am not sure."


def _reward(env_id: str, role: str, actions: list[str] | None) -> float:
    """The rollout's reward when the model calls ``act`` with ``actions`` in turn (WRONG when they
    run out), or never calls it (None)."""
    env = environment_factory(env_id, role)()
    env.reset(prompt=[], index=0, split="test")
    while actions is not None and not env.episode.done:
        env.act(actions.pop(0) if actions else WRONG)
    return env.get_reward()


@pytest.mark.parametrize(("env_id", "role"), ENV_ROLES)
def test_never_calling_the_tool_earns_no_more_than_honest_wrong_actions(env_id, role):
    assert _reward(env_id, role, None) <= _reward(env_id, role, []) + 1e-9


@pytest.mark.parametrize("env_id", ["plan_path_v0", "math_v0"])
def test_stopping_halfway_earns_no_more_than_answering_wrong_to_the_end(env_id):
    role = make(env_id).possible_agents[-1]
    assert _reward(env_id, role, [WRONG]) <= _reward(env_id, role, []) + 1e-9


@pytest.mark.parametrize("action", ["", "\x00" * 50, "ünïcödé " * 5000, "<tool_call>{}</tool_call>"])
def test_junk_and_calls_after_the_end_never_raise(action):
    env = environment_factory("plan_path_v0", "planner", max_turns=1)()
    env.reset(prompt=[], index=0, split="test")
    assert isinstance(env.act(action), str)
    assert env.act(action) == EPISODE_OVER
    assert env.get_reward() == env.get_reward()  # asking twice pays the same


def test_one_model_in_both_seats_of_a_zero_sum_game_is_refused():
    """Summed, the two tictactoe players' returns cancel the outcome: one model in both seats was paid
    +0.4 to +0.6 for X's quickest win and +0.7 for any draw, so it was taught to draw. Refused with one
    line; one learner against a seat is paid its own return, so winning pays more than drawing."""
    with pytest.raises(ValueError, match="rewarded against each other"):
        environment_factory("tictactoe_v0", ("player_x", "player_o"))
    with pytest.raises(ValueError, match="rewarded against each other"):
        environment_factory("textarena_v0", ("player_0", "player_1"))
    env, oracle = environment_factory("tictactoe_v0", "player_x")(), scripted_policy("tictactoe_v0")
    env.reset(prompt=[], index=0, split="test")
    while not env.episode.done:  # the oracle's moves: X wins every opening
        turn = env.episode.turn
        env.act(oracle(turn.observation, turn.agent, turn.info))
    assert env.get_reward() == env.episode.returns["player_x"] > 1.0  # the win's +1 is in it
    assert env.episode.success("player_x")


def test_several_learners_of_a_cooperative_env_still_share_one_reward():
    env = environment_factory("math_v0", ("reasoner", "tool"))()
    env.reset(prompt=[], index=0, split="test")
    assert env.get_reward() == pytest.approx(sum(env.episode.returns.values()))

