"""Multi-turn training of any pettingllm env through TRL's ``GRPOTrainer(environment_factory=...)``.

TRL (>= 1.16, transformers >= 5.2) runs one environment object per rollout: ``reset(**row)``
returns text appended to the row's prompt, every public method is a tool the model may call
(its result comes back as a ``tool`` message, excluded from the loss), and ``get_reward()``
gives the rollout's one scalar reward. :func:`environment_factory` builds that class for an
env id:

* The trained role(s), the *learners*, act by calling the tool ``act(action)``: the action
  text. The tool applies it, lets every other role play (each by its seat:
  :func:`pettingllm_envs.seats.make_seat`, the env's oracle by default, or any LLM seat such as
  ``hf:<model folder>`` or ``openai:<model>@<base_url>``) and returns what is new for the learner
  to act next, or the end of the episode.
* ``get_reward()`` is the sum of the learners' episode returns
  (:attr:`~pettingllm_envs.seats.SeatedEpisode.returns`): everything the env paid them,
  ``alpha * ΔG + local`` for their actions plus what the seats' moves paid them. With one
  learner that is the trained role's return. TRL has one scalar per rollout, so per-turn credit
  is not available there (the AT-GRPO trainer, ``pettingllm train``, has it).
* Several learners ("one policy in several seats"): the model's tool calls act for whichever
  learner is to move, and each tool result names the role that acts next. Only in an env whose
  roles share the reward (cooperative): where they are rewarded against each other (tictactoe_v0,
  textarena_v0) the summed return cancels the outcome (one model in both tictactoe seats was paid
  +0.4 to +0.6 for X's quickest win and +0.7 for any draw), so :func:`environment_factory`
  refuses several learners there; train one seat per run against a seat (a frozen copy of the
  model: ``hf:<folder>``), or self-play both seats with ``pettingllm train``, whose groups keep
  each role's own return.
* A rollout whose model stops calling the tool before the episode ends (it answered in prose,
  or hit TRL's ``max_tool_calling_iterations``) is played out by ``get_reward`` as if the
  learners answered every remaining turn with an empty action, which each env refuses with its
  format penalty. Otherwise not acting would be the best policy: the seats' moves often pay the
  learners (a team reward) while every honest but wrong action costs a penalty.
  Calls after the end are answered, never raise.

Rows of the dataset (:func:`episode_dataset`) hold ``prompt`` (a user message telling the model
to act through the tool), ``index`` (the problem) and ``split``; ``reset`` plays problem
``index`` of ``split``. ``on_reward`` (optional) receives one :class:`RolloutRecord` per
rollout, with the actions played, to audit what TRL was paid.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pettingllm_envs.policies import Policy
from pettingllm_envs.registry import make
from pettingllm_envs.seats import SeatedEpisode, SeatTurn, make_seat, roles_compete

#: The prompt of every row; the learner's first observation is appended to it by TRL.
TOOL_INSTRUCTION = ("You act in the environment below only by calling the tool `act` with your action as its "
                    "argument. Its result is what you see next.\n\n")
#: What ``act`` answers once the episode is over.
EPISODE_OVER = "The episode is over: no more actions are taken."


@dataclass(frozen=True)
class RolloutRecord:
    """One rollout as the env saw it: the problem, the learners' actions in order and the reward."""

    index: int
    split: str
    actions: tuple[tuple[str, str], ...]
    """``(role, action)`` of every action, the seats' included, in order."""
    returns: dict[str, float]
    reward: float


