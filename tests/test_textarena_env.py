"""textarena_v0: TextArena's two-player games through the registry-wide conformance tests, game by game,
plus what the bridge adds (the game table, seeding, deep copies, legal moves, no network, self-play groups).

The registry-wide tests (tests/test_registry_envs.py) run the default game; here every game in
``CONFORMANCE_GAMES`` gets the same checks. The quick games run by default, the long tail is marked slow.
"""

from __future__ import annotations

import copy
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

textarena = pytest.importorskip("textarena")

from conformance import (  # noqa: E402
    continue_episode,
    mixed_policy,
    pickle_round_trip,
    random_printable,
    step_junk_actions,
)
from pettingzoo.test import api_test, parallel_api_test, seed_test  # noqa: E402

import pettingllm_envs  # noqa: E402
from pettingllm_envs.bridges import textarena_games  # noqa: E402
from pettingllm_envs.bridges.textarena_env import available_games, random_legal_policy, scripted_policy  # noqa: E402
from pettingllm_envs.episodes import play_episode  # noqa: E402

ENV_ID = "textarena_v0"
GAMES = available_games()
#: Quick games (a few tenths of a second for every check): the default run.
QUICK_GAMES = [
    "Briscola-v0", "Chopsticks-v0", "ColonelBlotto-v0", "ConnectFour-v0", "GameOfPureStrategy-v0", "Golf-v0",
    "HighSociety-v0", "IndianPoker-v0", "IteratedMatchingPennies-v0", "IteratedRockPaperScissors-v0",
    "IteratedTwoThirdsAverage-v0", "KuhnPoker-v0", "LiarsDice-v0", "Nim-v0", "PigDice-v0", "SimpleNegotiation-v0",
    "Snake-v0", "Surround-v0", "TicTacToe-v0", "WildTicTacToe-v0",
]
CONFORMANCE_GAMES = [pytest.param(g, id=g) if g in QUICK_GAMES else pytest.param(g, id=g, marks=pytest.mark.slow)
                     for g in GAMES]
SCRIPTED_GAMES = [g for g in GAMES if textarena_games.GAMES[g].moves is not None]


def make(game: str, **config):
    return pettingllm_envs.make(ENV_ID, game=game, **config)


def scripted_plies(game: str, plies: int):
    """``game`` reset with seed 0 and ``plies`` moves into it, played by the scripted policy."""
    env = make(game)
    env.reset(seed=0)
    for _ in range(plies):
        agent = env.agent_selection
        env.step(scripted_policy(env.observe(agent), agent, env.infos[agent]))
    return env


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


@pytest.mark.parametrize("game", QUICK_GAMES)  # every game pickles: tests/test_pickling.py
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


# ------------------------------------------------------------------ the game table
def _source(game: str) -> str:
    """The source of a game's module, read from its file: importing it (or its package) could download."""
    entry = textarena.envs.registration.ENV_REGISTRY[game].entry_point
    module = entry.split(":")[0] if isinstance(entry, str) else entry.__module__
    assert module.startswith("textarena.")
    return (Path(textarena.__file__).parent / (module.removeprefix("textarena.").replace(".", "/") + ".py")).read_text()


def test_every_textarena_game_is_played_or_listed_with_its_reason():
    registered = {g for g in textarena.envs.registration.ENV_REGISTRY if g.endswith("-v0")}
    played, unavailable = set(textarena_games.GAMES), set(textarena_games.UNAVAILABLE)
    single = set(textarena_games.SINGLE_PLAYER)
    assert not (played & unavailable) and not (played & single) and not (unavailable & single)
    assert played | unavailable | single == registered


