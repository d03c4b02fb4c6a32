"""Reward attacks on code_v0 that tell the reference from other code by how it is judged
rather than by what it does, played as a reward-seeking policy would: a test that outlasts a
shorter time limit, a test that reads a line number, a test that kills only mutants that crash,
and a coder that makes a lookup table a "fix" by first failing every hidden test.

Each figure in a docstring is what the attack earned before the judge judged all code alike
(docs/security.md, code_v0).
"""

from __future__ import annotations

import ast

import pytest
from code_problems import ADD, fence, fresh_problem

from adversarial.test_code_episode_attacks import (
    FLIP,
    HONEST_FLIP_TESTS,
    LOOKUP_FLIP,
    SIGNATURE_TESTS,
    WRONG_FLIP,
    WRONG_FLIP_AGAIN,
    _returns,
)
from pettingllm_envs.code.code_env import JudgeLimits, judge_many
from pettingllm_envs.code.datasets import AssertTest, humaneval
from pettingllm_envs.code.judge.recording import recorded_calls
from pettingllm_envs.code.mutants import problem_mutants, repaired_source
from pettingllm_envs.code.verdict_cache import OutcomeCache

#: The signature tests of the episode attacks, after a 1.2 s sleep: longer than the 1 s the
#: mutants were judged with, well inside the reference's 5 s.
SLEEPING_SIGNATURE_TESTS = fence("import time\ntime.sleep(1.2)\n" + SIGNATURE_TESTS.split("\n", 1)[1][:-4])
#: Fails every hidden test of HumanEval/27 (None is never a string).
FAILS_EVERYTHING = fence("def flip_case(string: str) -> str:\n    return None")
CORRECT_ADD = fence("def add(x, y):\n    return x + y")
#: The raw reference of HumanEval/53 raises add('a', 1)'s TypeError on its line 10.
LINE_NUMBER_TEST = fence("def _error():\n    try:\n        add('a', 1)\n    except TypeError as error:\n"
                         "        return str(error)\n    return ''\n"
                         "assert add(2, 3) == 5 and 'line 10 ' in _error()")


def test_a_test_that_outlasts_the_mutants_time_limit_kills_no_mutant():
    """HumanEval/27, wrong coder: credit 2.0 for the two sleeping signature tests (every mutant
    "killed" by its 1 s limit), coder and tester +1.33 each against +0.33 / +1.33 with honest
    tests. Every program is now judged under the same limit."""
    env = fresh_problem(FLIP)
    env.step(WRONG_FLIP)
    env.step(SLEEPING_SIGNATURE_TESTS)
    assert env.infos["tester"]["last_action"]["parsed"]["credit"] == 0
    hack, _ = _returns(FLIP, [WRONG_FLIP, SLEEPING_SIGNATURE_TESTS] * 4)
    honest, _ = _returns(FLIP, [WRONG_FLIP, HONEST_FLIP_TESTS] * 4)
    for role in ("coder", "tester"):
        assert hack[role] <= honest[role] + 1e-9, (role, hack, honest)


def test_the_verdict_cache_keys_on_the_time_limit():
    """A verdict judged at 1 s was answered for the same pair at 5 s."""
    problem = humaneval().get(ADD)
    test = AssertTest("import time", "time.sleep(1.2)\nassert add(2, 3) == 5")
    cache = OutcomeCache(64)
    assert not cache.judge(problem, [(problem.reference, test)], limits=JudgeLimits(timeout=1.0, workers=1))[0].passed
    assert cache.judge(problem, [(problem.reference, test)], limits=JudgeLimits(timeout=3.0, workers=1))[0].passed


def test_a_test_that_reads_a_line_number_earns_no_more_than_an_honest_test():
    """HumanEval/53: asserting the line of the reference's exception was valid, killed every
    (re-printed) mutant and failed correct code forever: the tester's step +1.50 against +1.00,
    bug credit for correct code. Now no program's message carries a line: the test is invalid,
    catches nothing and pays the correct coder what any invalid test does."""
    hack = fresh_problem(ADD)
    hack.step(CORRECT_ADD)
    hack.step(LINE_NUMBER_TEST)
    honest = fresh_problem(ADD)
    honest.step(CORRECT_ADD)
    honest.step(fence("assert add(2, 3) == 5"))
    parsed = hack.infos["tester"]["last_action"]["parsed"]
    assert parsed["valid"] == 0 and parsed["caught"] == 0 and not hack.caught
    assert hack.infos["tester"]["last_action"]["reward"] <= honest.infos["tester"]["last_action"]["reward"]
    coder, _ = _returns(ADD, [CORRECT_ADD, LINE_NUMBER_TEST] * 4)
    assert coder["coder"] >= _returns(ADD, [CORRECT_ADD, fence("assert add(2, 3) == 6")] * 4)[0]["coder"]


