"""code_v0: datasets and loaders, test parsing, sandboxed judging, rewards of each role,
termination, and that hidden tests never reach an observation."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from pettingllm_envs.code import driver
from pettingllm_envs.code.code_env import (
    CodeConfig,
    format_tests,
    judge_many,
    parse_tests,
    raw_env,
    scripted_policy,
    show_test,
)
from pettingllm_envs.code.datasets import AssertTest, IOTest, builtin_stdio, humaneval, load_dataset
from pettingllm_envs.code.judge import (
    ANSWER_PROGRAM,
    DRIVER_PROGRAM,
    Suite,
    answer_in_one_process,
    answer_stdin,
    driver_stdin,
    one_process_jobs,
)
from pettingllm_envs.code.stdio_problems import PROBLEMS
from pettingllm_envs.core import split_of
from pettingllm_envs.episodes import play_episode

ADD_PROBLEM = "HumanEval/53"  # def add(x: int, y: int)


def fresh(problem_id: str = ADD_PROBLEM, **config) -> raw_env:
    """An env reset on a given problem (found by scanning its split)."""
    env = raw_env(**config)
    for split in ("train", "test"):
        problems = env.dataset.split(split, env.config.test_percent)
        ids = [p.problem_id for p in problems]
        if problem_id in ids:
            env.reset(options={"index": ids.index(problem_id), "split": split})
            return env
    raise AssertionError(problem_id)


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


def last(env: raw_env, agent: str) -> dict:
    return env.infos[agent]["last_action"]


# ------------------------------------------------------------------ data
def test_humaneval_has_164_problems_with_hidden_tests_and_a_disjoint_split():
    dataset = humaneval()
    assert len(dataset.problems) == 164
    assert all(p.tests and p.style == "function" and p.entry_point for p in dataset.problems)
    train, test = dataset.split("train", 20), dataset.split("test", 20)
    assert not {p.problem_id for p in train} & {p.problem_id for p in test}
    assert len(train) + len(test) == 164 and 20 <= len(test) <= 50
    assert all(split_of(p.problem_id, 20) == "test" for p in test)
    assert dataset.split("test", 20) == test  # deterministic
    assert dataset.split("test", 20, data_seed=3) != test and set(dataset.split("test", 20, data_seed=3)) == set(test)
    # "assert True, '...'" lines of HumanEval test nothing and are dropped
    assert not any("assert True" in t.check for p in dataset.problems for t in p.tests)


@pytest.mark.slow
def test_every_canonical_solution_passes_its_split_tests_and_a_stub_fails():
    failures, stub_passes = [], []
    for problem in humaneval().problems:
        jobs = [(problem.reference, t) for t in problem.tests]
        stub = f"def {problem.entry_point}(*args, **kwargs):\n    return None\n"
        outcomes = judge_many(problem, [*jobs, *((stub, t) for t in problem.tests)], timeout=10)
        good, bad = outcomes[: len(jobs)], outcomes[len(jobs):]
        failures += [(problem.problem_id, o.reason) for o in good if not o.passed]
        if all(o.passed for o in bad):
            stub_passes.append(problem.problem_id)
    assert failures == []
    assert stub_passes == []


def test_builtin_stdio_problems_are_consistent():
    dataset = builtin_stdio()
    assert len(dataset.problems) == len(PROBLEMS) >= 12
    for problem in dataset.problems:
        assert problem.style == "stdio" and len(problem.tests) >= 4
        assert "Example input:" in problem.statement
        for test in problem.tests:  # the statement's example is not a hidden test
            assert f"Example input:\n{test.input}Example output" not in problem.statement
        outcomes = judge_many(problem, [(problem.reference, t) for t in problem.tests])
        assert all(o.passed for o in outcomes), (problem.problem_id, outcomes)


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


SUM_SOLUTION = "print(sum(map(int, input().split())))\n"


def test_generic_jsonl_loader(tmp_path):
    records = [
        {"id": "a", "statement": "Add two numbers.", "solution": SUM_SOLUTION,
         "tests": [{"input": "1 2\n", "output": "3\n"}]},
        {"id": "b", "statement": "No solution.", "tests": [{"input": "1\n", "output": "1\n"}]},
        {"id": "c", "statement": "No tests.", "solution": SUM_SOLUTION, "tests": []},
    ]
    dataset = load_dataset(write_jsonl(tmp_path / "mine.jsonl", records))
    assert [p.problem_id for p in dataset.problems] == ["a"]
    assert dataset.skipped == {"no reference solution": 1, "no tests": 1}
    assert dataset.problems[0].tests == (IOTest("1 2\n", "3\n"),)


def test_apps_loader_skips_call_based_records(tmp_path):
    records = [
        {"problem_id": 7, "question": "Sum the numbers.", "solutions": json.dumps([SUM_SOLUTION]),
         "input_output": json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]})},
        {"problem_id": 8, "question": "Call based.", "solutions": json.dumps(["def f(): pass"]),
         "input_output": json.dumps({"inputs": [[1]], "outputs": [[1]], "fn_name": "f"})},
    ]
    dataset = load_dataset(write_jsonl(tmp_path / "apps.jsonl", records))
    assert [p.problem_id for p in dataset.problems] == ["apps/7"]
    assert dataset.skipped == {"call-based (fn_name) problem": 1}
    assert len(dataset.problems[0].tests) == 2


def test_code_contests_loader_takes_a_python3_solution_and_private_then_generated_tests(tmp_path):
    record = {
        "name": "sum", "description": "Sum two numbers.",
        "public_tests": {"input": ["9 9\n"], "output": ["18\n"]},
        "private_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "generated_tests": {"input": ["4 4\n", "0 0\n"], "output": ["8\n", "0\n"]},
        "solutions": {"language": [2, 3], "solution": ["int main(){}", SUM_SOLUTION]},
    }
    path = tmp_path / "cc.json"
    path.write_text(json.dumps([record]))
    problem = load_dataset(str(path)).problems[0]
    assert problem.reference == SUM_SOLUTION and problem.problem_id == "code_contests/sum"
    assert [t.input for t in problem.tests] == ["1 2\n", "4 4\n", "0 0\n"]  # public tests are in the statement
    assert len(load_dataset(str(path), max_hidden_tests=2).problems[0].tests) == 2


def test_livecodebench_loader_needs_a_solution_and_plain_json_tests(tmp_path):
    cases = json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}])
    records = [
        {"question_id": "q1", "question_content": "Sum.", "public_test_cases": cases,
         "private_test_cases": cases, "solution": SUM_SOLUTION},
        {"question_id": "q2", "question_content": "No solution.", "public_test_cases": cases,
         "private_test_cases": cases},
        {"question_id": "q3", "question_content": "Compressed.", "public_test_cases": cases,
         "private_test_cases": "eJzLSM3JyVcozy/KSQEAGgQEXQ==", "solution": SUM_SOLUTION},
        {"question_id": "q4", "question_content": "Functional.", "solution": SUM_SOLUTION,
         "public_test_cases": json.dumps([{"input": "1", "output": "1", "testtype": "functional"}]),
         "private_test_cases": "[]"},
    ]
    dataset = load_dataset(write_jsonl(tmp_path / "lcb.jsonl", records), "livecodebench")
    assert [p.problem_id for p in dataset.problems] == ["livecodebench/q1"]
    assert sum(dataset.skipped.values()) == 3


def test_loader_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_dataset(str(tmp_path / "missing.jsonl"))
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_dataset(str(tmp_path / "empty.jsonl"))
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"foo": 1}])
    with pytest.raises(ValueError, match="format"):
        load_dataset(odd)
    with pytest.raises(ValueError, match="dataset_format"):
        raw_env(dataset=odd, dataset_format="nope")


def test_parquet_needs_pyarrow_or_pandas(tmp_path):
    path = tmp_path / "data.parquet"
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        try:
            import pandas  # noqa: F401
        except ImportError:
            path.write_bytes(b"PAR1")
            with pytest.raises(ImportError, match="pyarrow"):
                load_dataset(str(path))
            return
        pytest.skip("pandas without pyarrow cannot write the parquet fixture")
    record = {"id": "p", "statement": "Sum.", "solution": SUM_SOLUTION, "tests": [{"input": "1 1\n", "output": "2"}]}
    pq.write_table(pa.Table.from_pylist([record]), path)
    assert load_dataset(str(path)).problems[0].problem_id == "p"


def test_env_runs_a_local_file_end_to_end(tmp_path):
    records = [{"id": f"p{i}", "statement": f"Print the sum of the numbers (variant {i}).", "solution": SUM_SOLUTION,
                "tests": [{"input": f"{i} 1\n", "output": f"{i + 1}\n"}]} for i in range(10)]
    env = raw_env(dataset=write_jsonl(tmp_path / "local.jsonl", records), test_percent=50)
    episode = play_episode(env, scripted_policy, seed=0)
    assert episode.success


# ------------------------------------------------------------------ parsing and judging
def test_parse_function_tests():
    problem = humaneval().get(ADD_PROBLEM)
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
    problem = humaneval().get(ADD_PROBLEM)
    test = problem.tests[0]
    cheats = ["import os\nos._exit(0)", "exit(0)", "import sys\nsys.exit()", "raise SystemExit"]
    outcomes = judge_many(problem, [(c, test) for c in cheats])
    assert not any(o.passed for o in outcomes)
    assert "the code failed to load" in outcomes[0].reason


def test_main_block_of_a_solution_does_not_run():
    problem = humaneval().get(ADD_PROBLEM)
    code = "def add(x, y):\n    return x + y\nif __name__ == '__main__':\n    print(add(int(input()), 1))"
    assert all(o.passed for o in judge_many(problem, [(code, t) for t in problem.tests[:2]]))


def test_failure_reasons_explain_what_went_wrong():
    problem = humaneval().get(ADD_PROBLEM)
    test = AssertTest("candidate = add", "assert add(2, 2) == 4")
    wrong, loop, syntax, raises = judge_many(problem, [
        ("def add(x, y):\n    return x - y", test), ("def add(x, y):\n    while True: pass", test),
        ("def add(x, y):\n    return (x +", test), ("def add(x, y):\n    raise ValueError('nope')", test)],
        timeout=0.5)
    assert "AssertionError" in wrong.reason and "add(2, 2) returned 0" in wrong.reason
    assert "timed out" in loop.reason
    assert "failed to load: SyntaxError" in syntax.reason and "line 2 of the code" in syntax.reason
    assert "ValueError: nope (line 2 of the code)" in raises.reason
    stdio = builtin_stdio().problems[0]
    (answer,) = judge_many(stdio, [("print(42)", IOTest("1\n5\n", "5\n"))])
    assert not answer.passed and "expected '5\\n', got '42\\n'" in answer.reason


def test_the_program_is_the_same_driver_for_every_run_and_the_tests_come_after_the_code():
    """The run's program (visible to the code) holds no test; on stdin, the code's frame
    comes first, so the process that runs it is forked before the tests are read."""
    problem = humaneval().get(ADD_PROBLEM)
    assert "assert" not in DRIVER_PROGRAM and "candidate(" not in DRIVER_PROGRAM
    stdin = driver_stdin(Suite(problem, "def add(x, y):\n    return x + y", problem.tests), "t" * 32, 1.0, 400)
    first = int(stdin[:driver.FRAME_DIGITS])
    code_frame = stdin[driver.FRAME_DIGITS: driver.FRAME_DIGITS + first]
    assert "t" * 32 not in code_frame and "prefetch" not in code_frame
    assert "t" * 32 in stdin[driver.FRAME_DIGITS + first:]


def test_hidden_tests_with_known_calls_run_on_the_host_on_the_codes_replies():
    """The one-process mode: the run gets the code and the calls' arguments only (no test,
    no expected value); the host runs the tests on the replies (HumanEval/53's random loop
    included: its calls are recorded and replayed with a private seeded ``random``). A test
    whose arguments depend on a result (``add(add(1, 2), 3)``) is left to the driver."""
    problem = humaneval().get(ADD_PROBLEM)
    suite = Suite(problem, "def add(x, y):\n    return x + y", problem.tests, trusted=True)
    jobs = one_process_jobs([suite], [[None] * len(problem.tests)])
    stdin = answer_stdin(suite, list(jobs[0][2]), 2.0)
    assert "assert" not in stdin and "assert" not in ANSWER_PROGRAM
    for test in problem.tests:
        assert test.check not in stdin
    outcomes = [[None] * len(problem.tests)]
    answer_in_one_process([suite], outcomes, timeout=2.0, memory_mb=512, workers=1, shown_chars=400)
    assert [o is not None and o.passed for o in outcomes[0]] == [True] * 6
    wrong = Suite(problem, "def add(x, y):\n    return x * y", problem.tests, trusted=True)
    outcomes = [[None] * len(problem.tests)]
    answer_in_one_process([wrong], outcomes, timeout=2.0, memory_mb=512, workers=1, shown_chars=400)
    assert not any(o.passed for o in outcomes[0])
    assert "add(2, 3) returned 6" in outcomes[0][2].reason
    untrusted = Suite(problem, wrong.code, problem.tests)  # tester tests never run on the host
    outcomes = [[None] * len(problem.tests)]
    answer_in_one_process([untrusted], outcomes, timeout=2.0, memory_mb=512, workers=1, shown_chars=400)
    assert outcomes == [[None] * len(problem.tests)]
    nested = add_problem_with_tests("assert candidate(candidate(1, 2), 3) == 6", "assert candidate(1, 1) == 2")
    outcomes = [[None, None]]
    answer_in_one_process([Suite(nested, suite.code, nested.tests, trusted=True)], outcomes, timeout=2.0,
                          memory_mb=512, workers=1, shown_chars=400)
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
        assert driver.from_wire(json_round_trip(driver.to_wire(value))) == value
        assert type(driver.from_wire(json_round_trip(driver.to_wire(value)))) is type(value)
    nan = driver.from_wire(json_round_trip(driver.to_wire(float("nan"))))
    assert nan != nan
    class Sneaky(int):
        def __eq__(self, other):
            return True
    assert type(driver.from_wire(driver.to_wire(Sneaky(3)))) is int
    for bad in [object(), len, iter([]), type("X", (), {})]:
        with pytest.raises(driver.Unsupported):
            driver.to_wire(bad)
    for garbage in [{"q": 1}, {"t": 1}, {"d": [[[1], 2]]}, {"b": "zz"}, {"a": 1, "b": 2}, {"c": ["x", 1]}]:
        with pytest.raises(driver.ProtocolError):
            driver.from_wire(garbage)


def json_round_trip(tree):
    return json.loads(json.dumps(tree))


def test_perturb_changes_every_value_and_keeps_its_type():
    for value in [None, True, False, 0, 7, 2**80, 1.5, 1e300, float("nan"), 1j, "", "ab", b"", [1, 2], [], (1,), {1: 2},
                  {}, {1}, frozenset()]:
        changed = driver.from_wire(driver.perturb(driver.to_wire(value)))
        assert changed != value
        assert value is None or type(changed) is type(value)


def test_the_protocol_serves_the_ways_tests_call_the_function():
    problem = humaneval().get("HumanEval/38")  # decode_cyclic(encode_cyclic(s)) round trips, random inputs
    ref = problem.reference
    assert all(o.passed for o in judge_many(problem, [(ref, t) for t in problem.tests]))
    add = humaneval().get(ADD_PROBLEM)
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
    return dataclasses.replace(humaneval().get(ADD_PROBLEM), tests=tests)


def test_a_prefetched_call_that_crashes_the_candidate_is_judged_again_one_call_at_a_time():
    problem = add_problem_with_tests(*(f"assert candidate({x}, 1) == {x + 1}" for x in range(6)),
                                     "for i in range(8, 12):\n    assert candidate(i, i) == 2 * i")
    code = "import os\ndef add(x, y):\n    if x == 4:\n        os._exit(1)\n    return x + y"
    outcomes = judge_many(problem, [(code, t) for t in problem.tests])
    assert [o.passed for o in outcomes] == [True, True, True, True, False, True, True]
    assert "exited" in outcomes[4].reason


# ------------------------------------------------------------------ rewards and episodes
CORRECT_ADD = fence("def add(x, y):\n    return x + y")
WRONG_ADD = fence("def add(x, y):\n    if x >= 5:\n        return 0\n    return y + x")
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