class SeatedToolEnv:
    """Base of the classes :func:`environment_factory` builds (configured by class attributes).
    ``episode`` is the rollout's :class:`~pettingllm_envs.seats.SeatedEpisode`."""

    env_id: str
    learners: tuple[str, ...]
    seat_specs: Mapping[str, str | Policy]
    config: Mapping[str, Any]
    default_split: str
    seed: int
    max_tokens: int
    _on_reward: Callable[[RolloutRecord], None] | None

    def __init__(self) -> None:
        env = make(self.env_id, **self.config)
        others = [r for r in env.possible_agents if r not in self.learners]
        self._actions: list[tuple[str, str]] = []
        seats = {r: self._recorded(make_seat(self.seat_specs.get(r, "scripted"), self.env_id, seed=self.seed,
                                             max_tokens=self.max_tokens)) for r in others}
        self.episode = SeatedEpisode(env, seats, self.learners)
        self._index, self._split = 0, self.default_split

    def reset(self, **row: Any) -> str:
        """Play problem ``row["index"]`` of ``row["split"]`` until a learner's turn; its observation."""
        self._index = int(row.get("index", 0))
        self._split = str(row.get("split") or self.default_split)
        self._actions = []
        turn = self.episode.reset(seed=self._index, options={"split": self._split})
        if turn.done:
            return f"{turn.observation}\n\n{EPISODE_OVER}"
        return self._header(turn) + str(turn.observation)

    def act(self, action: str) -> str:
        """Take your turn in the environment.

        Args:
            action: Your action, written as the environment's instructions ask.

        Returns:
            What is new for you after the other roles played, or the end of the episode.
        """
        if self.episode.done:
            return EPISODE_OVER
        actor = self.episode.agent
        assert actor is not None
        self._actions.append((actor, action if isinstance(action, str) else str(action)))
        turn = self.episode.act(action)
        if turn.done:
            return f"{turn.new_text}\n\n{EPISODE_OVER}"
        return self._header(turn) + turn.new_text

    def get_reward(self) -> float:
        """The learners' summed episode return, the episode played out first if the model stopped
        acting (see the module docstring)."""
        while not self.episode.done:
            assert self.episode.agent is not None
            self._actions.append((self.episode.agent, ""))
            self.episode.act("")
        returns = dict(self.episode.returns)
        reward = float(sum(returns.get(r, 0.0) for r in self.learners))
        if self._on_reward is not None:
            self._on_reward(RolloutRecord(self._index, self._split, tuple(self._actions), returns, reward))
        return reward

    def _recorded(self, seat: Policy) -> Policy:
        def play(observation: Any, agent: str, info: dict[str, Any]) -> str:
            action = seat(observation, agent, info)
            self._actions.append((agent, action))
            return action

        return play

    def _header(self, turn: SeatTurn) -> str:
        """Which role the next action is for, when the model holds several seats."""
        return f"[you now play {turn.agent}]\n" if len(self.learners) > 1 else ""


def environment_factory(
    env_id: str,
    learners: str | Collection[str] | None = None,
    seats: Mapping[str, str | Policy] | None = None,
    *,
    split: str = "train",
    seed: int = 0,
    max_tokens: int = 1024,
    on_reward: Callable[[RolloutRecord], None] | None = None,
    **config: Any,
) -> type[SeatedToolEnv]:
    """The class to pass as ``GRPOTrainer(environment_factory=...)`` for ``env_id``.

    ``learners``: the role or roles the trained model plays (default: the env's first role).
    ``seats``: a seat spec or policy per other role (default: the env's scripted oracle);
    ``seed`` and ``max_tokens`` configure random and model seats. ``split``: the split of rows
    without one. ``config`` goes to ``make(env_id, **config)``. TRL names the reward column
    after the class: ``<env_id>_env``."""
    probe = make(env_id, **config)
    roles, compete = list(probe.possible_agents), roles_compete(probe)
    probe.close()
    chosen = (roles[0],) if learners is None else (learners,) if isinstance(learners, str) else tuple(learners)
    unknown = [r for r in chosen if r not in roles] + [r for r in (seats or {}) if r not in roles or r in chosen]
    if unknown or not chosen:
        raise ValueError(f"learners and seated roles must be distinct roles of {env_id} ({roles}); got "
                         f"learners {list(chosen)}, seats for {list(seats or {})}")
    if compete and len(chosen) > 1:
        raise ValueError(f"the roles of {env_id} are rewarded against each other, so one reward for learners "
                         f"{list(chosen)} cancels the outcome: give environment_factory one learner")
    attributes = {"env_id": env_id, "learners": chosen, "seat_specs": dict(seats or {}), "config": dict(config),
                  "default_split": split, "seed": seed, "max_tokens": max_tokens,
                  # private and static: TRL offers every public function of the class as a tool
                  "_on_reward": staticmethod(on_reward) if on_reward is not None else None}
    return type(f"{env_id}_env", (SeatedToolEnv,), attributes)


def episode_dataset(indices: Collection[int], *, split: str = "train", instruction: str = TOOL_INSTRUCTION) -> Any:
    """A ``datasets.Dataset`` of rollouts: ``prompt`` (one user message, ``instruction``; TRL appends
    the learner's first observation to it), ``index`` and ``split``."""
    from datasets import Dataset

    indices = list(indices)
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": instruction}] for _ in indices],
                              "index": indices, "split": [split] * len(indices)})
