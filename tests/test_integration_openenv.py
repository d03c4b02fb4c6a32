"""OpenEnv (pettingllm_envs.integrations.openenv_env): a pettingllm env served with OpenEnv's
``create_app`` by uvicorn on 127.0.0.1 and driven through OpenEnv's own WebSocket client.

The episodes played over the wire equal a plain AEC episode with the same actions (rewards
per turn and returns per role); a session can play every role (two policies routed by
``observation.agent``) or one role with seats; seat specs that would make the server reach
out (``openai:``/``hf:``) are refused unless the server allows them.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

# Not in `.[all]`: openenv 0.10 needs mcp<2 and verifiers 0.4.0 pins mcp==2.0.0 (pyproject.toml's
# `openenv` extra): run this module in an environment with `.[openenv,test]`.
pytest.importorskip("openenv.core.env_server.http_server", reason="needs the openenv extra (its own environment)")

import uvicorn

from pettingllm_envs.integrations.openenv_env import (
    PettingLLMAction,
    PettingLLMClient,
    openenv_app,
)
from pettingllm_envs.policies import random_policy, scripted_policy
from pettingllm_envs.registry import make


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def base_url():
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(openenv_app("plan_path_v0", max_turns=3), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the OpenEnv server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    assert not thread.is_alive()


def aec_episode(seed: int, policies: dict) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """Actions and returns of a plain AEC episode of plan_path_v0 (max_turns=3)."""
    env = make("plan_path_v0", max_turns=3)
    env.reset(seed=seed)
    actions, returns = [], dict.fromkeys(env.possible_agents, 0.0)
    for agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        action = None if terminated or truncated else policies[agent](observation, agent, info)
        if action is not None:
            actions.append((agent, action))
        env.step(action)
        for role, reward in env.rewards.items():
            returns[role] += reward
    return actions, returns


@pytest.mark.slow
def test_one_session_plays_both_roles_with_two_policies(base_url):
    policies = {"tool": random_policy(3), "planner": scripted_policy("plan_path_v0")}
    expected_actions, expected_returns = aec_episode(5, {"tool": random_policy(3),
                                                         "planner": scripted_policy("plan_path_v0")})
    with PettingLLMClient(base_url=base_url).sync() as client:
        result = client.reset(seed=5)
        actions = []
        for _ in range(20):  # bounded: plan_path with max_turns=3 has at most 6 actions
            if result.done:
                break
            observation = result.observation
            action = policies[observation.agent](observation.prompt, observation.agent,
                                                 {"messages": observation.messages, **observation.metadata["info"]})
            actions.append((observation.agent, action))
            result = client.step(PettingLLMAction(text=action))
        assert result.done
        state = client.state()
    assert actions == expected_actions
    assert state.returns == pytest.approx(expected_returns)
    assert result.observation.metadata["returns"] == pytest.approx(expected_returns)


@pytest.mark.slow
def test_one_role_with_seats_gets_the_rewards_of_the_aec_episode(base_url):
    oracle = scripted_policy("plan_path_v0")
    _, expected_returns = aec_episode(2, {"tool": oracle, "planner": oracle})
    with PettingLLMClient(base_url=base_url).sync() as client:
        result = client.reset(seed=2, learners=["planner"], seats={"tool": "scripted"})
        total = 0.0
        for _ in range(10):
            total += result.reward or 0.0
            if result.done:
                break
            assert result.observation.agent == "planner"
            assert result.observation.new_messages  # the incremental chat travels with every turn
            result = client.step(PettingLLMAction(text=oracle(result.observation.prompt, "planner",
                                                               result.observation.metadata["info"])))
        assert result.done and result.observation.metadata["success"]
    assert total == pytest.approx(expected_returns["planner"])


@pytest.mark.slow
def test_a_client_cannot_make_the_server_call_out_through_a_seat(base_url):
    with PettingLLMClient(base_url=base_url).sync() as client:
        for spec in ("openai:m@http://169.254.169.254/v1", "hf:/etc"):
            with pytest.raises(Exception, match="not allowed"):
                client.reset(seed=0, learners=["planner"], seats={"tool": spec})


@pytest.mark.slow
def test_the_docs_example_runs(capsys):
    """docs/integrations.md's OpenEnv block (skipped by tests/test_docs_run.py, which runs in `.[all]`)."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "integrations.md").read_text()
    section = docs[docs.index("## OpenEnv"):]
    block = section[section.index("```python"):]
    code = block[block.index("\n") + 1:block.index("\n```")]
    exec(compile(code.replace("8765", str(free_port())), "docs/integrations.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "True" in printed  # the oracle planner with a scripted tool solves the problem


@pytest.mark.slow
def test_the_trl_example_logs_the_returns_the_server_paid():
    """examples/openenv/trl_grpo_openenv.py: two GRPO steps through TRL's environment_factory, every
    rollout an OpenEnv session; TRL's logged reward equals the mean return the server paid."""
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, str(root / "examples" / "openenv" / "trl_grpo_openenv.py"), "--steps", "2"],
                          cwd=root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for step in (1, 2):
        assert re.search(rf"^step {step}: reward (-?\d+\.\d{{3}}) \(env returns \1\), tool calls per rollout [1-9]",
                         proc.stdout, re.MULTILINE), proc.stdout
