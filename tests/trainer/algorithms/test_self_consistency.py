"""Self-consistency: voting functions, the envs' Voting capabilities (math via verify, code via
behaviour, research by command), evaluation, and the refusal of an env that declares none."""

from __future__ import annotations

import pytest

import pettingllm_envs
from pettingllm_envs.capabilities import MissingCapability, Voting, capability
from pettingllm_envs.cli import main
from pettingllm_envs.code.voting import behaviour_program, doctest_probes
from pettingllm_envs.math.math_env import scripted_policy
from trainers.algorithms.self_consistency import evaluate_self_consistency, majority_vote, scores, vote_buckets
from trainers.models.policy_set import PolicySet
from trainers.models.spec import ModelSpec

MATH = capability("math_v0", Voting)


def test_buckets_merge_answers_equal_under_verify():
    answers = ["1/2", "3", None, "0.5", "3", "0.50", "7"]
    assert vote_buckets(answers, MATH.same) == [[0, 3, 5], [1, 4], [6]]
    assert majority_vote(answers, MATH.same) == 0


def test_ties_go_to_the_first_bucket_and_no_votes_give_none():
    assert majority_vote(["4", "5", "5", "4"], MATH.same) == 0
    assert majority_vote(["5", "4", "4", "5"], MATH.same) == 0
    assert majority_vote(["9", "4", "4", "5"], MATH.same) == 1
    assert majority_vote([None, None], MATH.same) is None
    assert majority_vote([], MATH.same) is None


def test_non_transitive_equality_compares_with_the_bucket_representative():
    def close(a: float, b: float) -> bool:
        return abs(a - b) <= 1.0

    # 2.6 is close to 1.9 but not to 1.0, the representative of 1.9's bucket: it starts its own
    assert vote_buckets([1.0, 1.9, 2.6, 2.0], close) == [[0, 1, 3], [2]]


def test_math_votes_are_the_answers_the_env_reads_for_each_role():
    env = pettingllm_envs.make("math_v0")
    env.reset(seed=0)
    assert MATH.keys(env, "reasoner", ["so \\boxed{12}", "no answer", "\\boxed{ 12.0 }"]) == ["12", None, "12.0"]
    programs = ["```python\nprint(6 * 2)\n```", "```python\nraise SystemExit(1)\n```", "no code",
                "```python\nprint('the answer is', 12)\nprint(12.0)\n```"]
    keys = MATH.keys(env, "tool", programs)
    assert keys == ["12", None, None, "12.0"] and MATH.same(keys[0], keys[3])


def test_research_votes_on_the_command_and_its_normalised_argument():
    voting = capability("research_v0", Voting)
    env = pettingllm_envs.make("research_v0")
    env.reset(seed=0)
    keys = voting.keys(env, "main", ["ANSWER: Vel Orin", "**answer**:  vel orin", "DELEGATE: who?", "SEARCH: x",
                                     "no command"])
    assert keys[0] == keys[1] and keys[2] == ("DELEGATE", "who") and keys[3] is None and keys[4] is None


def test_reasoning_gym_votes_on_the_answer_the_env_reads():
    pytest.importorskip("reasoning_gym")
    voting = capability("reasoning_gym_v0", Voting)
    env = pettingllm_envs.make("reasoning_gym_v0", dataset="countdown")
    env.reset(seed=0)
    keys = voting.keys(env, "reasoner", ["so <answer>3 + 4</answer>", "<answer> 3  +\n4 </answer>", "no tag"])
    assert keys == ["3 + 4", "3 + 4", None]
    programs = ["```python\nprint('<answer>3 + 4</answer>')\n```", "```python\nraise SystemExit(2)\n```"]
    assert voting.keys(env, "tool", programs) == ["3 + 4", None]


