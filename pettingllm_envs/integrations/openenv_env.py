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

One episode can also be shared by several sessions, each playing its own roles (one policy
per role, e.g. two processes): every session resets with ``shared=True``, the same
``episode_id``, ``seed`` and ``seats`` (roles a seat plays; default none) and ``learners=[its
roles]`` (default: every role no session has claimed yet). The first session opens the
episode in the server's table; it starts once every role without a seat is claimed, and a
role left unclaimed for ``join_timeout_s`` refuses the episode (every waiting ``reset``
raises an error naming the roles). ``reset`` and ``step`` return when it is one of the
session's roles' turn, or when the episode is over; a player silent for ``turn_timeout_s``,
or a session that leaves (closes, resets), abandons the episode: every session's next
observation is ``done`` with ``metadata["error"]`` saying why. The final prompt and info go to
the session whose action ended the episode. An episode leaves the table when it is over. Keep
the client's ``message_timeout_s`` (60 s by default) above ``join_timeout_s + turn_timeout_s``,
as a ``reset`` can wait for both.

What a session is paid (every session, shared or not): ``metadata["rewards"]`` maps roles to
what the env paid them since the session last reported them: the role to act while the episode
runs, every role of the session once it is over (the -1 a loss dealt to the role that did not
end it included), so each role's entries sum to its return. ``reward`` is the entry of
``metadata["role"]`` (the role to act, or at the end the session's role that acted last): for a
session of one role, its whole pay. ``metadata["success"]`` is what the env reported as that
role's success when it finished, ``metadata["successes"]`` the same for every role of the session,
whichever session ended the episode.

Abandoned: the roles of the session that went silent or left forfeit. What the rest of the
episode would pay them is added to their returns (:func:`forfeit`): on a copy of the env, they
answer nothing more (the empty action, refused with each env's format penalty), the seats play
on, and the other sessions' roles are played by the env's oracle where the roles are rewarded
against each other (the absent role meets at best the loss it was facing), or answer nothing too
in a cooperative env (no partner's work is credited to it). So silence never pays more than
answering. The roles of the sessions still present are paid what the env paid them up to the
abandonment, nothing more; their ``successes`` are False (the episode did not finish).

Serve: ``uvicorn.run(openenv_app("plan_path_v0", max_turns=4), host="127.0.0.1", port=8000)``;
connect: ``PettingLLMClient(base_url="http://127.0.0.1:8000").sync()``.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Collection
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.registry import make
from pettingllm_envs.seats import SeatedEpisode, make_seat, roles_compete

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


class SharedEpisode:
    """An episode whose learner roles (every role without a seat) are played by one or more sessions.

    A :class:`~pettingllm_envs.seats.SeatedEpisode` with those roles as learners holds the play;
    ``changed`` (a condition) guards it, and sessions wait on it for their roles' turns."""

    def __init__(self, env_id: str, env_config: dict[str, Any], seed: int, seats: dict[str, str]) -> None:
        env = make(env_id, **env_config)
        self.env_id, self.seed, self.seats = env_id, seed, seats
        self.sessions: list[list[str]] = []  # the roles of each claim, one claim per session
        self.forfeits: dict[str, float] = {}
        self.roles = [role for role in env.possible_agents if role not in seats]
        self.episode = SeatedEpisode(env, {r: make_seat(s, env_id, seed=seed) for r, s in seats.items()}, self.roles)
        self.claimed: set[str] = set()
        self.started = False
        self.ended_by: PettingLLMEnvironment | None = None
        self.error: str | None = None
        self.changed = threading.Condition()

    @property
    def unclaimed(self) -> list[str]:
        return [role for role in self.roles if role not in self.claimed]

    @property
    def over(self) -> bool:
        return self.error is not None or (self.started and self.episode.done)

    @property
    def returns(self) -> dict[str, float]:
        """What the env paid each role, the forfeits of an abandoned episode's absent roles included."""
        return {role: paid + self.forfeits.get(role, 0.0) for role, paid in self.episode.returns.items()}

    def session_of(self, role: str | None) -> list[str]:
        """The roles of the session that plays ``role``."""
        return next((roles for roles in self.sessions if role in roles), [])

    def claim(self, roles: list[str]) -> None:
        if not roles:
            raise ValueError(f"every role of this episode is taken (by sessions: {sorted(self.claimed)}; "
                             f"by seats: {sorted(self.seats)})")
        taken = sorted(set(roles) & self.claimed)
        if taken:
            raise ValueError(f"roles {taken} of this episode are already played by another session")
        not_played = sorted(set(roles) - set(self.roles))
        if not_played:
            raise ValueError(f"roles {not_played} are not played by sessions in this episode (seats: {self.seats})")
        self.claimed.update(roles)
        self.sessions.append(list(roles))
        if not self.unclaimed:
            self.episode.reset(seed=self.seed)
            self.started = True
            self.changed.notify_all()

    def abort(self, error: str, absent: Collection[str] = ()) -> None:
        """End the episode with ``error``; the ``absent`` roles (a session gone silent or left) forfeit."""
        if not self.over:
            if self.started and absent:
                self.forfeits = forfeit(self.episode, absent, self.env_id)
            self.error = error
            self.changed.notify_all()

    def wait(self, roles: Collection[str], timeout_s: float) -> bool:
        """Wait until one of ``roles`` is to act or the episode is over; False on timeout."""
        return self.changed.wait_for(lambda: self.over or (self.started and self.episode.agent in roles), timeout_s)


class EpisodeTable:
    """The shared episodes of one server, by episode id; an episode leaves it when it is over."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.episodes: dict[str, SharedEpisode] = {}

    def discard(self, episode_id: str, shared: SharedEpisode) -> None:
        with self.lock:
            if self.episodes.get(episode_id) is shared:
                del self.episodes[episode_id]


class PettingLLMEnvironment(Environment[PettingLLMAction, PettingLLMObservation, PettingLLMState]):
    """One session's episodes of ``env_id``, alone or in a shared episode (module docstring)."""

    # OpenEnv runs a session's reset/step/close in that session's own worker thread, so a session
    # may block waiting for its turn; what sessions share (shared episodes) is behind their locks.
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, *, allowed_seats: Collection[str] = SAFE_SEATS, table: EpisodeTable | None = None,
                 join_timeout_s: float = 20.0, turn_timeout_s: float = 30.0, **env_config: Any) -> None:
        super().__init__()
        self.env_id, self.allowed_seats, self.env_config = env_id, tuple(allowed_seats), env_config
        self.table = table if table is not None else EpisodeTable()
        self.join_timeout_s, self.turn_timeout_s = join_timeout_s, turn_timeout_s
        self.roles = list(make(env_id, **env_config).possible_agents)
        self.shared: SharedEpisode | None = None
        self.learners: list[str] = []
        self._paid: dict[str, float] = {}
        self._last_role: str | None = None
        self._state = PettingLLMState(env_id=env_id)

    def reset(self, seed: int | None = None, episode_id: str | None = None, learners: list[str] | None = None,
              seats: dict[str, str] | None = None, shared: bool = False, **kwargs: Any) -> PettingLLMObservation:
        self.close()
        seed = 0 if seed is None else seed
        unknown = sorted(set(learners or []) - set(self.roles))
        if unknown:
            raise ValueError(f"learners must be roles of {self.env_id} ({self.roles}), got {unknown}")
        if shared:
            if not episode_id:
                raise ValueError("a shared episode needs an episode_id, the same in every session that plays it")
            self._check_seats(seats or {})
            episode, roles = self._join(episode_id, seed, seats, learners)
        else:
            roles = list(learners or self.roles)
            specs = {role: "scripted" for role in self.roles if role not in roles}
            specs.update(seats or {})
            self._check_seats(specs)
            episode = SharedEpisode(self.env_id, self.env_config, seed,
                                    {role: spec for role, spec in specs.items() if role not in roles})
            episode_id = episode_id or str(uuid.uuid4())
            with episode.changed:
                episode.claim(roles)
        with episode.changed:
            if not episode.changed.wait_for(lambda: episode.started or episode.over, self.join_timeout_s):
                episode.abort(f"roles {episode.unclaimed} were not claimed by any session within "
                              f"{self.join_timeout_s:g} s: the episode is refused")
            error = episode.error if not episode.started else None
        if error is not None:
            self.table.discard(episode_id, episode)
            raise RuntimeError(error)
        self.shared, self.learners, self._last_role = episode, roles, roles[0]
        self._paid = dict.fromkeys(roles, 0.0)
        self._state = PettingLLMState(env_id=self.env_id, episode_id=episode_id, learners=roles)
        with episode.changed:
            self._await_turn(episode)
            observation = self._observe(episode)
        return self._after(observation, episode)

    def step(self, action: PettingLLMAction, timeout_s: float | None = None, **kwargs: Any) -> PettingLLMObservation:
        episode = self.shared
        if episode is None:
            raise EpisodeNotStarted(NOT_STARTED)
        with episode.changed:
            if episode.error is None:
                if episode.episode.agent not in self.learners:
                    raise RuntimeError(f"it is {episode.episode.agent}'s turn, not one of {self.learners}")
                self._last_role = episode.episode.agent
                self._state.step_count += 1
                episode.episode.act(action.text)
                if episode.episode.done:
                    episode.ended_by = self
                episode.changed.notify_all()
                self._await_turn(episode)
            observation = self._observe(episode)
        return self._after(observation, episode)

    def close(self) -> None:
        """Leave the current episode: a shared episode still running is abandoned, and its other sessions told."""
        episode, self.shared = self.shared, None
        if episode is not None:
            with episode.changed:
                episode.abort(f"the session playing {self.learners} left the episode", self.learners)
            self.table.discard(self._state.episode_id or "", episode)

    @property
    def state(self) -> PettingLLMState:
        return self._state

    def _check_seats(self, specs: dict[str, str]) -> None:
        refused = sorted(spec for spec in specs.values() if spec not in self.allowed_seats)
        if refused:
            raise ValueError(f"seat specs {refused} are not allowed on this server "
                             f"(allowed: {list(self.allowed_seats)})")
        unknown = sorted(set(specs) - set(self.roles))
        if unknown:
            raise ValueError(f"seats name roles that {self.env_id} does not have: {unknown}")

    def _join(self, episode_id: str, seed: int, seats: dict[str, str] | None,
              learners: list[str] | None) -> tuple[SharedEpisode, list[str]]:
        """Open the shared episode ``episode_id`` or join it, claiming ``learners`` (default: every unclaimed role)."""
        with self.table.lock:
            episode = self.table.episodes.get(episode_id)
            if episode is None:
                episode = SharedEpisode(self.env_id, self.env_config, seed, dict(seats or {}))
            elif episode.seed != seed or (seats is not None and seats != episode.seats):
                raise ValueError(f"episode {episode_id!r} was opened with seed {episode.seed} and seats "
                                 f"{episode.seats}: join it with the same")
            with episode.changed:
                roles = list(learners or episode.unclaimed)
                episode.claim(roles)
            self.table.episodes[episode_id] = episode  # only once claimed, so a refused opening leaves nothing
        return episode, roles

    def _await_turn(self, episode: SharedEpisode) -> None:
        """Wait (holding ``episode.changed``) for this session's turn or the end; a silent player abandons it."""
        if not episode.wait(self.learners, self.turn_timeout_s):
            episode.abort(f"no move from the session playing {episode.episode.agent} within "
                          f"{self.turn_timeout_s:g} s: the episode is abandoned",
                          episode.session_of(episode.episode.agent))

    def _after(self, observation: PettingLLMObservation, episode: SharedEpisode) -> PettingLLMObservation:
        """Once the session has seen the end, it leaves the episode and the table drops it."""
        if observation.done:
            self.shared = None
            self.table.discard(self._state.episode_id or "", episode)
        return observation

    def _observe(self, episode: SharedEpisode) -> PettingLLMObservation:
        """This session's view (holding ``episode.changed``): its role's turn, or the end (an error included).

        Pays each role reported (the role to act; at the end every role of the session) what the env
        paid it since the session last reported it; the final prompt and info go to the session whose
        action ended the episode (every session, when no action did)."""
        turn, returns, over = episode.episode.turn, episode.returns, episode.over
        assert turn is not None
        ours = not over and turn.agent in self.learners
        shown = ours or (over and episode.error is None and episode.ended_by in (self, None))
        role = turn.agent if ours and turn.agent is not None else self._last_role
        assert role is not None
        reported = list(self.learners) if over else [role]
        rewards = {r: returns[r] - self._paid[r] for r in reported}
        self._paid.update({r: returns[r] for r in reported})
        successes = {r: episode.episode.success(r) for r in self.learners} if over else {}
        info = {key: value for key, value in turn.info.items() if shown and key not in ("messages", "new_messages")}
        metadata: dict[str, Any] = {"info": info, "returns": returns, "rewards": rewards, "role": role,
                                    "success": successes.get(role, False), "successes": successes}
        if episode.error is not None:
            metadata["error"] = episode.error
        self._state.agent = turn.agent if ours else None
        self._state.returns = returns
        return PettingLLMObservation(
            agent=self._state.agent, prompt=str(turn.observation) if shown else "",
            messages=list(turn.messages or []) if shown else [],
            new_messages=list(turn.info.get("new_messages") or []) if shown else [],
            reward=rewards[role], done=over, metadata=metadata)


def forfeit(episode: SeatedEpisode, absent: Collection[str], env_id: str) -> dict[str, float]:
    """What the rest of ``episode`` pays each ``absent`` role (module docstring), played on a copy of
    its env: the absent roles answer the empty action, the seats play on, and every other role is
    played by the env's oracle where the roles compete, or answers the empty action too."""
    env = copy.deepcopy(episode.env)
    oracle = scripted_policy(env_id) if roles_compete(env) else None
    paid = dict.fromkeys(absent, 0.0)
    for agent in env.agent_iter(max_iter=10_000):
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            action = None
        elif agent in episode.seats:
            action = episode.seats[agent](observation, agent, info)
        elif agent in paid or oracle is None:
            action = ""
        else:
            action = oracle(observation, agent, info)
        env.step(action)
        for role in paid:
            paid[role] += float(env.rewards.get(role, 0.0))
    return paid  # the copy is not closed: it may share what the env holds (a sandbox, a dataset)


#: The answer to a step without an episode; over plain HTTP every /step is one (each request gets a new env).
NOT_STARTED = ("the episode is over (or never started): reset first. HTTP /reset and /step are stateless (each "
               "request gets a new env): play an episode over the WebSocket session (/ws, OpenEnv's EnvClient)")


class EpisodeNotStarted(RuntimeError):
    """A step with no episode to step (HTTP 409 from :func:`openenv_app`)."""


def openenv_app(env_id: str, *, allowed_seats: Collection[str] = SAFE_SEATS, max_concurrent_envs: int = 8,
                join_timeout_s: float = 20.0, turn_timeout_s: float = 30.0, **env_config: Any) -> Any:
    """The FastAPI app serving ``env_id`` (``env_config``: keyword arguments of ``pettingllm_envs.make``);
    its sessions share one :class:`EpisodeTable` (module docstring for the timeouts)."""
    from fastapi.responses import JSONResponse

    table = EpisodeTable()
    app = create_app(lambda: PettingLLMEnvironment(env_id, allowed_seats=allowed_seats, table=table,
                                                   join_timeout_s=join_timeout_s, turn_timeout_s=turn_timeout_s,
                                                   **env_config),
                     PettingLLMAction, PettingLLMObservation, env_name=f"pettingllm_{env_id}",
                     max_concurrent_envs=max_concurrent_envs, state_cls=PettingLLMState)

    async def not_started(request: Any, error: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=409)

    app.add_exception_handler(EpisodeNotStarted, not_started)
    return app


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
