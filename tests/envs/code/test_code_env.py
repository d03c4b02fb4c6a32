"""code_v0's rewards and episodes: each role's reward as the change of its potential, bug
credit and its claw-back, termination, what each role observes, copies and configuration."""

from __future__ import annotations

import copy

import pytest
from code_problems import WRONG_ADD, fence
from code_problems import fresh_problem as fresh

from pettingllm_envs.code.code_env import CodeConfig, raw_env, scripted_policy, show_test
from pettingllm_envs.code.datasets import builtin_stdio
from pettingllm_envs.episodes import play_episode


def last(env: raw_env, agent: str) -> dict:
    return env.infos[agent]["last_action"]


CORRECT_ADD = fence("def add(x, y):\n    return x + y")
# (``add(0, 0) == 0`` would earn nothing: x - y, x * y and an early ``return x`` pass it too.)
VALID_TESTS = fence("assert add(1, 2) == 3\nassert add(0, 3) == 3")
CATCHING_TESTS = fence("assert add(1, 2) == 3\nassert add(7, 1) == 8")
INVALID_TESTS = fence("assert add(1, 2) == 4\nassert add(0, 3) == 3")
MIXED_TESTS = fence("assert add(1, 2) == 3\nassert add(7, 1) == 8\nassert add(1, 2) == 4")
#: The tester's alternative actions, from best to worst.
TESTER_ACTIONS = {"catching": CATCHING_TESTS, "valid": VALID_TESTS, "invalid": INVALID_TESTS, "junk": "add should add"}


def branch_results(env: raw_env, agent: str, actions: dict[str, str]) -> dict[str, dict]:
    """``agent``'s ``last_action`` after each of ``actions``, each stepped in its own deep copy of ``env``."""
    results = {}
    for name, action in actions.items():
        branch = copy.deepcopy(env)
        branch.step(action)
        results[name] = last(branch, agent)
    return results


def test_coder_reward_varies_with_its_code():
    """The coder is paid the change of its pass rate on the tester's valid tests: from 0.5
    (the wrong code against the catching tests, paid on the tester's step) to 1 or 0.5."""
    env = fresh()
    env.step(WRONG_ADD)
    env.step(CATCHING_TESTS)  # the wrong code fails add(7, 1)
    assert env.local_state("coder") == 0.5 and last(env, "coder")["reward_local"] == 0.0
    rewards = branch_results(env, "coder", {"correct": CORRECT_ADD, "wrong": WRONG_ADD, "junk": "I would add them."})
    assert rewards["correct"]["reward_local"] == 1.0 - 0.5 and rewards["wrong"]["reward_local"] == 0.5 - 0.5
    assert rewards["correct"]["team_state"] == 1.0 > rewards["wrong"]["team_state"] > 0
    # junk withdraws the code: its pass rate falls from 0.5 to 0, on top of the format penalty
    assert rewards["junk"]["reward_local"] == -0.5 - env.config.format_penalty and not rewards["junk"]["valid"]
    assert rewards["junk"]["team_state"] == 0.0
    assert rewards["correct"]["reward"] > rewards["wrong"]["reward"] > rewards["junk"]["reward"]


def test_tester_reward_varies_with_its_tests():
    env = fresh()
    env.step(WRONG_ADD)
    rewards = {name: result["reward_local"] for name, result in branch_results(env, "tester", TESTER_ACTIONS).items()}
    bug_credit = env.config.bug_credit
    assert rewards == pytest.approx({"catching": 1.0 + bug_credit / 2, "valid": 1.0, "invalid": 0.5,
                                     "junk": -env.config.format_penalty})


