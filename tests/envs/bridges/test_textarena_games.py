"""textarena_v0's game table: every TextArena game is played or left out with a reason that
holds, what the table marks (perfect information) is true of the game's source, free-for-all games
end at the first elimination, unknown or left-out games are refused with the reason, and no
playable game reaches the network.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

textarena = pytest.importorskip("textarena")

from textarena_helpers import (  # noqa: E402
    GAMES,
    SCRIPTED_GAMES,
    game_source,
    make,
)

from pettingllm_envs.bridges import textarena_games  # noqa: E402
from pettingllm_envs.bridges.textarena_policies import scripted_policy  # noqa: E402
from pettingllm_envs.episodes import play_episode  # noqa: E402


# ------------------------------------------------------------------ the game table
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
    source = game_source(game)
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


PERFECT_INFORMATION = sorted(g for g in SCRIPTED_GAMES if textarena_games.GAMES[g].perfect_information)


def test_perfect_information_is_marked_only_on_games_without_chance_or_hidden_state():
    """The games whose winning moves are published: no random draw anywhere in their module (so
    no chance after the start either) and no hidden state; the card, dice and simultaneous-move
    games are left unmarked."""
    assert len(PERFECT_INFORMATION) == 13
    for game in PERFECT_INFORMATION:
        spec = textarena_games.GAMES[game]
        assert not spec.random_during_play and "random." not in game_source(game), game
    for game in ("KuhnPoker-v0", "LiarsDice-v0", "PigDice-v0", "Battleship-v0", "ColonelBlotto-v0",
                 "IteratedPrisonersDilemma-v0", "Snake-v0", "Surround-v0"):
        assert not textarena_games.GAMES[game].perfect_information, game


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
        source = game_source(game)
        assert "nltk.download" not in source and "word_lists" not in source and "OpenRouter" not in source, game

    def refuse(*args, **kwargs):
        raise AssertionError("a TextArena game tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for game in GAMES:
        env = make(game, max_turns=3)
        play_episode(env, scripted_policy, seed=0)
