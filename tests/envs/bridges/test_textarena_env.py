"""textarena_v0: TextArena's two-player games through the registry-wide conformance tests, game by game,
plus what the bridge adds (seeding, deep copies and pickles, a time bound on hostile replies, the caller's
random state left alone, self-play groups). The game table is tested in tests/envs/bridges/test_textarena_games.py, the
legal, winning and invalid moves in tests/envs/bridges/test_textarena_moves.py.

The registry-wide tests (tests/envs/testing/test_registry_envs.py) run the default game; here every game in
``CONFORMANCE_GAMES`` gets the same checks. The quick games run by default, the long tail is marked slow.
"""

from __future__ import annotations

import copy
import random
import time

import pytest

textarena = pytest.importorskip("textarena")

from pettingzoo.test import api_test, parallel_api_test, seed_test  # noqa: E402
from textarena_helpers import (  # noqa: E402
    CONFORMANCE_GAMES,
    ENV_ID,
    GAMES,
    QUICK_GAMES,
    SCRIPTED_GAMES,
    make,
    scripted_plies,
)

import pettingllm_envs  # noqa: E402
from pettingllm_envs.bridges.textarena_policies import random_legal_policy, scripted_policy  # noqa: E402
from pettingllm_envs.episodes import play_episode  # noqa: E402
from pettingllm_envs.testing import (  # noqa: E402
    continue_episode,
    mixed_policy,
    pickle_round_trip,
    random_printable,
    step_junk_actions,
)


# ------------------------------------------------------------------ conformance, per game
@pytest.mark.parametrize("game", CONFORMANCE_GAMES)
def test_pettingzoo_api_seed_and_parallel_tests(game):
    api_test(make(game), num_cycles=200)
    seed_test(lambda: make(game), num_cycles=50)
    parallel_api_test(pettingllm_envs.make_parallel(ENV_ID, game=game), num_cycles=100)


JUNK = ["", " ", "\x00\x01", "\ud800 surrogate", "[" * 500, "]]][[[", "[0]" * 2000, "a" * (1024 * 1024),
        b"\xff\xfe bytes", None, 12345, ["list"], "[col -1]", "[99 99]", "[Bid: 999999999999999999999, 7]"]


@pytest.mark.parametrize("game", CONFORMANCE_GAMES)
def test_junk_actions_never_raise_and_are_explained(game):
    env = make(game)
    rng = random.Random(0)
    for round_ in range(2):
        env.reset(seed=round_)
        for last in step_junk_actions(env, [*JUNK, *random_printable(rng, 8, 200)], reset_seed=round_ + 100):
            assert last["reward_local"] <= 0.0


def _trace(env, policy, steps: int):
    trace = []
    for _ in range(steps):
        if not env.agents:
            break
        agent = env.agent_selection
        obs, reward, terminated, truncated, info = env.last()
        trace.append((agent, str(obs), reward, terminated, truncated, info["success"]))
        env.step(None if terminated or truncated else policy(obs, agent, info))
    return trace


@pytest.mark.parametrize("game", CONFORMANCE_GAMES)
def test_deepcopy_mid_episode_continues_identically(game):
    """Copies share nothing mutable: TextArena's game and its random state travel with the copy."""
    rng = random.Random(7)

    def mixed(obs, agent, info):
        return "junk" if rng.random() < 0.2 else scripted_policy(obs, agent, info)

    env = make(game)
    env.reset(seed=5)
    env.step(scripted_policy(env.observe(env.agent_selection), env.agent_selection, env.infos[env.agent_selection]))
    clone = copy.deepcopy(env)
    state = rng.getstate()
    original = _trace(env, mixed, 30)
    rng.setstate(state)
    assert _trace(clone, mixed, 30) == original


@pytest.mark.parametrize("game", QUICK_GAMES)  # every game pickles: tests/envs/testing/test_pickling.py
def test_pickle_at_every_step_continues_identically(game):
    """TextArena's game and the env's own random state travel in the pickle; the game's spec (it holds
    lambdas) and prototype are process resources that the pickle names."""

    env = make(game)
    env.reset(seed=5)
    twin = pickle_round_trip(env)
    assert twin.unwrapped.spec is env.unwrapped.spec and twin.unwrapped.prototype is env.unwrapped.prototype
    original = continue_episode(env, mixed_policy(scripted_policy, junk_share=0.2), 30)
    replayed = continue_episode(twin, mixed_policy(scripted_policy, junk_share=0.2), 30, reload=pickle_round_trip)
    assert replayed == original


