"""The env core: spaces, splits, configuration and the base class's bookkeeping."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
from gymnasium.spaces import Text

import pettingllm_envs
from pettingllm_envs.core import TextObservation, UnicodeText, draw_instance, split_of
from pettingllm_envs.planning.plan_path import raw_env


def test_text_observation_is_a_str_with_the_space_dtype():
    obs = TextObservation("héllo ```python")
    space = UnicodeText(100)
    assert isinstance(obs, str) and obs == "héllo ```python"
    assert obs.dtype == space.dtype == Text(5).dtype
    assert space.contains(obs) and space.contains("") and space.contains("\x00\ud800")
    assert not space.contains("x" * 101) and not space.contains(b"bytes") and not space.contains(None)


def test_unicode_text_samples_printable_junk_deterministically():
    first, second = UnicodeText(50, seed=3), UnicodeText(50, seed=3)
    samples = [first.sample() for _ in range(200)]
    assert samples == [second.sample() for _ in range(200)]
    assert any(s == "" or len(s) < 5 for s in samples) and all(first.contains(s) for s in samples)
    assert any(c in "`\n[ " for s in samples for c in s)


def test_split_of_is_a_stable_content_hash():
    keys = [f"puzzle-{i}" for i in range(2000)]
    test_share = sum(split_of(k, 20) == "test" for k in keys) / len(keys)
    assert 0.16 < test_share < 0.24
    assert [split_of(k, 20) for k in keys] == [split_of(k, 20) for k in keys]


def test_draw_instance_fails_clearly_when_a_split_is_unreachable():
    with pytest.raises(RuntimeError, match="no 'test' instance"):
        draw_instance(lambda rng: "always-the-same", lambda x: "train-key", data_seed=0, index=0,
                      split="train" if split_of("train-key", 20) == "test" else "test", test_percent=20)


def test_draw_instance_uses_data_seed_plus_index():
    def generate(rng: random.Random) -> int:
        return rng.randrange(10**9)

    a = draw_instance(generate, str, data_seed=5, index=2, split="train", test_percent=20)
    b = draw_instance(generate, str, data_seed=6, index=1, split="train", test_percent=20)
    assert a == b


def test_reset_picks_the_problem_from_seed_or_options():
    env = raw_env()
    env.reset(seed=7)
    assert (env.index, env.split) == (7, "train")
    env.reset(seed=1, options={"index": 7, "split": "test"})
    assert (env.index, env.split) == (7, "test")
    with pytest.raises(ValueError, match="split"):
        env.reset(options={"split": "validation"})
    env.reset(seed=3)
    first = env.np_random.integers(1 << 30)
    env.reset(seed=3)
    assert env.np_random.integers(1 << 30) == first and env.np_random_seed == 3


def test_overlong_observations_are_cut_in_the_middle():
    env = raw_env(max_observation_chars=400)
    env.reset(seed=0)
    obs = env.observe("tool")
    assert len(obs) <= 400 and "cut to fit" in obs
    assert obs.startswith("You are on a team")


def test_overlong_action_is_invalid_and_explained():
    env = raw_env(max_action_chars=100)
    env.reset(seed=0)
    env.step("MOVES: U" + " U" * 100)
    last = env.infos["tool"]["last_action"]
    assert not last["valid"] and "max_action_chars=100" in last["invalid_reason"]


def test_make_unknown_env_suggests_close_ids():
    with pytest.raises(ValueError, match="did you mean plan_path_v0"):
        pettingllm_envs.make("plan_path_v1")


def test_order_enforcing_wrapper_rejects_step_before_reset():
    env = pettingllm_envs.make("plan_path_v0")
    with pytest.raises(Exception, match="reset"):
        env.step("MOVES: U")


def test_render_modes():
    env = pettingllm_envs.make("plan_path_v0", render_mode="ansi")
    env.reset(seed=0)
    assert "A" in env.render() and "G" in env.render()
    with pytest.raises(ValueError):
        raw_env(render_mode="rgb_array")


def test_deepcopy_is_cheaper_than_rebuilding_and_keeps_rng_streams_apart():
    env = raw_env()
    env.reset(seed=0)
    clone = copy.deepcopy(env)
    assert clone.np_random is not env.np_random
    assert np.array_equal(clone.np_random.integers(0, 100, 5), env.np_random.integers(0, 100, 5))
    assert clone._action_spaces is env._action_spaces


@pytest.mark.parametrize("env_id", ["plan_path_v0", "sudoku_v0", "math_v0", "tictactoe_v0"])
def test_every_role_is_paid_the_change_of_the_team_state(env_id):
    """The team part of each step's reward is alpha * (G after - G before), paid to every role
    (not only the actor), so each role's episode return is alpha * (G_final - G_start) plus its
    own local rewards: stalling in a partly solved state earns nothing."""
    from pettingllm_envs.episodes import play_episode
    from pettingllm_envs.policies import scripted_policy

    alpha = 0.7
    env = pettingllm_envs.make(env_id, alpha=alpha)
    env.reset(seed=1)
    base = env.unwrapped
    start = {a: base.team_state(a) for a in base.possible_agents}
    episode = play_episode(env, scripted_policy(env_id), seed=1)
    assert episode.success
    for agent in base.possible_agents:
        local = sum(r.reward_local for r in base.history if r.agent == agent)
        team = alpha * (base.team_state(agent) - start[agent])
        assert episode.total_reward(agent) == pytest.approx(team + local)
    for record in base.history:  # the actor's own record: its change of G, and G after it
        assert record.reward == pytest.approx(alpha * record.reward_global + record.reward_local)
    assert base.history[-1].team_state == pytest.approx(base.team_state(base.history[-1].agent))


def test_branches_of_one_state_differ_by_their_team_state_alone():
    """N branches of one state share G(s): paying G(s') - G(s) rather than G(s') shifts every
    reward of an AT-GRPO group by the same amount, so normalised advantages are unchanged."""
    from pettingllm_envs.policies import scripted_policy

    env = pettingllm_envs.make("plan_path_v0")
    env.reset(seed=2)
    oracle = scripted_policy("plan_path_v0")
    env.step(oracle(env.observe("tool"), "tool", env.infos["tool"]))  # the planner is to move
    before = env.unwrapped.team_state("planner")
    actions = [oracle(env.observe("planner"), "planner", env.infos["planner"]), "MOVES: U", "MOVES: R R", "junk"]
    for action in actions:
        branch = copy.deepcopy(env)
        branch.step(action)
        last = branch.infos["planner"]["last_action"]
        assert last["reward_global"] == pytest.approx(last["team_state"] - before)


def test_every_env_declares_the_potentials_it_defines():
    """``roles_compete`` and ``has_local_state`` say what the base class reads: an env that
    defines ``team_state`` without ``roles_compete`` would have every role paid the shared G, one
    that defines ``local_state`` without ``has_local_state`` would never pay L."""
    import importlib

    from pettingllm_envs.core.text_env import TextAECEnv
    from pettingllm_envs.registry import ENV_MODULES

    classes = {importlib.import_module(module).raw_env for module in ENV_MODULES.values()}
    text_envs = [cls for cls in classes if issubclass(cls, TextAECEnv)]
    assert len(text_envs) >= 7
    for cls in text_envs:
        assert cls.roles_compete == (cls.team_state is not TextAECEnv.team_state), cls
        assert cls.has_local_state == (cls.local_state is not TextAECEnv.local_state), cls
    assert {cls.__module__ for cls in text_envs if cls.roles_compete} >= {"pettingllm_envs.games.tictactoe"}
