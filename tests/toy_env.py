"""A tiny two-role env for the trainer's tests (registered only inside those tests).

| Property           | Value                                                                 |
|--------------------|-----------------------------------------------------------------------|
| Roles (turn order) | `first`, `second`                                                     |
| Observation        | role instructions, the problem index, every action so far             |
| Action             | free text; only its first character counts                            |
| Local reward       | 1 when the first character is in the role's target set, else 0       |
| Global reward      | 1 when every role's latest answer is right, else 0                    |
| Termination        | never early; the episode is truncated after `max_turns` turns        |
| Config             | `ToyConfig`: targets per role, max_turns, alpha (0: reward = local)   |

A one-token task a 2-layer random model can learn in seconds, with a chance rate well
above zero (so GRPO groups are rarely all-equal) and different targets per role (so a
shared policy must read the role from its prompt). The observation shows every earlier
action, including the same turn's, which the trap tests rely on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from pettingllm_envs.core import ActionResult, TextAECEnv, TextEnvConfig, make_parallel_env, wrap_env


@dataclass
class ToyConfig(TextEnvConfig):
    """Configuration of the toy env."""

    alpha: float = 0.0
    max_turns: int = 1
    targets: dict[str, str] = field(default_factory=lambda: {"first": "0123456789", "second": "abcdefghijklm"})
    """Accepted first characters per role."""


class raw_env(TextAECEnv[int]):
    """The toy env (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "ansi"], "name": "toy_bytes_v0",
                                          "is_parallelizable": False}
    roles = ("first", "second")
    config_class = ToyConfig
    config: ToyConfig

    def load_instance(self, index: int, split: str) -> int:
        return index

    def start_episode(self, instance: int) -> None:
        self.correct: dict[str, bool] = dict.fromkeys(self.roles, False)

    def apply_action(self, agent: str, text: str) -> ActionResult:
        right = bool(text) and text[0] in self.config.targets[agent]
        self.correct[agent] = right
        return ActionResult(1.0 if right else 0.0, parsed=text[:1])

    def global_reward(self) -> float:
        return 1.0 if all(self.correct.values()) else 0.0

    def is_success(self, agent: str | None = None) -> bool:
        return all(self.correct.values())

    def is_done(self) -> bool:
        return False

    def role_instructions(self, agent: str) -> str:
        return f"You are {agent}. Answer with one character."

    def task_view(self, agent: str) -> str:
        lines = [f"Problem {self.index}. Turn {self.turn}."]
        lines += [f"turn {r.turn} {r.agent} said: {r.text}" for r in self.history]
        return "\n".join(lines)

    def render_state(self) -> str:
        return self.task_view(self.agent_selection)


def env(**config: Any) -> TextAECEnv:
    return wrap_env(raw_env(**config))


def parallel_env(**config: Any) -> Any:
    return make_parallel_env(env(**config))
