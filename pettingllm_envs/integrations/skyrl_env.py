"""One role of any pettingllm env as a SkyRL-gym ``BaseTextEnv`` (``pip install -e '.[skyrl]'``).

SkyRL trains one agent per env over an append-only chat: ``init(prompt)`` gives the first
messages, ``step(action)`` the messages to append, a reward and ``done``. Here that agent is
one role of a multi-agent env (``role``); every other role is a seat
(:mod:`pettingllm_envs.seats`: ``scripted`` by default, or ``random``, ``openai:<model>@<url>``,
``hf:<folder>``) played inside ``step`` until the role acts again.

* ``init`` resets the env on problem ``seed`` and returns the role's first chat (the env's
  ``info["messages"]``, system message included); the dataset's own prompt is not used,
  because the env writes the prompt of each problem.
* ``step`` returns as observations what is new in the role's chat since its previous turn
  (``info["new_messages"]`` without system or assistant messages: the model's own reply is
  already in SkyRL's chat), the reward the env paid the role since its previous action (its own
  ``alpha * global + local`` plus what the seats' moves credited it), and ``done`` when the
  episode ended. ``metadata`` has the env's ``info`` of the role, every role's ``returns`` and
  ``success``: what the env reported for the role when it finished (False before the end).
* ``init`` cannot carry a reward, so what the seats' moves paid the role before its first action
  (a tester credited for the coder's first code, a tool role for the reasoner's answer) comes with
  the first ``step``'s reward; where the seats end the episode before the role acts, the first
  ``step`` ends it, whatever the action, with that reward. The step rewards therefore sum to the
  role's return in the env, on truncation too (the env's ``max_turns`` ends the episode).

Settings come from SkyRL's ``env_config`` (a mapping) and are overridden per dataset row by
``extras``: ``env_id`` (bound by the registered id ``pettingllm/<env_id>``), ``role``, ``seed``,
``seats`` (role -> spec), ``env_config`` (keyword arguments of ``pettingllm_envs.make``).
:func:`register_skyrl_envs` registers ``pettingllm/<env_id>`` for every registered env.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType

from pettingllm_envs.registry import list_envs, make
from pettingllm_envs.seats import SeatedEpisode, SeatTurn, make_seat

#: SkyRL-gym id prefix: ``pettingllm/<env_id>``.
ID_PREFIX = "pettingllm/"


def _settings(env_config: Any, extras: Mapping[str, Any] | None) -> dict[str, Any]:
    """SkyRL's ``env_config`` (dict or OmegaConf) overridden by the dataset row's ``extras``."""
    settings = dict(env_config or {})
    settings.update({k: v for k, v in (extras or {}).items() if k in ("env_id", "role", "seed", "seats", "env_config")})
    return settings


class PettingLLMTextEnv(BaseTextEnv):
    """One role of a pettingllm env in SkyRL (module docstring)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None, *,
                 env_id: str | None = None) -> None:
        super().__init__()
        settings = _settings(env_config, extras)
        self.env_id = str(settings.get("env_id") or env_id or "")
        if not self.env_id:
            raise ValueError("no env_id: register pettingllm/<env_id> or pass env_id in env_config or extras")
        self.env = make(self.env_id, **dict(settings.get("env_config") or {}))
        roles = list(self.env.possible_agents)
        self.role = str(settings.get("role") or "")
        if self.role not in roles:
            raise ValueError(f"role must be one of {roles} of {self.env_id}, got {self.role!r}")
        self.seed = int(settings.get("seed", 0))
        specs = {r: "scripted" for r in roles if r != self.role}
        specs.update({r: s for r, s in dict(settings.get("seats") or {}).items() if r != self.role})
        unknown = sorted(set(specs) - set(roles))
        if unknown:
            raise ValueError(f"seats name roles that {self.env_id} does not have: {unknown}")
        seats = {r: make_seat(spec, self.env_id, seed=self.seed) for r, spec in specs.items()}
        self.episode = SeatedEpisode(self.env, seats, [self.role])
        # SkyRL reads max_turns; the env truncates itself, this only bounds SkyRL's loop.
        # (the role acts at most once per env turn).
        self.max_turns = int(getattr(getattr(self.env.unwrapped, "config", None), "max_turns", 1) or 1)
        self.success = False

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        turn = self.episode.reset(seed=self.seed)
        self.turns = 0
        self._paid_before_acting = turn.reward  # paid out with the first step (init has no reward)
        return self._chat(turn), {"seed": self.seed, "role": self.role, "done": turn.done}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        turn = self.episode.turn
        assert turn is not None, "init() first"
        reward, self._paid_before_acting = self._paid_before_acting, 0.0
        if not self.episode.done:  # else the seats ended it before the role acted: this step reports the end
            self.turns += 1
            turn = self.episode.act(action)
            reward += float(turn.reward)
        observations = [] if turn.done else self._new_messages(turn)
        self.success = self.episode.success(self.role)
        metadata = {"success": self.success, "returns": dict(self.episode.returns), "info": turn.info}
        return BaseTextEnvStepOutput(observations=observations, reward=reward, done=turn.done,
                                     metadata=metadata, postprocessed_action=action)

    def _chat(self, turn: SeatTurn) -> ConversationType:
        messages = turn.messages or [{"role": "user", "content": str(turn.observation)}]
        return [dict(m) for m in messages]

    @staticmethod
    def _new_messages(turn: SeatTurn) -> ConversationType:
        new = turn.info.get("new_messages")
        if isinstance(new, list):
            return [dict(m) for m in new if m.get("role") not in ("system", "assistant")]
        return [{"role": "user", "content": turn.new_text}]

    def get_metrics(self) -> dict[str, Any]:
        return {"success": float(self.success), "return": self.episode.returns.get(self.role, 0.0)}

    def close(self) -> None:
        self.env.close()


def register_skyrl_envs() -> list[str]:
    """Register ``pettingllm/<env_id>`` in SkyRL-gym for every registered env (idempotent);
    returns the ids."""
    ids = []
    for env_id in list_envs():
        ident = ID_PREFIX + env_id
        if ident not in skyrl_gym.registry:
            skyrl_gym.register(id=ident, entry_point=f"{__name__}:PettingLLMTextEnv", kwargs={"env_id": env_id})
        ids.append(ident)
    return ids