@pytest.mark.parametrize("game", [g for g in CONFORMANCE_GAMES if g.values[0] in SCRIPTED_GAMES])
def test_scripted_play_makes_only_legal_moves_and_ends_the_game(game):
    """Games with a move generator: every scripted move made where a legal one was listed is accepted.

    (A position can have none: TextArena's UltimateTicTacToe goes on when every mini-board is full
    but some are drawn, so the player to move can only lose by the invalid-move rule.)"""
    env = make(game, split="test")
    listed: list[bool] = []

    def policy(observation, agent, info):
        listed.append(bool(info["game"]["legal_actions"]))
        return scripted_policy(observation, agent, info)

    for seed in range(2):
        listed.clear()
        episode = play_episode(env, policy, seed=seed)
        assert any(listed)
        assert all(valid for valid, had_legal in zip(episode.valid, listed, strict=True) if had_legal)
        assert set(episode.final_infos) == {"player_0", "player_1"}


@pytest.mark.parametrize("game", [g for g in CONFORMANCE_GAMES if g.values[0] in SCRIPTED_GAMES])
def test_same_seed_same_episode_and_seeds_differ(game):
    first = play_episode(make(game), scripted_policy, seed=11)
    second = play_episode(make(game), scripted_policy, seed=11)
    assert (first.observations, first.actions, first.rewards) == (second.observations, second.actions,
                                                                   second.rewards)
    others = {play_episode(make(game), scripted_policy, seed=s).observations[0] for s in (12, 13, 14)}
    assert len(others | {first.observations[0]}) > 1


# ------------------------------------------------------------------ hostile replies: a time bound
#: Replies that drive TextArena's parsers to their worst case (their regexes backtrack on repeated
#: openers: ConnectFour's ``.*\[(?:col\s*)?(\d+)\].*`` on ``[[[...`` is quadratic), one per parser family.
HOSTILE_UNITS = ["[", "[col ", "[0", "[0 ", "[0,", "[a1 ", "a1", "[A", "[a", "[play ", "[Bid: 1, ", "{", " ", "0", "1 "]


