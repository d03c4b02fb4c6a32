"""The single-agent view of a multi-agent env, as a PettingZoo AEC env with one agent.

The baseline the AT-GRPO paper compares against (Zhao et al. 2025, "single-agent RL"): one
policy does the whole task alone. :class:`SingleAgentEnv` wraps any pettingllm env: its
only agent, ``solo``, gets one prompt per turn holding every role's instructions
(:func:`~pettingllm_envs.model_policies.single_agent.single_agent_prompt`, the prompt the
``bench --mode single`` baseline uses) and answers with one ``### <role>`` section per
role; each section is played as that role's action in turn order. What the multi-agent
setup adds is exactly what is missing here: a later role's section is written before the
env has run the earlier role's action, so it never sees that action's result (a tool
program's output).

| Property     | Value                                                                           |
|--------------|---------------------------------------------------------------------------------|
| Agents       | one, ``solo``                                                                   |
| Observation  | ``TextObservation``: the system message (every role's instructions) + the task  |
|              | view of the turn's first role                                                   |
| Action       | ``UnicodeText``: ``### <role>`` sections; a missing section is an empty action  |
|              | (the inner env's format penalty), a non-string action plays an empty action     |
|              | for every role                                                                  |
| Reward       | the sum over roles of what the inner env paid each of them during the turn      |
|              | (``alpha * ΔG`` to every role per action plus the actor's local reward): the    |
|              | team's reward, so the same reward as the multi-agent episode in total           |
| Termination  | when the inner episode terminates; truncation when it truncates (``max_turns``) |
| Infos        | ``messages``, ``turn``, ``success`` (the inner env's), ``last_action`` with     |
|              | ``reward``, ``reward_global`` (its team part, ``alpha * ΔG`` summed over roles), |
|              | ``reward_local`` (the actors' local rewards), ``valid``                         |
|              | and ``sections`` (each role's action and inner ``last_action``)                 |

Problems, splits and seeds are the inner env's: ``reset(seed=i)`` plays problem ``i``.
Deep copies copy the inner env (cheap: pettingllm envs copy their episode state only), so
tree rollouts branch it like any env.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from pettingzoo import AECEnv

from pettingllm_envs.core.spaces import TextObservation, UnicodeText
from pettingllm_envs.core.wrappers import wrap_env
from pettingllm_envs.model_policies.single_agent import single_agent_prompt, split_sections
from pettingllm_envs.registry import make

#: The one agent of the single-agent view.
SOLO = "solo"


class SingleAgentEnv(AECEnv):
    """One agent plays every role of ``env_id`` (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "ansi"], "name": "single_agent",
                                          "is_parallelizable": False}

    def __init__(self, env_id: str, **config: Any) -> None:
        super().__init__()
        self.env_id = env_id
        self.inner = make(env_id, **config)
        self.render_mode = getattr(self.inner.unwrapped, "render_mode", None)
        self.roles = list(self.inner.possible_agents)
        self.metadata = {**self.metadata, "name": f"single_agent[{env_id}]"}
        self.possible_agents = [SOLO]
        inner_action = self.inner.action_space(self.roles[0])
        inner_observation = self.inner.observation_space(self.roles[0])
        # a reply carries one action per role plus their headings
        self._action_space = UnicodeText(inner_action.max_length * len(self.roles) + 64 * len(self.roles))
        self._observation_space = UnicodeText(inner_observation.max_length * 2)
        self._instructions: dict[str, str] = {}

    def observation_space(self, agent: str) -> UnicodeText:
        return self._observation_space

    def action_space(self, agent: str) -> UnicodeText:
        return self._action_space

    # ------------------------------------------------------------------ episode
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.inner.reset(seed=seed, options=options)
        # read per episode: some envs' instructions hold the episode's own rules (textarena_v0's game prompt)
        self._instructions = {role: self.inner.unwrapped.role_instructions(role) for role in self.roles}
        self.agents = [SOLO]
        self.agent_selection = SOLO
        self.rewards = {SOLO: 0.0}
        self._cumulative_rewards = {SOLO: 0.0}
        self.terminations = {SOLO: False}
        self.truncations = {SOLO: False}
        self._last_action: dict[str, Any] | None = None
        self.infos = {SOLO: self._info()}

    def _prompt(self) -> list[dict[str, str]]:
        first = self._live_inner_agent() or self.roles[0]
        view = self.inner.infos[first]["messages"][-1]["content"]
        return single_agent_prompt(self.roles, self._instructions, view)

    def observe(self, agent: str) -> TextObservation:
        system, user = self._prompt()
        return TextObservation(system["content"] + "\n\n" + user["content"])

    def _inner_over(self) -> bool:
        """No inner agent is live (every remaining one is terminated or truncated)."""
        inner = self.inner
        return all(inner.terminations[a] or inner.truncations[a] for a in inner.agents)

    def _live_inner_agent(self) -> str | None:
        """The inner agent to move, after stepping ``None`` for done ones selected before it
        (the AEC protocol); None when the inner episode is over (its final flags stay readable)."""
        inner = self.inner
        for _ in range(len(inner.agents) + 1):
            if self._inner_over():
                return None
            agent = inner.agent_selection
            if not (inner.terminations[agent] or inner.truncations[agent]):
                return agent
            inner.step(None)
        raise RuntimeError("the inner env kept selecting done agents")

    def step(self, action: str | None) -> None:
        if self.terminations[SOLO] or self.truncations[SOLO]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[SOLO] = 0.0
        text = action.decode("utf-8", errors="replace") if isinstance(action, bytes) else action
        sections = split_sections(text, self.roles) if isinstance(text, str) else dict.fromkeys(self.roles, "")
        inner = self.inner.unwrapped
        turn = inner.turn
        total = reward_local = 0.0
        played: dict[str, Any] = {}
        while (agent := self._live_inner_agent()) is not None and inner.turn == turn:
            self.inner.step(sections[agent])
            # every role is paid alpha * ΔG for this action; the actor also its local reward
            total += sum(float(r) for r in self.inner.rewards.values())
            last = self.inner.infos[agent]["last_action"] or {}
            reward_local += float(last.get("reward_local") or 0.0)
            played[agent] = {"action": sections[agent], "last_action": last}
        self._last_action = {"turn": turn, "reward": total, "reward_global": total - reward_local,
                             "reward_local": reward_local, "alpha": inner.config.alpha,
                             "valid": all(p["last_action"].get("valid", False) for p in played.values()),
                             "sections": played}
        self.rewards = {SOLO: total}
        if self._inner_over():
            terminated = any(self.inner.terminations[a] for a in self.inner.agents)
            self.terminations = {SOLO: terminated}
            self.truncations = {SOLO: not terminated}
        self.infos = {SOLO: self._info()}
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()

    def _info(self) -> dict[str, Any]:
        inner = self.inner.unwrapped
        return {"env_id": self.metadata["name"], "index": inner.index, "split": inner.split, "turn": inner.turn,
                "role": SOLO, "messages": self._prompt(), "last_action": self._last_action,
                "success": bool(inner.is_success()), "roles": list(self.roles)}

    def render(self) -> str | None:
        return self.inner.render()

    def close(self) -> None:
        self.inner.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> SingleAgentEnv:
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        for name, value in self.__dict__.items():
            # spaces never change, and instructions not within an episode (reset replaces them, never mutates)
            shared = name in ("_action_space", "_observation_space", "_instructions", "metadata", "roles")
            clone.__dict__[name] = value if shared else copy.deepcopy(value, memo)
        return clone


def single_agent_env(env_id: str, **config: Any) -> AECEnv:
    """The wrapped (order-enforcing) single-agent view of ``make(env_id, **config)``."""
    return wrap_env(SingleAgentEnv(env_id, **config))
