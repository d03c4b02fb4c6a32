"""Small things a user reads that said something else than what happened: each message names
what the user gave, as they gave it, and every count agrees with the others."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

import pettingllm_envs
from pettingllm_envs.cli import main
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.policies import scripted_policy


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pettingllm: error: ") and "\n" not in err, err
    return err.removeprefix("pettingllm: error: ")


def test_a_negative_step_count_is_shown_as_the_number_typed(capsys, tmp_path):
    err = one_line_error(capsys, ["train", "--model", str(tmp_path), "--steps", "-1"])
    assert err == "config field 'steps': got -1; allowed: >= 0"  # not "got '-1' (str)"


def test_serve_names_its_positional_argument_not_an_option(capsys, tmp_path):
    err = one_line_error(capsys, ["serve", str(tmp_path / "missing")])
    assert err.startswith(f"MODEL {tmp_path / 'missing'}: the folder does not exist")
    assert "--model" not in err  # serve has no --model option


def test_a_request_without_a_model_is_told_it_lacks_one(tiny_model_dir):
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.generation.server import PolicyServer
    from trainers.models.policy_set import PolicySet

    config = TrainConfig.from_flat(model=str(tiny_model_dir), max_new_tokens=4, steps=0, progress=False,
                                   tensorboard=False)
    config.validate()
    policies = PolicySet(config.model, {"assistant": "shared"})
    with PolicyServer(policies, model_name="tiny", max_new_tokens=8) as server:
        request = urllib.request.Request(server.base_url + "/completions", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"prompt": [5, 6], "max_tokens": 2}).encode())
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["error"]["message"] == (
        "the request has no 'model'; this server serves 'tiny'")  # not "model None is not served here"


def test_tictactoes_turns_are_counted_alike_in_prompts_render_and_run(capsys):
    env = pettingllm_envs.make("tictactoe_v0", render_mode="ansi")
    env.reset(seed=0)
    assert "before turn 1 of 5" in env.render()
    prompt_turns = []
    policy = scripted_policy("tictactoe_v0")
    for agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        prompt_turns.append(int(observation.split("Turn ")[-1].split(" of")[0]))
        env.step(policy(observation, agent, info))
        # the render names the turn of the move just made, as the mover's prompt numbered it
        assert f"after turn {prompt_turns[-1]} of 5" in env.render()
    episode = play_episode(pettingllm_envs.make("tictactoe_v0"), policy, seed=0)
    assert episode.turns == prompt_turns[-1] >= 1  # the turn the game was won in counts as played

    assert main(["run", "tictactoe_v0", "--episodes", "5"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("tictactoe_v0"))
    turns = float(row.split()[-2])
    expected = sum(play_episode(pettingllm_envs.make("tictactoe_v0", split="test"), policy, seed=s).turns
                   for s in range(5)) / 5
    assert turns == pytest.approx(expected, abs=0.05) and turns >= 1.0  # was 0.8: a won first turn counted as 0