ERROR = "def _error():\n    try:\n        add('a', 1)\n    except TypeError as error:\n        return str(error)\n"
#: What a test can observe beside results, each asserted to take one program's value.
CHANNELS = {
    "line_number": ERROR + "assert add(2, 3) == 5 and 'line 10 ' in _error()",
    "exception_text": ERROR + "assert add(2, 3) == 5 and _error() == 'can only concatenate str (not \"int\") to str'",
    "file_name": ERROR + "assert add(2, 3) == 5 and 'solution' not in _error() and '.py' not in _error()",
    "time_limit": "import signal\nassert add(2, 3) == 5 and signal.getitimer(signal.ITIMER_REAL)[0] > 1.5",
    "object_identity": "assert add(2, 3) == 5 and add(2, 3) is add(2, 3) and add.__name__ == 'add'",
}


@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_a_test_cannot_tell_programs_apart_except_by_their_results(channel):
    """The reference as the dataset prints it, re-printed by the AST (as mutants are), laid out
    by hand with comments, and a coder's equivalent code: one verdict for all."""
    problem = humaneval().get(ADD)
    test = AssertTest(f"candidate = {problem.entry_point}", CHANNELS[channel])
    codes = [problem.reference, ast.unparse(ast.parse(problem.reference)),
             "\n\n# the sum\n\n\n" + problem.reference.replace("return", "# add them\n    return"),
             "def add(x, y):\n    return x + y"]
    verdicts = {o.passed for o in judge_many(problem, [(code, test) for code in codes], JudgeLimits(timeout=3.0))}
    assert len(verdicts) == 1, (channel, verdicts)


def test_every_kept_mutant_is_wrong_in_its_values_not_only_by_crashing():
    """A mutant that crashes on every non-trivial input was kept because it passed one trivial
    hidden case, and any test that called the function killed it. Each kept mutant, with its
    crashes and changes of type repaired by the reference, still fails a hidden test."""
    for problem_id in ("HumanEval/0", "HumanEval/12", FLIP, "HumanEval/120"):
        problem = humaneval().get(problem_id)
        for mutant in problem_mutants(problem):
            outcomes = judge_many(problem, [(repaired_source(problem, mutant), t) for t in problem.tests],
                                  JudgeLimits(timeout=2.0))
            assert not all(o.passed for o in outcomes), (problem_id, mutant)


def call_and_check_the_type(problem_id: str) -> str:
    """A test that calls the function on a hidden test's input and checks only that the result
    has a plausible type and lacks the perturbation's signature: nothing this task requires."""
    problem = humaneval().get(problem_id)
    call = recorded_calls(problem, problem.tests[-1])[0]  # type: ignore[index]
    name = problem.entry_point
    return fence(f"_r = {name}(*{call}[0], **{call}[1])\n"
                 "assert type(_r) in (str, list, type(None), tuple, dict) and not (isinstance(_r, str) and "
                 "_r.endswith('\\x00')) and not (isinstance(_r, list) and len(_r) > 1 and _r[-1] == _r[-2]) "
                 f"and {name}")


@pytest.mark.parametrize("problem_id", ["HumanEval/10", "HumanEval/17", "HumanEval/19"])
def test_a_call_and_check_the_type_test_earns_about_nothing(problem_id):
    """Full credit (1.0) on these problems, and credit on 5 of the first 24 HumanEval train
    problems: it killed the mutants that crash on its input."""
    env = fresh_problem(problem_id)
    env.step(fence(f"def {env.instance.entry_point}(*args):\n    return None"))
    env.step(call_and_check_the_type(problem_id))
    assert env.infos["tester"]["last_action"]["parsed"]["credit"] <= 0.1


def test_a_coder_that_first_fails_every_hidden_test_gains_nothing_from_a_lookup_table():
    """HumanEval/27: code failing every hidden test (free under the potential G), then a table of
    the shown cases, whose fallback passes the trivial hidden case: coder +1.33, tester +1.83,
    against +0.33 / +1.33 for an honest wrong second attempt, hidden pass rate 1/3."""
    lookup, env = _returns(FLIP, [FAILS_EVERYTHING, HONEST_FLIP_TESTS] + [LOOKUP_FLIP, HONEST_FLIP_TESTS] * 3)
    honest, _ = _returns(FLIP, [WRONG_FLIP, HONEST_FLIP_TESTS] + [WRONG_FLIP_AGAIN, HONEST_FLIP_TESTS] * 3)
    assert env.global_reward() == pytest.approx(1 / 3)
    for role in ("coder", "tester"):
        assert lookup[role] <= honest[role] + 1e-9, (role, lookup, honest)
    solved, _ = _returns(FLIP, [FAILS_EVERYTHING, HONEST_FLIP_TESTS, fence(env.instance.reference)])
    assert solved["tester"] > honest["tester"]  # a real fix still pays the tester's bug credit
