"""RoleEnv: one role of every registered env as a Gymnasium env."""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from toy_env import raw_env as ToyRawEnv

from pettingllm_envs import list_envs, make
from pettingllm_envs.core import wrap_env
from pettingllm_envs.core.spaces import TextObservation
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.integrations import RoleEnv, gym_id
from pettingllm_envs.policies import scripted_policy

ENV_ROLES = [(env_id, role) for env_id in list_envs() for role in make(env_id).possible_agents]


@pytest.mark.parametrize(("env_id", "role"), ENV_ROLES)
def test_every_role_of_every_env_passes_gymnasiums_env_checker(env_id, role):
    # Made through the Gymnasium registry, so the checker also exercises the spec
    # (every render mode, close twice) and treats resets as deterministic.
    env = gymnasium.make(gym_id(env_id), role=role)
    assert isinstance(env.unwrapped, RoleEnv)
    check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize(("env_id", "role"), ENV_ROLES)
def test_a_role_played_by_its_oracle_reproduces_the_aec_episode(env_id, role):
    """The Gymnasium view changes who drives the loop, nothing else: rewards, success and
    the role's observations equal those of play_episode with the same policies and seed."""
    oracle = scripted_policy(env_id)
    reference = play_episode(make(env_id), oracle, seed=3)
    env = RoleEnv(env_id, role)
    observation, info = env.reset(seed=3)
    observations, total, done = [], 0.0, False
    while not done:
        assert isinstance(observation, TextObservation) and observation in env.observation_space
        observations.append(str(observation))
        observation, reward, terminated, truncated, info = env.step(oracle(observation, role, info))
        total += reward
        done = terminated or truncated
    assert observations == [obs for agent, obs in reference.observations if agent == role]
    assert total == pytest.approx(reference.total_reward(role))
    assert info["success"] == reference.final_infos[role]["success"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step("too late")


def test_reward_is_the_roles_own_and_infos_carry_its_parts():
    env = RoleEnv("plan_path_v0", "planner", alpha=0.5)
    observation, info = env.reset(seed=0)
    assert env.np_random_seed == 0  # the AEC env's generator is the one Gymnasium sees
    assert info["role"] == "planner" and info["turn"] == 0
    assert "This turn the tool agent wrote" in observation  # the scripted tool acted first
    _, reward, terminated, truncated, info = env.step("no moves here")
    last = info["last_action"]
    assert not last["valid"] and reward == pytest.approx(0.5 * last["reward_global"] + last["reward_local"])
    assert reward < 0 and not (terminated or truncated)
    assert info["turn"] == 1  # the tool already took its turn-1 action before control came back


def test_other_policies_are_required_for_env_objects_and_must_cover_every_other_role():
    with pytest.raises(ValueError, match="other_policies is required"):
        RoleEnv(make("plan_path_v0"), "planner")
    with pytest.raises(ValueError, match="no policy for the other roles"):
        RoleEnv("plan_path_v0", "planner", {"planner": scripted_policy("plan_path_v0")})
    with pytest.raises(ValueError, match="unknown role"):
        RoleEnv("plan_path_v0", "pilot")


class _FirstAnswerEnds(ToyRawEnv):
    """The toy env, ended as soon as the first role answers right."""

    def is_done(self) -> bool:
        return self.correct["first"]


def test_an_episode_the_other_roles_finish_ends_on_the_next_step():
    env = RoleEnv(wrap_env(_FirstAnswerEnds(max_turns=3)), "second", lambda obs, agent, info: "7")
    _, info = env.reset(seed=0)
    assert info["last_action"] is None  # "second" never acted
    _, reward, terminated, truncated, _ = env.step("ignored")
    assert terminated and not truncated and reward == 0.0


class _FirstAnswerPaysAndEnds(_FirstAnswerEnds):
    """The first role's right answer sets the team state to 1 and ends the episode."""

    def global_reward(self) -> float:
        return 1.0 if self.correct["first"] else 0.0


def test_what_the_other_roles_paid_before_an_early_end_is_paid_once():
    """The second role never acts, but the first's answer paid it alpha * ΔG = 1: its return is 1,
    as in the AEC episode (it was paid twice, 2.0, when reset and step both read last())."""
    aec = wrap_env(_FirstAnswerPaysAndEnds(max_turns=3, alpha=1.0))
    reference = play_episode(wrap_env(_FirstAnswerPaysAndEnds(max_turns=3, alpha=1.0)),
                             lambda obs, agent, info: "7", seed=0)
    env = RoleEnv(aec, "second", lambda obs, agent, info: "7")
    env.reset(seed=0)
    _, reward, terminated, _, _ = env.step("ignored")
    assert terminated and reward == pytest.approx(reference.total_reward("second")) == pytest.approx(1.0)
