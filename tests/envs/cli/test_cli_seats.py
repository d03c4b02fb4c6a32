"""``--seat ROLE=SPEC`` in ``pettingllm play`` and ``pettingllm bench``: any subset of roles in seats.

``play`` seats the roles the person does not play (the oracle by default), ``bench`` the roles
the benchmarked policy does not play; a seated bench episode is recorded with its seats (a
different identity from the unseated one) and pays what replaying it with the seat pays.
"""

from __future__ import annotations

import io
import json

import pytest

from pettingllm_envs.cli import main
from pettingllm_envs.evaluation.suite import RECORDS
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.registry import make


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pettingllm: error: ") and "\n" not in err, err
    return err


def test_play_puts_the_roles_the_person_does_not_play_in_the_named_seats(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("MOVES: D D D\n" * 4))
    assert main(["play", "plan_path_v0", "--seat", "tool=random"]) == 0
    out = capsys.readouterr().out
    assert "You play planner" in out and "random plays tool" in out
    assert "--- tool (random) ---" in out and "(scripted)" not in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--seat", "tol=random"], "has no role 'tol'; did you mean 'tool'"),
    (["--seat", "planner=random"], "you play planner (--role)"),
    (["--seat", "tool=gpt"], "unknown spec"),
    (["--seat", "tool"], "'tool' is not role=SPEC"),
    (["--seat", "tool=random", "--seat", "tool=scripted"], "given two seats"),
])
def test_play_refuses_a_seat_it_cannot_use_in_one_line(capsys, argv, message):
    assert message in one_line_error(capsys, ["play", "plan_path_v0", *argv])


def _replayed_returns(record: dict) -> dict[str, float]:
    """The record's episode again: the coder's recorded replies, the scripted tester."""
    env = make("code_v0", split="test")
    env.reset(seed=record["seed"])
    replies = iter(r["text"] for r in record["replies"] if r["agent"] == "coder")
    oracle, returns = scripted_policy("code_v0"), dict.fromkeys(env.possible_agents, 0.0)
    for agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            action = None
        else:
            action = next(replies) if agent == "coder" else oracle(observation, agent, info)
        env.step(action)
        for role, reward in env.rewards.items():
            returns[role] += reward
    return returns


def test_bench_plays_the_seated_role_with_its_seat_and_records_it(capsys, tmp_path):
    out = tmp_path / "bench"
    argv = ["bench", "code_v0", "--policy", "random", "--episodes", "2", "--out", str(out)]
    assert main([*argv, "--seat", "tester=scripted"]) == 0
    assert "seats (the policies played the other roles): tester=scripted" in capsys.readouterr().out
    records = [json.loads(line) for line in (out / RECORDS).read_text().splitlines()]
    assert len(records) == 2
    for record in records:
        assert record["seats"] == {"tester": "scripted"}
        assert record["return"] == pytest.approx(_replayed_returns(record))
    (row,) = json.loads((out / "summary.json").read_text())
    assert row["seats"] == "tester=scripted" and set(row["return_per_role"]) == {"coder", "tester"}
    # the same episodes without the seat are other episodes: played, not reused
    assert main(argv) == 0
    assert "reusing" not in capsys.readouterr().err
    assert len((out / RECORDS).read_text().splitlines()) == 4


@pytest.mark.parametrize(("argv", "message"), [
    (["code_v0", "--seat", "tester=human"], "unknown spec"),
    (["math_v0", "--seat", "tester=scripted"], "math_v0 has no such role"),
    (["code_v0", "--seat", "tester=scripted", "--seat", "coder=random"], "every role of code_v0 is seated"),
    (["code_v0", "--policy", "openai:m@http://127.0.0.1:9/v1", "--mode", "single", "--seat", "tester=scripted"],
     "seats need mode multi"),
])
def test_bench_refuses_seats_it_cannot_use_in_one_line(capsys, tmp_path, argv, message):
    assert message in one_line_error(capsys, ["bench", *argv, "--out", str(tmp_path / "b")])
    assert not (tmp_path / "b").exists()
