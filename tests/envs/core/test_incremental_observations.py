"""Incremental observations: each role's chat can be rebuilt from what is new at each turn.

For pettingllm envs, ``infos[a]`` carries ``kept_messages`` (k) and ``new_messages``: the
chat at a turn is the chat of the role's previous turn cut to k messages, plus the new ones,
and ``prompt_reset`` says when that cut dropped something. Any other AEC env gets the
generic text increment of ``SeatedEpisode.new_text``."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from pettingzoo.utils import BaseWrapper
from toy_env import raw_env as ToyRawEnv

from pettingllm_envs import list_envs, make
from pettingllm_envs.core import wrap_env
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.seats import SeatedEpisode

INCREMENT_KEYS = ("new_messages", "kept_messages", "prompt_reset")


def _check_turn(chats: dict[str, list[dict[str, str]]], agent: str, info: dict[str, Any]) -> None:
    previous = chats.get(agent, [])
    kept = info["kept_messages"]
    assert 0 <= kept <= len(previous)
    assert info["prompt_reset"] == (kept < len(previous))
    rebuilt = previous[:kept] + info["new_messages"]
    assert rebuilt == info["messages"]
    chats[agent] = rebuilt


@pytest.mark.parametrize("env_id", list_envs())
def test_the_chat_rebuilt_from_increments_is_the_full_prompt_at_every_turn_of_every_role(env_id):
    oracle = scripted_policy(env_id)
    env = make(env_id)
    env.reset(seed=1)
    chats: dict[str, list[dict[str, str]]] = {}
    turns = 0
    for agent in env.agent_iter(max_iter=2000):
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        if agent not in chats:
            assert info["kept_messages"] == 0 and not info["prompt_reset"]
        _check_turn(chats, agent, info)
        turns += 1
        env.step(oracle(observation, agent, info))
    assert turns >= 1


def test_unchanged_instructions_are_kept_and_a_rewritten_view_is_reported_as_a_reset():
    env = make("plan_path_v0")
    env.reset(seed=0)
    oracle = scripted_policy("plan_path_v0")
    for agent in env.agent_iter(max_iter=4):
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        if info["turn"] > 0:  # the grid view changed since the role's previous turn; its instructions did not
            assert info["kept_messages"] == 1 and info["prompt_reset"]
            assert info["new_messages"] == info["messages"][1:]
        env.step(oracle(observation, agent, info))


def test_the_reference_chat_survives_deepcopy_and_pickle():
    """Branches of a rollout tree (deepcopy) and workers (pickle) compute the same increments."""
    env = make("plan_path_v0", max_turns=5)
    env.reset(seed=0)
    for _ in range(3):  # moves that solve nothing keep the episode running
        env.step("no moves here")
    for clone in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        clone.step("no moves here")
        assert clone.infos[clone.agent_selection]["kept_messages"] == 1
    env.step("no moves here")
    assert clone.infos == env.infos


class _AppendOnlyToy(ToyRawEnv):
    """The toy env with a transcript view that only grows (no turn counter)."""

    def task_view(self, agent: str) -> str:
        return "\n".join([f"Problem {self.index}."] + [f"{r.agent} said: {r.text}" for r in self.history])


class _PlainInfos(BaseWrapper):
    """An AEC env whose infos carry no increments, as any env from outside this package."""

    def last(self, observe: bool = True) -> tuple[Any, ...]:
        observation, reward, terminated, truncated, info = super().last(observe)
        return observation, reward, terminated, truncated, {k: v for k, v in info.items() if k not in INCREMENT_KEYS}


def test_seated_episodes_give_the_text_increment_of_any_env():
    env = _PlainInfos(wrap_env(_AppendOnlyToy(max_turns=3)))
    episode = SeatedEpisode(env, {"second": lambda observation, agent, info: "b"}, ["first"])
    turn = episode.reset(seed=0)
    assert turn.new_text == turn.observation  # the first turn: everything is new
    previous = str(turn.observation)
    while not turn.done:
        turn = episode.act("1")
        assert previous + turn.new_text == str(turn.observation)
        assert turn.new_text.startswith("\nfirst said: 1\nsecond said: b")
        previous = str(turn.observation)


def test_seated_episodes_pass_on_the_envs_own_increment():
    env = make("plan_path_v0")
    episode = SeatedEpisode(env, {"tool": scripted_policy("plan_path_v0")}, ["planner"])
    turn = episode.reset(seed=0)
    assert turn.new_text == "\n\n".join(m["content"] for m in turn.messages)
    turn = episode.act("no moves here")
    assert turn.info["kept_messages"] == 1 and turn.new_text == turn.messages[1]["content"]
