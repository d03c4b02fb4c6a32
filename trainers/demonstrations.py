"""Demonstrations for a warm start: the scripted oracle's actions on the train split, with
mistakes injected at a documented rate, for the multi-agent roles and the single-agent view.

RL sharpens what a policy can already sometimes do; a random model gives all-degenerate
groups (docs/design.md §4). :mod:`trainers.sft` fine-tunes on these demonstrations so the
warm policy solves some held-out problems, and the mistakes keep it imperfect, so there is
something left for RL to fix.

**Compact tool programs.** The envs' scripted tool writes a full solver (a BFS or a
backtracking search, 700-900 bytes of Python). A byte-level model of a few million
parameters cannot learn to write that program in minutes of CPU, so the demonstrated tool
program prints the oracle's answer in one line (```` ```python\\nprint("MOVES: U R")\\n``` ````).
It still runs in the sandbox and is scored like any program: the tool agent solves the
task itself and the program reports it. The planner's demonstration is the oracle's own
answer, worked out from the board (not copied from the tool), so when the tool is wrong
the planner's demonstration is right or independently wrong.

**Mistakes** (``mistake_rate``): each demonstrated answer is independently replaced, with
that probability, by a corrupted one: a plan-path move list with one move changed to another
direction, a sudoku answer with one value changed. A corrupted answer is still well-formed
(the format is learned either way); it just does not solve the task.

**Brief instructions** (:class:`BriefInstructions`, optional): the envs' system messages
are 450-700 bytes of English per role (1,100-1,500 for the single-agent view), the same
every episode. A byte-level model trained from scratch cannot read them; to it they are a
role tag that costs one token per byte in every forward. The wrapper replaces each system
message by a one-line tag naming the role and the answer format (:data:`BRIEF`), which
makes prompts 3-4x shorter on CPU. The user message (board, history, tool output) and
everything else about the env are unchanged.

Supported envs: ``plan_path_v0`` and ``sudoku_v0`` (:data:`ANSWERS`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper

import pettingllm_envs
from pettingllm_envs.evaluation.single_agent_env import SOLO, single_agent_env
from pettingllm_envs.policies import scripted_policy

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Demonstration:
    """One (prompt, action) pair: ``policy_role`` is the env role (or ``solo``) that acts."""

    policy_role: str
    messages: Messages
    action: str
    corrupted: bool


@dataclass(frozen=True)
class AnswerFormat:
    """How an env's oracle answer is read, corrupted and written by the tool and the planner."""

    parse: Callable[[str], list[str]]
    """The answer's items from the oracle planner's reply (moves, or ``r c v`` triples)."""
    corrupt: Callable[[list[str], random.Random, int], list[str]]
    """A well-formed but wrong version of the items (the last argument: the sudoku's size)."""
    tool_output: Callable[[list[str]], str]
    """What the compact tool program prints."""
    planner_reply: Callable[[list[str]], str]
    """The planner's reply."""


_DIRECTIONS = ("U", "D", "L", "R")


def _parse_moves(reply: str) -> list[str]:
    return reply.split("MOVES:", 1)[1].split()


def _corrupt_moves(moves: list[str], rng: random.Random, size: int) -> list[str]:
    changed = list(moves)
    i = rng.randrange(len(changed))
    changed[i] = rng.choice([d for d in _DIRECTIONS if d != changed[i]])
    return changed


def _parse_triples(reply: str) -> list[str]:
    return [t.strip() for t in reply.split("PLACE:", 1)[1].split(";") if t.strip()]


def _corrupt_triples(triples: list[str], rng: random.Random, size: int) -> list[str]:
    changed = list(triples)
    i = rng.randrange(len(changed))
    r, c, v = changed[i].split()
    changed[i] = f"{r} {c} {rng.choice([x for x in range(1, size + 1) if x != int(v)])}"
    return changed


