"""The single-agent view of a multi-agent env (pettingllm_envs.evaluation.single_agent_env)."""

from __future__ import annotations

import copy

import pytest
from pettingzoo.test import api_test, seed_test

import pettingllm_envs
from pettingllm_envs.evaluation.single_agent_env import SOLO, single_agent_env
from pettingllm_envs.policies import scripted_policy

SMALL = {"plan_path_v0": {"rows": 4, "cols": 4, "max_turns": 2}, "sudoku_v0": {"size": 4, "max_turns": 2}}


@pytest.mark.parametrize("env_id", sorted(SMALL))
def test_passes_pettingzoo_api_and_seed_tests(env_id):
    api_test(single_agent_env(env_id, **SMALL[env_id]), num_cycles=100)
    seed_test(lambda: single_agent_env(env_id, **SMALL[env_id]), num_cycles=30)


def _oracle_reply(env) -> str:
    """Every role's scripted action in ``### <role>`` sections, from the inner env's views."""
    solo = env.unwrapped
    oracle = scripted_policy(solo.env_id)
    return "\n".join(f"### {role}\n{oracle(solo.inner.observe(role), role, solo.inner.infos[role])}"
                     for role in solo.roles)


@pytest.mark.parametrize("env_id", sorted(SMALL))
def test_oracle_reply_solves_and_the_reward_is_the_team_total(env_id):
    env = single_agent_env(env_id, **SMALL[env_id])
    multi = pettingllm_envs.make(env_id, **SMALL[env_id])
    env.reset(seed=3)
    multi.reset(seed=3)
    reply = _oracle_reply(env)
    env.step(reply)
    info = env.infos[SOLO]
    assert env.terminations[SOLO] and info["success"]
    # the same actions in the multi-agent env pay the roles, in total, what the solo agent got
    oracle = scripted_policy(env_id)
    paid = 0.0
    for agent in multi.agent_iter():
        observation, _, terminated, truncated, agent_info = multi.last()
        paid += multi._cumulative_rewards[agent]
        multi.step(None if terminated or truncated else oracle(observation, agent, agent_info))
    assert env.rewards[SOLO] == pytest.approx(paid)
    assert info["last_action"]["reward"] == pytest.approx(paid)
    assert set(info["last_action"]["sections"]) == set(env.unwrapped.roles)


def test_missing_sections_and_junk_cost_the_format_penalty_and_never_crash():
    env = single_agent_env("plan_path_v0", **SMALL["plan_path_v0"])
    penalty = env.unwrapped.inner.unwrapped.config.format_penalty
    junks = ("", "no sections at all", "### planner\nMOVES: U", None, 17, b"\xff\xfe", "### tool\n```python\nwhile")
    for junk in junks:
        env.reset(seed=1)
        env.step(junk)
        last = env.infos[SOLO]["last_action"]
        assert not last["valid"]
        tool = last["sections"]["tool"]["last_action"]  # missing or unparsable: the format penalty
        assert not tool["valid"] and tool["reward_local"] == pytest.approx(-penalty)
        assert not env.infos[SOLO]["success"]


def test_a_later_section_does_not_see_the_earlier_sections_result():
    """The prompt is built before any section runs: the planner section is written blind to
    the tool program's output (what the multi-agent setup adds)."""
    env = single_agent_env("plan_path_v0", **SMALL["plan_path_v0"])
    env.reset(seed=2)
    prompt = env.infos[SOLO]["messages"][-1]["content"]
    assert "Program output" not in prompt
    assert "### tool" in env.infos[SOLO]["messages"][0]["content"]
    env.step("### tool\n```python\nprint('MOVES: U')\n```\n### planner\nMOVES: D")
    if not (env.terminations[SOLO] or env.truncations[SOLO]):
        assert "turn 1, tool: moves U" in env.infos[SOLO]["messages"][-1]["content"]  # the next turn sees it


def test_truncates_at_max_turns_and_deep_copies_branch_independently():
    env = single_agent_env("plan_path_v0", **SMALL["plan_path_v0"])
    env.reset(seed=4)
    branch = copy.deepcopy(env)
    branch.step(_oracle_reply(branch))
    assert branch.terminations[SOLO]
    assert not env.terminations[SOLO] and env.infos[SOLO]["turn"] == 0  # the original did not move
    env.step("### tool\nnothing\n### planner\nnothing")
    env.step("### tool\nnothing\n### planner\nnothing")
    assert env.truncations[SOLO] and not env.terminations[SOLO]
    env.step(None)
    assert env.agents == []
