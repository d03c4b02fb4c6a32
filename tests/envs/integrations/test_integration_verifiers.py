"""verifiers v1 (pettingllm_envs.integrations.verifiers_env): real episodes through verifiers'
own runner (``run_eval``), offline, every model role played by the tiny model behind
``pettingllm serve``'s server on loopback.

Each check replays the recorded replies on a plain AEC loop of the env and compares: the
prompt of every trace is the chat the env showed that role, and the rewards the traces carry
are exactly what the env paid (per turn, and summed to each role's return).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("torch")

from generate_route import GenerateRoute
from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.dialects.chat import message_to_wire

from pettingllm_envs.integrations.verifiers_env import eval_config
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.registry import make
from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.generation.server import PolicyServer
from trainers.models.policy_set import PolicySet

ENV_CONFIG = {"max_turns": 2}


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path):
    config = TrainConfig.from_flat(model=str(tiny_model_dir), steps=0, progress=False, tensorboard=False)
    config.validate()
    policies = PolicySet(config.model, {"assistant": "shared"})
    with PolicyServer(policies, model_name="tiny", max_new_tokens=24) as running:
        yield running


def run(env_id: str, server, tmp_path: Path, num_tasks: int = 2, **fields):
    config = eval_config(env_id, model="tiny", base_url=server.base_url, output_dir=str(tmp_path), num_tasks=num_tasks,
                         max_tokens=24, taskset={"env_config": ENV_CONFIG}, **fields)
    return asyncio.run(run_eval(config))


def prompt_of(trace) -> list[dict[str, str]]:
    """The chat the model was sent for the trace's (single) call."""
    nodes = [node for node in trace.nodes if not node.sampled]
    return [{"role": m["role"], "content": m["content"]} for m in (message_to_wire(n.message) for n in nodes)]


def replies_of(trace) -> list[str]:
    """The model's replies recorded in the trace, in order (what the env received as actions)."""
    return [(message_to_wire(n.message).get("content") or "").strip() for n in trace.nodes if n.sampled]


def replay(env_id: str, seed: int, replies: dict[str, list[str]], seats: dict[str, object]):
    """A plain AEC loop with the recorded replies: each role's prompts, per-action rewards (what
    the env paid the role from that action until its next one), returns and final success."""
    env = make(env_id, **ENV_CONFIG)
    env.reset(seed=seed)
    prompts: dict[str, list] = {}
    per_action: dict[str, list[float]] = {}
    returns = dict.fromkeys(env.possible_agents, 0.0)
    before = dict.fromkeys(env.possible_agents, 0.0)
    successes: dict[str, bool] = {}
    for agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            action = None
        elif agent in seats:
            action = seats[agent](observation, agent, info)
        else:
            prompts.setdefault(agent, []).append(info["messages"])
            per_action.setdefault(agent, []).append(0.0)
            action = replies[agent][len(prompts[agent]) - 1]
        env.step(action)
        for role, reward in env.rewards.items():
            returns[role] += reward
            if per_action.get(role):
                per_action[role][-1] += reward
            else:
                before[role] += reward
        successes.update({role: info.get("success") for role, info in env.infos.items()})
    for role, rewards in per_action.items():  # paid before the role's first action: its first action's reward
        rewards[0] += before[role]
    return prompts, per_action, returns, successes


def by_role(traces) -> dict[str, list]:
    grouped: dict[str, list] = {}
    for trace in traces:
        grouped.setdefault(trace.agent.name, []).append(trace)
    return grouped


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["plan_path_v0", "tictactoe_v0"])
def test_both_roles_are_models_and_every_turn_is_a_trace_paid_what_the_env_paid(env_id, server, tmp_path):
    episodes = run(env_id, server, tmp_path)
    assert len(episodes) == 2
    for episode in episodes:
        assert episode.ok, episode.errors
        seed = episode.traces[0].info["seed"]
        traces = by_role(episode.traces)
        assert set(traces) == set(make(env_id).possible_agents)  # both roles played by the model
        replies = {role: [reply for t in ts for reply in replies_of(t)] for role, ts in traces.items()}
        prompts, per_action, returns, successes = replay(env_id, seed, replies, {})
        for role, role_traces in traces.items():
            assert [t.info["turn"] for t in role_traces] == list(range(len(role_traces)))
            assert [prompt_of(t) for t in role_traces] == prompts[role]
            assert [t.rewards["env_reward"].value for t in role_traces] == pytest.approx(per_action[role])
            assert sum(t.reward for t in role_traces) == pytest.approx(returns[role])
            assert all(t.agent.trainable for t in role_traces)
            assert all(t.num_output_tokens > 0 for t in role_traces)
            assert role_traces[-1].metrics["success"] == float(successes[role])


