"""code_v0's judge, host side: one-call asserts checked without a replay, recording, the
one-process run's call and reply encodings. Real HumanEval tests and real sandbox runs."""

from __future__ import annotations

import ast
import dataclasses
import json
import random
import subprocess
import sys
import textwrap
import warnings

from pettingllm_envs.code.datasets import AssertTest, humaneval
from pettingllm_envs.code.judge.host_checks import answer_on_host, host_plans
from pettingllm_envs.code.judge.limits import JudgeLimits
from pettingllm_envs.code.judge.one_process import answer_in_one_process, one_process_jobs
from pettingllm_envs.code.judge.recording import call_text, recorded_calls
from pettingllm_envs.code.judge.replies import SIMPLE_REPLY, read_reply, wire_call
from pettingllm_envs.code.judge.scheduler import judge_many
from pettingllm_envs.code.judge.suite import Suite


def replies_for(expected: object) -> list[tuple]:
    """Replies near ``expected``: itself, the same value in other types and containers, wrong values, raises."""
    values: list[object] = [expected, None, True, False, 0, 1, 1.0, -0.0, "", [], (), {}, [expected], (expected,)]
    if isinstance(expected, list):
        values += [tuple(expected), expected[::-1], [*expected, None]]
    if isinstance(expected, tuple):
        values.append(list(expected))
    if isinstance(expected, bool):
        values += [int(expected), float(expected)]
    elif isinstance(expected, int):
        values += [float(expected), expected + 1, str(expected)]
    elif isinstance(expected, float):
        values += [expected + 1e-12, int(expected) if expected == int(expected) else expected * 2]
    replies: list[tuple] = [("ok", v) for v in values]
    return [*replies, ("raise", "ValueError", "bad input"), ("raise", "SystemExit", "0")]


def test_a_one_call_assert_checked_on_the_host_gives_the_replays_verdict_and_reason():
    """For every HumanEval test that becomes a HostCheck, and many replies (the expected value
    itself, the same value as another type, 1 vs 1.0 vs True, tuple vs list, wrong values,
    raises), the check's verdict and reason are exactly those of replaying the test."""
    checked = 0
    for problem in humaneval().problems:
        for test, plan in host_plans(problem).items():
            if plan.check is None:
                continue
            for reply in replies_for(plan.check.expected):
                fast = plan.check.outcome(problem, reply, 400)
                if fast is None:  # only a raise is left to the replay
                    assert reply[0] == "raise"
                    continue
                assert fast == answer_on_host(problem, test, {plan.check.call: reply}, 400), (problem.problem_id, reply)
                checked += 1
            if plan.check.ok_reply is not None:
                assert plan.check.outcome(problem, plan.check.ok_reply, 400).passed
    assert checked > 15_000


def test_only_one_call_asserts_on_literals_after_a_plain_setup_become_host_checks():
    problem = humaneval().get("HumanEval/53")  # add(x, y)

    def check_of(setup: str, check: str):
        test = AssertTest(setup, check)
        return host_plans(dataclasses.replace(problem, tests=(test,)))[test].check

    assert check_of("candidate = add", "assert candidate(1, 2) == 3").kind == "=="
    assert check_of("candidate = add\nM = {'a': 1}\nimport math", "assert not candidate(0, 0)").kind == "falsy"
    assert check_of("", "assert add(1, y=2) is True, 'msg'").message == ("msg",)
    for setup, check in [
        ("candidate = add", "assert candidate(1, 2) == 3 == 3"),  # a chained comparison
        ("candidate = add", "assert candidate(1, 2) == set()"),  # a call in the expected value
        ("candidate = add", "assert candidate(1, 2) == 3, str(candidate(1, 2))"),  # a message that calls
        ("candidate = add\ncandidate = 5", "assert candidate(1, 2) == 3"),  # rebound
        ("candidate = add\nimport math as candidate", "assert candidate(1, 2) == 3"),
        ("candidate = add\nfrom math import *", "assert candidate(1, 2) == 3"),
        ("candidate = add\nprint('x')", "assert candidate(1, 2) == 3"),  # a setup that does something
        ("candidate = add\nimport no_such_module_here", "assert candidate(1, 2) == 3"),  # a setup that fails
        ("candidate = add", "assert candidate(1, 2) < 4"),
        ("candidate = add", "assert candidate(*[1, 2]) == 3"),
    ]:
        assert check_of(setup, check) is None, (setup, check)


def test_recording_runs_past_a_failed_assert_and_records_the_messages_calls():
    """HumanEval/32's loop asserts ``fabs(poly(xs, candidate(xs))) < 1e-4``, which the
    placeholder result fails: the recording must still see all its calls (once it saw
    only the first, and the canonical solution went to a second, driver round). HumanEval/77
    calls ``candidate(1728)`` only in a failed assert's message."""
    find_zero = humaneval().get("HumanEval/32")
    assert len(recorded_calls(find_zero, find_zero.tests[0])) > 50
    iscube = humaneval().get("HumanEval/77")
    assert "((1728,), {})" in recorded_calls(iscube, iscube.tests[7])
    for problem, code in ((find_zero, find_zero.preamble + find_zero.reference),
                          (iscube, iscube.preamble + "def iscube(a):\n    return None\n")):
        suite = Suite(problem, code, problem.tests, trusted=True)
        outcomes = [[None] * len(problem.tests)]
        answer_in_one_process([suite], outcomes, JudgeLimits(timeout=3.0, workers=1))
        assert None not in outcomes[0]  # all judged on the host, none left to the driver
    assert all(o.passed for o in judge_many(find_zero, [(find_zero.preamble + find_zero.reference, t)
                                                        for t in find_zero.tests]))