def test_tester_reward_later_in_the_episode_is_the_change_its_tests_make():
    """From a state with tests already scored, the tester's branches differ exactly as its
    first-step rewards do (validity, and bug credit for a test the current code fails)."""
    env = fresh()
    for action in (WRONG_ADD, MIXED_TESTS, WRONG_ADD):
        env.step(action)
    bug_credit = env.config.bug_credit
    before = env.local_state("tester")
    assert before == pytest.approx((2 + bug_credit) / 3)
    rewards = {name: result["reward_local"] for name, result in branch_results(env, "tester", TESTER_ACTIONS).items()}
    # "valid": the wrong code passes those tests and the episode ends; add(7, 1) was caught
    # by MIXED_TESTS but is no longer a current test, so it is not credited. "junk" withdraws
    # the tests the tester had: its potential falls to 0, on top of the format penalty.
    assert rewards == pytest.approx({"catching": 1.0 + bug_credit / 2 - before, "valid": 1.0 - before,
                                     "invalid": 0.5 - before, "junk": -before - env.config.format_penalty})


def _play(env: raw_env, actions: list[str]) -> dict[str, float]:
    """Step ``actions`` in turn order; each role's return (everything it was paid)."""
    returns = dict.fromkeys(env.possible_agents, 0.0)
    for action in actions:
        env.step(action)
        for agent, reward in env.rewards.items():
            returns[agent] += reward
    return returns


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_each_roles_return_is_its_final_potential_plus_penalties(alpha):
    """Whatever the path (catches, junk, replaced tests, a regression, truncation), a role's
    return is alpha * (G_final - G_start) + its final local potential - its penalties."""
    env = fresh(alpha=alpha, max_turns=4)
    start = env.global_reward()
    actions = [WRONG_ADD, CATCHING_TESTS, "no code", MIXED_TESTS, fence("def add(x, y):\n    return x - y"),
               MIXED_TESTS, WRONG_ADD, CATCHING_TESTS]
    returns = _play(env, actions)
    assert all(env.truncations.values()) and not any(env.terminations.values())
    penalty = env.config.format_penalty
    invalid = {a: sum(not r.result.valid for r in env.history if r.agent == a) for a in env.possible_agents}
    assert invalid == {"coder": 1, "tester": 0}
    team = alpha * (env.global_reward() - start)
    for agent in env.possible_agents:
        assert returns[agent] == pytest.approx(team + env.local_state(agent) - penalty * invalid[agent])
    assert env.local_state("coder") == 0.5  # the wrong code fails add(7, 1) == 8
    # the tester's local return: both tests valid; add(1, 2) == 3, which x - y failed, is
    # fixed by the last code and keeps its credit, add(7, 1) == 8 is still failed: taken back
    assert returns["tester"] - team == pytest.approx(1.0 + env.config.bug_credit / 2)


def test_a_bug_the_coder_fixes_is_credited_and_an_unfixed_one_is_clawed_back():
    bug_credit = fresh().config.bug_credit
    caught = 1.0 + bug_credit / 2  # 2 valid tests, 1 caught
    # fixed: the coder's correct code passes the catching tests, the episode ends on its step
    fixed = fresh(alpha=0.0)
    returns = _play(fixed, [WRONG_ADD, CATCHING_TESTS, CORRECT_ADD])
    assert all(fixed.terminations.values()) and fixed.episode_ending
    assert returns["tester"] == pytest.approx(caught) and fixed.local_state("tester") == pytest.approx(caught)
    assert fixed.rewards["tester"] == 0.0  # the catch was paid when made; the fix keeps it
    # unfixed: the coder keeps its wrong code until truncation; the credit is taken back there
    unfixed = fresh(alpha=0.0, max_turns=2)
    returns = _play(unfixed, [WRONG_ADD, CATCHING_TESTS, WRONG_ADD, CATCHING_TESTS])
    assert all(unfixed.truncations.values())
    assert [r.reward_local for r in unfixed.history if r.agent == "tester"] == pytest.approx([caught, -bug_credit / 2])
    assert returns["tester"] == pytest.approx(1.0)  # validity only, as if it had caught nothing
    # the same tester actions with a correct last code: the coder failing never pays more
    corrected = fresh(alpha=0.0, max_turns=2)
    returns_corrected = _play(corrected, [WRONG_ADD, CATCHING_TESTS, CORRECT_ADD])
    assert returns_corrected["tester"] > returns["tester"]
    # a caught test dropped and written again is still caught; a test no code failed is not credited
    restored = fresh(alpha=0.0, max_turns=3)
    returns = _play(restored, [WRONG_ADD, CATCHING_TESTS, WRONG_ADD, fence("assert add(6, 0) == 6"),
                               fence("def add(x, y):\n    return 0 if x == 6 else x + y"), MIXED_TESTS])
    assert all(restored.terminations.values())
    assert restored.local_state("tester") == pytest.approx((2 + bug_credit) / 3)
    assert returns["tester"] == pytest.approx((2 + bug_credit) / 3)


