"""Every name the README gives a user is accepted as written, and a game that docs/bridges.md
says is left out is refused with its reason, not as an unknown name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pettingllm_envs
from pettingllm_envs.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BRIDGES = (ROOT / "docs" / "bridges.md").read_text()


def _env_row(env_id: str) -> str:
    return next(line for line in README.splitlines() if line.startswith(f"| `{env_id}`"))


def readme_textarena_games() -> list[str]:
    """The games the env table names for textarena_v0 (``game=``: ConnectFour, Othello, ...)."""
    listed = re.search(r"`game=`: ([^;]+)", _env_row("textarena_v0")).group(1)
    return [name.strip() for name in listed.split(",") if name.strip() not in ("", "...")]


def readme_left_out_games() -> list[str]:
    """The games docs/bridges.md lists as left out (``Left out (32 ...): 6 do not import ... (Checkers, ...)``)."""
    section = BRIDGES[BRIDGES.index("Left out (32"):BRIDGES.index("BabyAiText has no")]
    return [name.strip() for group in re.findall(r"\(([A-Z][^)]*)\)", section) for name in group.split(",")]


def test_the_readme_lists_the_games_it_names():
    assert len(readme_textarena_games()) == 8 and "ConnectFour" in readme_textarena_games()
    assert len(readme_left_out_games()) == 6 + 9 + 4 + 2 + 3


@pytest.mark.parametrize("game", readme_textarena_games())
def test_a_game_named_as_in_the_readme_plays(game):
    env = pettingllm_envs.make("textarena_v0", game=game)
    assert env.unwrapped.config.game == f"{game}-v0"  # the same env as the versioned id, so the same episodes
    env.reset(seed=0)
    env.close()


def test_the_readme_name_runs_from_the_command_line(capsys):
    assert main(["run", "textarena_v0", "--episodes", "1", "--env-kwargs", '{"game": "ConnectFour"}']) == 0
    assert "textarena_v0" in capsys.readouterr().out


@pytest.mark.parametrize("game", readme_left_out_games())
def test_a_left_out_game_is_refused_with_its_reason(game):
    with pytest.raises(ValueError, match=rf"TextArena game '{game}-v0' is not available: \S+"):
        pettingllm_envs.make("textarena_v0", game=game)


def test_a_one_player_puzzle_is_refused_with_the_reason(capsys):
    assert main(["run", "textarena_v0", "--env-kwargs", '{"game": "Sudoku"}']) == 2
    assert capsys.readouterr().err.strip() == (
        "pettingllm: error: textarena_v0 config: TextArena game 'Sudoku-v0' is not available: it is a one-player "
        "puzzle, and textarena_v0 plays games between two players")


def test_a_misspelt_game_still_gets_the_close_match(capsys):
    assert main(["run", "textarena_v0", "--env-kwargs", '{"game": "ConectFour"}']) == 2
    assert "did you mean ConnectFour-v0?" in capsys.readouterr().err
