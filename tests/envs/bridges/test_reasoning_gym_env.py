"""reasoning_gym_v0: the registry-wide conformance tests on many reasoning-gym datasets,
the dataset list (what is bridged and why the rest is not), splits, config and rewards.

The default run checks :data:`FAST_DATASETS`; :data:`SLOW_DATASETS` (the long tail of the
at-least-20 that the bridge promises) and the sweep over every bridged dataset are slow."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("reasoning_gym")

from pettingzoo.test import api_test, parallel_api_test, seed_test
from reasoning_gym_play import FAST_DATASETS, SLOW_DATASETS

import pettingllm_envs
from pettingllm_envs.bridges import reasoning_gym_datasets as catalogue
from pettingllm_envs.bridges.reasoning_gym_env import scripted_policy
from pettingllm_envs.core import split_of
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.testing import JUNK_ACTIONS, continue_episode, mixed_policy, pickle_round_trip, step_junk_actions

ENV_ID = "reasoning_gym_v0"
CONFORMANCE = [*FAST_DATASETS, *(pytest.param(name, marks=pytest.mark.slow) for name in SLOW_DATASETS)]


def make(dataset: str, **config):
    return pettingllm_envs.make(ENV_ID, dataset=dataset, **config)


def test_at_least_twenty_datasets_are_checked_and_all_are_bridged():
    assert len(FAST_DATASETS) + len(SLOW_DATASETS) >= 20
    assert set(FAST_DATASETS) | set(SLOW_DATASETS) <= set(catalogue.supported_datasets())


# ------------------------------------------------------- the registry-wide tests, per dataset
@pytest.mark.parametrize("dataset", CONFORMANCE)
def test_pettingzoo_api_seed_and_parallel_tests(dataset):
    api_test(make(dataset), num_cycles=300)
    seed_test(lambda: make(dataset), num_cycles=50)
    parallel_api_test(pettingllm_envs.make_parallel(ENV_ID, dataset=dataset), num_cycles=100)


@pytest.mark.parametrize("dataset", CONFORMANCE)
def test_junk_actions_never_raise(dataset):
    env = make(dataset)
    for round_ in range(2):
        env.reset(seed=round_)
        assert len(step_junk_actions(env, JUNK_ACTIONS, reset_seed=round_ + 100)) == len(JUNK_ACTIONS) - 1  # not None


@pytest.mark.parametrize("dataset", CONFORMANCE)
def test_deepcopy_mid_episode_continues_identically(dataset):
    import random

    rng = random.Random(7)

    def mixed(obs, agent, info):  # sometimes junk, so that copies diverge if state is shared
        return "junk" if rng.random() < 0.4 else scripted_policy(obs, agent, info)

    env = make(dataset)
    env.reset(seed=5)
    env.step("<answer>not it</answer>")
    clone = copy.deepcopy(env)
    assert clone.unwrapped.dataset is env.unwrapped.dataset and clone.unwrapped.instance is env.unwrapped.instance
    state = rng.getstate()
    original = continue_episode(env, mixed, 12)
    rng.setstate(state)
    assert continue_episode(clone, mixed, 12) == original


@pytest.mark.parametrize("dataset", FAST_DATASETS)  # every dataset pickles: tests/envs/testing/test_pickling.py
def test_pickle_at_every_step_continues_identically(dataset):
    """The dataset object is a process resource: a pickle names it, and the same-process unpickle gets it back."""
    env = make(dataset)
    env.reset(seed=5)
    twin = pickle_round_trip(env)
    assert twin.unwrapped.dataset is env.unwrapped.dataset
    original = continue_episode(env, mixed_policy(scripted_policy, junk_share=0.4), 12)
    replayed = continue_episode(twin, mixed_policy(scripted_policy, junk_share=0.4), 12, reload=pickle_round_trip)
    assert replayed == original


@pytest.mark.parametrize("dataset", CONFORMANCE)
def test_same_seed_same_episode_and_oracle_solves_every_test_problem(dataset):
    first = play_episode(make(dataset), scripted_policy, seed=11)
    second = play_episode(make(dataset), scripted_policy, seed=11)
    assert (first.observations, first.actions, first.rewards) == (second.observations, second.actions, second.rewards)
    env = make(dataset, split="test")
    episodes = [play_episode(env, scripted_policy, seed=index) for index in range(20)]
    assert all(episode.success for episode in episodes)
    assert len({episode.observations[0] for episode in episodes}) > 1


# ------------------------------------------------------------------ the dataset list
def test_unsupported_datasets_are_refused_with_their_reason():
    for name, reason in catalogue.UNSUPPORTED.items():
        assert name in catalogue.all_datasets()
        with pytest.raises(ValueError, match="not bridged") as error:
            make(name)
        assert reason in str(error.value)
    with pytest.raises(ValueError, match="did you mean countdown"):
        make("countdwn")
    assert len(catalogue.supported_datasets()) == len(catalogue.all_datasets()) - len(catalogue.UNSUPPORTED)


def _dataset(name: str):
    """The reasoning-gym dataset itself, bypassing the bridge (to show why it is refused)."""
    import reasoning_gym

    return reasoning_gym.create_dataset(name, seed=0, size=100)


def test_unsupported_scorers_really_fail_as_listed(tmp_path):
    """Each listed scorer defect holds for reasoning-gym itself, so the list is not stale."""
    marker = tmp_path / "ran"
    for name in ("simple_integration", "intermediate_integration", "polynomial_multiplication"):
        payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('{name}')"
        _dataset(name).score_answer(payload, _dataset(name)[0])
        assert marker.read_text() == name  # the answer ran as code in this process
        marker.unlink()
    halting = _dataset("game_of_life_halting")
    assert all(halting.score_answer("certainly not", halting[i]) == 1.0 for i in range(5))
    coins = _dataset("coin_flip")
    assert sum(coins.score_answer("0", coins[i]) == 1.0 for i in range(50)) > 40
    puzzle = _dataset("puzzle24")
    assert all(puzzle.score_answer("6+6+6+6", puzzle[i]) == 1.0 for i in range(5)
               if puzzle.config.min_value <= 6 <= puzzle.config.max_value)
    for name, reason in catalogue.UNSUPPORTED.items():
        if "no reference answer" in reason:
            assert _dataset(name)[0]["answer"] is None, name
    with pytest.raises(AssertionError, match="at least one dataset"):
        _dataset("composite")  # a mixture: nothing to play without its datasets in the config
    for name, item in catalogue.UNSEEDED_ITEMS.items():
        assert name in catalogue.UNSUPPORTED
        regenerated = {json.dumps(_dataset(name)[item], default=str) for _ in range(4)}
        assert len(regenerated) > 1, name  # the same item of the same seed differs within one process


_DIGESTS = """
import hashlib, json, sys
import reasoning_gym
out = {}
for name in sys.argv[1:]:
    ds = reasoning_gym.create_dataset(name, seed=0, size=100)
    items = [(ds[i]["question"], ds[i]["answer"]) for i in range(12)]
    out[name] = hashlib.sha256(json.dumps(items, default=str).encode()).hexdigest()
