"""Deep copies of an env defer copying its infos and its generator until they are used (a tree
rollout copies every live env once per branch and steps the branch at once): the deferred parts
must still behave as copies, whichever of the two envs uses them first and however."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import pettingllm_envs
from pettingllm_envs.policies import scripted_policy


def started(env_id: str):
    """``env_id`` reset and one scripted step into its episode, so infos hold a last action."""
    env = pettingllm_envs.make(env_id)
    env.reset(seed=3)
    agent = env.agent_selection
    env.step(scripted_policy(env_id)(env.observe(agent), agent, env.infos[agent]))
    return env


@pytest.mark.parametrize("env_id", ["plan_path_v0", "tictactoe_v0", "math_v0"])
def test_copies_share_infos_until_one_reads_them_and_a_reader_changes_only_its_own(env_id):
    env = started(env_id)
    agents = list(env.agents)
    before = copy.deepcopy(env.infos)
    observations = {agent: env.observe(agent) for agent in agents}
    branch, other = copy.deepcopy(env), copy.deepcopy(env)
    assert branch.unwrapped._infos is env.unwrapped._infos  # shared: nothing copied yet

    env.infos[agents[0]]["messages"].clear()  # the original changes first, in place: no copy sees it
    env.infos[agents[0]]["turn"] = -1
    changed = copy.deepcopy(env.infos)
    assert branch.infos == before

    branch.infos[agents[0]]["messages"].append({"role": "user", "content": "changed in place"})
    del branch.infos[agents[-1]]  # as PettingZoo's dead step does
    assert env.infos == changed and other.infos == before and copy.deepcopy(other).infos == before

    step_branch = copy.deepcopy(env)
    step_branch.step("junk")  # as a tree rollout's branch: stepped right after it was copied
    assert step_branch.infos != changed and env.infos == changed
    assert {agent: env.observe(agent) for agent in agents} == observations


def test_a_copy_restores_its_generator_from_the_state_at_copy_time_when_first_used():
    env = pettingllm_envs.make("plan_path_v0")
    env.reset(seed=0)
    raw = env.unwrapped
    raw.np_random.integers(0, 100, 3)  # a generator that has drawn: not in its seeded state
    clone = copy.deepcopy(raw)
    assert clone._generator is None  # not restored yet
    expected = copy.deepcopy(raw._generator).integers(0, 1000, 5)  # numpy's own copy, for reference
    raw.np_random.integers(0, 100, 7)  # the original moves on first: the copy's stream is its own
    copy_of_copy = copy.deepcopy(clone)  # shares the pending snapshot
    assert np.array_equal(clone.np_random.integers(0, 1000, 5), expected)
    clone.np_random.integers(0, 100, 2)
    assert np.array_equal(copy_of_copy.np_random.integers(0, 1000, 5), expected)
    assert clone.np_random is not raw.np_random and clone.np_random_seed == raw.np_random_seed
