"""code_v0's judging: test parsing, the sandboxed runs (driver and one-process), the
codec of the candidate socket, and the failure reasons a verdict carries."""

from __future__ import annotations

import dataclasses
import json

import pytest
from code_problems import ADD, fence

from pettingllm_envs.code.code_env import JudgeLimits, format_tests, judge_many, parse_tests
from pettingllm_envs.code.datasets import AssertTest, IOTest, builtin_stdio, humaneval
from pettingllm_envs.code.judge.driver_runs import driver_stdin
from pettingllm_envs.code.judge.one_process import answer_in_one_process, one_process_jobs
from pettingllm_envs.code.judge.programs import ANSWER_PROGRAM, DRIVER_PROGRAM
from pettingllm_envs.code.judge.replies import answer_stdin
from pettingllm_envs.code.judge.sandboxed import wire
from pettingllm_envs.code.judge.sandboxed.loading import FRAME_DIGITS
from pettingllm_envs.code.judge.suite import Suite


def test_parse_function_tests():
    problem = humaneval().get(ADD)
    code = fence("import math\nassert add(1, 2) == 3\nassert True\nassert 1 + 1 == 2\nx = 5\n"
                 "assert candidate(x, 1) == 6")
    tests, ignored, reason = parse_tests(problem, code)
    assert reason is None and ignored == 2
    assert [t.check for t in tests] == ["assert add(1, 2) == 3", "assert candidate(x, 1) == 6"]
    assert "x = 5" in tests[1].setup and "import math" in tests[1].setup
    assert parse_tests(problem, "assert add(1, 2) == 3")[2] is not None  # no code block
    assert "does not parse" in parse_tests(problem, fence("assert add(1,"))[2]
    assert parse_tests(problem, fence("assert True"))[2] is not None


def test_parse_stdio_tests_and_round_trip_of_the_oracle_format():
    problem = builtin_stdio().problems[0]
    text = "<input>1 2</input><output>3</output>\n<INPUT>\n4\n</INPUT> <output>\n5\n</output>"
    tests, _, reason = parse_tests(problem, text)
    assert reason is None and tests == [IOTest("1 2\n", "3"), IOTest("4\n", "5\n")]
    assert parse_tests(problem, "input: 1 2 output: 3")[2] is not None
    assert parse_tests(problem, format_tests(problem, problem.tests))[0] == list(problem.tests)
    for he in humaneval().problems[:40]:  # the tester's duplicates count once (HumanEval/31 repeats an assert)
        assert parse_tests(he, format_tests(he, he.tests))[0] == list(dict.fromkeys(he.tests))


def test_early_exit_with_status_zero_does_not_pass_a_test():
    problem = humaneval().get(ADD)
    test = problem.tests[0]
    cheats = ["import os\nos._exit(0)", "exit(0)", "import sys\nsys.exit()", "raise SystemExit"]
    outcomes = judge_many(problem, [(c, test) for c in cheats])
    assert not any(o.passed for o in outcomes)
    assert "the code failed to load" in outcomes[0].reason


def test_main_block_of_a_solution_does_not_run():
    problem = humaneval().get(ADD)
    code = "def add(x, y):\n    return x + y\nif __name__ == '__main__':\n    print(add(int(input()), 1))"
    assert all(o.passed for o in judge_many(problem, [(code, t) for t in problem.tests[:2]]))


def test_failure_reasons_explain_what_went_wrong():
    problem = humaneval().get(ADD)
    test = AssertTest("candidate = add", "assert add(2, 2) == 4")
    wrong, loop, syntax, raises = judge_many(problem, [
        ("def add(x, y):\n    return x - y", test), ("def add(x, y):\n    while True: pass", test),
        ("def add(x, y):\n    return (x +", test), ("def add(x, y):\n    raise ValueError('nope')", test)],
        JudgeLimits(timeout=0.5))
    assert "AssertionError" in wrong.reason and "add(2, 2) returned 0" in wrong.reason
    assert "timed out" in loop.reason
    assert "failed to load: SyntaxError" in syntax.reason and "line 2 of the code" in syntax.reason
    # no line: a tester's test reads exception messages, and a line depends on how a program is printed
    assert "ValueError: nope" in raises.reason and "line" not in raises.reason
    stdio = builtin_stdio().problems[0]
    (answer,) = judge_many(stdio, [("print(42)", IOTest("1\n5\n", "5\n"))])
    assert not answer.passed and "expected '5\\n', got '42\\n'" in answer.reason


