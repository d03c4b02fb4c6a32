"""Conformance tests run over every registered env: PettingZoo's own tests, robustness
to junk actions, deepcopy, determinism and the scripted oracle."""

from __future__ import annotations

import copy
import random

import pytest
from conformance import (
    JUNK_ACTIONS,
    continue_episode,
    mixed_policy,
    pickle_round_trip,
    random_printable,
    snapshot,
    step_junk_actions,
)
from pettingzoo.test import api_test, parallel_api_test, seed_test

import pettingllm_envs
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.policies import scripted_policy

ENV_IDS = pettingllm_envs.list_envs()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_api_test(env_id):
    api_test(pettingllm_envs.make(env_id), num_cycles=1000)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_seed_test(env_id):
    seed_test(lambda: pettingllm_envs.make(env_id), num_cycles=100)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_parallel_api_test(env_id):
    parallel_api_test(pettingllm_envs.make_parallel(env_id), num_cycles=200)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_module_exposes_pettingzoo_trio_and_docs(env_id):
    module = pettingllm_envs.registry.env_module(env_id)
    assert callable(module.env) and callable(module.parallel_env)
    assert module.raw_env.metadata["name"] == env_id
    doc = module.__doc__ or ""
    for heading in ("Roles", "Observation", "Action", "reward", "Termination", "Config"):
        assert heading.lower() in doc.lower(), f"{env_id} docstring lacks {heading!r}"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_junk_actions_never_raise(env_id):
    env = pettingllm_envs.make(env_id)
    rng = random.Random(0)
    for round_ in range(3):
        env.reset(seed=round_)
        step_junk_actions(env, [*JUNK_ACTIONS, *random_printable(rng, 10, 300)], reset_seed=round_ + 100)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_non_string_action_costs_the_format_penalty(env_id):
    env = pettingllm_envs.make(env_id)
    env.reset(seed=1)
    agent = env.agent_selection
    env.step(12345)
    last = env.infos[agent]["last_action"]
    assert not last["valid"] and "string" in last["invalid_reason"]
    assert last["reward_local"] == -env.unwrapped.config.format_penalty


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_deepcopy_mid_episode_continues_identically(env_id):
    env = pettingllm_envs.make(env_id)
    env.reset(seed=5)
    agent = env.agent_selection
    env.step("not a valid action")  # move into the episode first
    clone = copy.deepcopy(env)
    original = continue_episode(env, mixed_policy(scripted_policy(env_id)), 20)
    copied = continue_episode(clone, mixed_policy(scripted_policy(env_id)), 20)
    assert original == copied
    assert agent in clone.unwrapped.possible_agents


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pickle_at_every_step_continues_identically(env_id):
    """Pickled and unpickled before every step (right after reset included), the env plays on exactly
    as the original: tree rollouts across processes, Ray transport and checkpoints rely on it."""
    env = pettingllm_envs.make(env_id)
    env.reset(seed=5)
    twin = pickle_round_trip(env)
    original = continue_episode(env, mixed_policy(scripted_policy(env_id)), 20)
    assert continue_episode(twin, mixed_policy(scripted_policy(env_id)), 20, reload=pickle_round_trip) == original
    assert len(original) > 2


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_parallel_env_pickles_mid_episode(env_id):
    env = pettingllm_envs.make_parallel(env_id)
    env.reset(seed=3)
    env.step(dict.fromkeys(env.agents, "junk"))
    twin = pickle_round_trip(env)
    for action in ("not a move", "junk"):
        assert twin.step(dict.fromkeys(twin.agents, action)) == env.step(dict.fromkeys(env.agents, action))
    assert snapshot(twin.aec_env) == snapshot(env.aec_env)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_deepcopy_shares_config_and_separates_state(env_id):
    env = pettingllm_envs.make(env_id)
    env.reset(seed=2)
    clone = copy.deepcopy(env)
    raw, raw_clone = env.unwrapped, clone.unwrapped
    assert raw_clone.config is raw.config
    assert raw_clone.instance is raw.instance
    assert raw_clone.history is not raw.history
    clone.step("junk")
    assert len(raw_clone.history) == 1 and len(raw.history) == 0


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_episode(env_id):
    policy = scripted_policy(env_id)
    first = play_episode(pettingllm_envs.make(env_id), policy, seed=11)
    second = play_episode(pettingllm_envs.make(env_id), policy, seed=11)
    assert (first.observations, first.actions, first.rewards) == (second.observations, second.actions, second.rewards)
    other = play_episode(pettingllm_envs.make(env_id), policy, seed=12)
    assert other.observations[0] != first.observations[0]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_scripted_policy_solves_every_test_instance(env_id):
    policy = scripted_policy(env_id)
    env = pettingllm_envs.make(env_id, split="test")
    solved = 0
    for index in range(50):
        episode = play_episode(env, policy, seed=index)
        assert set(episode.final_infos) == set(env.unwrapped.possible_agents)
        assert all(isinstance(info["success"], bool) for info in episode.final_infos.values())
        solved += episode.success
    assert solved == 50


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_infos_carry_structured_turn_data(env_id):
    env = pettingllm_envs.make(env_id)
    env.reset(seed=0)
    agent = env.agent_selection
    info = env.infos[agent]
    assert info["role"] == agent and info["turn"] == 0 and info["last_action"] is None
    assert [m["role"] for m in info["messages"]] == ["system", "user"]
    assert str(env.observe(agent)).startswith(info["messages"][0]["content"])
    env.step(scripted_policy(env_id)(env.observe(agent), agent, info))
    last = env.infos[agent]["last_action"]
    for key in ("reward", "reward_global", "reward_local", "alpha", "valid", "parsed"):
        assert key in last
    assert last["reward"] == pytest.approx(last["alpha"] * last["reward_global"] + last["reward_local"])
