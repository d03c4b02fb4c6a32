"""The env commands on envs registered from outside the package: a PettingZoo classic env
(``tictactoe_v3``: dict observations with an action mask, Discrete actions, no infos) and a plain
text AEC env (``tests/uneven_env.py``), through the public ``register`` call. What works works;
what needs more than the AEC API (an oracle, text actions) is one line saying so."""

from __future__ import annotations

import numpy as np
import pytest

from pettingllm_envs import registry
from pettingllm_envs.cli import main
from pettingllm_envs.cli.env_support import random_actions
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.registry import make, register

pytest.importorskip("pettingzoo.classic")


@pytest.fixture(autouse=True)
def outside_envs(monkeypatch):
    """``tictactoe_v3`` and ``uneven_v0`` registered with the public call, for this test only."""
    monkeypatch.setattr(registry, "ENV_MODULES", dict(registry.ENV_MODULES))
    register("tictactoe_v3", "pettingzoo.classic.tictactoe.tictactoe")
    register("uneven_v0", "uneven_env")


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pettingllm: error: ") and "\n" not in err, err
    return err


def test_list_shows_outside_envs_with_their_agents_and_docs(capsys):
    assert main(["list"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert "player_1, player_2" in rows["tictactoe_v3"] and "Tic Tac Toe" in rows["tictactoe_v3"]
    assert "sprinter, marathoner" in rows["uneven_v0"] and "A plain PettingZoo AEC env" in rows["uneven_v0"]
    assert "tool, planner" in rows["plan_path_v0"]  # the package's envs are listed as before


def test_run_plays_a_classic_env_with_legal_random_moves(capsys):
    assert main(["run", "tictactoe_v3", "--policy", "random", "--episodes", "4"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("tictactoe_v3"))
    # No infos: success and turns are not reported, not shown as 0; the returns are the game's.
    assert row.split()[1] == "n/a" and "player_1=" in row and "player_2=" in row
    assert "n/a: the env does not report it" in out


def test_the_random_baseline_samples_within_the_action_mask():
    env = make("tictactoe_v3")
    policy = random_actions(env, seed=0)
    chosen = []

    def checked(observation: dict, agent: str, info: dict) -> int:
        action = policy(observation, agent, info)
        assert observation["action_mask"][action] == 1  # an illegal move would end the game early
        chosen.append(int(action))
        return action

    for seed in range(10):
        play_episode(env, checked, seed=seed)
    assert len(set(chosen)) == 9  # every cell gets played: a sample, not a fixed move
    env.reset(seed=0)
    observation = env.observe("player_1")
    assert random_actions(env, seed=3)(observation, "player_1", {}) == random_actions(env, seed=3)(
        observation, "player_1", {})  # seeded


def test_run_plays_a_plain_text_env(capsys):
    assert main(["run", "uneven_v0", "--policy", "random", "--episodes", "2", "--env-kwargs", '{"laps": 2}']) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("uneven_v0"))
    assert "sprinter=" in row and "marathoner=" in row


def test_what_an_outside_env_lacks_is_one_line(capsys):
    err = one_line_error(capsys, ["run", "tictactoe_v3"])  # the default policy is the oracle
    assert "run --policy scripted needs the scripted oracle of tictactoe_v3" in err
    assert "pettingzoo.classic.tictactoe.tictactoe defines no scripted_policy" in err
    err = one_line_error(capsys, ["play", "tictactoe_v3"])
    assert "play works with text actions, but tictactoe_v3's are not text (player_1: Discrete(9)" in err
    err = one_line_error(capsys, ["play", "uneven_v0", "--role", "sprinter"])
    assert "needs the scripted oracle of uneven_v0" in err
    err = one_line_error(capsys, ["bench", "tictactoe_v3", "--policy", "random", "--out", "unused"])
    assert "bench works with text actions" in err
    assert "no role 'runner'" in one_line_error(capsys, ["play", "uneven_v0", "--role", "runner"])


def test_an_outside_envs_constructor_checks_its_config(capsys):
    err = one_line_error(capsys, ["run", "uneven_v0", "--policy", "random", "--env-kwargs", '{"lapz": 2}'])
    assert err.startswith("pettingllm: error: uneven_v0 config:") and "lapz" in err


def test_the_random_baseline_of_a_text_env_is_printable_text():
    policy = random_actions(make("plan_path_v0"), seed=0)
    texts = [policy("", "planner", {}) for _ in range(20)]
    assert all(isinstance(t, str) for t in texts) and len(set(texts)) > 1
    assert np.mean([len(t) for t in texts]) > 10
