"""Plays shared by the reasoning_gym_v0 attack files: an answer in the form each role gives
it, and an episode in which both roles give an attack's answer every turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pettingllm_envs
from pettingllm_envs.bridges.reasoning_gym_answers import refusal
from pettingllm_envs.episodes import Episode, play_episode

ENV_ID = "reasoning_gym_v0"
#: Datasets whose conformance runs by default; the long tail below runs with the slow tests.
FAST_DATASETS = ["basic_arithmetic", "countdown", "gsm_symbolic", "knights_knaves", "maze", "spiral_matrix"]
SLOW_DATASETS = [
    "ab", "aiw", "arc_1d", "base_conversion", "binary_matrix", "caesar_cipher", "chain_sum", "decimal_arithmetic",
    "fraction_simplification", "gcd", "letter_counting", "letter_jumble", "mini_sudoku", "n_queens",
    "number_sorting", "prime_factorization", "sokoban", "spell_backward", "string_insertion", "sudoku",
    "tower_of_hanoi", "word_sorting",
]


def wrong_answer(env: Any) -> str:
    """A well-formed wrong answer: the reference answer of another problem of the dataset that
    passes the guards (the same shape as a right one) and is not right here."""
    for index in range(1, 50):
        other = str(env.dataset[(env.instance.item_index + index) % 1000]["answer"])
        if refusal(env.config.dataset, other, env.instance.answer) is None and env.raw_score(other) < 1.0:
            return other
    raise AssertionError("no wrong answer found")


def tagged(answer: str) -> str:
    """The reasoner's action giving ``answer``."""
    return f"Let me think.\n<answer>{answer}</answer>"


def printing(answer: str) -> str:
    """The tool's action giving ``answer``: a program that prints it."""
    return f"```python\nprint({answer!r})\n```"


def play_answers(dataset: str, seed: int, answer_of: Callable[[Any], str]) -> Episode:
    """An episode in which both roles give ``answer_of(raw env)`` every turn (the reasoner
    tagged, the tool printed)."""
    env = pettingllm_envs.make(ENV_ID, dataset=dataset)

    def policy(observation: str, agent: str, info: dict[str, Any]) -> str:
        answer = answer_of(env.unwrapped)
        return tagged(answer) if agent == "reasoner" else printing(answer)

    return play_episode(env, policy, seed=seed)
