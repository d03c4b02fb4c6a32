"""math_v0: the problem generator, dataset loaders, rewards of each role, turns and termination."""

from __future__ import annotations

import json
import random
import re

import pytest

import pettingllm_envs
from pettingllm_envs.math import math_v0
from pettingllm_envs.math.datasets import (
    DatasetFormatError,
    MathProblem,
    load_dataset_file,
    load_hf_dataset,
    read_records,
    record_to_problem,
)
from pettingllm_envs.math.generator import TEMPLATES, generate_problem
from pettingllm_envs.math.math_env import MathConfig, program_answer, raw_env
from pettingllm_envs.testing import check_reset_repeats, check_split_disjointness

RIGHT, WRONG = "right", "wrong"


def fresh(seed: int = 0, **config) -> raw_env:
    env = raw_env(**config)
    env.reset(seed=seed)
    return env


def reasoner(env: raw_env, kind: str) -> str:
    answer = env.instance.answer if kind == RIGHT else str(int(env.instance.answer) + 1)
    return f"Let me compute.\n\\boxed{{{answer}}}"


def tool(env: raw_env, kind: str) -> str:
    answer = env.instance.answer if kind == RIGHT else str(int(env.instance.answer) + 1)
    return f"```python\nprint('working')\nprint({answer})\n```"


# ------------------------------------------------------------------ generator
def test_templates_compute_whole_answers_at_every_level():
    assert len(TEMPLATES) >= 8
    for template in TEMPLATES:
        for level in (1, 2, 3):
            for seed in range(60):
                question, answer = template(random.Random(seed), level)
                assert isinstance(answer, int) and answer >= 0, (template.__name__, level, seed)
                assert question.endswith("?")


def test_levels_take_more_steps():
    """Higher levels have longer problem texts on average (more given quantities)."""
    lengths = {level: sum(len(generate_problem(random.Random(i), level)[0]) for i in range(200))
               for level in (1, 2, 3)}
    assert lengths[1] < lengths[2] < lengths[3]


def test_generator_is_deterministic_and_varied():
    first = [generate_problem(random.Random(i)) for i in range(500)]
    assert first == [generate_problem(random.Random(i)) for i in range(500)]
    assert len({q for q, *_ in first}) > 450
    assert {template for *_, template in first} == {t.__name__ for t in TEMPLATES}


def test_generated_answers_match_hand_computation():
    question, answer = TEMPLATES[0](random.Random(3), 1)  # shopping, level 1
    numbers = [int(n) for n in re.findall(r"\d+", question)]
    count_a, price_a, count_b, price_b = numbers
    assert answer == count_a * price_a + count_b * price_b


def test_splits_are_disjoint_and_deterministic():
    env = raw_env()
    check_split_disjointness(env, 200)  # the key is the question
    check_reset_repeats(env, 5)


def test_difficulty_config_fixes_the_level():
    env = raw_env(difficulty=2)
    for seed in range(20):
        env.reset(seed=seed)
        assert env.instance.level == 2


# ------------------------------------------------------------------- datasets
def write_jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def test_gsm8k_loader(tmp_path):
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [
        {"question": "How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
        {"question": "How much?", "answer": "so 1,200 in all\n#### 1,200"},
    ])
    problems = load_dataset_file(path)
    assert [p.answer for p in problems] == ["7", "1200"]
    assert problems[0].source == "gsm8k"


def test_math_loader_handles_nested_braces(tmp_path):
    path = tmp_path / "math.json"
    path.write_text(json.dumps([
        {"problem": "Simplify.", "solution": "We get $\\boxed{\\frac{\\sqrt{3}}{2}}$.", "level": "Level 4"},
        {"problem": "Sets?", "solution": "\\boxed{1} is wrong; it is \\boxed{\\{1, \\{2\\}\\}}"},
    ]), encoding="utf-8")
    problems = load_dataset_file(path, "math")
    assert problems[0].answer == "\\frac{\\sqrt{3}}{2}" and problems[0].level == 4
    assert problems[1].answer == "\\{1, \\{2\\}\\}"


def test_aime_and_olympiad_records():
    assert record_to_problem({"Problem": "Find n.", "Answer": 204}).answer == "204"
    olympiad = record_to_problem({"question": "Find x, y.", "final_answer": ["$3$", "$\\frac{1}{2}$"]})
    assert olympiad.answer == "3, \\frac{1}{2}"
    assert record_to_problem({"problem": "Q", "solution": "...", "answer": "5"}, "math").answer == "5"


