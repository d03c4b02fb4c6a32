"""Any pettingllm env served as an OpenEnv environment (``pip install -e '.[openenv]'``).

OpenEnv (Hugging Face's environment framework, TRL's native path for environments) runs an env
server-side as an ``Environment`` (``reset``/``step``/``state`` over pydantic ``Action`` and
``Observation`` models) and trainers drive it through OpenEnv's client over a WebSocket session
(``/ws``: one env instance per session; plain HTTP ``/reset`` and ``/step`` build a fresh env
per request, so an episode needs the session).

Each session chooses at ``reset`` which roles it plays (``learners``, default: every role) and
who plays the others (``seats``, role -> spec, default ``scripted``): one session can drive
both roles with two models (``observation.agent`` says which role is to act, so the client
routes the prompt to that role's model), or train one role against seats. Seat specs a remote
client may ask for are limited to ``allowed_seats`` (default ``scripted`` and ``random``): an
``openai:`` or ``hf:`` seat would make the server call any URL or load any local folder on a
client's say-so; the server's owner can allow them.

An observation carries the acting role, its chat (``messages``) and what is new in it since
the role's previous turn (``new_messages``), the reward that role was paid since its previous
action (for a learner's first turn, what it was paid before acting), ``done``, and in
``metadata`` the env's info for the role and every role's return so far.

Serve: ``uvicorn.run(openenv_app("plan_path_v0", max_turns=4), host="127.0.0.1", port=8000)``;
connect: ``PettingLLMClient(base_url="http://127.0.0.1:8000").sync()``.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from pettingllm_envs.registry import make
from pettingllm_envs.seats import SeatedEpisode, SeatTurn, make_seat

#: Seat specs a client may ask for unless the server allows more.
SAFE_SEATS = ("scripted", "random")


class PettingLLMAction(Action):
    text: str = Field(description="The acting role's reply, as the env reads it")


class PettingLLMObservation(Observation):
    agent: str | None = Field(default=None, description="The role to act next; None when the episode is over")
    prompt: str = Field(default="", description="The role's observation text")
    messages: list[dict[str, str]] = Field(default_factory=list, description="The role's full chat prompt")
    new_messages: list[dict[str, str]] = Field(default_factory=list,
                                               description="What is new in that chat since the role's previous turn")


class PettingLLMState(State):
    env_id: str = ""
    agent: str | None = None
    learners: list[str] = Field(default_factory=list)
    returns: dict[str, float] = Field(default_factory=dict)


class PettingLLMEnvironment(Environment[PettingLLMAction, PettingLLMObservation, PettingLLMState]):
    """One session's episodes of ``env_id`` (module docstring)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session builds its own env; nothing mutable is shared

    def __init__(self, env_id: str, *, allowed_seats: Collection[str] = SAFE_SEATS, **env_config: Any) -> None:
        super().__init__()
        self.env_id, self.allowed_seats, self.env_config = env_id, tuple(allowed_seats), env_config
        self.roles = list(make(env_id, **env_config).possible_agents)
        self.episode: SeatedEpisode | None = None
        self._state = PettingLLMState(env_id=env_id)

    def reset(self, seed: int | None = None, episode_id: str | None = None, learners: list[str] | None = None,
              seats: dict[str, str] | None = None, **kwargs: Any) -> PettingLLMObservation:
        learners = list(learners or self.roles)
        specs = {role: "scripted" for role in self.roles if role not in learners}
        specs.update(seats or {})
        refused = sorted(spec for spec in specs.values() if spec not in self.allowed_seats)
        if refused:
            raise ValueError(f"seat specs {refused} are not allowed on this server "
                             f"(allowed: {list(self.allowed_seats)})")
        unknown = sorted(set(specs) - set(self.roles))
        if unknown:
            raise ValueError(f"seats name roles that {self.env_id} does not have: {unknown}")
        env = make(self.env_id, **self.env_config)
        seed = 0 if seed is None else seed
        self.episode = SeatedEpisode(env, {r: make_seat(s, self.env_id, seed=seed) for r, s in specs.items()},
                                     learners)
        self._state = PettingLLMState(env_id=self.env_id, episode_id=episode_id or str(uuid.uuid4()),
                                      learners=learners)
        return self._observe(self.episode.reset(seed=seed))

    def step(self, action: PettingLLMAction, timeout_s: float | None = None, **kwargs: Any) -> PettingLLMObservation:
        if self.episode is None or self.episode.done:
            raise RuntimeError("the episode is over (or never started): reset first")
        self._state.step_count += 1
        return self._observe(self.episode.act(action.text))

    @property
    def state(self) -> PettingLLMState:
        return self._state

    def _observe(self, turn: SeatTurn) -> PettingLLMObservation:
        assert self.episode is not None
        self._state.agent = turn.agent
        self._state.returns = dict(self.episode.returns)
        info = {key: value for key, value in turn.info.items() if key not in ("messages", "new_messages")}
        return PettingLLMObservation(
            agent=turn.agent, prompt=str(turn.observation), messages=list(turn.messages or []),
            new_messages=list(turn.info.get("new_messages") or []), reward=turn.reward, done=turn.done,
            metadata={"info": info, "returns": dict(self.episode.returns), "success": bool(info.get("success"))})


def openenv_app(env_id: str, *, allowed_seats: Collection[str] = SAFE_SEATS, max_concurrent_envs: int = 8,
                **env_config: Any) -> Any:
    """The FastAPI app serving ``env_id`` (``env_config``: keyword arguments of ``pettingllm_envs.make``)."""
    return create_app(lambda: PettingLLMEnvironment(env_id, allowed_seats=allowed_seats, **env_config),
                      PettingLLMAction, PettingLLMObservation, env_name=f"pettingllm_{env_id}",
                      max_concurrent_envs=max_concurrent_envs, state_cls=PettingLLMState)


class PettingLLMClient(EnvClient[PettingLLMAction, PettingLLMObservation, PettingLLMState]):
    """OpenEnv's WebSocket client for a served pettingllm env."""

    def _step_payload(self, action: PettingLLMAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[PettingLLMObservation]:
        fields = {**payload.get("observation", {}), "reward": payload.get("reward"), "done": payload.get("done", False)}
        observation = PettingLLMObservation.model_validate(fields)
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done")))

    def _parse_state(self, payload: dict[str, Any]) -> PettingLLMState:
        return PettingLLMState.model_validate(payload)