def test_calls_travel_as_json_only_where_json_carries_them_exactly():
    assert json.loads(wire_call(call_text((1, "a", [2.5, None, True]), {"k": {"s": 1}}))) == [
        [1, "a", [2.5, None, True]], {"k": {"s": 1}}]
    for args in [((1, 2),), ({1: "a"},), ({1, 2},), (b"x",), (1j,), ({"a": (1,)},), (2**70, [()])]:
        wire = json.loads(wire_call(call_text(args, {})))
        assert type(wire) is str and ast.literal_eval(wire) == (args, {})
    problem = dataclasses.replace(humaneval().get("HumanEval/53"), tests=(
        AssertTest("candidate = add", "assert candidate((1, 2), {3: 4}) == 'tuple dict'"),
        AssertTest("candidate = add", "assert candidate([1, 2], {'3': 4}) == 'list dict'"),
        AssertTest("candidate = add", "assert candidate(True, 1.0) == 'bool float'")))
    code = "def add(x, y):\n    return f'{type(x).__name__} {type(y).__name__}'"
    suite = Suite(problem, code, problem.tests, trusted=True)
    assert len(one_process_jobs([suite], [[None] * 3])[0][2]) == 3
    outcomes = [[None] * 3]
    answer_in_one_process([suite], outcomes, JudgeLimits(timeout=2.0, workers=1))
    assert [o.passed for o in outcomes[0]] == [True, True, True]


def test_a_reply_read_without_literal_eval_is_what_literal_eval_reads():
    for line in ["('ok', None)", "('ok', False)", "('ok', -0)", "('ok', 123456789012345678)", "('ok', 'No')",
                 "('ok', '')", "('ok', 'x\"y ~')"]:
        assert SIMPLE_REPLY.fullmatch(line)
    for line in ["('ok', 007)", "('ok', 'a\\nb')", "('ok', 'a\\'b')", "('ok', 1234567890123456789)", "('ok', 'a\tb')",
                 "('ok',  1)", "('ok', None )"]:
        assert not SIMPLE_REPLY.fullmatch(line)
    rng = random.Random(0)
    alphabet = "()'ok, -0123456789NoneTrueFalse\\\"ab\t~[]"
    matched = 0
    for _ in range(50_000):
        line = "('ok', " + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) + ")"
        with warnings.catch_warnings():  # invalid escapes in the random lines
            warnings.simplefilter("ignore")
            try:
                reference = ast.literal_eval(line)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                reference = None
            got = read_reply(line)
        if SIMPLE_REPLY.fullmatch(line):
            matched += 1
            assert got == reference and type(got[1]) is type(reference[1]), line
        elif reference is None or type(reference) is not tuple or len(reference) != 2:
            assert got is None, line
    assert matched > 1000


def test_a_code_that_answers_with_the_expected_texts_other_form_is_judged_by_value():
    """A reply equal to the expected value but not its ``repr`` (another dict order, 1.0 for 1)
    passes; a tuple for a list fails, as the test's own ``==`` decides."""
    problem = dataclasses.replace(humaneval().get("HumanEval/53"), tests=(
        AssertTest("candidate = add", "assert candidate(1, 2) == {'a': 1, 'b': 2}"),
        AssertTest("candidate = add", "assert candidate(2, 2) == 4"),
        AssertTest("candidate = add", "assert candidate(3, 2) == [1, 2]")))
    code = "def add(x, y):\n    return {1: {'b': 2, 'a': 1}, 2: 4.0, 3: (1, 2)}[x]"
    outcomes = [[None] * 3]
    answer_in_one_process([Suite(problem, code, problem.tests, trusted=True)], outcomes,
                          JudgeLimits(timeout=2.0, workers=1))
    assert [o.passed for o in outcomes[0]] == [True, True, False]
    assert outcomes[0][2].reason == "AssertionError\nadd(3, 2) returned (1, 2)"


def test_the_tests_asserts_hold_when_the_host_runs_python_with_O():
    """Under ``python -O`` (or ``PYTHONOPTIMIZE``) ``compile`` drops asserts by default: a
    wrong code then passed every replayed hidden test and every driver-run test."""
    script = textwrap.dedent("""
        from pettingllm_envs.code.datasets import AssertTest, humaneval
        from pettingllm_envs.code.judge.scheduler import judge_many
        problem = humaneval().get("HumanEval/53")
        tests = (*problem.tests, AssertTest("", "assert add(2, 3) == 5"))  # the last one is a tester's (driver)
        print(sum(o.passed for o in judge_many(problem, [("def add(x, y):\\n    return 0", t) for t in tests])))
    """)
    done = subprocess.run([sys.executable, "-O", "-c", script], capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.strip() == "0"
