"""Shared by the textarena_v0 test files: the playable games and their groups, an env maker, a
position reached by scripted play, and a game module's source read without importing it.

Import it after ``pytest.importorskip("textarena")``: it imports TextArena.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import textarena

import pettingllm_envs
from pettingllm_envs.bridges import textarena_games
from pettingllm_envs.bridges.textarena_env import available_games
from pettingllm_envs.bridges.textarena_policies import scripted_policy

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


def game_source(game: str) -> str:
    """The source of a game's module, read from its file: importing it (or its package) could download."""
    entry = textarena.envs.registration.ENV_REGISTRY[game].entry_point
    module = entry.split(":")[0] if isinstance(entry, str) else entry.__module__
    assert module.startswith("textarena.")
    return (Path(textarena.__file__).parent / (module.removeprefix("textarena.").replace(".", "/") + ".py")).read_text()