def test_agreement_terminates_only_when_the_hidden_tests_pass_too():
    env = fresh()
    env.step(WRONG_ADD)
    env.step(VALID_TESTS)  # weak tests: the wrong code passes them, but not the tests the tester did not write
    assert not any(env.terminations.values())
    assert not env.infos["coder"]["success"] and 0 < env.infos["coder"]["last_action"]["team_state"] < 1

    env = fresh()
    env.step(WRONG_ADD)
    env.step(CATCHING_TESTS)
    assert not any(env.terminations.values())
    env.step(CORRECT_ADD)  # the coder's fix passes the tester's tests: ends before the tester's turn
    assert all(env.terminations.values()) and env.infos["tester"]["success"]


def test_observations_show_failures_but_never_hidden_tests_or_the_reference():
    env = fresh()
    problem = env.instance
    observations = []
    for action in [WRONG_ADD, MIXED_TESTS, WRONG_ADD, CATCHING_TESTS, "junk"]:
        observations.append(env.observe(env.agent_selection))
        env.step(action)
    observations += [env.observe(a) for a in env.possible_agents]
    coder_view = observations[2]
    assert "assert add(7, 1) == 8" in coder_view and "AssertionError" in coder_view
    assert "assert add(1, 2) == 4" not in coder_view  # invalid tests are not the coder's business
    tester_view = observations[3]
    assert "Invalid tests" in tester_view and "assert add(1, 2) == 4" in tester_view
    assert "Valid tests the coder's current code fails" in tester_view
    canonical = problem.reference[len(problem.statement):].strip()
    for obs in observations:
        assert canonical not in obs
        for test in problem.tests:
            assert test.check not in obs


def test_stdio_episode_with_the_oracle_and_hidden_tests_stay_hidden():
    env = raw_env(dataset="stdio")
    for index in range(len(builtin_stdio().problems)):
        episode = play_episode(env, scripted_policy, seed=index)
        assert episode.success
    env.reset(seed=3)
    env.step(fence("print(0)"))
    env.step("<input>\n1 1\n</input>\n<output>\nnot the answer\n</output>")
    views = [env.observe(a) for a in env.possible_agents]
    for test in env.instance.tests:
        assert all(show_test(test, env.config.shown_chars) not in v for v in views)


def test_deep_copies_share_dataset_and_cache():
    env = fresh()
    clone = copy.deepcopy(env)
    assert clone.dataset is env.dataset and clone.cache is env.cache
    clone.step(CORRECT_ADD)
    assert env.code is None and clone.code is not None
    clone.step(CATCHING_TESTS)
    env.step(WRONG_ADD)
    env.step(CATCHING_TESTS)  # a catch in one branch is not seen by its copy
    assert len(env.caught) == 1 and not clone.caught and clone.local_state("tester") == 1.0


def test_config_validation():
    with pytest.raises(ValueError):
        CodeConfig(max_tests=0).validate()
    with pytest.raises(ValueError):
        raw_env(bug_credit=-1)
    with pytest.raises(FileNotFoundError):
        raw_env(dataset="no/such/file.jsonl")
