"""The base class of every pettingllm environment: a turn-based text AEC env.

A concrete environment declares its ``roles`` (the turn order) and a config dataclass,
and fills in a handful of hooks:

==========================  ==============================================================
hook                        what it does
==========================  ==============================================================
``generate_instance(rng)``  a new problem from a ``random.Random`` (procedural envs)
``instance_key(instance)``  canonical text of a problem; its hash decides the split
``load_instance(i, split)`` problem ``i`` of a split (override for datasets)
``start_episode(instance)`` set up the episode state
``apply_action(agent, s)``  parse and apply one action, return an :class:`ActionResult`
``before_action(a)``        clear what role ``a`` holds that every action of it replaces
                            (an answer, code, tests), before its action is read
``global_reward()``         the team's task state G in [0, 1], the same for every role
``team_state(a)``           G from role ``a``'s side (defaults to ``global_reward()``;
                            competitive envs override it)
``local_state(a)``          role ``a``'s own potential L, or None (the default: its local
                            reward is its actions' ``ActionResult.local_reward`` alone)
``is_success()``            the task is solved (or the game won, per agent)
``is_done()``               the episode ends (defaults to ``is_success()``)
``is_truncated()``          the episode is cut short (defaults to ``max_turns`` turns)
``next_agent(a)``           who acts after ``a`` (defaults to round-robin in ``roles`` order)
``role_instructions(a)``    the system prompt of role ``a``
``task_view(a)``            what role ``a`` sees now (task, history, feedback)
``render_state()``          the state as text for ``render()``
``extra_info(a)``           optional env-specific data for ``infos[a]``
==========================  ==============================================================

The base class owns everything PettingZoo checks: agent bookkeeping, the AEC turn
order, reward accumulation, termination and truncation at ``max_turns``, infos,
seeding through ``np_random``, and a cheap ``deepcopy``. The pieces it is built from have
their own modules: the options every env has (:mod:`pettingllm_envs.core.env_config`), what an
action did and how a raw action is read (:mod:`pettingllm_envs.core.actions`), and the cut of an
over-long observation and the ``last_action`` summary (:mod:`pettingllm_envs.core.observations`).

Semantics (docs/design.md §3):

* A *turn* is every role acting once, in ``roles`` order. ``task_view`` of a later role
  is built after the earlier roles of the same turn acted, so it can show their output.
  An env whose roles act a variable number of times (a planner that calls a sub-agent,
  which calls tools several times) overrides ``next_agent``; a turn then ends just before
  a role would act a second time in it. So every role acts at most once per turn and
  (problem, agent, turn) still identifies one decision, the key of AT-GRPO's groups; with
  the default round-robin order the two definitions coincide.
* After each action the acting agent's reward is ``alpha * global + local``, with both
  parts, the parsed action and why it was invalid in ``infos[agent]["last_action"]``.
* ``global`` is the **change** the action made to the team's task state G (``team_state``),
  and every role is paid ``alpha`` times its change, not only the actor: a potential-based
  team reward (Ng, Harada and Russell, 1999). Over an episode each role's team part sums
  to ``alpha * (G_final - G_start)``, so keeping a partly solved state alive until
  truncation earns nothing, and a failed episode never out-earns a solved one through the
  team reward (G is highest when solved). AT-GRPO loses nothing: the N branches of a group
  start from one state, so paying ``G(s') - G(s)`` instead of ``G(s')`` shifts every reward
  of the group by the same ``G(s)`` and leaves the normalised advantages unchanged.
  ``last_action["team_state"]`` holds G after the action.
* ``infos[a]["team_credit"]`` is the part of ``rewards[a]`` that is that shared team reward
  for another role's action (cooperative envs only: there the actor's own reward carries the
  same ``alpha * ΔG``). Everything else paid to a role that is not acting, a zero-sum game's
  loss at the winner's move or a change of its own potential L below, is a consequence of its
  earlier actions: a trainer adds it to the role's latest action (``trainers.rollout.episodes``).
* An env may pay a role's local reward the same way: when ``local_state(a)`` returns a
  float L (for a role it must do so for the whole episode), role ``a`` is paid, after every
  step whoever acts, the change of L, on top of its own actions' ``local_reward`` (which then
  carries only penalties). Its local return is ``L_final - L_start`` plus those penalties,
  so credit re-earned every step adds nothing. The acting role's ``reward_local`` is its
  action's local reward plus its own change of L; the others get ``alpha * ΔG + ΔL`` in
  ``rewards``. L is read after the step's termination and truncation are decided, with
  ``episode_ending`` True when this step ends the episode, so an env can value its final
  state differently (e.g. take back credit that only a later fix would have earned).
* An action that is not a string, is longer than ``max_action_chars``, or that the env
  cannot parse costs ``format_penalty`` (in ``local``) and never raises.
* ``infos[a]`` also says what is new in the chat since role ``a``'s previous turn
  (``kept_messages``, ``new_messages``, ``prompt_reset``: :mod:`pettingllm_envs.core.chat_increment`).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
from gymnasium.utils import seeding
from pettingzoo import AECEnv

from pettingllm_envs.core import chat_increment, process_shared
from pettingllm_envs.core.actions import ActionRecord, ActionResult, coerce_action
from pettingllm_envs.core.copying import ATOMIC, deepcopy_value, restore_generator
from pettingllm_envs.core.env_config import TextEnvConfig
from pettingllm_envs.core.instances import SPLITS, Split, draw_instance
from pettingllm_envs.core.observations import fit_observation, last_action_info
from pettingllm_envs.core.spaces import TextObservation, UnicodeText

InstanceT = TypeVar("InstanceT")


class TextAECEnv(AECEnv[str, TextObservation, str], Generic[InstanceT]):
    """Turn-based text environment with the PettingZoo AEC API."""

    roles: ClassVar[tuple[str, ...]] = ()
    #: The role ``pettingllm play`` gives a person by default (None: the first role); envs set it
    #: when the first role is one people do not play naturally (a tool agent that writes Python).
    human_role: ClassVar[str | None] = None
    config_class: ClassVar[type[TextEnvConfig]] = TextEnvConfig
    #: The roles are rewarded against each other (a game): each has its own side of G, which the
    #: env returns from :meth:`team_state`. Cooperative envs keep False: G is the shared
    #: :meth:`global_reward`, computed once per step.
    roles_compete: ClassVar[bool] = False
    #: The env pays each role the change of its own potential L (:meth:`local_state`) after every step.
    has_local_state: ClassVar[bool] = False
    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"],
        "name": "text_env_v0",
        "is_parallelizable": False,
    }
    #: Attributes that deep copies share instead of copying: configuration, spaces,
    #: read-only problem data and heavy resources (subclasses extend this set).
    shared_attributes: ClassVar[frozenset[str]] = frozenset(
        {"config", "render_mode", "instance", "_action_spaces", "_observation_spaces"}
    )
    # What the deferred copies of ``_np_random`` and ``infos`` below keep.
    _generator: np.random.Generator | None
    _generator_snapshot: tuple[type[np.random.BitGenerator], dict[str, Any]] | None
    _infos: dict[str, dict[str, Any]]
    _infos_shared: bool

    def __init__(
        self, config: TextEnvConfig | None = None, *, render_mode: str | None = None, **overrides: Any
    ) -> None:
        super().__init__()
        fields = {f.name for f in dataclasses.fields(self.config_class)}
        if set(overrides) - fields:  # name the valid fields: a bare TypeError from the dataclass does not
            unknown = sorted(set(overrides) - fields)
            raise TypeError(f"{self.config_class.__name__} has no field(s) {unknown}; "
                            f"fields: {', '.join(sorted(fields))}")
        if config is None:
            config = self.config_class(**overrides)
        elif overrides:
            config = dataclasses.replace(config, **overrides)
        if not isinstance(config, self.config_class):
            raise TypeError(f"config must be a {self.config_class.__name__}, got {type(config).__name__}")
        config.validate()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.config = config
        self.render_mode = render_mode
        self.possible_agents = list(self.roles)
        self._action_spaces = {a: UnicodeText(config.max_action_chars) for a in self.roles}
        self._observation_spaces = {a: UnicodeText(config.max_observation_chars) for a in self.roles}
        self._np_random = None
        self._np_random_seed: int | None = None
        self._infos_shared = False
        self.instance: InstanceT | None = None
        self.index = -1
        self.split: Split = config.split
        self.turn = 0
        self.history: list[ActionRecord] = []
        self.agents: list[str] = []
        #: True from the moment a step ends the episode (set before ``local_state`` is read).
        self.episode_ending = False
        self._local_state: dict[str, float] | None = None

    # ------------------------------------------------------------------ hooks
    def generate_instance(self, rng: Any) -> InstanceT:
        raise NotImplementedError

    def instance_key(self, instance: InstanceT) -> str:
        raise NotImplementedError

    def load_instance(self, index: int, split: Split) -> InstanceT:
        """Problem ``index`` of ``split``; procedural envs need not override this."""
        return draw_instance(
            self.generate_instance,
            self.instance_key,
            data_seed=self.config.data_seed,
            index=index,
            split=split,
            test_percent=self.config.test_percent,
        )

    def start_episode(self, instance: InstanceT) -> None:
        raise NotImplementedError

    def apply_action(self, agent: str, text: str) -> ActionResult:
        raise NotImplementedError

    def before_action(self, agent: str) -> None:
        """Called at each live step of ``agent`` before its action is read. An env whose roles
        hold something that every action replaces (an answer, code, tests) clears it here, so
        that an action it cannot read, including one refused before ``apply_action`` (not a
        string, too long), leaves the role with nothing. Kept instead, junk would be the safe
        fallback once the held thing is good: a wrong attempt loses it, junk would not."""

    def global_reward(self) -> float:
        raise NotImplementedError

    def team_state(self, agent: str) -> float:
        """The task state G from ``agent``'s side: the potential whose change every role is
        paid (``alpha *`` it) after each action. Cooperative envs keep the default, the
        shared :meth:`global_reward`; competitive ones (``roles_compete``) return each side's own outcome."""
        return float(self.global_reward())

    def _team_states(self) -> dict[str, float]:
        if not self.roles_compete:  # one G for every role: compute it once
            return dict.fromkeys(self.agents, float(self.global_reward()))
        return {a: float(self.team_state(a)) for a in self.agents}

    def local_state(self, agent: str) -> float | None:
        """Role ``agent``'s own potential L, whose change it is paid after every step (see
        the module docstring; read only where ``has_local_state``), or None: its local reward is
        its actions' ``local_reward``.
        Read after termination and truncation are decided; ``episode_ending`` says whether
        this step ends the episode."""
        return None

    def _local_states(self) -> dict[str, float] | None:
        if not self.has_local_state:  # no env potential: nothing to pay
            return None
        states = {a: self.local_state(a) for a in self.agents}
        return {a: float(s) for a, s in states.items() if s is not None}

    def _pay_local_changes(self, agent: str) -> None:
        """Add each role's change of L to this step's rewards, the actor's into its record."""
        states = self._local_states()
        assert states is not None and self._local_state is not None
        changes = {a: state - self._local_state[a] for a, state in states.items()}
        self._local_state = states
        for role, change in changes.items():
            self.rewards[role] += change
        if agent in changes:  # records are immutable and shared by copies: replace, never mutate
            record = self.history[-1]
            local = record.reward_local + changes[agent]
            self.history[-1] = dataclasses.replace(
                record, reward_local=local, reward=self.config.alpha * record.reward_global + local)

    def is_success(self, agent: str | None = None) -> bool:
        raise NotImplementedError

    def is_done(self) -> bool:
        return self.is_success()

    def is_truncated(self) -> bool:
        """The episode is cut short without ending; envs with their own budgets extend this."""
        return self.turn >= self.config.max_turns

    def next_agent(self, agent: str) -> str:
        """The agent that acts after ``agent`` has acted (called after ``apply_action``).

        Round-robin in ``possible_agents`` order by default; an env that lets one role act
        several times in a row, or skips a role, returns its choice here (PettingZoo's AEC
        API allows any order).
        """
        agents = self.possible_agents
        return agents[(agents.index(agent) + 1) % len(agents)]

    def role_instructions(self, agent: str) -> str:
        raise NotImplementedError

    def task_view(self, agent: str) -> str:
        raise NotImplementedError

    def render_state(self) -> str:
        raise NotImplementedError

    def extra_info(self, agent: str) -> dict[str, Any]:
        """Env-specific structured data added to ``infos[agent]`` (JSON-like); none by default."""
        return {}

    # ------------------------------------------------------------ PettingZoo
    # Deep copies defer the copying of two attributes to their first use: a tree rollout copies every
    # live env once per branch and steps the branch at once, so most copies never use them.
    @property
    def _np_random(self) -> np.random.Generator | None:
        """The env's generator, restored on first use from the snapshot a deep copy took (envs draw
        from it only on an unseeded reset)."""
        if self._generator_snapshot is not None:
            self._generator, self._generator_snapshot = restore_generator(self._generator_snapshot), None
        return self._generator

    @_np_random.setter
    def _np_random(self, generator: np.random.Generator | None) -> None:
        self._generator, self._generator_snapshot = generator, None

    @property
    def infos(self) -> dict[str, dict[str, Any]]:
        """PettingZoo's ``infos``. A deep copy shares them with the original until one of the two
        reads them: the reader then takes its own deep copy, since a reader may change them in place.
        ``step`` and ``reset`` replace them whole, so a branch stepped right after it was copied never
        copies them. Hence they must not refer to env state that changes in place (``extra_info``
        returns fresh data)."""
        if self._infos_shared:
            self._infos, self._infos_shared = copy.deepcopy(self._infos), False
        return self._infos

    @infos.setter
    def infos(self, infos: dict[str, dict[str, Any]]) -> None:
        self._infos, self._infos_shared = infos, False

    @property
    def np_random(self) -> np.random.Generator:
        """The env's random generator, seeded by ``reset(seed=...)`` (entropy otherwise)."""
        if self._np_random is None:
            self._np_random, self._np_random_seed = seeding.np_random()
        return self._np_random

    @property
    def np_random_seed(self) -> int | None:
        return self._np_random_seed

    def observation_space(self, agent: str) -> UnicodeText:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> UnicodeText:
        return self._action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode.

        The problem is ``options["index"]`` when given, else ``seed`` (so ``reset(seed=i)``
        always plays problem ``i``), else drawn from ``np_random``. ``options["split"]``
        overrides the configured split. Other option keys are ignored.
        """
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        options = options or {}
        split = options.get("split", self.config.split)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if "index" in options:
            index = int(options["index"])
        elif seed is not None:
            index = int(seed)
        else:
            index = int(self.np_random.integers(0, 2**31 - 1))
        self.index, self.split = index, split
        self.instance = self.load_instance(index, split)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.turn = 0
        self._acted_this_turn: set[str] = set()
        self.history = []
        self.agent_selection = self.agents[0]
        self.episode_ending = False
        self._team_credit: dict[str, float] = {}
        self._prompts_shown: dict[str, chat_increment.FrozenChat] = {}
        self.start_episode(self.instance)
        self._team_state = self._team_states()
        self._local_state = self._local_states()
        self.infos = {a: self._info(a) for a in self.agents}
        if self.render_mode == "human":
            self.render()

    def observe(self, agent: str) -> TextObservation:
        text = self.role_instructions(agent) + "\n\n" + self.task_view(agent)
        return TextObservation(fit_observation(text, self.config.max_observation_chars))

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self.before_action(agent)
        text, reason = coerce_action(action, self.config.max_action_chars)
        if reason is not None:
            result = ActionResult(-self.config.format_penalty, valid=False, invalid_reason=reason)
        else:
            result = self.apply_action(agent, text)
        states = self._team_states()
        team = {a: states[a] - self._team_state[a] for a in self.agents}
        self._team_state = states
        reward_global = team[agent]
        reward_local = float(result.local_reward)
        reward = self.config.alpha * reward_global + reward_local
        self.history.append(
            ActionRecord(self.turn, agent, text, result, reward_global, reward_local, reward, states[agent])
        )

        # Every role is paid its change of G (the others see it in ``last()`` when they act).
        self.rewards = {a: self.config.alpha * team[a] for a in self.agents}
        self.rewards[agent] = reward
        self._team_credit = {a: self.rewards[a] for a in self.agents if a != agent} if not self.roles_compete else {}
        self._acted_this_turn.add(agent)
        following = self.next_agent(agent)
        if following in self._acted_this_turn:  # a role would act twice: the turn is over
            self._acted_this_turn = set()
            self.turn += 1
        if self.is_done():
            self.terminations = dict.fromkeys(self.agents, True)
        elif self.is_truncated():
            self.truncations = dict.fromkeys(self.agents, True)
        self.episode_ending = self.terminations[agent] or self.truncations[agent]
        if self._local_state is not None:
            self._pay_local_changes(agent)
        self.agent_selection = following
        self.infos = {a: self._info(a) for a in self.agents}
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        text = self.render_state()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        """Nothing to release by default; envs holding resources override this."""

    def __getstate__(self) -> dict[str, Any]:
        """What a pickle carries: the env's state, with its process resources (datasets) as references."""
        return process_shared.by_reference(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled: the references attach to this process's own resources (see ``core.process_shared``)."""
        self.__dict__.update(process_shared.resolved(state))

    def __deepcopy__(self, memo: dict[int, Any]) -> TextAECEnv:
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        state = clone.__dict__
        shared = self.shared_attributes
        for name, value in self.__dict__.items():
            # Infos are copied on read (see ``infos``), a pending generator snapshot is never changed,
            # and a live generator is replaced below.
            if type(value) in ATOMIC or name in shared or name in ("_infos", "_generator", "_generator_snapshot"):
                state[name] = value
            elif name in ("history", "_prompts_shown"):
                state[name] = copy.copy(value)  # the records and prompts in it are immutable
            else:
                state[name] = deepcopy_value(value, memo)
        generator = state.get("_generator")
        if generator is not None:  # the copy restores its own from a snapshot on first use
            bit_generator = generator.bit_generator
            state["_generator"], state["_generator_snapshot"] = None, (type(bit_generator), bit_generator.state)
        if "_infos" in state:
            self._infos_shared = state["_infos_shared"] = True
        return clone

    # --------------------------------------------------------------- helpers
    def last_record(self, agent: str | None = None, turn: int | None = None) -> ActionRecord | None:
        """The most recent action of ``agent`` (any agent when None), optionally in ``turn``."""
        for record in reversed(self.history):
            if (agent is None or record.agent == agent) and (turn is None or record.turn == turn):
                return record
        return None

    def _info(self, agent: str) -> dict[str, Any]:
        messages = [
            {"role": "system", "content": self.role_instructions(agent)},
            {"role": "user", "content": self.task_view(agent)},
        ]
        new = chat_increment.increment(self._prompts_shown.get(agent, ()), messages)
        if agent == self.agent_selection:  # the chat it acts on: the reference of its next turn
            self._prompts_shown[agent] = chat_increment.freeze(messages)
        return {
            "env_id": self.metadata["name"],
            "index": self.index,
            "split": self.split,
            "turn": self.turn,
            "role": agent,
            "messages": messages,
            **new,
            "last_action": last_action_info(self.last_record(agent), self.config.alpha),
            "team_credit": self._team_credit.get(agent, 0.0),
            "success": bool(self.is_success(agent)),
            **self.extra_info(agent),
        }
