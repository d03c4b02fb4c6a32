"""Reproducible problems: a seed names one episode, a split never meets the other, and an
episode that nobody solves ends by truncation.

``reset(seed=i)`` plays problem ``i``, so benchmark rows, AT-GRPO groups and replayed
rollouts can name a problem by a number; and a test split that shares a problem with the
train split measures memory instead of skill (trap 6 of docs/design.md: overlapping splits).
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv

from pettingllm_envs.core import SPLITS, TextAECEnv, split_of
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.policies import Policy, random_policy
from pettingllm_envs.testing.specs import EnvSpec, env_name, factory, instance, oracle, require, text_env


def check_same_seed_same_episode(env: EnvSpec, *, policy: Policy | None = None, seed: int = 11) -> None:
    """Two fresh envs reset with ``seed`` and played by the same policy (the oracle, else seeded
    random text) give the same observations, actions and rewards; ``seed + 1`` gives another
    first observation (another problem)."""
    make = factory(env)

    def play(episode_seed: int) -> Any:
        return play_episode(make(), oracle(env, policy) or random_policy(seed=3), seed=episode_seed)

    first, second = play(seed), play(seed)
    name = env_name(make())
    for part in ("observations", "actions", "rewards"):
        require(getattr(first, part) == getattr(second, part), name,
                "the same seed and the same actions give the same episode",
                f"two episodes of seed {seed} differ in their {part}")
    other = play(seed + 1)
    require(other.observations[0] != first.observations[0], name, "another seed gives another problem",
            f"seeds {seed} and {seed + 1} start with the same observation")


def check_reset_repeats(env: EnvSpec | AECEnv, index: int, split: str = "test") -> None:
    """Resetting to instance ``index`` of ``split`` twice gives the same instance."""
    made = instance(env)
    raw = text_env(made, "the reset check")
    made.reset(options={"index": index, "split": split})
    first = raw.instance
    made.reset(options={"index": index, "split": split})
    require(raw.instance == first, env_name(made), "a reset to one index and split gives one instance",
            f"instance {index} of {split} came out as {first!r}, then as {raw.instance!r}")


def declares_splits(env: AECEnv) -> bool:
    """Whether ``env`` is a TextAECEnv that names its instances (``instance_key``), so that its
    splits can be checked: procedural envs and dataset envs that hash their problems."""
    raw = env.unwrapped
    return isinstance(raw, TextAECEnv) and type(raw).instance_key is not TextAECEnv.instance_key


def check_split_disjointness(env: EnvSpec | AECEnv, count: int) -> dict[str, set[str]]:
    """The instance keys of the first ``count`` instances of each split, each checked to hash into
    its split (``split_of`` with the config's ``test_percent``), and the two splits checked to
    share none. Returns the keys per split."""
    made = instance(env)
    raw = text_env(made, "the split check")
    name = env_name(made)
    keys: dict[str, set[str]] = {}
    for split in SPLITS:
        keys[split] = set()
        for index in range(count):
            made.reset(options={"index": index, "split": split})
            key = raw.instance_key(raw.instance)
            require(split_of(key, raw.config.test_percent) == split, name,
                    "an instance lies in the split its content hashes into",
                    f"instance {index} of {split} has key {key[:80]!r}, which hashes into "
                    f"{split_of(key, raw.config.test_percent)}")
            keys[split].add(key)
    shared = keys["train"] & keys["test"]
    require(not shared, name, "the train and test splits share no instance",
            f"{len(shared)} keys are in both, e.g. {sorted(shared)[0][:80]!r}" if shared else "")
    return keys


def check_truncation(env: EnvSpec | AECEnv, *, idle_action: str = "nothing", by_truncation: bool = False) -> None:
    """Every role stepping ``idle_action`` (a reply that is no move) for ``max_turns`` turns: by
    then the episode is over for every role, and if no role was terminated (the env's rules may
    end a game on invalid moves) no role succeeded. With ``by_truncation`` every role must be
    truncated and none terminated (an env whose idle replies never end the task)."""
    made = instance(env)
    raw = text_env(made, "the truncation check")
    name = env_name(made)
    made.reset(seed=1)
    for _ in range(raw.config.max_turns * len(made.possible_agents)):
        agent = made.agent_selection
        if made.terminations[agent] or made.truncations[agent]:
            break
        made.step(idle_action)
    done = {agent: made.terminations[agent] or made.truncations[agent] for agent in made.agents}
    require(all(done.values()), name, "an episode ends within max_turns turns",
            f"after {raw.config.max_turns} turns of {idle_action!r}: terminations {made.terminations}, "
            f"truncations {made.truncations}")
    if by_truncation:
        require(all(made.truncations.values()) and not any(made.terminations.values()), name,
                "an episode nobody plays ends by truncation at max_turns",
                f"after {raw.config.max_turns} turns of {idle_action!r}: terminations {made.terminations}, "
                f"truncations {made.truncations}")
    if not any(made.terminations.values()):
        require(all(info["success"] is False for info in made.infos.values()), name,
                "an episode nobody plays is not a success",
                f"success flags {({a: info['success'] for a, info in made.infos.items()})}")
