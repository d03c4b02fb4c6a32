"""SkyRL-gym (pettingllm_envs.integrations.skyrl_env): episodes made through ``skyrl_gym.make``
equal a plain AEC episode with the same actions: the step rewards sum to the role's AEC return,
the chat SkyRL accumulates holds every prompt the env showed the role, and the oracle solves."""

from __future__ import annotations

import pytest
import skyrl_gym

from pettingllm_envs.integrations.skyrl_env import PettingLLMTextEnv, register_skyrl_envs
from pettingllm_envs.policies import random_policy, scripted_policy
from pettingllm_envs.registry import list_envs, make

register_skyrl_envs()


def play(env: PettingLLMTextEnv, policy) -> tuple[list[dict], list[float], list[str], dict]:
    """SkyRL's loop: the chat grows by the reply and the observations of each step."""
    chat, _ = env.init([])
    rewards, actions, output = [], [], {"done": False, "metadata": {}}
    while not output["done"]:
        observation, _, _, _, info = env.env.last()  # what the role sees now
        action = policy(observation, env.role, info)
        actions.append(action)
        output = env.step(action)
        rewards.append(output["reward"])
        chat += [{"role": "assistant", "content": action}, *output["observations"]]
    return chat, rewards, actions, output["metadata"]


def aec_return(env_id: str, role: str, seed: int, actions: list[str], env_config: dict) -> tuple[float, list[str]]:
    """The role's return in a plain AEC episode (other roles scripted) and the last user message
    of every prompt it was shown."""
    env = make(env_id, **env_config)
    env.reset(seed=seed)
    oracle, moves, total, shown = scripted_policy(env_id), iter(actions), 0.0, []
    for agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            action = None
        elif agent == role:
            shown.append(info["messages"][-1]["content"])
            action = next(moves)
        else:
            action = oracle(observation, agent, info)
        env.step(action)
        total += env.rewards.get(role, 0.0)
    return total, shown


@pytest.mark.parametrize(("env_id", "role"), [("plan_path_v0", "planner"), ("tictactoe_v0", "player_o"),
                                              ("math_v0", "reasoner")])
@pytest.mark.parametrize("policy_name", ["scripted", "random"])
def test_a_skyrl_episode_equals_the_aec_episode(env_id, role, policy_name):
    env_config = {"max_turns": 3}
    env = skyrl_gym.make(f"pettingllm/{env_id}", env_config={"role": role, "env_config": env_config},
                         extras={"seed": 4})
    policy = scripted_policy(env_id) if policy_name == "scripted" else random_policy(7)
    chat, rewards, actions, metadata = play(env, policy)
    total, shown = aec_return(env_id, role, 4, actions, env_config)
    assert sum(rewards) == pytest.approx(total)
    assert metadata["returns"][role] == pytest.approx(total)
    user_turns = [m["content"] for m in chat if m["role"] == "user"]
    assert user_turns == shown  # every prompt the env showed the role, appended in order
    assert len(actions) <= env.max_turns
    if policy_name == "scripted" and env_id != "tictactoe_v0":  # tic-tac-toe openings are forced wins for X
        assert metadata["success"]


def test_every_registered_env_has_a_skyrl_id():
    assert register_skyrl_envs() == [f"pettingllm/{env_id}" for env_id in list_envs()]


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="role must be one of"):
        skyrl_gym.make("pettingllm/plan_path_v0", env_config={"role": "pilot"})
    with pytest.raises(ValueError, match="does not have"):
        skyrl_gym.make("pettingllm/plan_path_v0", env_config={"role": "planner", "seats": {"ghost": "random"}})
