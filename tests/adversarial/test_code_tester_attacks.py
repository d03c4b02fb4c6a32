"""Reward attacks of code_v0's tester on its own local reward, played as a reward-seeking
policy would: tests that check nothing, inflating the reward by repetition or enumeration,
crashing the parser, and the documented bounds of what it can earn."""

from __future__ import annotations

import copy

import pytest
from code_problems import ADD, WRONG_ADD, fence
from code_problems import fresh_problem as fresh
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pettingllm_envs.code.code_env import parse_tests
from pettingllm_envs.code.datasets import builtin_stdio, humaneval

VACUOUS = {
    "bare_name": "assert candidate",
    "callable": "assert callable(add)",
    "not_none": "assert add is not None",
    "short_circuit_true": "assert True or add(1, 2) == 7",
    "same_call_twice": "assert add(1, 2) == add(1, 2)",
    "or_true": "assert add(1, 2) or True",
    "self_comparison": "assert add == add",
    "type_only": "assert isinstance(add(1, 2), int)",
    "not_none_result": "assert add(1, 2) is not None",
    "swallowed": "try:\n    assert add(1, 2) == 99\nexcept AssertionError:\n    pass",
    "no_arguments_checked": "assert add(1, 2) != 'a string'",
    "tautology": "assert add(3, 4) == add(3, 4) or add(3, 4) != add(3, 4)",
}


@pytest.mark.parametrize("name", sorted(VACUOUS))
def test_tests_that_check_no_result_earn_nothing(name):
    env = fresh()
    env.step(WRONG_ADD)
    env.step(fence(VACUOUS[name]))
    action = env.infos["tester"]["last_action"]
    assert action["reward_local"] <= 0.0, action
    assert action["parsed"]["valid"] == 0


def test_the_rule_still_credits_real_tests_and_shows_the_vacuous_ones():
    env = fresh()
    env.step(WRONG_ADD)
    env.step(fence("assert add(1, 2) == 3\nassert add(7, 1) == 8\nassert callable(add)\nassert add(2, 2) == add(2, 2)"))
    action = env.infos["tester"]["last_action"]
    assert action["parsed"]["valid"] == 2 and action["parsed"]["checks_nothing"] == 2
    assert action["reward_local"] == pytest.approx(2 / 4 + env.config.bug_credit * 1 / 4)
    view = env.observe("tester")
    assert "check no result" in view and "assert callable(add)" in view
    coder_view = env.observe("coder")  # the coder is shown only tests that count
    assert "assert add(7, 1) == 8" in coder_view and "callable" not in coder_view
    assert "add(2, 2) == add(2, 2)" not in coder_view


def test_repeated_and_enumerated_tests_do_not_inflate_the_reward():
    env = fresh(max_action_chars=10**6)
    env.step(WRONG_ADD)
    one = copy.deepcopy(env)
    one.step(fence("assert add(7, 1) == 8"))
    repeated = copy.deepcopy(env)
    repeated.step(fence("\n".join(["assert add(7, 1) == 8"] * 50)))
    many = copy.deepcopy(env)
    many.step(fence("\n".join(f"assert add({i}, 1) == {i + 1}" for i in range(10_000))))
    best = 1 + env.config.bug_credit
    r_one, r_rep, r_many = (e.infos["tester"]["last_action"] for e in (one, repeated, many))
    assert r_one["reward_local"] == pytest.approx(best)
    assert r_rep["reward_local"] <= r_one["reward_local"] / 10  # duplicates count against it
    assert r_many["reward_local"] <= best
    assert r_many["parsed"]["dropped_over_max_tests"] == 10_000 - env.config.max_tests


@pytest.mark.parametrize("source", [
    "assert add(" + "-" * 100_000 + "1, 2) == 3",
    "assert add(" + "(" * 1000 + "1" + ")" * 1000 + ", 2) == 3",
    "assert add(" + "+".join(["1"] * 200_000) + ", 2) == 3",
    "x = " + "not " * 50_000 + "1\nassert add(x, 1) == 2",
    "assert add(" + "[" * 150 + "]" * 150 + ", 1)",
])
def test_parser_bombs_are_an_invalid_action_not_an_exception(source):
    problem = humaneval().get(ADD)
    tests, _, reason = parse_tests(problem, fence(source))
    assert tests == [] and reason
    env = fresh(max_action_chars=10**6)
    env.step(WRONG_ADD)
    env.step(fence(source))
    action = env.infos["tester"]["last_action"]
    assert not action["valid"] and action["reward_local"] == -env.config.format_penalty


def test_tester_local_reward_stays_within_its_documented_bounds():
    env = fresh()
    env.step(WRONG_ADD)
    actions = [fence("assert add(7, 1) == 8"), fence("assert add(1, 2) == 4"), "no tests",
               fence("assert callable(add)"), fence("\n".join(f"assert add({i}, 0) == {i}" for i in range(40)))]
    for action in actions:
        branch = copy.deepcopy(env)
        branch.step(action)
        local = branch.infos["tester"]["last_action"]["reward_local"]
        assert -env.config.format_penalty <= local <= 1 + env.config.bug_credit


#: Python-ish pieces for the test parser: asserts, calls, operators, nesting, odd characters.
TEST_PIECES = ["assert ", "add(", "candidate(", ")", "(", "[", "]", "{", "}", " == ", " or ", " and ", "not ", "-", "+",
               "1", "7" * 5000, ", ", "\n", "    ", "try:\n", "except:\n", "lambda: ", "x = ", "import os\n", "'",
               '"', "\\", "\x00", "\ud800", "٣", "```", "\r\n", "#", "if 1:\n", "for i in range(3):\n", ":", ";"]
test_text = st.lists(st.one_of(st.sampled_from(TEST_PIECES), st.text(max_size=50),
                               st.tuples(st.sampled_from(["(", "[", "-", "not ", "add("]),
                                         st.integers(1, 3000)).map(lambda p: p[0] * p[1])),
                     max_size=12).map("".join)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(test_text)
def test_parse_tests_never_raises(text):
    for problem in (humaneval().get(ADD), builtin_stdio().problems[0]):
        for action in (fence(text), text):
            tests, ignored, reason = parse_tests(problem, action)
            assert (reason is None) == bool(tests) and ignored >= 0
