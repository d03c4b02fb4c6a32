"""Envs pickle at any point of an episode and continue identically, in this process and in a
fresh one, with their heavy resources (datasets, the verdict cache, the sandbox's and the
math verifier's process pools) carried by reference, never by value. The per-step check of
every registered env is in the conformance battery (``pettingllm_envs.testing``, run by
tests/envs/testing/test_registry_envs.py)."""

from __future__ import annotations

import copy
import gc
import json
import pickle
import subprocess
import sys
import weakref
from typing import Any

import pytest
from reasoning_gym_play import FAST_DATASETS, SLOW_DATASETS
from repo_paths import REPO as REPO_PATH

import pettingllm_envs
from pettingllm_envs.bridges import textarena_games
from pettingllm_envs.core.process_shared import ResourceReference, by_reference
from pettingllm_envs.math import bounded
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.sandbox import executor
from pettingllm_envs.testing import continue_episode, mixed_policy, pickle_round_trip, snapshot

REPO = str(REPO_PATH)
#: TextArena games that draw random numbers during play: their continuation depends on the env's own random state.
RANDOM_GAMES = ["KuhnPoker-v0", "LiarsDice-v0", "PigDice-v0"]

#: The seed of the policy that continues a pickled episode, here and in the fresh interpreter.
CONTINUATION_SEED = 11

#: Run in a fresh interpreter: unpickle the cases read from stdin, continue each with the env's
#: oracle mixed with junk, as here (the process's global random state scrambled first; the
#: oracle has only what the infos entry names), and write back what happened.
CONTINUE_IN_A_FRESH_PROCESS = """
import pickle, random, sys
from pettingllm_envs.core.process_shared import ResourceReference, by_reference
from pettingllm_envs.math import bounded
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.sandbox import executor
from pettingllm_envs.testing import continue_episode, mixed_policy

random.seed(12345)
cases, singletons, family, seed = pickle.load(sys.stdin.buffer)
results = []
for env_id, env, steps in cases:
    resources = sorted(n for n, v in by_reference(env.unwrapped.__dict__).items() if isinstance(v, ResourceReference))
    results.append((resources, continue_episode(env, mixed_policy(scripted_policy(env_id), seed=seed), steps)))
first, copied, other = (pickle.loads(data).unwrapped for data in family)
caches = (first.cache is copied.cache, first.cache is other.cache, first.dataset is other.dataset)
own = singletons[0] is executor._CLIENT and singletons[1] is bounded._POOL
pickle.dump((results, [type(s).__name__ for s in singletons], own, caches), sys.stdout.buffer)
"""


def _resource_names(env: Any) -> list[str]:
    return sorted(n for n, v in by_reference(env.unwrapped.__dict__).items() if isinstance(v, ResourceReference))


def _case(env_id: str, steps: int = 12, **config: Any) -> tuple[bytes, list[tuple[Any, ...]], list[str]]:
    """``env_id`` two steps into an episode, pickled; the snapshots of its continuation here."""
    env = pettingllm_envs.make(env_id, **config)
    env.reset(seed=5)
    continue_episode(env, mixed_policy(scripted_policy(env_id)), 2)
    data = pickle.dumps(env)
    trace = continue_episode(env, mixed_policy(scripted_policy(env_id), seed=CONTINUATION_SEED), steps)
    return data, trace, _resource_names(env)