def test_an_env_without_voting_is_refused_at_start_with_one_clear_line(capsys, tiny_model_dir):
    with pytest.raises(MissingCapability) as error:
        capability("sudoku_v0", Voting)
    message = str(error.value)
    assert "sudoku_v0 does not declare voting" in message and "pettingllm_envs.games.sudoku" in message
    declaring = message.split("envs that declare it: ")[1].split(", ")
    assert {"code_v0", "math_v0", "research_v0"} <= set(declaring) and "sudoku_v0" not in declaring
    # The command refuses it before loading the model: one line, exit status 2.
    assert main(["self-consistency", "--model", str(tiny_model_dir), "--env", "sudoku_v0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pettingllm: error: sudoku_v0 does not declare voting") and "\n" not in err


def test_scores_are_the_envs_success_after_the_voted_action():
    env = pettingllm_envs.make("math_v0")
    env.reset(seed=3, options={"split": "test"})
    info = env.infos["reasoner"]
    right = scripted_policy("", "reasoner", info)
    assert scores(env, "reasoner", [right, "\\boxed{-123456789}", "nothing"]) == [True, False, False]
    assert env.agent_selection == "reasoner"  # the env itself was not stepped


def test_code_votes_by_behaviour_on_the_public_examples():
    env = pettingllm_envs.make("code_v0")
    env.reset(seed=0, options={"split": "test"})
    problem = env.unwrapped.instance
    assert problem.entry_point == "all_prefixes"
    assert doctest_probes(problem.statement) == ["all_prefixes('abc')"]
    loop = ("```python\ndef all_prefixes(string):\n    out = []\n    for i in range(len(string)):\n"
            "        out.append(string[:i + 1])\n    return out\n```")
    comprehension = ("```python\ndef all_prefixes(string):\n"
                     "    return [string[:i] for i in range(1, len(string) + 1)]\n```")
    wrong = "```python\ndef all_prefixes(string):\n    return [string]\n```"
    crash = "```python\ndef all_prefixes(string):\n    return undefined_name\n```"
    texts = [wrong, loop, "no code", comprehension, crash]
    voter = capability("code_v0", Voting)
    keys = voter.keys(env, "coder", texts)
    assert keys[1] == keys[3] == "['a', 'ab', 'abc']\n"
    assert keys[0] != keys[1] and keys[2] is None and keys[4] == "raised NameError\n"
    winner = majority_vote(keys, voter.same)
    assert winner == 1
    assert scores(env, "coder", [texts[winner], wrong]) == [True, False]
    # The tester votes on the set of tests it states, as the env parses them.
    one = "```python\nassert all_prefixes('ab') == ['a', 'ab']\nassert all_prefixes('') == []\n```"
    same = "```python\nassert all_prefixes('') == []\nassert all_prefixes('ab') == ['a', 'ab']\n```"
    tester_keys = voter.keys(env, "tester", [one, same, "no tests"])
    assert tester_keys[0] == tester_keys[1] and tester_keys[2] is None


def test_behaviour_program_prints_one_line_per_probe():
    program = behaviour_program("", "def f(x):\n    return 1 / x", ["f(2)", "f(0)"])
    assert "print(repr(f(2)))" in program and "print(repr(f(0)))" in program


def test_evaluation_on_math_with_the_tiny_model(tiny_model_dir):
    import torch

    torch.manual_seed(0)
    policies = PolicySet(ModelSpec(model=str(tiny_model_dir), max_new_tokens=3, device="cpu"),
                         {"reasoner": "shared", "tool": "shared"})
    report = evaluate_self_consistency(policies, "shared", lambda: pettingllm_envs.make("math_v0"), [0, 1], 3,
                                       voting=MATH, variants=["work backwards", "estimate and check"])
    assert report.problems == 2 and len(report.records) == 2
    for record in report.records:
        assert len(record["successes"]) == 3 and len(record["answers"]) == 3
        assert record["majority"] == (record["winner"] is not None and record["successes"][record["winner"]])
    assert report.single == pytest.approx(sum(sum(r["successes"]) / 3 for r in report.records) / 2)
    for value in (report.single, report.majority, report.greedy, report.ensemble, report.voted):
        assert 0.0 <= value <= 1.0