@pytest.mark.parametrize("game", sorted(textarena_games.UNAVAILABLE))
def test_each_unavailable_reason_holds(game):
    """Checked without importing the modules that download NLTK data or call OpenRouter."""
    reason = textarena_games.UNAVAILABLE[game]
    registry = textarena.envs.registration.ENV_REGISTRY
    if reason == textarena_games.NO_RAW_VARIANT:
        assert game + "-raw" not in registry
        return
    source = _source(game)
    if reason == textarena_games.SYNTAX_ERROR:
        with pytest.raises(SyntaxError):
            compile(source, game, "exec")
    elif reason == textarena_games.NEEDS_NLTK:
        assert "nltk.download(" in source or "word_lists" in source
    elif reason == textarena_games.NEEDS_API_KEY:
        assert "OpenRouter" in source
    else:
        expected = {textarena_games.MISSING_FILES: FileNotFoundError, textarena_games.NOT_TWO_PLAYERS: AssertionError,
                    textarena_games.FIXED_START: None}[reason]
        if expected is None:  # a fixed start: every seed gives the same content, so no split can be drawn
            keys = set()
            for seed in range(5):
                game_env = textarena.make(game + "-raw")
                game_env.reset(num_players=2, seed=seed)
                keys.add(repr(game_env.state.game_state) + repr(game_env.state.observations))
            assert len(keys) == 1 and textarena_games.GAMES.get(game) is None
            return
        with pytest.raises(expected):
            textarena.make(game + "-raw").reset(num_players=2, seed=0)


FREE_FOR_ALL_GAMES = ["LiarsDice-v0", "MarketEntryGame-v0", "Poker-v0", "PublicGoodsGame-v0", "SantoriniBaseFixed-v0",
                      "Snake-v0", "Surround-v0"]


@pytest.mark.parametrize("game", FREE_FOR_ALL_GAMES)
def test_a_free_for_all_game_ends_at_the_first_elimination_as_that_players_loss(game):
    """Before: Poker and Santorini went on with the eliminated player to move, so junk until
    truncation drew instead of losing; MarketEntryGame and PublicGoodsGame hung the process."""
    env = make(game)
    env.reset(seed=0)
    junk_seat = env.agent_selection
    for _ in range(30):
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            break
        env.step("junk" if agent == junk_seat else scripted_policy(env.observe(agent), agent, env.infos[agent]))
    assert env.unwrapped.game.state.done and not any(env.truncations.values())
    assert env.infos[junk_seat]["game"]["outcome"] == -1.0


@pytest.mark.slow
def test_textarena_itself_hangs_when_both_players_of_market_entry_are_eliminated():
    """What the elimination rule guards against, on TextArena alone (in a child process: it never
    returns): each player sends junk until it is eliminated, then a valid move; once both are out,
    ``FFAMultiPlayerState.step`` looks for a player still in forever."""
    script = ("import textarena\ngame = textarena.make('MarketEntryGame-v0-raw')\ngame.reset(num_players=2, seed=0)\n"
              "for _ in range(80):\n    state = game.state\n"
              "    action = '[E]' if state.current_player_id in state.elimination_order else 'junk'\n"
              "    if game.step(action)[0]:\n        break\nprint('finished')")
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=10)


def test_unknown_and_unavailable_games_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="did you mean ConnectFour-v0"):
        make("ConectFour-v0")
    with pytest.raises(ValueError, match="NLTK"):
        make("Wordle-v0")


