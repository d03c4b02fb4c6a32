"""Copies that continue identically: deepcopy and pickle, mid-episode.

AT-GRPO branches a state into N deep copies and steps each with its own completion
(docs/design.md §4); rollouts cross processes and Ray workers as pickles, and checkpoints
keep them. So a copy of an env must play on exactly as the original would, and must share
nothing the original changes: a copy that shares a list with its original corrupts every
branch of a group without ever raising.
"""

from __future__ import annotations

import copy
import pickle
import random
from collections.abc import Callable
from typing import Any

from pettingzoo import AECEnv

from pettingllm_envs.policies import Policy, random_policy
from pettingllm_envs.testing.specs import (
    ConformanceError,
    EnvSpec,
    env_name,
    factory,
    oracle,
    require,
    shown,
    text_env,
)

#: The fields of a :func:`snapshot`, for messages.
SNAPSHOT_FIELDS = ("agent_selection", "agents", "observations", "rewards", "cumulative rewards", "terminations",
                   "truncations", "infos")


def snapshot(env: AECEnv) -> tuple[Any, ...]:
    """What a copy of ``env`` must reproduce: the agent to act, every live agent's observation,
    rewards, cumulative rewards, terminations, truncations and infos."""
    raw = env.unwrapped
    return (raw.agent_selection, list(raw.agents), {agent: str(raw.observe(agent)) for agent in raw.agents},
            dict(raw.rewards), dict(raw._cumulative_rewards), dict(raw.terminations), dict(raw.truncations),
            copy.deepcopy(raw.infos))  # later steps may change these infos in place


def mixed_policy(policy: Policy, *, junk_share: float = 0.3, seed: int = 7) -> Policy:
    """``policy``, replying junk instead with probability ``junk_share`` (seeded), so that
    copies of an env that wrongly share state diverge."""
    rng = random.Random(seed)
    return lambda obs, agent, info: "junk" if rng.random() < junk_share else policy(obs, agent, info)


def pickle_round_trip(env: Any) -> Any:
    return pickle.loads(pickle.dumps(env))


def continue_episode(env: AECEnv, policy: Policy, steps: int, *,
                     reload: Callable[[Any], Any] | None = None) -> list[tuple[Any, ...]]:
    """The :func:`snapshot` before each of up to ``steps`` steps of ``policy`` (None for a done
    agent), ending early when no agent is left; ``reload`` (a pickle round trip, say) replaces
    the env before every snapshot."""
    trace = []
    for _ in range(steps):
        if reload is not None:
            env = reload(env)
        trace.append(snapshot(env))
        if not env.agents:
            break
        agent = env.agent_selection
        obs, _, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else policy(obs, agent, info))
    return trace


def _difference(original: Any, copy_: Any) -> str:
    """The first place two unequal values differ: a dict's key, a text's character, else both values."""
    if isinstance(original, dict) and isinstance(copy_, dict):
        key = next((k for k in [*original, *copy_] if original.get(k) != copy_.get(k)), None)
        if key is not None:
            return f"[{key!r}] {_difference(original.get(key), copy_.get(key))}"
    if isinstance(original, str) and isinstance(copy_, str):
        common = min(len(original), len(copy_))
        at = next((i for i in range(common) if original[i] != copy_[i]), common)
        start = max(0, at - 30)
        return (f"from character {at}: original ...{shown(original[start:at + 60], 120)}, "
                f"copy ...{shown(copy_[start:at + 60], 120)}")
    return f"original {shown(original, 200)}, copy {shown(copy_, 200)}"


def first_difference(expected: list[tuple[Any, ...]], got: list[tuple[Any, ...]]) -> str:
    """Where two traces of :func:`continue_episode` part: the step, the snapshot field and the place in it."""
    for step, (want, have) in enumerate(zip(expected, got, strict=False)):
        for field, a, b in zip(SNAPSHOT_FIELDS, want, have, strict=True):
            if a != b:
                return f"at step {step} the {field} differ: {_difference(a, b)}"
    return f"the original played {len(expected)} steps, the copy {len(got)}"


def _playing_policy(env: EnvSpec, policy: Policy | None) -> Policy:
    """The oracle mixed with junk (random text when there is no oracle): play that reaches far into episodes."""
    return mixed_policy(oracle(env, policy) or random_policy(seed=3))


