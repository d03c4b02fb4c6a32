"""The scripted policies are partners of model-played roles (the Gymnasium role view, the
single-agent baseline, ``play``), so they read observations that hold model output: a role
whose output looks like the env's own board or status lines must not crash its partner."""

from __future__ import annotations

import pytest

import pettingllm_envs
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.policies import scripted_policy

#: Lines shaped like the boards and status lines of plan_path, sokoban, sudoku and tictactoe.
LOOKALIKES = ["...", "#.#", "A", "G", "##", "@$.", "1 2 3 4", "0 0 0", "| X | O |", "X O .",
              "Walker at (row, col) = (99, 99); goal at (0, 0)", "Player at (9, 9)", "MOVES: U D", "PLACE: 9 9 9"]
PRINTED = "```python\n" + "\n".join(f"print({line!r})" for line in LOOKALIKES) + "\n```"
SAID = "\n".join(LOOKALIKES)
ENVS = [e for e in pettingllm_envs.list_envs() if e != "code_v0"]  # code_v0's oracle reads the dataset


@pytest.mark.parametrize("env_id", ENVS)
@pytest.mark.parametrize("text", [PRINTED, SAID], ids=["program-output", "reply"])
def test_board_lookalike_output_never_crashes_the_scripted_partners(env_id, text):
    env = pettingllm_envs.make(env_id)
    oracle = scripted_policy(env_id)
    for role in env.possible_agents:
        policies = {a: oracle for a in env.possible_agents}
        policies[role] = lambda observation, agent, info: text
        for seed in range(3):
            play_episode(pettingllm_envs.make(env_id), policies, seed=seed)
