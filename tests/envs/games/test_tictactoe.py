"""tictactoe_v0: rules, minimax, openings and splits, zero-sum rewards and illegal moves."""

from __future__ import annotations

import random

import pytest

import pettingllm_envs
from pettingllm_envs.core import split_of
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.games.tictactoe import (
    TicTacToeConfig,
    best_move,
    minimax,
    parse_cell,
    random_policy,
    raw_env,
    scripted_policy,
    winner,
)


def fresh(seed: int = 0, **config) -> raw_env:
    env = raw_env(**config)
    env.reset(seed=seed)
    return env


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("MOVE: 5", 4),
        ("I think the centre.\n**Move:** b2", 4),
        ("move: A1", 0),
        ("MOVE: c3.", 8),
        ("MOVE: 'a3'", 6),
        ("MOVE: 1\nMOVE: 9", 8),
        ("MOVE: 10", None),
        ("MOVE: d1", None),
        ("MOVE: center", None),
        ("5", None),
    ],
)
def test_parse_cell(text, cell):
    assert parse_cell(text)[0] == cell


def test_winner_and_minimax_values():
    assert winner("XXX.OO...") == "X" and winner("O..O..O.X") == "O" and winner("XOXXOOOXX") is None
    assert minimax("." * 9, "X") == 0  # perfect play draws
    assert best_move("XX.OO....", "X") == 2  # win now
    assert best_move("XX.OO....", "O") == 5  # O wins now rather than blocking
    assert best_move("XX..O....", "O") == 2  # block
    assert minimax("X...O...X", "O") <= 0 and minimax("X.......O", "X") > 0


def play_out(first: str, policies: dict[str, object], rng: random.Random) -> str | None:
    board, mark = "." * 9, first
    while winner(board) is None and "." in board:
        free = [i for i in range(9) if board[i] == "."]
        cell = best_move(board, mark) if policies[mark] == "minimax" else rng.choice(free)
        board = board[:cell] + mark + board[cell + 1:]
        mark = "O" if mark == "X" else "X"
    return winner(board)


def test_minimax_never_loses_to_random_play():
    rng = random.Random(0)
    for game in range(200):
        minimax_mark = "X" if game % 2 else "O"
        policies = {minimax_mark: "minimax", ("O" if minimax_mark == "X" else "X"): "random"}
        assert play_out("X", policies, rng) in (minimax_mark, None)


def test_openings_are_forced_wins_for_x_and_splits_are_disjoint():
    env = raw_env()
    keys: dict[str, set[str]] = {}
    for split in ("train", "test"):
        keys[split] = set()
        for index in range(150):
            env.reset(options={"index": index, "split": split})
            board = env.instance.board
            assert board.count("X") == board.count("O") in (1, 2)
            assert winner(board) is None and minimax(board, "X") > 0
            assert split_of(env.instance_key(env.instance), env.config.test_percent) == split
            keys[split].add(board)
    assert not keys["train"] & keys["test"]
    assert len(keys["test"]) > 20


def test_config_validation():
    for bad in ({"opening_plies": (1,)}, {"opening_plies": (0,)}, {"opening_plies": (8,)},
                {"legal_move_reward": -1}, {"opening_plies": ()}):
        with pytest.raises(ValueError):
            TicTacToeConfig(**bad).validate()
    env = fresh(3, opening_plies=(0, 2), forced_win=False)
    assert env.instance.board.count(".") in (7, 9)


def test_win_is_zero_sum_across_the_two_players():
    env = pettingllm_envs.make("tictactoe_v0", alpha=1.0)
    episode = play_episode(env, scripted_policy, seed=4)
    infos = episode.final_infos
    assert infos["player_x"]["success"] and not infos["player_o"]["success"]
    assert infos["player_x"]["game"]["outcome"] == 1.0 and infos["player_o"]["game"]["outcome"] == -1.0
    legal = env.unwrapped.config.legal_move_reward
    moves = {agent: sum(1 for a, _ in episode.actions if a == agent) for agent in ("player_x", "player_o")}
    # every move was legal: totals are the outcome plus the local reward of each move, and the
    # winner is also credited the moves its win saved (half the empty cells left, rounded down)
    saved = infos["player_x"]["game"]["board"].count(".") // 2
    assert episode.total_reward("player_x") == pytest.approx(1.0 + legal * (moves["player_x"] + saved))
    assert episode.total_reward("player_o") == pytest.approx(-1.0 + legal * moves["player_o"])


def test_winning_move_scores_global_one_for_the_mover():
    env = fresh(0)
    board = env.instance.board
    env.step(scripted_policy(env.observe("player_x"), "player_x", {}))
    last = env.infos["player_x"]["last_action"]
    saved = env.board.count(".") // 2 if winner(env.board) == "X" else 0
    assert last["valid"] and last["reward_local"] == pytest.approx(env.config.legal_move_reward * (1 + saved))
    if winner(env.board) == "X":
        assert last["reward_global"] == 1.0 and env.rewards["player_o"] == -1.0
    else:
        assert last["reward_global"] == 0.0 and env.board != board


