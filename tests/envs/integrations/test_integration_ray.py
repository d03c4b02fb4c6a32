"""The Ray backend: the same episodes and sandbox verdicts as the local code paths."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from openai_server import ChatServer  # noqa: E402

from pettingllm_envs import make  # noqa: E402
from pettingllm_envs.episodes import play_episode  # noqa: E402
from pettingllm_envs.integrations.ray_backend import RayBackend  # noqa: E402
from pettingllm_envs.policies import random_policy, scripted_policy  # noqa: E402
from pettingllm_envs.sandbox import execute_many  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backend(ray_session):
    """Two actors (CI's 2 cores) on the session's Ray."""
    with RayBackend(num_workers=2) as backend:
        yield backend


def _same(remote, local) -> bool:
    return (remote.observations, remote.actions, remote.rewards, remote.final_infos) == (
        local.observations, local.actions, local.rewards, local.final_infos
    )


@pytest.mark.parametrize("env_id", ["plan_path_v0", "code_v0", "tictactoe_v0", "math_v0"])
def test_scripted_episodes_on_actors_equal_local_ones(backend, env_id):
    assert len(backend.workers) == 2
    seeds = [0, 1, 2, 5, 8]
    remote = backend.play_episodes(env_id, scripted_policy(env_id), seeds, split="test")
    local = [play_episode(make(env_id, split="test"), scripted_policy(env_id), seed=s) for s in seeds]
    assert [next(iter(e.final_infos.values()))["index"] for e in remote] == seeds  # seed order kept
    assert all(_same(r, loc) for r, loc in zip(remote, local, strict=True))
    assert all(e.success for e in remote)


def test_spec_policies_are_built_on_the_actors(backend):
    """A spec string is resolved on each actor: ``random`` is seeded per chunk (so it matches
    a local random_policy with that seed), ``openai:`` opens a client per actor."""
    remote = backend.play_episodes("sokoban_v0", "random", [4, 7], max_turns=2)
    for seed, episode in zip([4, 7], remote, strict=True):
        assert _same(episode, play_episode(make("sokoban_v0", max_turns=2), random_policy(seed), seed=seed))
    with ChatServer(lambda messages: "MOVES: U") as server:
        episodes = backend.play_episodes("plan_path_v0", f"openai:tiny@{server.base_url}", [0, 1], max_turns=1)
    assert len(server.requests) == 4  # 2 episodes x 2 roles x 1 turn, all over HTTP
    assert [a for e in episodes for _, a in e.actions] == ["MOVES: U"] * 4


def test_sandbox_batches_on_actors_give_the_local_verdicts(backend):
    programs = [
        "print(sum(range(10)))",
        "import sys; sys.exit(3)",
        "while True: pass",
        "print(input()[::-1])",
        "raise ValueError('boom')",
        "x = 'a' * (2 ** 31)",
    ] * 2
    stdins = ["", "", "", "abc", "", ""] * 2
    remote = backend.execute_many(programs, stdins=stdins, timeout=1.0, memory_mb=256)
    local = execute_many(programs, stdins=stdins, timeout=1.0, memory_mb=256)

    def verdict(r):
        return r.passed, r.returncode, r.timed_out, r.stop_reason, r.stdout

    assert [verdict(r) for r in remote] == [verdict(r) for r in local]
    assert [r.passed for r in remote[:6]] == [True, False, False, True, False, False]
    assert remote[3].stdout == "cba\n"
    assert backend.execute_many([]) == []
    with pytest.raises(ValueError, match="one entry per program"):
        backend.execute_many(["print(1)"], stdins=[])


def test_the_default_actor_count_is_capped_and_set_by_a_variable(monkeypatch):
    from pettingllm_envs.integrations.ray_backend import DEFAULT_MAX_WORKERS, WORKERS_VARIABLE, default_workers

    monkeypatch.delenv(WORKERS_VARIABLE, raising=False)
    assert default_workers(2) == 2 and default_workers(0.5) == 1
    assert default_workers(256) == DEFAULT_MAX_WORKERS  # was one actor per CPU: 256
    assert default_workers(16, cpus_per_worker=4) == 4
    monkeypatch.setenv(WORKERS_VARIABLE, "32")
    assert default_workers(2) == 32
    for bad in ("0", "many", "-3"):
        monkeypatch.setenv(WORKERS_VARIABLE, bad)
        with pytest.raises(ValueError, match=WORKERS_VARIABLE):
            default_workers(2)