print("DIGESTS " + json.dumps(out))  # some generators print to stdout themselves (without a newline)
"""


def _digests(names: list[str], hash_seeds: tuple[int, ...]) -> list[dict[str, str]]:
    """Per hash seed (one process each, run at once), a digest of each dataset's first items."""
    processes = [subprocess.Popen([sys.executable, "-c", _DIGESTS, *names], stdout=subprocess.PIPE, text=True,
                                  stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONHASHSEED": str(seed)})
                 for seed in hash_seeds]
    outputs = [process.communicate(timeout=600)[0] for process in processes]
    assert all(process.returncode == 0 for process in processes)
    return [json.loads(output.rpartition("DIGESTS ")[2]) for output in outputs]


@pytest.mark.slow
def test_problems_are_the_same_in_every_process_and_the_hash_seed_ones_are_not():
    """Problem i must be the same problem in every process (the oracle rebuilding it in another
    process, splits and resumed runs depend on it); the datasets listed for PYTHONHASHSEED really change with it."""
    checked = catalogue.supported_datasets()
    hash_seeded = [name for name, reason in catalogue.UNSUPPORTED.items() if "PYTHONHASHSEED" in reason]
    one, two = _digests(checked + hash_seeded, (1, 2))
    assert [name for name in checked if one[name] != two[name]] == []
    assert [name for name in hash_seeded if one[name] == two[name]] == []


@pytest.mark.slow
def test_every_bridged_dataset_plays_its_oracle_on_the_test_split():
    failures = {}
    for name in catalogue.supported_datasets():
        try:
            env = make(name, split="test")
            solved = [play_episode(env, scripted_policy, seed=index).success for index in range(3)]
        except Exception as error:  # report every failing dataset at once, not only the first
            failures[name] = repr(error)
            continue
        if not all(solved):
            failures[name] = f"oracle solved {solved}"
    assert failures == {}


# ---------------------------------------------------------------------- splits, config
def test_train_and_test_never_share_a_question():
    env = make("basic_arithmetic").unwrapped
    questions = {}
    for split in ("train", "test"):
        seen = set()
        for index in range(150):
            env.reset(seed=index, options={"split": split})
            assert split_of(env.instance_key(env.instance), env.config.test_percent) == split
            seen.add(env.instance.question)
        questions[split] = seen
    assert not questions["train"] & questions["test"]
    assert len(questions["test"]) > 100


def test_dataset_config_is_applied_and_checked():
    env = make("countdown", dataset_config={"min_numbers": 3, "max_numbers": 3}).unwrapped
    env.reset(seed=0)
    assert len(env.instance.entry["metadata"]["numbers"]) == 3
    with pytest.raises(ValueError, match="unknown option"):
        make("countdown", dataset_config={"min_numberz": 3})
    with pytest.raises(ValueError, match="data_seed"):
        make("countdown", dataset_config={"seed": 3})
    with pytest.raises(ValueError, match="not valid"):
        make("countdown", dataset_config={"min_numbers": 5, "max_numbers": 2})
    with pytest.raises(ValueError, match="JSON-like"):
        make("countdown", dataset_config={"min_numbers": object()})
    other = make("countdown", data_seed=1).unwrapped
    other.reset(seed=0)
    env = make("countdown").unwrapped
    env.reset(seed=0)
    assert other.instance.question != env.instance.question


def test_rewards_are_potential_based_and_agreeing_on_a_wrong_answer_ends_with_nothing():
    env = make("basic_arithmetic").unwrapped
    env.reset(seed=3)
    gold = env.instance.answer
    env.step(f"<answer>{gold}</answer>")
    last = env.infos["reasoner"]["last_action"]
    assert last["reward_global"] == 1.0 and last["reward_local"] == 1.0 and last["parsed"]["score"] == 1.0
    env.step("```python\nprint('12345678')\n```")  # the tool disagrees, wrongly: the team answer is now wrong
    tool = env.infos["tool"]["last_action"]
    assert tool["reward_global"] == -1.0 and tool["reward_local"] == 0.0 and not env.terminations["tool"]
    env.step("<answer>12345678</answer>")  # the reasoner gives in: they agree on a wrong answer
    assert all(env.terminations.values()) and not env.infos["reasoner"]["success"]
    assert env.infos["reasoner"]["last_action"]["reward_local"] == -1.0  # its right answer's credit is taken back


def test_infos_and_observations_carry_the_task_and_the_other_role_s_answer():
    env = make("maze").unwrapped
    env.reset(seed=0)
    info = env.infos["reasoner"]
    assert info["dataset"] == "maze" and info["problem_id"] == env.instance.uid
    assert env.instance.question in env.observe("reasoner")
    env.step("I think it is <answer>7</answer>")
    assert "Answer: 7" in env.observe("tool")


# ------------------------------------------------------------- command line, suite, trainer
@pytest.mark.slow  # imports every registered env module
def test_pettingllm_list_counts_the_datasets(capsys):
    from pettingllm_envs.cli import main

    assert main(["list"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(ENV_ID))
    supported, total = len(catalogue.supported_datasets()), len(catalogue.all_datasets())
    assert f"{supported} of {total} reasoning-gym datasets" in line and "reasoner, tool" in line


def test_the_evaluation_suite_benches_a_named_dataset(tmp_path):
    from pettingllm_envs.evaluation.suite import SuiteConfig, run_suite

    config = SuiteConfig(envs=[ENV_ID], policies=["scripted", "random"], episodes=3,
                         env_config={"dataset": "countdown", "max_turns": 2})
    rows = {row["policy"]: row for row in run_suite(config, tmp_path, progress=False)}
    assert rows["scripted"]["success_rate"] == 1.0 and rows["random"]["success_rate"] == 0.0
    record = json.loads((tmp_path / "episodes.jsonl").read_text().splitlines()[0])
    assert record["env_config"]["dataset"] == "countdown"


@pytest.mark.slow
def test_pettingllm_train_runs_on_a_reasoning_gym_dataset(tiny_model_dir, tmp_path, capsys):
    from pettingllm_envs.cli import main

    run, samples = tmp_path / "run", tmp_path / "samples.jsonl"
    args = ["train", "--env", ENV_ID, "--model", str(tiny_model_dir), "--steps", "1", "--run-dir", str(run),
            "--max-new-tokens", "4", "--n-samples", "2", "--problems-per-step", "1", "--env-kwargs",
            '{"dataset": "maze", "max_turns": 1}', "--eval-every", "0", "--progress", "false",
            "--tensorboard", "false", "--dump-samples", str(samples)]
    assert main(args) == 0
    dumped = [json.loads(line) for line in samples.read_text().splitlines()]
    assert {sample["agent"] for sample in dumped} == {"reasoner", "tool"}
    assert all("reasoning task" in sample["prompt"] and "Task:" in sample["prompt"] for sample in dumped)
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]
