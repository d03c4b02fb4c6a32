"""The warm start's data: every demonstrated (prompt, action) pair of the train split, on the
views the experiment trains on.

The actions are the env's :class:`~pettingllm_envs.capabilities.Demonstrations` (the oracle
with tool programs a small model can write, a planner that takes the tool's answer over, and
mistakes injected at ``mistake_rate``; ``plan_path_v0`` and ``sudoku_v0`` declare it). This
module adds the views:

**Brief instructions** (:class:`BriefInstructions`, optional): the envs' system messages
are 450-700 bytes of English per role (1,100-1,500 for the single-agent view), the same
every episode. A byte-level model trained from scratch cannot read them; to it they are a
role tag that costs one token per byte in every forward. The wrapper replaces each system
message by a one-line tag naming the role and the answer format (:data:`BRIEF`), which
makes prompts 3-4x shorter on CPU. The user message (board, history, tool output) and
everything else about the env are unchanged.

**Scripted partners** (:class:`ScriptedPartners`): roles played by the oracle without
mistakes, whose tool prints the oracle's answer in one line (the partner is not trained, and
a short program keeps the trained role's prompt short).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper

import pettingllm_envs
from pettingllm_envs.capabilities import Demonstrations, capability
from pettingllm_envs.evaluation.single_agent_env import SOLO, single_agent_env

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Demonstration:
    """One (prompt, action) pair: ``policy_role`` is the env role (or ``solo``) that acts."""

    policy_role: str
    messages: Messages
    action: str
    corrupted: bool


#: The brief system message of every role (and of the single-agent view) per env.
BRIEF: dict[str, dict[str, str]] = {
    "plan_path_v0": {
        "tool": "Role: tool. Maze: a ```python block that prints MOVES: U D L R to the goal.",
        "planner": "Role: planner. Maze: reply MOVES: U D L R to the goal.",
        SOLO: "Role: solo. Maze: reply ### tool, a ```python block that prints MOVES, then ### planner, MOVES.",
    },
    "sudoku_v0": {
        "tool": "Role: tool. Sudoku: a ```python block that prints the empty cells as r c v; r c v.",
        "planner": "Role: planner. Sudoku: reply PLACE: r c v; r c v for the empty cells.",
        SOLO: "Role: solo. Sudoku: reply ### tool, a ```python block that prints r c v; ..., then ### planner, PLACE:.",
    },
}


class BriefInstructions(BaseWrapper):
    """An env whose chat prompts carry a one-line system message (:data:`BRIEF`) instead of
    the env's instructions; the user message and the env's dynamics are unchanged."""

    def __init__(self, env: AECEnv, env_id: str) -> None:
        super().__init__(env)
        self.brief = BRIEF[env_id]

    @property
    def infos(self) -> dict[str, dict[str, Any]]:
        return {agent: self._brief(agent, info) for agent, info in self.env.infos.items()}

    def _brief(self, agent: str, info: dict[str, Any]) -> dict[str, Any]:
        messages = info.get("messages")
        if not messages or messages[0].get("role") != "system":
            return info
        return {**info, "messages": [{"role": "system", "content": self.brief[agent]}, *messages[1:]]}

    def observe(self, agent: str) -> Any:
        messages = self.infos[agent].get("messages")
        return "\n\n".join(m["content"] for m in messages) if messages else self.env.observe(agent)


class ScriptedPartners(BaseWrapper):
    """An env in which ``roles`` are played by the oracle without mistakes (the env's
    :attr:`Demonstrations.partner`): whenever one of them is to move it acts inside
    ``reset``/``step``, so a rollout only ever sees the other roles' turns. The scripted roles
    stay in ``agents`` (their rewards and dead steps follow the AEC protocol); they simply never
    have a live turn left for the trainer."""

    def __init__(self, env: AECEnv, env_id: str, roles: tuple[str, ...]) -> None:
        super().__init__(env)
        self.scripted = roles
        self.partner = capability(env_id, Demonstrations).partner

    def _play_scripted(self) -> None:
        env = self.env
        while env.agents and env.agent_selection in self.scripted:
            agent = env.agent_selection
            if env.terminations[agent] or env.truncations[agent]:
                return  # the episode is over: the rollout steps the dead agents itself
            env.step(self.partner(env, agent))

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)
        self._play_scripted()

    def step(self, action: Any) -> None:
        self.env.step(action)
        self._play_scripted()


def make_view(env_id: str, env_kwargs: dict[str, Any], *, single_agent: bool, brief: bool,
              scripted: tuple[str, ...] = ()) -> AECEnv:
    """The multi-agent env or its single-agent view, with brief instructions or the env's own,
    and optionally some roles played by the oracle (:class:`ScriptedPartners`)."""
    env = single_agent_env(env_id, **env_kwargs) if single_agent else pettingllm_envs.make(env_id, **env_kwargs)
    if scripted:
        env = ScriptedPartners(env, env_id, scripted)
    return BriefInstructions(env, env_id) if brief else env


def multi_agent_demonstrations(env_id: str, env_kwargs: dict[str, Any], problems: range, mistake_rate: float,
                               seed: int, *, brief: bool = False, scripted: tuple[str, ...] = ()
                               ) -> list[Demonstration]:
    """Every role's demonstrated action at every step of one episode per train problem. The
    episodes continue with the demonstrated (possibly wrong) actions, so later turns show the
    states a mistake leads to and the oracle's recovery from them. Roles in ``scripted`` are
    played by the oracle without mistakes inside the env (:class:`ScriptedPartners`) and get
    no demonstrations."""
    act, rng = capability(env_id, Demonstrations).act, random.Random(seed)
    env = make_view(env_id, {**env_kwargs, "split": "train"}, single_agent=False, brief=brief, scripted=scripted)
    demos = []
    for problem in problems:
        env.reset(seed=problem)
        for agent in env.agent_iter():
            _, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            action, corrupted = act(env, agent, rng, mistake_rate)
            demos.append(Demonstration(agent, [dict(m) for m in info["messages"]], action, corrupted))
            env.step(action)
    env.close()
    return demos


def single_agent_demonstrations(env_id: str, env_kwargs: dict[str, Any], problems: range, mistake_rate: float,
                                seed: int, *, brief: bool = False) -> list[Demonstration]:
    """The single-agent view's demonstrations: one reply per turn with a ``### <role>``
    section per role, each section the multi-agent role's demonstration (independently
    corrupted), worked out from the state the turn starts from."""
    act, rng = capability(env_id, Demonstrations).act, random.Random(seed)
    env = make_view(env_id, {**env_kwargs, "split": "train"}, single_agent=True, brief=brief)
    demos = []
    for problem in problems:
        env.reset(seed=problem)
        solo = env.unwrapped
        for _ in env.agent_iter():
            _, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            sections, any_corrupted = [], False
            for role in solo.roles:
                action, corrupted = act(solo.inner, role, rng, mistake_rate)
                sections.append(f"### {role}\n{action}")
                any_corrupted |= corrupted
            reply = "\n".join(sections)
            demos.append(Demonstration(SOLO, [dict(m) for m in info["messages"]], reply, any_corrupted))
            env.step(reply)
    env.close()
    return demos
