"""research_v0's sub pads its tool calls: a reward attack on the sub-agent's tool credit.

Before, every tool call of a useful delegation whose result was new to the episode was paid,
related to the sub-question or not, so irrelevant searches prefixed to the same lookup and
report raised the sub's return, the reward M-GRPO trains the sub on (3 searches per
delegation: 14.70 -> 15.55 over 6 problems, 0.55 -> 0.61 own reward per delegation). Now a
call is paid only when it serves its sub-question: it reads a hop of the sub-question's chain
that no earlier call read (``pettingllm_envs/research/tool_credit.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

import pettingllm_envs
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.research.oracle import scripted_policy

CONFIG = {"hops": 2}


def padding_sub(env: Any) -> Any:
    """The sub oracle, with searches for off-chain entities before its lookup and report: each
    search has hits that no other call of the episode returned."""
    problem = env.instance
    on_path = {problem.entity, *problem.path}
    queries = iter(f"SEARCH: {e.name}" for e in problem.kb.entities if e.name not in on_path)

    def act(observation: str, agent: str, info: dict[str, Any]) -> str:
        if info["research"]["sub_step"] < env.config.max_tool_calls - 1:
            return next(queries)
        return scripted_policy(observation, agent, info)
    return act


@pytest.mark.parametrize("seed", range(3))
def test_research_padding_with_irrelevant_tool_calls_earns_nothing(seed):
    probe = pettingllm_envs.make("research_v0", **CONFIG).unwrapped
    probe.reset(seed=seed)
    env = pettingllm_envs.make("research_v0", **CONFIG)
    padded = play_episode(env, {"main": scripted_policy, "sub": padding_sub(probe)}, seed=seed)
    honest = play_episode(pettingllm_envs.make("research_v0", **CONFIG), scripted_policy, seed=seed)
    assert padded.success and honest.success
    searches = [r for r in env.unwrapped.history if r.agent == "sub" and r.result.parsed["command"] == "SEARCH"]
    assert searches and all("No entity matches" not in r.result.feedback for r in searches)  # they had hits
    assert all(not r.result.parsed["found"] and r.reward_local == 0.0 for r in searches)
    assert padded.total_reward("sub") <= honest.total_reward("sub")