def test_loader_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_dataset_file(tmp_path / "missing.jsonl")
    with pytest.raises(DatasetFormatError, match="#### "):
        record_to_problem({"question": "Q", "answer": "no marker"}, "gsm8k")
    with pytest.raises(DatasetFormatError, match="record 1"):
        load_dataset_file(write_jsonl(tmp_path / "bad.jsonl", [{"question": "Q", "answer": "1"}, {"text": "?"}]))
    bad_json = tmp_path / "broken.jsonl"
    bad_json.write_text('{"question": "Q", "answer": "1"}\n{oops\n', encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"broken\.jsonl:2"):
        read_records(bad_json)
    (tmp_path / "data.csv").write_text("a,b\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="unsupported"):
        read_records(tmp_path / "data.csv")


def test_parquet_and_hf_paths_need_their_libraries(tmp_path):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        (tmp_path / "d.parquet").write_bytes(b"PAR1")
        with pytest.raises(ImportError, match="pyarrow"):
            read_records(tmp_path / "d.parquet")
    try:
        import datasets  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="datasets"):
            load_hf_dataset("openai/gsm8k", "test", "main")


def test_env_on_a_dataset_file(tmp_path):
    records = [{"question": f"What is {i} + {i}?", "answer": f"#### {2 * i}"} for i in range(40)]
    path = write_jsonl(tmp_path / "toy.jsonl", records)
    env = raw_env(dataset=str(path), test_percent=30)
    seen = {}
    for split in ("train", "test"):
        seen[split] = set()
        for index in range(60):
            env.reset(options={"index": index, "split": split})
            seen[split].add(env.instance.question)
    assert seen["train"] and seen["test"] and not seen["train"] & seen["test"]
    assert len(seen["train"]) + len(seen["test"]) == 40
    whole = raw_env(dataset=str(path), dataset_hash_split=False)
    whole.reset(options={"index": 3, "split": "test"})
    assert whole.instance.question == "What is 3 + 3?"
    whole.step("\\boxed{6}")
    whole.step("```python\nprint(3 + 3)\n```")
    assert whole.terminations["tool"] and whole.infos["tool"]["success"]


# -------------------------------------------------------------------- rewards
def test_reasoner_reward_right_above_wrong_above_invalid():
    rewards = {}
    for kind in (RIGHT, WRONG, "invalid"):
        env = fresh(3)
        env.step(reasoner(env, kind) if kind != "invalid" else "the answer is 7 (no box)")
        rewards[kind] = env.infos["reasoner"]["last_action"]
    assert rewards[RIGHT]["reward"] == pytest.approx(2.0)
    assert rewards[RIGHT]["reward_global"] == 1.0 and rewards[RIGHT]["reward_local"] == 1.0
    assert rewards[WRONG]["reward"] == 0.0
    assert rewards["invalid"]["reward_local"] == -0.5 and "boxed" in rewards["invalid"]["invalid_reason"]
    assert rewards[RIGHT]["reward"] > rewards[WRONG]["reward"] > rewards["invalid"]["reward"]


def test_tool_reward_right_above_wrong_above_failures():
    rewards = {}
    for kind in (RIGHT, WRONG):
        env = fresh(4)
        env.step(reasoner(env, WRONG))
        env.step(tool(env, kind))
        rewards[kind] = env.infos["tool"]["last_action"]
    for kind, action in {"crash": "```python\nraise ValueError('no')\n```", "no_code": "print(3)",
                         "silent": "```python\nx = 1\n```"}.items():
        env = fresh(4)
        env.step(reasoner(env, WRONG))
        env.step(action)
        rewards[kind] = env.infos["tool"]["last_action"]
    assert rewards[RIGHT]["reward"] == pytest.approx(2.0)
    assert rewards[WRONG]["reward"] == 0.0
    assert rewards["crash"]["reward_local"] == -0.5 and "failed" in rewards["crash"]["invalid_reason"]
    assert "code block" in rewards["no_code"]["invalid_reason"]
    assert "printed no answer" in rewards["silent"]["invalid_reason"]
    for failure in ("crash", "no_code", "silent"):
        assert rewards[WRONG]["reward"] > rewards[failure]["reward"]


@pytest.mark.parametrize("alpha", [0.0, 0.3, 2.0])
def test_wrong_always_earns_less_than_right_for_each_role(alpha):
    for seed in range(3):
        for role in ("reasoner", "tool"):
            totals = {}
            for kind in (RIGHT, WRONG):
                env = fresh(seed, alpha=alpha)
                if role == "tool":
                    env.step(reasoner(env, WRONG))
                env.step(reasoner(env, kind) if role == "reasoner" else tool(env, kind))
                last = env.infos[role]["last_action"]
                assert last["reward"] == pytest.approx(alpha * last["reward_global"] + last["reward_local"])
                totals[kind] = last["reward"]
            assert totals[WRONG] < totals[RIGHT], (role, seed, alpha)


