"""Conformance tests run over every registered env: the battery of ``pettingllm_envs.testing``
(PettingZoo's own tests, robustness to junk actions, deepcopy and pickle continuation,
determinism, disjoint splits, truncation, the scripted oracle and declared demonstrations), one
check per test so that a failure names the env and the check."""

from __future__ import annotations

import pytest

import pettingllm_envs
from pettingllm_envs.capabilities import Demonstrations, capability, declares
from pettingllm_envs.testing import (
    check_api,
    check_deepcopy_continuation,
    check_deepcopy_sharing,
    check_demonstrations,
    check_env_module,
    check_infos,
    check_junk_actions,
    check_non_string_penalty,
    check_oracle_solves,
    check_parallel_api,
    check_parallel_pickle,
    check_pickle_continuation,
    check_reset_repeats,
    check_same_seed_same_episode,
    check_seed,
    check_split_disjointness,
    check_truncation,
)

ENV_IDS = pettingllm_envs.list_envs()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_api_test(env_id):
    check_api(env_id, num_cycles=1000)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_seed_test(env_id):
    check_seed(env_id, num_cycles=100)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_parallel_api_test(env_id):
    check_parallel_api(lambda: pettingllm_envs.make_parallel(env_id), num_cycles=200)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_module_exposes_pettingzoo_trio_and_docs(env_id):
    check_env_module(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_junk_actions_never_raise(env_id):
    check_junk_actions(env_id, rounds=3, random_count=10, random_chars=300)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_non_string_action_costs_the_format_penalty(env_id):
    check_non_string_penalty(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_deepcopy_mid_episode_continues_identically(env_id):
    check_deepcopy_continuation(env_id, steps=20)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pickle_at_every_step_continues_identically(env_id):
    """Pickled and unpickled before every step (right after reset included), the env plays on exactly
    as the original: tree rollouts across processes, Ray transport and checkpoints rely on it."""
    check_pickle_continuation(env_id, steps=20)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_parallel_env_pickles_mid_episode(env_id):
    check_parallel_pickle(lambda: pettingllm_envs.make_parallel(env_id))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_deepcopy_shares_config_and_separates_state(env_id):
    check_deepcopy_sharing(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_episode(env_id):
    check_same_seed_same_episode(env_id, seed=11)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_scripted_policy_solves_every_test_instance(env_id):
    check_oracle_solves(env_id, episodes=50, split="test")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_infos_carry_structured_turn_data(env_id):
    check_infos(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_splits_are_disjoint_and_resets_repeat(env_id):
    check_split_disjointness(env_id, 20)  # plan_path, sokoban, sudoku and math tests check hundreds
    check_reset_repeats(env_id, 0)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_idle_replies_end_the_episode_without_success(env_id):
    check_truncation(env_id)


@pytest.mark.parametrize("env_id", [env_id for env_id in ENV_IDS if declares(env_id, Demonstrations)])
def test_declared_demonstrations_solve_and_flag_their_mistakes(env_id):
    check_demonstrations(env_id, capability(env_id, Demonstrations))
