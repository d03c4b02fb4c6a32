"""One role of any pettingllm env as a single-agent ``gymnasium.Env``.

Single-agent RL libraries (and anything that speaks Gymnasium) see the world from one
agent's seat. :class:`RoleEnv` gives them that seat: ``step(action)`` applies the role's
action, then plays every other role with the given policies until it is this role's turn
again or the episode ends (a :class:`~pettingllm_envs.seats.SeatedEpisode` with this role as its
learner). The other roles are part of the environment's dynamics, so they should be deterministic
(the default, each env's scripted oracle, is) for seeded resets to be reproducible.

Gymnasium ids ``pettingllm/<env_id>`` are registered when this package is imported, with
the role as a keyword: ``gymnasium.make("pettingllm/plan_path_v0", role="planner")``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium
import numpy as np
from pettingzoo import AECEnv

from pettingllm_envs.core.spaces import TextObservation
from pettingllm_envs.policies import Policy, scripted_policy
from pettingllm_envs.registry import list_envs, make
from pettingllm_envs.seats import SeatedEpisode, SeatTurn

#: Gymnasium namespace of the registered ids.
GYM_NAMESPACE = "pettingllm"


class RoleEnv(gymnasium.Env[TextObservation, str]):
    """``role`` of an AEC env as a Gymnasium env; the other roles are played by ``other_policies``.

    ``env_or_id`` is an env id (made with ``make(env_id, **config)``) or an AEC env.
    ``other_policies`` is one policy for every other role, a dict role -> policy, or None
    for each env's scripted oracle (only possible when ``env_or_id`` is an id).

    The reward of a step is the role's reward accumulated since its previous action: its
    own action's ``alpha * global + local``, plus anything the other roles' actions gave it
    (their change of the team state); what they gave it before its first action comes with
    its first step.
    ``info`` is the role's ``infos`` entry (chat ``messages``, ``last_action`` with the
    reward parts, ``success``), copied so that callers may keep and modify it.
    """

    #: ``render_fps`` only tells Gymnasium's checker that human rendering (printing text) is
    #: not an animation to pace; it plays no role otherwise.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "ansi"], "render_fps": 1}

    def __init__(
        self,
        env_or_id: str | AECEnv,
        role: str | None = None,
        other_policies: Policy | Mapping[str, Policy] | None = None,
        *,
        render_mode: str | None = None,
        **config: Any,
    ) -> None:
        if isinstance(env_or_id, str):
            if render_mode is not None:
                config["render_mode"] = render_mode
            self.aec = make(env_or_id, **config)
            env_id = env_or_id
        else:
            if config or render_mode is not None:
                raise ValueError("config and render_mode apply only when RoleEnv makes the env from an id")
            self.aec = env_or_id
            env_id = None
        self.render_mode = getattr(self.aec.unwrapped, "render_mode", None)
        roles = list(self.aec.possible_agents)
        self.role = roles[0] if role is None else role
        if self.role not in roles:
            raise ValueError(f"unknown role {self.role!r}; the roles are {roles}")
        self.others = [r for r in roles if r != self.role]
        if other_policies is None:
            if env_id is None:
                raise ValueError("other_policies is required when RoleEnv wraps an env object")
            other_policies = scripted_policy(env_id)
        if callable(other_policies):
            other_policies = dict.fromkeys(self.others, other_policies)
        missing = [r for r in self.others if r not in other_policies]
        if missing:
            raise ValueError(f"no policy for the other roles {missing}")
        self.other_policies: dict[str, Policy] = {r: other_policies[r] for r in self.others}
        self.observation_space = self.aec.observation_space(self.role)
        self.action_space = self.aec.action_space(self.role)
        self.episode = SeatedEpisode(self.aec, self.other_policies, [self.role])
        self._episode_over = True
        self._ended_before_acting = False
        self._reward_before_acting = 0.0
        self._last_turn: SeatTurn | None = None

    # The AEC env's generator is the only source of randomness (it draws the problem on an
    # unseeded reset), so Gymnasium's seeding checks look at that one rather than a second,
    # unused generator on this wrapper.
    @property
    def _np_random(self) -> np.random.Generator | None:  # type: ignore[override]
        return self.aec.unwrapped._np_random

    @property
    def np_random(self) -> np.random.Generator:  # type: ignore[override]
        return self.aec.unwrapped.np_random

    @property
    def np_random_seed(self) -> int | None:  # type: ignore[override]
        return self.aec.unwrapped.np_random_seed

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[TextObservation, dict[str, Any]]:
        """Reset the AEC env (``reset(seed=i)`` plays problem ``i``; ``options`` as the env's
        ``reset``) and play the roles before this one in turn order."""
        turn = self.episode.reset(seed=seed, options=options)
        # An episode that other roles finished before this role acted ends on the next step,
        # whatever the action: Gymnasium's reset cannot report termination. Nor a reward: what
        # the roles before this one paid it (their change of the team state) comes with the
        # first step's reward, so the episode's return is the AEC env's.
        self._episode_over = False
        self._ended_before_acting = turn.done
        self._reward_before_acting = turn.reward
        self._last_turn = turn
        return TextObservation(turn.observation), copy.deepcopy(turn.info)

    def step(self, action: str) -> tuple[TextObservation, float, bool, bool, dict[str, Any]]:
        """Apply this role's ``action`` and play the others until it is this role's turn or the end."""
        if self._episode_over:
            raise RuntimeError("the episode is over (or never started): call reset()")
        if self._ended_before_acting:  # the turn reset saw, whose reward reset held back
            turn, reward = self._last_turn, self._reward_before_acting
        else:
            turn = self.episode.act(action)
            reward = turn.reward + self._reward_before_acting
        self._ended_before_acting, self._reward_before_acting = False, 0.0
        self._episode_over = turn.done
        return (TextObservation(turn.observation), reward, turn.terminated, turn.truncated,
                copy.deepcopy(turn.info))

    def render(self) -> str | None:
        return self.aec.render()

    def close(self) -> None:
        self.aec.close()


def make_role_env(env_id: str, role: str | None = None, **kwargs: Any) -> RoleEnv:
    """Entry point of the registered Gymnasium ids (``gymnasium.make`` calls it)."""
    return RoleEnv(env_id, role, **kwargs)


def gym_id(env_id: str) -> str:
    """The Gymnasium id of ``env_id``: ``pettingllm/<env_id>``."""
    return f"{GYM_NAMESPACE}/{env_id}"


def register_gymnasium_envs() -> list[str]:
    """Register ``pettingllm/<env_id>`` for every registered env (no env module is imported);
    returns the ids. Idempotent, so envs registered later can be added by calling it again."""
    ids = []
    for env_id in list_envs():
        if gym_id(env_id) not in gymnasium.registry:
            gymnasium.register(
                id=gym_id(env_id),
                entry_point="pettingllm_envs.integrations.gymnasium_env:make_role_env",
                kwargs={"env_id": env_id},
            )
        ids.append(gym_id(env_id))
    return ids
