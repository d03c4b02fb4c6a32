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
