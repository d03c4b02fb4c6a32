"""Every env's oracle plays from its arguments alone, in any process: an interpreter that
never reset an env, or a Ray worker. The env runs here; each action comes from the oracle
there, fed only the observation and the infos entry (docs/design.md §2)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from repo_paths import REPO as REPO_PATH

import pettingllm_envs
from pettingllm_envs.core import answer_team
from pettingllm_envs.episodes import Episode, play_episode
from pettingllm_envs.policies import Policy, scripted_policy

REPO = str(REPO_PATH)
#: Reads pickled ``(env_id, observation, agent, info)`` requests from stdin until it is closed and
#: answers each with the oracle's action (one pickle per reply). It never makes or resets an env.
ORACLE_SERVER = """
import pickle, sys
from pettingllm_envs.policies import scripted_policy

while True:
    try:
        env_id, observation, agent, info = pickle.load(sys.stdin.buffer)
    except EOFError:
        break
    pickle.dump(scripted_policy(env_id)(observation, agent, info), sys.stdout.buffer)
    sys.stdout.buffer.flush()
"""
#: The reasoning-gym configurations played: a few datasets, one with its own options.
REASONING_GYM_CONFIGS: list[dict[str, Any]] = [
    {"dataset": "countdown"},
    {"dataset": "basic_arithmetic", "dataset_config": {"min_terms": 3, "max_terms": 4}},
    {"dataset": "knights_knaves"},
]


def _cases(dataset_file: str) -> list[tuple[str, dict[str, Any], int]]:
    """``(env_id, config, episodes)``: every registered env as configured by default, and the
    dataset envs on several sources."""
    cases = [(env_id, {}, 2) for env_id in pettingllm_envs.list_envs()]
    cases += [("math_v0", {"difficulty": 3}, 3), ("math_v0", {"dataset": dataset_file}, 3)]
    return cases + [("reasoning_gym_v0", config, 3) for config in REASONING_GYM_CONFIGS]


@pytest.fixture
def dataset_file(tmp_path) -> str:
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} times {i + 3}?", "answer": str(i * (i + 3))}) + "\n"
                            for i in range(30)))
    return str(path)


@pytest.fixture
def fresh_oracle() -> Iterator[subprocess.Popen]:
    """An oracle server in a fresh interpreter (see :data:`ORACLE_SERVER`)."""
    server = subprocess.Popen([sys.executable, "-c", ORACLE_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              cwd=REPO)
    yield server
    server.stdin.close()
    assert server.wait(timeout=60) == 0


def _served_by(server: subprocess.Popen, env_id: str) -> Policy:
    def act(observation: Any, agent: str, info: dict[str, Any]) -> str:
        pickle.dump((env_id, observation, agent, info), server.stdin)
        server.stdin.flush()
        return pickle.load(server.stdout)

    return act


def _play(env_id: str, config: dict[str, Any], policy: Policy, seeds: range) -> list[Episode]:
    env = pettingllm_envs.make(env_id, split="test", **config)
    return [play_episode(env, policy, seed=seed) for seed in seeds]


@pytest.mark.slow
def test_every_oracle_solves_its_problems_from_a_process_that_never_made_the_env(fresh_oracle, dataset_file):
    for env_id, config, episodes in _cases(dataset_file):
        remote = _play(env_id, config, _served_by(fresh_oracle, env_id), range(episodes))
        local = _play(env_id, config, scripted_policy(env_id), range(episodes))
        assert all(episode.success for episode in remote), (env_id, config)
        assert [e.actions for e in remote] == [e.actions for e in local], (env_id, config)


def test_the_problem_reference_names_the_problem_never_its_answer():
    """What the oracle reads in infos: the config fields that determine problems, the index
    and the split; the answer it finds by rebuilding the problem never travels in infos."""
    env = pettingllm_envs.make("reasoning_gym_v0", split="test", **REASONING_GYM_CONFIGS[1])
    env.reset(seed=4)
    info = env.infos[env.agent_selection]
    expected = {"dataset": "basic_arithmetic", "dataset_config": {"min_terms": 3, "max_terms": 4},
                "data_seed": 0, "test_percent": 20}
    assert info["problem"] == {"config": expected, "index": 4, "split": "test"}
    info["problem"]["config"]["dataset_config"]["min_terms"] = 9  # a copy: the env's config is untouched
    assert env.unwrapped.config.dataset_config["min_terms"] == 3
    math_env = pettingllm_envs.make("math_v0", difficulty=2)
    math_env.reset(seed=7)
    reference = math_env.infos["reasoner"]["problem"]
    assert reference["config"] == {"difficulty": 2, "dataset": None, "dataset_format": "auto",
                                   "dataset_hash_split": True, "data_seed": 0, "test_percent": 20}
    assert (reference["index"], reference["split"]) == (7, "train")
    oracle, right = scripted_policy("math_v0"), math_env.infos["reasoner"]
    assert oracle("", "reasoner", right).endswith(f"\\boxed{{{math_env.unwrapped.instance.answer}}}")
    broken = [{**right, "problem_id": "0" * 16}, {**right, "problem": "math"},
              *({**right, "problem": {**reference, **change}} for change in (
                  {"index": "seven"}, {"split": "validation"}, {"config": {"difficulty": 9}},
                  {"config": {"no_such_field": 1}}, {"config": {"dataset": "/no/such/file.jsonl"}}, {"config": []}))]
    for info in broken:  # a reply without an answer, never a crash
        assert oracle("", "reasoner", info) == oracle("", "tool", info) == answer_team.NO_REFERENCE_REPLY


@pytest.mark.slow
def test_oracle_play_works_in_a_ray_worker(dataset_file, ray_session):
    """The oracle answers from a Ray worker for envs played here, and plays a pickled, already
    reset episode to the end there."""
    ray = ray_session

    def oracle_action(env_id: str, observation: Any, agent: str, info: dict[str, Any]) -> str:
        return scripted_policy(env_id)(observation, agent, info)

    def finish_with_the_oracle(env_id: str, env: Any) -> bool:
        """Play ``env`` (reset elsewhere) to its end with the oracle; whether the team solved it."""
        policy = scripted_policy(env_id)
        for agent in env.agent_iter():
            observation, _, terminated, truncated, info = env.last()
            env.step(None if terminated or truncated else policy(observation, agent, info))
        return env.unwrapped.is_success()

    remote_oracle, finish = ray.remote(oracle_action), ray.remote(finish_with_the_oracle)
    cases = [("math_v0", {}), ("math_v0", {"dataset": dataset_file}),
             ("reasoning_gym_v0", REASONING_GYM_CONFIGS[0]), ("reasoning_gym_v0", REASONING_GYM_CONFIGS[1])]
    for env_id, config in cases:
        def act(observation: Any, agent: str, info: dict[str, Any], env_id: str = env_id) -> str:
            return ray.get(remote_oracle.remote(env_id, observation, agent, info))

        assert all(episode.success for episode in _play(env_id, config, act, range(3))), (env_id, config)
        started = []
        for seed in range(3):
            env = pettingllm_envs.make(env_id, **config)
            env.reset(seed=seed)
            started.append(env)
        assert ray.get([finish.remote(env_id, env) for env in started]) == [True] * 3, (env_id, config)