def check_deepcopy_continuation(env: EnvSpec, *, policy: Policy | None = None, steps: int = 20,
                                seed: int = 5) -> None:
    """A deep copy made one step into an episode plays on exactly as the original (the same
    snapshots, step by step, under the same seeded mix of the oracle and junk)."""
    instance = factory(env)()
    name = env_name(instance)
    instance.reset(seed=seed)
    agent = instance.agent_selection
    instance.step("not a valid action")  # move into the episode first
    clone = copy.deepcopy(instance)
    original = continue_episode(instance, _playing_policy(env, policy), steps)
    copied = continue_episode(clone, _playing_policy(env, policy), steps)
    require(original == copied, name, "a deep copy continues exactly as the original (it shares no state)",
            first_difference(original, copied))
    require(agent in clone.unwrapped.possible_agents, name, "a deep copy keeps its possible agents",
            f"{agent!r} is missing from the copy's {clone.unwrapped.possible_agents}")


def check_pickle_continuation(env: EnvSpec, *, policy: Policy | None = None, steps: int = 20,
                              seed: int = 5) -> None:
    """Pickled and unpickled before every step (right after reset included), the env plays on
    exactly as the original: tree rollouts across processes, Ray transport and checkpoints rely on it."""
    instance = factory(env)()
    name = env_name(instance)
    instance.reset(seed=seed)
    try:
        twin = pickle_round_trip(instance)
    except Exception as error:
        raise ConformanceError(f"{name} breaks 'an env pickles at any point of an episode': right after "
                               f"reset, pickling raised {type(error).__name__}: {error}") from error
    original = continue_episode(instance, _playing_policy(env, policy), steps)
    replayed = continue_episode(twin, _playing_policy(env, policy), steps, reload=pickle_round_trip)
    require(replayed == original, name, "an env pickled before every step continues exactly as the original",
            first_difference(original, replayed))
    require(len(original) > 2, name, "an episode lasts more than two steps under the oracle mixed with junk",
            f"it lasted {len(original)}: the continuation checks saw too little")


def check_parallel_pickle(parallel_env_fn: Callable[[], Any]) -> None:
    """A Parallel API env pickled mid-episode steps as the original (the same returns, then the
    same state): ``parallel_env_fn`` makes a fresh ``ParallelEnv``."""
    env = parallel_env_fn()
    env.reset(seed=3)
    name = env_name(env.aec_env) if hasattr(env, "aec_env") else type(env).__name__
    env.step(dict.fromkeys(env.agents, "junk"))
    twin = pickle_round_trip(env)
    for action in ("not a move", "junk"):
        returned, twin_returned = env.step(dict.fromkeys(env.agents, action)), twin.step(
            dict.fromkeys(twin.agents, action))
        require(twin_returned == returned, name, "a parallel env pickled mid-episode steps as the original",
                f"step({action!r}) returned {shown(returned, 200)}, its unpickled copy {shown(twin_returned, 200)}")
    if hasattr(env, "aec_env"):
        require(snapshot(twin.aec_env) == snapshot(env.aec_env), name,
                "a parallel env pickled mid-episode ends in the original's state",
                first_difference([snapshot(env.aec_env)], [snapshot(twin.aec_env)]))


def check_deepcopy_sharing(env: EnvSpec) -> None:
    """A deep copy shares the config and the problem instance (read-only, possibly heavy) and
    copies the history: a step of the copy leaves the original's history as it was."""
    instance = factory(env)()
    raw = text_env(instance, "the deepcopy sharing check")
    name = env_name(instance)
    instance.reset(seed=2)
    clone = copy.deepcopy(instance)
    raw_clone = text_env(clone, "the deepcopy sharing check")
    require(raw_clone.config is raw.config, name, "deep copies share the config", "the copy has its own config")
    require(raw_clone.instance is raw.instance, name, "deep copies share the problem instance",
            "the copy has its own instance (list it in shared_attributes)")
    require(raw_clone.history is not raw.history, name, "deep copies have their own history",
            "the copy's history is the original's list")
    clone.step("junk")
    require(len(raw_clone.history) == 1 and len(raw.history) == 0, name,
            "a step of a deep copy leaves the original as it was",
            f"after one step of the copy, the copy has {len(raw_clone.history)} records, "
            f"the original {len(raw.history)}")
