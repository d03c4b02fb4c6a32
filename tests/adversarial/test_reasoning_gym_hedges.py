"""Hedges on every bridged reasoning-gym dataset: the reference answer listed with wrong
candidates ("A or B", one per line, comma lists, the right one first, last or in the middle)
is a wrong answer, whatever the dataset's own scorer makes of it.

Before the general guard (``reasoning_gym_answers.hedge``) four bridged scorers paid full
credit for such a hedge: sokoban (every shape with the gold first: it replays only the moves
it needs), word_sorting, time_intervals and advanced_geometry (``gold, other``: they read the
first comma-separated values). The tests score each hedge through the env and show, on those
datasets, that the raw scorer still pays it, so removing the guard fails them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("reasoning_gym")

from reasoning_gym_play import ENV_ID, printing, tagged, wrong_answer

import pettingllm_envs
from pettingllm_envs.bridges.reasoning_gym_answers import hedge
from pettingllm_envs.bridges.reasoning_gym_env import available_datasets

#: Hedge shapes from the gold ``g`` and two wrong answers ``w`` and ``v``.
SHAPES: dict[str, Callable[[str, str, str], str]] = {
    "g or w": lambda g, w, v: f"{g} or {w}",
    "w or g": lambda g, w, v: f"{w} or {g}",
    "either g or w": lambda g, w, v: f"either {g} or {w}",
    "g (or w)": lambda g, w, v: f"{g} (or {w})",
    "g or w or v": lambda g, w, v: f"{g} or {w} or {v}",
    "g and w": lambda g, w, v: f"{g} and {w}",
    "g, w": lambda g, w, v: f"{g}, {w}",
    "w, g": lambda g, w, v: f"{w}, {g}",
    "w, g, v": lambda g, w, v: f"{w}, {g}, {v}",
    "[g, w]": lambda g, w, v: f"[{g}, {w}]",
    "g; w": lambda g, w, v: f"{g}; {w}",
    "g | w": lambda g, w, v: f"{g} | {w}",
    "g / w": lambda g, w, v: f"{g} / {w}",
    "g newline w": lambda g, w, v: f"{g}\n{w}",
    "w newline g": lambda g, w, v: f"{w}\n{g}",
    "g w": lambda g, w, v: f"{g} {w}",
    "w g": lambda g, w, v: f"{w} {g}",
}
#: The datasets whose own scorer paid a hedge before the guard (seed 1 of each pays one).
PAID_BEFORE = ("sokoban", "word_sorting", "time_intervals", "advanced_geometry")
SEEDS = range(4)


def second_wrong_answer(env: Any, wrong: str) -> str:
    """Another wrong answer, different from ``wrong`` (the dataset's next reference that is one)."""
    for index in range(60, 120):
        other = str(env.dataset[(env.instance.item_index + index) % 1000]["answer"])
        if other != wrong and env.raw_score(other) < 1.0:
            return other
    return wrong + "1"


def assert_hedges_score_as_wrong(dataset: str) -> int:
    """Step the reasoner with every hedge of each seed's reference; each must be no more right,
    and earn no more, than a well-formed wrong answer. Returns how many hedges the dataset's
    own scorer paid full credit."""
    env = pettingllm_envs.make(ENV_ID, dataset=dataset).unwrapped
    paid_by_scorer = 0
    for seed in SEEDS:
        env.reset(seed=seed)
        gold, wrong = env.instance.answer, wrong_answer(env)
        other = second_wrong_answer(env, wrong)
        honest = copy.deepcopy(env)
        honest.step(tagged(wrong))
        wrong_reward = honest.infos["reasoner"]["last_action"]["reward"]
        for name, shape in SHAPES.items():
            answer = shape(gold, wrong, other)
            paid_by_scorer += env.raw_score(answer) == 1.0
            hedged = copy.deepcopy(env)
            hedged.step(tagged(answer))
            reward = hedged.infos["reasoner"]["last_action"]["reward"]
            assert not hedged.correct["reasoner"] and not hedged.team_correct, (dataset, seed, name, answer[:80])
            assert reward <= wrong_reward, (dataset, seed, name, reward, wrong_reward)
    return paid_by_scorer


@pytest.mark.parametrize("dataset", PAID_BEFORE)
def test_hedges_that_the_scorer_pays_score_as_wrong_answers(dataset):
    assert assert_hedges_score_as_wrong(dataset) > 0, "the scorer no longer pays a hedge: update PAID_BEFORE"


@pytest.mark.slow
def test_hedges_score_as_wrong_answers_on_every_bridged_dataset():
    for dataset in available_datasets():
        assert_hedges_score_as_wrong(dataset)


def test_the_tool_s_printed_hedge_is_wrong_too():
    env = pettingllm_envs.make(ENV_ID, dataset="sokoban").unwrapped
    env.reset(seed=1)
    env.step(tagged(wrong_answer(env)))
    answer = f"{env.instance.answer} or {wrong_answer(env)}"
    assert env.raw_score(answer) == 1.0
    env.step(printing(answer))
    last = env.infos["tool"]["last_action"]
    assert not env.correct["tool"] and last["reward"] <= 0.0 and "several candidates" in last["parsed"]["hedge"]


def test_right_answers_are_not_hedges():
    """The reference itself, and right answers with more parts than the reference whose parts
    are all needed, still get full credit."""
    for dataset in (*PAID_BEFORE, "basic_arithmetic", "knights_knaves", "maze"):
        env = pettingllm_envs.make(ENV_ID, dataset=dataset).unwrapped
        for seed in SEEDS:
            env.reset(seed=seed)
            env.step(tagged(env.instance.answer))
            assert env.correct["reasoner"], (dataset, seed)
    moves = "DLUUURRRDURRURDD"
    assert hedge("DLUU URRRDURRURDD", moves, lambda answer: answer.replace(" ", "") == moves) is None