def test_illegal_move_is_penalised_and_the_player_passes():
    env = fresh(1)
    taken = next(i for i in range(9) if env.instance.board[i] != ".")
    env.step(f"MOVE: {taken + 1}")
    last = env.infos["player_x"]["last_action"]
    assert not last["valid"] and "taken" in last["invalid_reason"] and "lost this move" in last["invalid_reason"]
    assert last["reward_local"] == -env.config.illegal_move_penalty and last["reward_global"] == 0.0
    assert env.board == env.instance.board and env.agent_selection == "player_o"
    assert "last action was invalid" in env.observe("player_o")
    env.step("I refuse to move")
    last = env.infos["player_o"]["last_action"]
    assert "MOVE" in last["invalid_reason"] and last["reward_local"] == -env.config.format_penalty
    # minimax still plays correctly for X after both passed (the mark counts stay even here)
    env.step(scripted_policy(env.observe("player_x"), "player_x", {}))
    assert env.infos["player_x"]["last_action"]["valid"]


def test_both_cell_names_mean_the_same_cell():
    env_a, env_b = fresh(2), fresh(2)
    free = next(i for i in range(9) if env_a.instance.board[i] == ".")
    env_a.step(f"MOVE: {free + 1}")
    env_b.step(f"MOVE: {'abc'[free % 3]}{free // 3 + 1}")
    assert env_a.board == env_b.board != env_a.instance.board


def test_observation_shows_the_opponents_last_move():
    env = fresh(5)
    free = next(i for i in range(9) if env.instance.board[i] == ".")
    env.step(f"MOVE: {free + 1}")
    view = env.observe("player_o")
    assert f"opponent's last move: {'abc'[free % 3]}{free // 3 + 1} ({free + 1})" in view
    assert f"{free + 1}" not in view.split("Free cells:")[1].split(".")[0].split(", ")


def test_draw_and_truncation_give_no_success():
    env = pettingllm_envs.make("tictactoe_v0", max_turns=1)
    env.reset(seed=0)
    env.step("pass")
    env.step("pass")
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert all(info["success"] is False for info in env.infos.values())
    # a full board without three in a row ends the game as a draw
    raw = raw_env(opening_plies=(6,), forced_win=False)
    for seed in range(200):
        raw.reset(seed=seed)
        board, free = raw.instance.board, [i for i in range(9) if raw.instance.board[i] == "."]
        for cell, mark in zip(free, "XOX", strict=True):
            board = board[:cell] + mark + board[cell + 1:]
            if winner(board) is not None:
                break
        else:
            break  # no one wins on the way: a draw
    else:
        pytest.fail("no drawn continuation found")
    for cell in free:
        raw.step(f"MOVE: {cell + 1}")
    assert raw.board == board and all(raw.terminations.values())
    assert all(info["game"]["outcome"] == 0.0 and not info["success"] for info in raw.infos.values())


def test_random_opponent_plays_legal_moves_and_loses_to_minimax():
    env = pettingllm_envs.make("tictactoe_v0", split="test")
    for seed in range(20):
        episode = play_episode(env, {"player_x": scripted_policy, "player_o": random_policy(seed)}, seed=seed)
        assert episode.final_infos["player_x"]["success"]
        assert all(info["last_action"] is None or info["last_action"]["valid"]
                   for info in episode.final_infos.values())


def test_delaying_a_forced_win_never_pays_more():
    """Each legal move earns legal_move_reward, so before the saved-moves credit a player that
    stalled a forced win by one round collected one more; now fast and slow wins pay the same."""
    compared = 0
    for seed in range(20):
        fast, slow = _x_return(seed, delay=False), _x_return(seed, delay=True)
        if fast is not None and slow is not None:
            assert slow <= fast + 1e-9, (seed, fast, slow)
            compared += 1
    assert compared >= 3


def _x_return(seed: int, delay: bool) -> float | None:
    """X's return when it wins as fast as it can, or (``delay``) first plays a move that keeps
    a forced win without winning at once. O plays minimax. None: X did not win, or no delay exists."""
    env = fresh(seed)
    total = 0.0
    if delay:
        board = env.board
        keeps = [c for c in range(9) if board[c] == "." and winner(board[:c] + "X" + board[c + 1:]) is None
                 and minimax(board[:c] + "X" + board[c + 1:], "O") < 0]
        if not keeps:
            return None
        env.step(f"MOVE: {keeps[0] + 1}")
        total += env.rewards["player_x"]
        env.step(f"MOVE: {best_move(env.board, 'O') + 1}")
    while not (env.terminations["player_x"] or env.truncations["player_x"]):
        env.step(f"MOVE: {best_move(env.board, 'X') + 1}")
        total += env.rewards["player_x"]
        if env.terminations["player_o"] or env.truncations["player_o"]:
            break
        env.step(f"MOVE: {best_move(env.board, 'O') + 1}")
    return total if winner(env.board) == "X" else None