def test_the_program_is_the_same_driver_for_every_run_and_the_tests_come_after_the_code():
    """The run's program (visible to the code) holds no test; on stdin, the code's frame
    comes first, so the process that runs it is forked before the tests are read."""
    problem = humaneval().get(ADD)
    assert "assert" not in DRIVER_PROGRAM and "candidate(" not in DRIVER_PROGRAM
    suite = Suite(problem, "def add(x, y):\n    return x + y", problem.tests)
    stdin = driver_stdin(suite, "t" * 32, JudgeLimits(timeout=1.0))
    first = int(stdin[:FRAME_DIGITS])
    code_frame = stdin[FRAME_DIGITS: FRAME_DIGITS + first]
    assert "t" * 32 not in code_frame and "prefetch" not in code_frame
    assert "t" * 32 in stdin[FRAME_DIGITS + first:]


def test_hidden_tests_with_known_calls_run_on_the_host_on_the_codes_replies():
    """The one-process mode: the run gets the code and the calls' arguments only (no test,
    no expected value); the host runs the tests on the replies (HumanEval/53's random loop
    included: its calls are recorded and replayed with a private seeded ``random``). A test
    whose arguments depend on a result (``add(add(1, 2), 3)``) is left to the driver."""
    problem = humaneval().get(ADD)
    suite = Suite(problem, "def add(x, y):\n    return x + y", problem.tests, trusted=True)
    jobs = one_process_jobs([suite], [[None] * len(problem.tests)])
    stdin = answer_stdin(suite, list(jobs[0][2]), 2.0)
    assert "assert" not in stdin and "assert" not in ANSWER_PROGRAM
    for test in problem.tests:
        assert test.check not in stdin
    outcomes = [[None] * len(problem.tests)]
    answer_in_one_process([suite], outcomes, JudgeLimits(timeout=2.0, workers=1))
    assert [o is not None and o.passed for o in outcomes[0]] == [True] * 6
    wrong = Suite(problem, "def add(x, y):\n    return x * y", problem.tests, trusted=True)
    outcomes = [[None] * len(problem.tests)]
    answer_in_one_process([wrong], outcomes, JudgeLimits(timeout=2.0, workers=1))
    assert not any(o.passed for o in outcomes[0])
    assert "add(2, 3) returned 6" in outcomes[0][2].reason
    untrusted = Suite(problem, wrong.code, problem.tests)  # tester tests never run on the host
    outcomes = [[None] * len(problem.tests)]
    answer_in_one_process([untrusted], outcomes, JudgeLimits(timeout=2.0, workers=1))
    assert outcomes == [[None] * len(problem.tests)]
    nested = add_problem_with_tests("assert candidate(candidate(1, 2), 3) == 6", "assert candidate(1, 1) == 2")
    outcomes = [[None, None]]
    answer_in_one_process([Suite(nested, suite.code, nested.tests, trusted=True)], outcomes,
                          JudgeLimits(timeout=2.0, workers=1))
    assert outcomes[0][0] is None and outcomes[0][1].passed
    assert all(o.passed for o in judge_many(nested, [(suite.code, t) for t in nested.tests]))


def test_results_repr_cannot_carry_go_to_the_driver():
    """NaN, infinities and frozensets have no literal ``repr``: the one-process run's
    replies are unreadable, so the driver judges those tests (and gets them right)."""
    problem = add_problem_with_tests("assert candidate(0, 1) == 1", "assert candidate(2, 2) != candidate(2, 2)",
                                     "assert candidate(1, 1) == frozenset({2})")
    code = "def add(x, y):\n    return {(0, 1): 1, (2, 2): float('nan'), (1, 1): frozenset({2})}[(x, y)]"
    assert [o.passed for o in judge_many(problem, [(code, t) for t in problem.tests])] == [True, True, True]