def test_envs_pickled_mid_episode_continue_identically_in_a_fresh_process():
    # TextArena games retry a rejected move here: by default the junk of the mixed policy ends a game
    # at once, and the episodes must run long enough to be pickled in their middle
    retry = {"retry_rejected": True}
    cases = [(env_id, retry if env_id == "textarena_v0" else {}) for env_id in pettingllm_envs.list_envs()]
    cases += [("textarena_v0", {"game": game, **retry}) for game in RANDOM_GAMES]
    played = [_case(env_id, **config) for env_id, config in cases]
    assert all(len(trace) > 3 for _, trace, _ in played)
    family = pettingllm_envs.make("code_v0")
    family.reset(seed=1)
    family_pickles = [pickle.dumps(family), pickle.dumps(copy.deepcopy(family)),
                      pickle.dumps(pettingllm_envs.make("code_v0"))]
    payload = pickle.dumps(([(env_id, pickle.loads(data), len(trace)) for (env_id, _), (data, trace, _)
                             in zip(cases, played, strict=True)],
                            [executor._CLIENT, bounded._POOL], family_pickles, CONTINUATION_SEED))
    done = subprocess.run([sys.executable, "-c", CONTINUE_IN_A_FRESH_PROCESS], input=payload,
                          capture_output=True, cwd=REPO, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    results, singleton_types, singletons_are_the_process_own, caches = pickle.loads(done.stdout)
    for (env_id, config), (_, trace, resources), (their_resources, their_trace) in zip(cases, played, results,
                                                                                     strict=True):
        assert their_trace == trace, (env_id, config)
        assert their_resources == resources, (env_id, config)  # re-attached to that process's own resources
    assert singleton_types == ["_Client", "_Pool"] and singletons_are_the_process_own
    # copies of one family share one verdict cache there, another family has its own; datasets are per process
    assert caches == (True, False, True)


def test_a_code_env_carries_its_dataset_and_verdict_cache_by_reference():
    env = pettingllm_envs.make("code_v0")
    env.reset(seed=3)
    env.step("```python\ndef f():\n    return 1\n```")
    raw = env.unwrapped
    data = pickle.dumps(env)
    twin = pickle.loads(data).unwrapped
    assert twin.dataset is raw.dataset and twin.cache is raw.cache  # as a deep copy shares them
    assert _resource_names(env) == ["dataset"]
    others = [p for p in raw.dataset.problems if p is not raw.instance]
    assert not any(p.statement.encode() in data for p in others[:20])
    assert len(data) < len(pickle.dumps(raw.dataset)) / 4


def test_a_pickled_verdict_cache_is_not_kept_alive_by_its_pickle():
    """Pickling registers the cache by its family's token, weakly: a cache nobody uses is freed, and a
    later unpickle of the family gets a new, empty one."""
    env = pettingllm_envs.make("code_v0")
    env.reset(seed=1)
    env.step("```python\ndef f():\n    return 1\n```")
    data = pickle.dumps(env)
    cache = weakref.ref(env.unwrapped.cache)
    family, size = cache().family, len(cache()._items)
    del env
    gc.collect()
    assert cache() is None and size > 0
    twin = pickle.loads(data).unwrapped
    assert twin.cache.family == family and len(twin.cache._items) == 0


def test_a_math_env_on_a_dataset_file_names_its_problems(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(40)))
    env = pettingllm_envs.make("math_v0", dataset=str(path))
    env.reset(seed=0)
    data = pickle.dumps(env)
    twin = pickle.loads(data)
    assert twin.unwrapped.pools is env.unwrapped.pools
    assert sum(f"What is {i} + {i}?".encode() in data for i in range(40)) == 1  # the episode's own problem only
    policy = scripted_policy("math_v0")
    assert continue_episode(twin, mixed_policy(policy), 6) == continue_episode(env, mixed_policy(policy), 6)


@pytest.mark.parametrize("game", sorted(textarena_games.GAMES))
def test_every_textarena_game_pickles_mid_episode(game):
    """TextArena's GameSpec holds lambdas: before it became a process resource most games did not pickle."""
    env = pettingllm_envs.make("textarena_v0", game=game)
    env.reset(seed=2)
    env.step("junk")
    twin = pickle_round_trip(env)
    assert snapshot(twin) == snapshot(env)


@pytest.mark.parametrize("dataset", [*FAST_DATASETS, *SLOW_DATASETS])
def test_every_checked_reasoning_gym_dataset_pickles_mid_episode(dataset):
    """The dataset object is named, not carried; the item (whose metadata is the dataset's own) travels."""
    env = pettingllm_envs.make("reasoning_gym_v0", dataset=dataset)
    env.reset(seed=2)
    env.step("<answer>not it</answer>")
    twin = pickle_round_trip(env)
    assert twin.unwrapped.dataset is env.unwrapped.dataset
    assert snapshot(twin) == snapshot(env)
