"""The evaluation suite: scripted/random runs, resume after interruption, the
OpenAI-compatible client against a real local HTTP server, and the single-agent baseline."""

from __future__ import annotations

import json
import time

import pytest
from openai_server import ChatServer

from pettingllm_envs.cli import main
from pettingllm_envs.evaluation import EndpointError, OpenAIChatPolicy, SuiteConfig, run_suite, split_sections
from pettingllm_envs.evaluation.suite import RECORDS, REPLY_CHARS, load_records, truncate_reply
from pettingllm_envs.policies import scripted_policy


def plan_path_model(messages):
    """A 'model' that behaves like the plan_path oracle, reading only the chat messages."""
    system = messages[0]["content"]
    text = "\n\n".join(m["content"] for m in messages)
    if "You play every role" in system:  # single-agent prompt: answer both sections
        oracle = scripted_policy("plan_path_v0")
        return f"### tool\n{oracle(text, 'tool', {})}\n### planner\n{oracle(text, 'planner', {})}"
    agent = "tool" if "You are the tool agent" in system else "planner"
    return scripted_policy("plan_path_v0")(text, agent, {})


def test_scripted_and_random_on_a_subset_write_every_report_file(tmp_path):
    config = SuiteConfig(envs=["plan_path_v0", "tictactoe_v0"], episodes=4, concurrency=2)
    rows = run_suite(config, tmp_path, progress=False)
    by = {(r["env"], r["policy"]): r for r in rows}
    assert by["plan_path_v0", "scripted"]["success_rate"] == 1.0
    assert by["plan_path_v0", "random"]["success_rate"] == 0.0
    assert by["tictactoe_v0", "scripted"]["success_rate"] == 1.0
    assert set(by["plan_path_v0", "random"]["return_per_role"]) == {"tool", "planner"}
    for name in (RECORDS, "summary.json", "summary.csv", "summary.md", "success.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert len(load_records(tmp_path)) == 16


def test_resume_after_an_interrupted_run_plays_only_the_missing_episodes(tmp_path):
    config = SuiteConfig(envs=["plan_path_v0"], policies=["scripted"], episodes=6, concurrency=1)
    run_suite(config, tmp_path, progress=False)
    lines = (tmp_path / RECORDS).read_text().splitlines()
    # Simulate a crash: keep 2 complete records and half of the third line.
    (tmp_path / RECORDS).write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2])
    rows = run_suite(config, tmp_path, progress=False)
    records = load_records(tmp_path)
    assert sorted(r["seed"] for r in records) == list(range(6))
    assert rows[0]["episodes"] == 6 and rows[0]["success_rate"] == 1.0
    again = run_suite(config, tmp_path, progress=False)
    assert len(load_records(tmp_path)) == 6 and again == rows


def test_openai_policy_against_a_local_server_with_retries_and_bounded_concurrency(tmp_path):
    def slow_model(messages):
        time.sleep(0.05)  # long enough for concurrent episodes to overlap their requests
        return plan_path_model(messages)

    with ChatServer(slow_model) as server:
        server.fail_next = 2
        spec = f"openai:tiny@{server.base_url}"
        config = SuiteConfig(envs=["plan_path_v0"], policies=[spec], episodes=6, concurrency=3)
        rows = run_suite(config, tmp_path, progress=False)
        assert rows[0]["success_rate"] == 1.0
        assert rows[0]["completion_tokens"] > 0  # from the server's usage, per episode
        assert 1 < server.max_in_flight <= 3
        assert server.requests[0]["model"] == "tiny"
        assert [m["role"] for m in server.requests[-1]["messages"]] == ["system", "user"]


def test_openai_policy_raises_a_clear_error_on_a_permanent_failure():
    with ChatServer(lambda messages: "x") as server:
        client = OpenAIChatPolicy(base_url=server.base_url.replace("/v1", "/nope"), model="m", retries=1)
        with pytest.raises(EndpointError, match="HTTP 404"):
            client("hello", "tool", {})
    client = OpenAIChatPolicy(base_url="http://127.0.0.1:9/v1", model="m", retries=0, timeout=2)
    with pytest.raises(EndpointError):
        client("hello", "tool", {})


def test_single_agent_baseline_splits_one_reply_across_roles(tmp_path):
    with ChatServer(plan_path_model) as server:
        config = SuiteConfig(envs=["plan_path_v0"], policies=[f"openai:tiny@{server.base_url}"],
                             modes=["multi", "single"], episodes=3, concurrency=1)
        rows = run_suite(config, tmp_path, progress=False)
        modes = {r["mode"]: r for r in rows}
        assert modes["single"]["success_rate"] == 1.0 and modes["multi"]["success_rate"] == 1.0
        single_requests = [r for r in server.requests if "You play every role" in r["messages"][0]["content"]]
        assert len(single_requests) == 3  # one request per turn, not per role


def test_the_single_agent_prompt_holds_each_episodes_own_rules_and_config(tmp_path):
    """textarena_v0's instructions hold the game (a config choice) and each player's private
    resources (drawn per episode): the single-agent prompt must be the episode's, not problem 0's
    of the default game."""
    pytest.importorskip("textarena")
    from pettingllm_envs import make

    with ChatServer(lambda messages: "[Deny]") as server:
        config = SuiteConfig(envs=["textarena_v0"], policies=[f"openai:tiny@{server.base_url}"], modes=["single"],
                             episodes=2, env_config={"game": "SimpleNegotiation-v0", "max_turns": 1}, concurrency=1)
        run_suite(config, tmp_path, progress=False)
        systems = {r["messages"][0]["content"] for r in server.requests}
    for seed in (0, 1):
        env = make("textarena_v0", game="SimpleNegotiation-v0", split="test", max_turns=1)
        env.reset(seed=seed)
        raw = env.unwrapped
        wanted = [raw.role_instructions(role) for role in raw.possible_agents]
        assert any(all(w in system for w in wanted) for system in systems), f"episode {seed}'s rules never shown"