#: Answer formats of the supported envs.
ANSWERS: dict[str, AnswerFormat] = {
    "plan_path_v0": AnswerFormat(_parse_moves, _corrupt_moves, lambda m: "MOVES: " + " ".join(m),
                                 lambda m: "MOVES: " + " ".join(m)),
    "sudoku_v0": AnswerFormat(_parse_triples, _corrupt_triples, lambda t: "; ".join(t),
                              lambda t: "PLACE: " + "; ".join(t)),
}


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
    """An env in which ``roles`` are played by the demonstration oracle without mistakes
    (:class:`DemonstrationPolicy`, compact tool programs): whenever one of them is to move it
    acts inside ``reset``/``step``, so a rollout only ever sees the other roles' turns. The
    scripted roles stay in ``agents`` (their rewards and dead steps follow the AEC protocol);
    they simply never have a live turn left for the trainer."""

    def __init__(self, env: AECEnv, env_id: str, roles: tuple[str, ...]) -> None:
        super().__init__(env)
        self.scripted = roles
        self.partner = DemonstrationPolicy(env_id, 0.0, random.Random(0))

    def _play_scripted(self) -> None:
        env = self.env
        while env.agents and env.agent_selection in self.scripted:
            agent = env.agent_selection
            if env.terminations[agent] or env.truncations[agent]:
                return  # the episode is over: the rollout steps the dead agents itself
            action, _ = self.partner.act(agent, env.observe(agent), env.infos[agent])
            env.step(action)

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


def compact_program(printed: str) -> str:
    """A tool action whose program prints ``printed`` (see the module docstring)."""
    return f"```python\nprint({printed!r})\n```"


def check_supported(env_id: str) -> AnswerFormat:
    if env_id not in ANSWERS:
        raise ValueError(f"demonstrations exist for {sorted(ANSWERS)}, not {env_id!r}")
    return ANSWERS[env_id]


class DemonstrationPolicy:
    """The oracle with compact tool programs and injected mistakes, for one env."""

    def __init__(self, env_id: str, mistake_rate: float, rng: random.Random, size: int = 9) -> None:
        if not 0.0 <= mistake_rate <= 1.0:
            raise ValueError(f"mistake_rate must be in [0, 1], got {mistake_rate}")
        self.format = check_supported(env_id)
        self.oracle = scripted_policy(env_id)
        self.mistake_rate = mistake_rate
        self.rng = rng
        self.size = size

    def answer(self, observation: str, info: dict[str, Any]) -> tuple[list[str], bool]:
        """The oracle planner's answer items for this board, corrupted with ``mistake_rate``."""
        items = self.format.parse(self.oracle(observation, "planner", info))
        if items and self.rng.random() < self.mistake_rate:
            return self.format.corrupt(items, self.rng, self.size), True
        return items, False

    def act(self, role: str, observation: str, info: dict[str, Any]) -> tuple[str, bool]:
        items, corrupted = self.answer(observation, info)
        if role == "tool":
            return compact_program(self.format.tool_output(items)), corrupted
        return self.format.planner_reply(items), corrupted


def multi_agent_demonstrations(env_id: str, env_kwargs: dict[str, Any], problems: range, mistake_rate: float,
                               seed: int, *, brief: bool = False, scripted: tuple[str, ...] = ()
                               ) -> list[Demonstration]:
    """Every role's demonstrated action at every step of one episode per train problem. The
    episodes continue with the demonstrated (possibly wrong) actions, so later turns show the
    states a mistake leads to and the oracle's recovery from them. Roles in ``scripted`` are
    played by the oracle without mistakes inside the env (:class:`ScriptedPartners`) and get
    no demonstrations."""
    policy = DemonstrationPolicy(env_id, mistake_rate, random.Random(seed), env_kwargs.get("size", 9))
    env = make_view(env_id, {**env_kwargs, "split": "train"}, single_agent=False, brief=brief, scripted=scripted)
    demos = []
    for problem in problems:
        env.reset(seed=problem)
        for agent in env.agent_iter():
            observation, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            action, corrupted = policy.act(agent, observation, info)
            demos.append(Demonstration(agent, [dict(m) for m in info["messages"]], action, corrupted))
            env.step(action)
    env.close()
    return demos


def single_agent_demonstrations(env_id: str, env_kwargs: dict[str, Any], problems: range, mistake_rate: float,
                                seed: int, *, brief: bool = False, scripted: tuple[str, ...] = ()
                               ) -> list[Demonstration]:
    """The single-agent view's demonstrations: one reply per turn with a ``### <role>``
    section per role, each section the multi-agent role's demonstration (independently
    corrupted), worked out from the board the turn starts from."""
    policy = DemonstrationPolicy(env_id, mistake_rate, random.Random(seed), env_kwargs.get("size", 9))
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
                inner_observation = solo.inner.observe(role)
                action, corrupted = policy.act(role, inner_observation, solo.inner.infos[role])
                sections.append(f"### {role}\n{action}")
                any_corrupted |= corrupted
            reply = "\n".join(sections)
            demos.append(Demonstration(SOLO, [dict(m) for m in info["messages"]], reply, any_corrupted))
            env.step(reply)
    env.close()
    return demos