@pytest.mark.slow
def test_a_seat_plays_one_role_and_a_frozen_role_is_not_trainable(server, tmp_path):
    episodes = run("plan_path_v0", server, tmp_path, num_tasks=1, seats={"tool": "scripted"})
    (episode,) = episodes
    assert episode.ok, episode.errors
    assert {t.agent.name for t in episode.traces} == {"planner"}
    replies = {"planner": [reply for t in episode.traces for reply in replies_of(t)]}
    _, per_action, returns, _ = replay("plan_path_v0", 0, replies, {"tool": scripted_policy("plan_path_v0")})
    assert [t.reward for t in episode.traces] == pytest.approx(per_action["planner"])
    assert sum(t.reward for t in episode.traces) == pytest.approx(returns["planner"])

    frozen = run("tictactoe_v0", server, tmp_path / "frozen", num_tasks=1, frozen=["player_o"])[0]
    trainable = {t.agent.name: t.agent.trainable for t in frozen.traces}
    assert trainable == {"player_x": True, "player_o": False}


@pytest.mark.slow
def test_one_conversation_per_role_reports_every_turn_reward_as_a_metric(server, tmp_path):
    (episode,) = run("plan_path_v0", server, tmp_path, num_tasks=1, trace_per="episode")
    assert episode.ok, episode.errors
    traces = by_role(episode.traces)
    assert {role: len(ts) for role, ts in traces.items()} == {"tool": 1, "planner": 1}
    for trace, in traces.values():
        turns = trace.info["turns"]
        assert trace.num_turns == turns == 2  # max_turns=2: two model calls in one conversation
        per_turn = [trace.metrics[f"reward_turn_{k}"] for k in range(turns)]
        assert sum(per_turn) == pytest.approx(trace.reward)
        assert len(replies_of(trace)) == 2
    replies = {role: replies_of(trace) for role, (trace,) in traces.items()}
    _, _, returns, _ = replay("plan_path_v0", 0, replies, {})
    assert {role: ts[0].reward for role, ts in traces.items()} == pytest.approx(returns)


@pytest.mark.slow
def test_the_train_client_puts_the_sampled_token_ids_and_log_probs_on_every_trace(server, tiny_model_dir, tmp_path):
    """verifiers' train client renders with the model's tokenizer and samples token-in/token-out
    (vLLM's /inference/v1/generate, here forwarded to the served model): every trace carries the
    prompt and completion ids and the log-probs the model sampled them with."""
    with GenerateRoute(server.base_url) as route:
        (episode,) = run("tictactoe_v0", route, tmp_path, num_tasks=1, client_type="train",
                         renderer_model=str(tiny_model_dir))
    assert episode.ok, episode.errors
    assert {t.agent.name for t in episode.traces} == {"player_x", "player_o"}
    assert len(route.calls) == len(episode.traces)
    for trace, call in zip(episode.traces, route.calls, strict=True):
        (sampled,) = [node for node in trace.nodes if node.sampled]
        completion = [i for i, trained in zip(sampled.token_ids, sampled.mask, strict=True) if trained]
        assert completion == call["completion_ids"] and completion
        assert sampled.logprobs == pytest.approx(call["logprobs"])
        assert [i for node in trace.nodes for i in node.token_ids] == call["prompt_ids"] + call["completion_ids"]


@pytest.mark.slow
def test_a_role_client_given_without_a_type_is_the_chat_client(server, tmp_path):
    """``--env.<role>.client.base-url URL`` alone (verifiers rejects an untyped client with ``Unable to
    extract tag using discriminator 'type'``): each role plays through its own client, the top-level
    client points nowhere."""
    role_client = {"base_url": server.base_url, "api_key_var": "PETTINGLLM_VF_API_KEY"}
    config = eval_config("tictactoe_v0", model="tiny", base_url="http://127.0.0.1:9/v1", output_dir=str(tmp_path),
                         max_tokens=24, taskset={"env_config": ENV_CONFIG},
                         agents={"player_x": {"client": role_client}, "player_o": {"client": role_client}})
    assert config.env.player_x.client.type == "eval"
    (episode,) = asyncio.run(run_eval(config))
    assert episode.ok, episode.errors
    assert {t.agent.name for t in episode.traces} == {"player_x", "player_o"}
    assert all(t.num_output_tokens > 0 for t in episode.traces)