def test_codec_keeps_plain_data_and_refuses_everything_else():
    values = [None, True, 0, -5, 2**70, -(2**200), 1.5, float("inf"), -0.0, 2j + 1, "x\u00e9\ud800", b"\x00\xff",
              [1, [2, (3, {4: frozenset({5})})]], {"a": {1, 2}, (1, "b"): [None]}, (), [], {}, set()]
    for value in values:
        assert wire.from_wire(json_round_trip(wire.to_wire(value))) == value
        assert type(wire.from_wire(json_round_trip(wire.to_wire(value)))) is type(value)
    nan = wire.from_wire(json_round_trip(wire.to_wire(float("nan"))))
    assert nan != nan
    class Sneaky(int):
        def __eq__(self, other):
            return True
    assert type(wire.from_wire(wire.to_wire(Sneaky(3)))) is int
    for bad in [object(), len, iter([]), type("X", (), {})]:
        with pytest.raises(wire.Unsupported):
            wire.to_wire(bad)
    for garbage in [{"q": 1}, {"t": 1}, {"d": [[[1], 2]]}, {"b": "zz"}, {"a": 1, "b": 2}, {"c": ["x", 1]}]:
        with pytest.raises(wire.ProtocolError):
            wire.from_wire(garbage)


def json_round_trip(tree):
    return json.loads(json.dumps(tree))


def test_perturb_changes_every_value_and_keeps_its_type():
    for value in [None, True, False, 0, 7, 2**80, 1.5, 1e300, float("nan"), 1j, "", "ab", b"", [1, 2], [], (1,), {1: 2},
                  {}, {1}, frozenset()]:
        changed = wire.from_wire(wire.perturb(wire.to_wire(value)))
        assert changed != value
        assert value is None or type(changed) is type(value)


def test_the_protocol_serves_the_ways_tests_call_the_function():
    problem = humaneval().get("HumanEval/38")  # decode_cyclic(encode_cyclic(s)) round trips, random inputs
    ref = problem.reference
    assert all(o.passed for o in judge_many(problem, [(ref, t) for t in problem.tests]))
    add = humaneval().get(ADD)
    tests = [AssertTest("candidate = add", check) for check in [
        "assert add(add(1, 2), add(x=3, y=4)) == 10",
        "assert abs(add(0.1, 0.2) - 0.3) < 1e-9",
        "assert [add(i, i) for i in range(20)] == [2 * i for i in range(20)]",
        "try:\n    add('a', 1)\n    assert False\nexcept TypeError:\n    pass",
        "import math\nassert math.isclose(add(1e300, 1e300), 2e300)",
    ]]
    outcomes = judge_many(add, [("def add(x, y):\n    return x + y", t) for t in tests])
    assert all(o.passed for o in outcomes), outcomes


def add_problem_with_tests(*checks: str):
    """HumanEval/53 with these hidden tests (its own end with a random loop)."""
    tests = tuple(AssertTest("candidate = add", check) for check in checks)
    return dataclasses.replace(humaneval().get(ADD), tests=tests)


def test_a_prefetched_call_that_crashes_the_candidate_is_judged_again_one_call_at_a_time():
    problem = add_problem_with_tests(*(f"assert candidate({x}, 1) == {x + 1}" for x in range(6)),
                                     "for i in range(8, 12):\n    assert candidate(i, i) == 2 * i")
    code = "import os\ndef add(x, y):\n    if x == 4:\n        os._exit(1)\n    return x + y"
    outcomes = judge_many(problem, [(code, t) for t in problem.tests])
    assert [o.passed for o in outcomes] == [True, True, True, True, False, True, True]
    assert "exited" in outcomes[4].reason