def test_tool_answer_can_be_boxed_in_its_output():
    assert program_answer("steps\n\\boxed{12}\nbye\n") == "12"
    assert program_answer("a\n\n 7 \n\n") == "7"
    assert program_answer("  \n") is None


# -------------------------------------------------------- turns and termination
def test_agreement_terminates_and_scores_success():
    env = fresh(5)
    env.step(reasoner(env, RIGHT))
    assert not any(env.terminations.values())
    env.step(tool(env, RIGHT))
    assert all(env.terminations.values()) and all(info["success"] for info in env.infos.values())


def test_agreeing_on_a_wrong_answer_ends_without_success():
    env = fresh(5)
    env.step(reasoner(env, WRONG))
    env.step(tool(env, WRONG))
    assert all(env.terminations.values())
    assert not any(info["success"] for info in env.infos.values())
    assert env.infos["tool"]["last_action"]["reward_global"] == 0.0


def test_disagreement_continues_until_max_turns():
    env = pettingllm_envs.make("math_v0", max_turns=2)
    env.reset(seed=6)
    raw = env.unwrapped
    for _ in range(2):
        env.step(reasoner(raw, RIGHT))
        env.step(tool(raw, WRONG))
    assert all(env.truncations.values()) and not any(env.terminations.values())
    # the team answer is the latest one (the tool's, wrong): no success
    assert not env.infos["reasoner"]["success"]


def test_reasoner_correct_mode_ends_at_once():
    env = fresh(7, terminate_on="reasoner_correct")
    env.step(reasoner(env, WRONG))
    assert not any(env.terminations.values())
    env.step(tool(env, WRONG))
    assert not any(env.terminations.values())  # they agree, but this mode ignores agreement
    env.step(reasoner(env, RIGHT))
    assert all(env.terminations.values()) and env.infos["tool"]["success"]


def test_turn_order_is_configurable():
    env = fresh(8, turn_order=("tool", "reasoner"))
    assert env.agent_selection == "tool" and env.possible_agents == ["tool", "reasoner"]
    env.step(tool(env, RIGHT))
    assert env.agent_selection == "reasoner"
    assert "print(" in env.observe("reasoner")


def test_later_role_sees_same_turn_output_and_roles_see_each_other_later():
    env = fresh(9)
    env.step("Reasoning marker-77.\n\\boxed{-1}")
    tool_view = env.observe("tool")
    assert "marker-77" in tool_view and "Answer: -1" in tool_view and "(this turn)" in tool_view
    env.step("```python\nprint('tool-marker-55')\nprint(-2)\n```")
    reasoner_view = env.observe("reasoner")
    assert "tool-marker-55" in reasoner_view and "Answer: -2" in reasoner_view
    assert "Answer: -1" in reasoner_view  # its own previous answer too
    assert "Turn 2 of" in reasoner_view


def test_observations_show_only_the_problem_and_answers_given():
    env = fresh(10, max_turns=3)
    assert env.task_view("reasoner") == f"Problem:\n{env.instance.question}\n\nTurn 1 of 3."
    env.step(reasoner(env, WRONG))
    env.step(tool(env, WRONG))
    view = env.task_view("reasoner").replace(env.instance.question, "").replace("Turn 2 of 3", "")
    assert env.instance.answer not in re.findall(r"\d+", view)
    assert "gold" not in str(env.observe("tool")) and "correct" not in env.task_view("tool")


def test_config_validation():
    with pytest.raises(ValueError, match="turn_order"):
        raw_env(turn_order=("reasoner", "reasoner"))
    with pytest.raises(ValueError, match="terminate_on"):
        raw_env(terminate_on="never")
    with pytest.raises(ValueError, match="difficulty"):
        raw_env(difficulty=4)
    with pytest.raises(ValueError, match="alpha"):
        MathConfig(alpha=-1).validate()
    with pytest.raises(FileNotFoundError):
        raw_env(dataset="/nonexistent/file.jsonl")


def test_package_exports_and_stdlib_math_is_intact():
    import math

    assert math.sqrt(16) == 4
    assert math_v0.raw_env is raw_env
    assert isinstance(MathProblem("q", "1").uid, str)
