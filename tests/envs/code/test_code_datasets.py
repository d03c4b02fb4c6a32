"""code_v0's data: HumanEval and the built-in stdio problems, the loaders of local APPS,
CodeContests, LiveCodeBench and generic files, and their errors."""

from __future__ import annotations

import json

import pytest

from pettingllm_envs.code.code_env import JudgeLimits, judge_many, raw_env, scripted_policy
from pettingllm_envs.code.datasets import IOTest, builtin_stdio, humaneval, load_dataset
from pettingllm_envs.code.stdio_problems import PROBLEMS
from pettingllm_envs.core import split_of
from pettingllm_envs.episodes import play_episode


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
        outcomes = judge_many(problem, [*jobs, *((stub, t) for t in problem.tests)], JudgeLimits(timeout=10))
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