def test_no_game_opens_a_network_connection(monkeypatch):
    """Every playable game runs offline: a connection attempt fails the test (and since a library may
    swallow that error, no playable game's module downloads NLTK data or calls OpenRouter)."""
    for game in GAMES:
        source = _source(game)
        assert "nltk.download" not in source and "word_lists" not in source and "OpenRouter" not in source, game

    def refuse(*args, **kwargs):
        raise AssertionError("a TextArena game tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for game in GAMES:
        env = make(game, max_turns=3)
        play_episode(env, scripted_policy, seed=0)


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


def test_legal_actions_are_what_textarena_accepts():
    env = make("ConnectFour-v0")
    env.reset(seed=0)
    agent = env.agent_selection
    game_info = env.infos[agent]["game"]
    other = "player_1" if agent == "player_0" else "player_0"
    assert env.infos[other]["game"]["legal_actions"] is None  # only the player to move gets the list
    legal = game_info["legal_actions"]
    assert legal and set(legal) <= {f"[col {c}]" for c in range(7)}
    for action in legal:
        trial = copy.deepcopy(env)
        trial.step(action)
        assert trial.infos[agent]["last_action"]["valid"]
    quiet = make("ConnectFour-v0", legal_actions_in_info=False)
    quiet.reset(seed=0)
    assert quiet.infos[quiet.agent_selection]["game"]["legal_actions"] is None


def test_a_winning_move_is_listed_and_pays_the_winner_and_charges_the_loser():
    """Nim from an opening: the scripted policy takes the last objects when it can."""
    env = make("Nim-v0")
    env.reset(seed=0)
    raw = env.unwrapped
    while env.agents:
        agent = env.agent_selection
        obs, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        winning = info["game"]["winning_actions"]
        env.step(scripted_policy(obs, agent, info))
        if winning:
            other = "player_1" if agent == "player_0" else "player_0"
            assert raw.rewards[agent] == pytest.approx(raw.config.alpha)
            assert raw.rewards[other] == pytest.approx(-raw.config.alpha)
            assert env.infos[agent]["success"] and not env.infos[other]["success"]
            break


PERFECT_INFORMATION = sorted(g for g in SCRIPTED_GAMES if textarena_games.GAMES[g].perfect_information)


def test_perfect_information_is_marked_only_on_games_without_chance_or_hidden_state():
    """The games whose winning moves are published: no random draw anywhere in their module (so
    no chance after the start either) and no hidden state; the card, dice and simultaneous-move
    games are left unmarked."""
    assert len(PERFECT_INFORMATION) == 13
    for game in PERFECT_INFORMATION:
        spec = textarena_games.GAMES[game]
        assert not spec.random_during_play and "random." not in _source(game), game
    for game in ("KuhnPoker-v0", "LiarsDice-v0", "PigDice-v0", "Battleship-v0", "ColonelBlotto-v0",
                 "IteratedPrisonersDilemma-v0", "Snake-v0", "Surround-v0"):
        assert not textarena_games.GAMES[game].perfect_information, game


@pytest.mark.parametrize("game", [g for g in CONFORMANCE_GAMES if g.values[0] in SCRIPTED_GAMES])
def test_winning_actions_are_published_only_for_games_of_perfect_information(game):
    env = make(game)
    env.reset(seed=0)
    listed = env.infos[env.agent_selection]["game"]
    assert listed["legal_actions"]
    if textarena_games.GAMES[game].perfect_information:
        assert isinstance(listed["winning_actions"], list)
    else:
        assert listed["winning_actions"] is None and env.unwrapped.legal_actions()[1] == ()


def _legal_in_a_world(env, change) -> tuple[str, tuple[str, ...]]:
    """The observation and the legal moves of the player to move after ``change`` to a copy's hidden state."""
    world = copy.deepcopy(env)
    change(world.unwrapped)
    world.unwrapped.legal_cache = None
    return str(world.observe(world.agent_selection)), world.unwrapped.legal_actions()[0]


def test_legal_moves_do_not_depend_on_the_opponent_s_cards_dice_or_the_next_roll():
    """Only the mover's view decides what is listed: two worlds the mover cannot tell apart (other
    opponent cards or dice, another state of the dice to come) list the same legal moves."""
    kuhn = make("KuhnPoker-v0")
    kuhn.reset(seed=0)
    mover = kuhn.unwrapped.game.state.current_player_id
    mine = kuhn.unwrapped.game.state.game_state["player_cards"][mover]

    def card(value):
        return lambda raw: raw.game.state.game_state["player_cards"].__setitem__(1 - mover, value)

    worlds = {_legal_in_a_world(kuhn, card(value)) for value in range(3) if value != mine}
    assert len(worlds) == 1
    dice = make("LiarsDice-v0")
    dice.reset(seed=0)
    dice.step("[Bid: 2, 3]")
    mover = dice.unwrapped.game.state.current_player_id

    def rolls(values):
        return lambda raw: raw.game.state.game_state["dice_rolls"].__setitem__(1 - mover, list(values))

    assert len({_legal_in_a_world(dice, rolls(values)) for values in ([1] * 5, [6] * 5, [3, 3, 2, 2, 1])}) == 1
    pig = make("PigDice-v0")
    pig.reset(seed=0)

    def next_roll(seed):
        return lambda raw: setattr(raw, "rng_state", random.Random(seed).getstate())

    assert len({_legal_in_a_world(pig, next_roll(seed)) for seed in range(4)}) == 1


def test_an_invalid_move_costs_the_penalty_and_the_retry_limit_loses_the_game():
    env = make("ConnectFour-v0", illegal_move_penalty=0.3)
    env.reset(seed=0)
    agent = env.agent_selection
    env.step("I will not move.")
    last = env.infos[agent]["last_action"]
    assert not last["valid"] and last["reward_local"] == pytest.approx(-0.3)
    assert "invalid" in last["invalid_reason"].lower()
    assert env.agent_selection == agent  # TextArena's retry: the same player again
    env.step("Still not.")
    assert all(env.terminations.values())
    assert env.infos[agent]["game"]["outcome"] == -1.0
    other = "player_1" if agent == "player_0" else "player_0"
    assert env.infos[other]["success"]


def test_only_the_latest_board_is_shown():
    env = scripted_plies("ConnectFour-v0", 4)
    view = str(env.observe(env.agent_selection))
    assert view.count("Board state:") == 1


# ------------------------------------------------------------------ self-play groups
def test_shared_policy_self_play_keeps_each_seat_in_its_own_groups():
    """One shared policy plays both seats; AT-GRPO's group key (problem, agent, turn) never mixes them."""
    pytest.importorskip("torch")
    from trainers.maths.advantages import group_key
    from trainers.algorithms.atgrpo.config import TrainConfig

    config = TrainConfig(env=ENV_ID, model="unused")
    assert config.regime == "shared" and config.group_by == "problem_agent_turn"
    env = make("TicTacToe-v0")
    episode = play_episode(env, random_legal_policy(0), seed=0)
    keys_by_agent: dict[str, set[str]] = {}
    for record in env.unwrapped.history:
        keys_by_agent.setdefault(record.agent, set()).add(group_key(0, record.agent, record.turn, config.group_by))
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


def test_an_exception_inside_textarena_is_an_invalid_move_and_the_game_is_rebuilt(monkeypatch):
    """No TextArena game raised on the hostile inputs tried; this guards the day one does: the
    half-changed game is rebuilt from the seed, the opening and the actions so far, and the action
    counts as TextArena's invalid move (retry, then the loss), so such input cannot stall a game."""
    env = make("ConnectFour-v0")
    env.reset(seed=0)
    env.step("[col 1]")
    raw = env.unwrapped
    agent = env.agent_selection
    before = copy.deepcopy(raw.game.state.game_state)
    game_class = type(raw.game)
    real_step = game_class.step

    def half_then_raise(self, action):
        if action == "BOOM":
            self.state.game_state["board"][0][0] = "?"  # changed, then the game fails
            raise KeyError("a TextArena bug")
        return real_step(self, action)

    monkeypatch.setattr(game_class, "step", half_then_raise)
    env.step("BOOM")
    last = env.infos[agent]["last_action"]
    assert not last["valid"] and "could not process" in last["invalid_reason"]
    assert raw.game.state.game_state == before and env.agent_selection == agent  # TextArena's retry
    clone = copy.deepcopy(env)
    env.step("[col 2]")
    assert env.infos[agent]["last_action"]["valid"] and not raw.game.state.done
    clone.step("BOOM")  # a second one in a row: TextArena's retry limit ends the game as this player's loss
    assert all(clone.terminations.values()) and clone.infos[agent]["game"]["outcome"] == -1.0
    clone_raw = clone.unwrapped
    rebuilt, _ = clone_raw._replay(clone_raw.instance, clone_raw.game_actions)  # the record replays to the same end
    assert rebuilt.state.done and rebuilt.state.rewards == clone_raw.game.state.rewards