def test_split_sections():
    reply = "intro\n### tool\ncode here\n### planner\nMOVES: U\n### tool\nignored"
    assert split_sections(reply, ["tool", "planner"]) == {"tool": "code here", "planner": "MOVES: U"}
    assert split_sections("nothing", ["a", "b"]) == {"a": "", "b": ""}


def test_bench_command_line(tmp_path, capsys):
    assert main(["bench", "plan_path_v0", "--episodes", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| plan_path_v0 | scripted | multi | 2 | 1.0 |" in out
    assert json.loads((tmp_path / "summary.json").read_text())[0]["env"] == "plan_path_v0"


def test_a_local_hugging_face_model_as_the_policy(tmp_path):
    pytest.importorskip("transformers")
    from trainers.models.tiny_model import write_tiny_model

    model = write_tiny_model(tmp_path / "tiny")
    config = SuiteConfig(envs=["plan_path_v0"], policies=[f"hf:{model}"], modes=["multi", "single"], episodes=2,
                         concurrency=2, max_tokens=8, env_config={"max_turns": 1})
    rows = run_suite(config, tmp_path / "out", progress=False)
    assert {r["mode"] for r in rows} == {"multi", "single"}
    for row in rows:  # a random tiny model never solves the maze, but it plays every turn through the model
        assert row["episodes"] == 2 and row["success_rate"] == 0.0
    multi = next(r for r in rows if r["mode"] == "multi")
    assert multi["completion_tokens"] == 2 * 8  # two roles, 8 new tokens each (no EOS from a random model)
    assert multi["return_per_role"]["planner"] < 0  # its random bytes earn the format penalty


def test_a_rerun_reuses_only_matching_records_says_so_and_reports_only_what_was_asked(tmp_path, capsys):
    assert main(["bench", "plan_path_v0", "--policy", "scripted", "--episodes", "2", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["bench", "tictactoe_v0", "--policy", "scripted", "--episodes", "1", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "| plan_path_v0 |" not in captured.out and "| tictactoe_v0 | scripted | multi | 1 |" in captured.out
    assert "reusing" not in captured.err
    assert [r["env"] for r in json.loads((tmp_path / "summary.json").read_text())] == ["tictactoe_v0"]

    assert main(["bench", "plan_path_v0", "--policy", "scripted", "--episodes", "5", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "reusing 2 of 5 episodes" in captured.err and "--fresh" in captured.err
    assert "| plan_path_v0 | scripted | multi | 5 |" in captured.out  # not 7, and no tictactoe row
    assert "| tictactoe_v0 |" not in captured.out

    # Another env config is another experiment: nothing reused, nothing mixed in.
    assert main(["bench", "plan_path_v0", "--policy", "scripted", "--episodes", "2", "--env-kwargs",
                 '{"max_turns": 1}', "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "reusing" not in captured.err and "| plan_path_v0 | scripted | multi | 2 |" in captured.out

    assert main(["bench", "plan_path_v0", "--policy", "scripted", "--episodes", "5", "--fresh",
                 "--out", str(tmp_path)]) == 0
    assert "reusing" not in capsys.readouterr().err
    records = load_records(tmp_path)
    default_config = [r for r in records if r["env"] == "plan_path_v0" and r["env_config"] == {}]
    assert sorted(r["seed"] for r in default_config) == [0, 1, 2, 3, 4]  # replayed, not duplicated
    assert len(records) == 5 + 1 + 2


def test_records_keep_the_replies_and_the_valid_action_rate(tmp_path, capsys):
    config = SuiteConfig(envs=["plan_path_v0"], episodes=2, env_config={"max_turns": 2})
    rows = run_suite(config, tmp_path, progress=False)
    by_policy = {r["policy"]: r for r in rows}
    assert by_policy["scripted"]["valid_action_rate"] == 1.0
    assert by_policy["random"]["valid_action_rate"] == 0.0  # random text is never a program or a MOVES line
    for record in load_records(tmp_path):
        assert record["env_config"] == {"max_turns": 2}
        assert len(record["replies"]) == record["actions"] > 0
        assert {reply["agent"] for reply in record["replies"]} == {"tool", "planner"}
    scripted = next(r for r in load_records(tmp_path) if r["policy"] == "scripted")
    assert scripted["replies"][0]["text"].startswith("```python")
    assert "valid_action_rate" in (tmp_path / "summary.md").read_text()
    assert main(["bench", "plan_path_v0", "--episodes", "2", "--env-kwargs", '{"max_turns": 2}',
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "valid_action_rate" in out and "share of actions the env could parse" in out


def test_long_replies_are_cut_with_a_marker():
    assert truncate_reply("short") == "short"
    long = "x" * (REPLY_CHARS + 123)
    cut = truncate_reply(long)
    assert cut.startswith("x" * REPLY_CHARS) and cut.endswith("[... 123 more characters]")
    assert truncate_reply(None) == "None"  # a non-string action is recorded as its repr
