"""A plain PettingZoo AEC env whose agents finish at different times (trainer tests only).

Deliberately *not* built on this project's ``TextAECEnv``: it uses nothing but PettingZoo's
``AECEnv`` and ``agent_selector`` and the standard dead-agent protocol (``_deads_step_first``
after a step, ``_was_dead_step`` for the ``None`` action), so it checks that the trainer
follows the AEC API rather than this project's conventions. No ``infos["messages"]`` and a numeric
observation: the trainer falls back to the observation's text as a user message.

| Property    | Value                                                                        |
|-------------|------------------------------------------------------------------------------|
| Agents      | ``sprinter`` (acts once, then terminates), ``marathoner`` (acts ``laps`` times) |
| Observation | ``[agent index, problem seed, lap, last reward x 10]`` (an int64 vector)       |
| Action      | any text                                                                     |
| Reward      | ``(sum of the action's code points mod 10) / 10`` to the acting agent           |
"""

from __future__ import annotations

import string
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import AgentSelector

CHARSET = string.printable


def reward_of(text: str) -> float:
    """A reward that varies with the text, so GRPO groups of random completions rarely tie."""
    return (sum(map(ord, text)) % 10) / 10


class UnevenEnv(AECEnv):
    metadata: ClassVar[dict[str, Any]] = {"name": "uneven_v0", "render_modes": [], "is_parallelizable": False}

    def __init__(self, laps: int = 3) -> None:
        super().__init__()
        self.laps = laps
        self.possible_agents = ["sprinter", "marathoner"]
        self.render_mode = None
        self._observation_space = spaces.Box(0, 2**31 - 1, shape=(4,), dtype=np.int64)
        self._action_space = spaces.Text(max_length=256, min_length=0, charset=CHARSET)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._action_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.problem = 0 if seed is None else int(seed)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.moves = dict.fromkeys(self.agents, 0)
        self.last_text = ""
        self._agent_selector = AgentSelector(self.agents)
        self.agent_selection = self._agent_selector.reset()

    def observe(self, agent: str) -> np.ndarray:
        last_reward = round(10 * reward_of(self.last_text))
        return np.array([self.possible_agents.index(agent), self.problem, self.moves[agent], last_reward],
                        dtype=np.int64)

    def step(self, action: str | None) -> None:
        # PettingZoo's AEC template as its environment-creation tutorial writes it (TextAECEnv
        # does the same by the same protocol; this env keeps its own copy on purpose, see above).
        if self.terminations[self.agent_selection] or self.truncations[self.agent_selection]:
            self._was_dead_step(action)
            return
        agent = self.agent_selection
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.rewards[agent] = reward_of(action)
        self.last_text = action
        self.moves[agent] += 1
        if agent == "sprinter" or self.moves[agent] >= self.laps:
            self.terminations[agent] = True
        self.agent_selection = self._agent_selector.next()
        while self.terminations[self.agent_selection] and not all(self.terminations.values()):
            self.agent_selection = self._agent_selector.next()  # the live agent moves next
        self._accumulate_rewards()
        self._deads_step_first()  # ... but a newly dead agent first takes its None step

    def render(self) -> None:
        return None

    def close(self) -> None:
        pass


def env(**config: Any) -> AECEnv:
    """The registry's factory (``pettingllm_envs.make`` calls ``env(**env_kwargs)``)."""
    return UnevenEnv(**config)