def _slowest_hostile_step(game: str) -> tuple[float, str]:
    env = make(game)
    length = env.unwrapped.config.max_action_chars
    slowest = (0.0, "")
    for unit in HOSTILE_UNITS:
        env.reset(seed=0)
        reply = (unit * (length // len(unit) + 1))[:length]
        started = time.perf_counter()
        env.step(reply)
        slowest = max(slowest, (time.perf_counter() - started, unit))
    return slowest


def test_the_reply_length_bound_is_well_below_what_stalls_a_parser():
    """A denial-of-service bound, not a speed target: at the base class's 32768 characters, one reply
    of ``[`` took ConnectFour 29 s. textarena_v0 sends the game at most 2048; longer replies are unread."""
    env = make("ConnectFour-v0")
    assert env.unwrapped.config.max_action_chars == 2048
    env.reset(seed=0)
    agent = env.agent_selection
    env.step("[" * 32768)
    last = env.infos[agent]["last_action"]
    assert not last["valid"] and "max_action_chars" in last["invalid_reason"]
    seconds, unit = _slowest_hostile_step("ConnectFour-v0")
    assert seconds < 1.0, (seconds, unit)


@pytest.mark.slow
def test_no_hostile_reply_of_the_allowed_length_stalls_any_game():
    """Every playable game steps the worst hostile reply found within a generous second (about 0.1 s
    for the slowest, ConnectFour, on a quiet machine): one reply cannot stall a rollout worker."""
    slow = {game: found for game in GAMES if (found := _slowest_hostile_step(game))[0] >= 1.0}
    assert not slow, slow


# ------------------------------------------------------------------ randomness, copies, views
def test_the_callers_random_state_is_left_alone_and_envs_do_not_disturb_each_other():
    random.seed(123)
    expected = random.random()
    random.seed(123)
    alone = play_episode(make("LiarsDice-v0"), scripted_policy, seed=3)
    assert random.random() == expected
    env_a, env_b = make("LiarsDice-v0"), make("LiarsDice-v0")
    env_a.reset(seed=3)
    env_b.reset(seed=4)
    interleaved = []
    for _ in range(200):  # step both in turns: each keeps its own dice
        for env, trace in ((env_a, interleaved), (env_b, None)):
            if not env.agents:
                continue
            obs, _, terminated, truncated, info = env.last()
            if trace is not None and not (terminated or truncated):
                trace.append((env.agent_selection, str(obs)))
            env.step(None if terminated or truncated else scripted_policy(obs, env.agent_selection, info))
    assert interleaved == alone.observations


def test_deepcopy_shares_the_immutable_parts():
    env = make("ConnectFour-v0")
    env.reset(seed=0)
    env.step("[col 3]")
    clone = copy.deepcopy(env)
    raw, twin = env.unwrapped, clone.unwrapped
    assert twin.views is raw.views and twin.rng_state is raw.rng_state and twin.spec is raw.spec
    assert twin.game is not raw.game and twin.game.state is not raw.game.state
    clone.step("[col 4]")
    assert twin.views is not raw.views and raw.game.state.game_state != twin.game.state.game_state


def test_textarena_queues_and_log_are_drained_so_copies_stay_small():
    env = scripted_plies("ConnectFour-v0", 6)
    state = env.unwrapped.game.state
    assert state.logs == [] and state.observations == {0: [], 1: []}


def test_only_the_latest_board_is_shown():
    env = scripted_plies("ConnectFour-v0", 4)
    view = str(env.observe(env.agent_selection))
    assert view.count("Board state:") == 1


# ------------------------------------------------------------------ self-play groups
def test_shared_policy_self_play_keeps_each_seat_in_its_own_groups():
    """One shared policy plays both seats; AT-GRPO's group key (problem, agent, turn) never mixes them."""
    pytest.importorskip("torch")
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.maths.advantages import group_key

    config = TrainConfig.from_flat(env=ENV_ID, model="unused")
    assert config.rollout.regime == "shared" and config.rollout.group_by == "problem_agent_turn"
    env = make("TicTacToe-v0")
    episode = play_episode(env, random_legal_policy(0), seed=0)
    keys_by_agent: dict[str, set[str]] = {}
    for record in env.unwrapped.history:
        key = group_key(0, record.agent, record.turn, config.rollout.group_by)
        keys_by_agent.setdefault(record.agent, set()).add(key)
    assert set(keys_by_agent) == {"player_0", "player_1"} and episode.turns >= 2
    assert not keys_by_agent["player_0"] & keys_by_agent["player_1"]


@pytest.mark.slow
def test_pettingllm_train_smoke_on_textarena(tiny_model_dir, tmp_path):
    """One AT-GRPO step of one shared policy on both seats (the tiny model trains nothing). The
    prisoner's dilemma opens with free talk, which any reply is, so both seats get turns."""
    import json

    from pettingllm_envs import cli

    run = tmp_path / "run"
    code = cli.main(["train", "--env", ENV_ID, "--model", str(tiny_model_dir), "--steps", "1", "--run-dir", str(run),
                     "--max-new-tokens", "4", "--n-samples", "2", "--problems-per-step", "1", "--env-kwargs",
                     '{"game": "IteratedPrisonersDilemma-v0", "max_turns": 2}', "--eval-every", "0",
                     "--progress", "false", "--tensorboard", "false", "--dump-samples", str(run / "samples.jsonl")])
    assert code == 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert "reward/agent/player_0" in metrics[0] and "reward/agent/player_1" in metrics[0]
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert {s["policy"] for s in samples} == {"shared"}
    groups = {seat: {s["group"] for s in samples if s["agent"] == seat} for seat in ("player_0", "player_1")}
    assert groups["player_0"] and groups["player_1"] and not groups["player_0"] & groups["player_1"]
    assert all(s["group"].split("/")[1] == s["agent"] for s in samples)  # a group holds one seat's samples
