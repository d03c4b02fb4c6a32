"""Seats: who plays each role of an episode, so that any subset of roles can be LLM seats in any library.

A *seat* is a :data:`~pettingllm_envs.policies.Policy` (``(observation, agent, info) -> action``)
bound to a role. :func:`make_seat` builds one from a spec string, the one place where
spec strings are parsed (the evaluation suite, the CLI, the Ray backend, every bridge and the
AT-GRPO trainer's ``seats`` use it; :func:`seat_assignments` reads the command line's
``role=SPEC`` lists):

=============================  =====================================================
``scripted``                   the env's oracle (``scripted_policy(env_id)``)
``random``                     random printable text
``human``                      a person at the terminal (a line, or a fenced block)
``openai:<model>@<base_url>``  any OpenAI-compatible chat endpoint (vLLM, llama.cpp)
``hf:<model folder>``          a local Hugging Face causal LM, greedy (needs the train extra)
a callable                     used as it is
=============================  =====================================================

:class:`SeatedEpisode` plays one episode of an AEC env in which some roles, the
*learners*, are driven from outside (another library's loop calls :meth:`SeatedEpisode.act`)
and every other role is played by its seat in between. That is how the bridges (Gymnasium's
``RoleEnv``, TRL's ``environment_factory``, ...) put one, two or all roles of an env in the
hands of the model being trained. No model library is imported here: model seats load
theirs when built.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TextIO

from pettingzoo import AECEnv

from pettingllm_envs.extras import extra_hint
from pettingllm_envs.model_policies import OpenAIChatPolicy, SingleAgentPolicy
from pettingllm_envs.policies import NAMED_POLICIES, Policy, random_policy, scripted_policy
from pettingllm_envs.registry import make
from pettingllm_envs.terminal import RULE, read_move

#: Every spec string :func:`make_seat` accepts, as help texts name them.
SEAT_SPECS = "scripted, random, human, openai:<model>@<base_url>, hf:<model folder>"
#: Every form :func:`make_seat` accepts, as error messages name them.
SEAT_FORMS = f"{SEAT_SPECS}, or a callable (observation, agent, info) -> action"

#: Entry-point group of the model backends behind ``<name>:<argument>`` specs: the entry point
#: ``name`` is ``completer(argument, *, max_tokens, usage) -> complete(messages) -> str``. The env
#: package loads no model itself; ``hf`` is the trainer's in-process sampler (greedy), declared
#: in pyproject.toml.
MODEL_POLICIES = "pettingllm.model_policies"

Messages = list[dict[str, str]]


def model_completer(name: str, argument: str, max_tokens: int,
                    usage: dict[str, int]) -> Callable[[Messages], str]:
    """``complete(messages) -> text`` of the model backend ``name`` (an entry point of :data:`MODEL_POLICIES`)."""
    found = [ep for ep in entry_points(group=MODEL_POLICIES) if ep.name == name]
    if not found:
        raise SystemExit(f"{name}: policies need {extra_hint('train')}")
    return found[0].load()(argument, max_tokens=max_tokens, usage=usage)


def _chat(info: dict[str, Any], observation: Any) -> Messages:
    """The chat a model seat is sent: the env's ``messages``, else the observation as one user message."""
    return info.get("messages") or [{"role": "user", "content": str(observation)}]


class HumanSeat:
    """A person plays the role in the terminal: the role's view is shown (its instructions
    once, then its task view), and a move is read as ``pettingllm play`` reads one (a line,
    or a fenced code block). End of input raises ``EOFError``."""

    def __init__(self, stdin: TextIO | None = None, out: TextIO | None = None) -> None:
        self.stdin = stdin
        self.out = out
        self._shown_instructions = False

    def __call__(self, observation: Any, agent: str, info: dict[str, Any]) -> str:
        stdin, out = self.stdin or sys.stdin, self.out or sys.stdout
        print(RULE, file=out)
        messages = info.get("messages")
        # The instructions do not change: show them once, then only the task view.
        view = observation if not self._shown_instructions or not messages else messages[-1]["content"]
        self._shown_instructions = True
        print(view, file=out)
        print(f"[{agent}] your move:", file=out, flush=True)
        move = read_move(stdin, out)
        if move is None:
            raise EOFError("input ended before the episode did")
        return move


def build_policy(spec: str, env_id: str, mode: str, max_tokens: int, seed: int,
                 episode_env: AECEnv | None = None) -> tuple[Policy, dict[str, int]]:
    """The policy that ``spec`` names (see the module docstring), for one episode of ``env_id``
    in ``mode`` (``multi``: one call per role; ``single``: one reply for every role, model specs
    only), and the token usage it accumulates (model policies only; empty otherwise).

    ``episode_env`` is that episode's env, already reset: the single-agent prompt takes each
    role's instructions from it, because they can hold the episode's own rules and the env's
    config (textarena_v0's game and private resources, reasoning_gym_v0's dataset). Without it
    (checking a spec) they come from problem 0 of the default config."""
    if spec in (*NAMED_POLICIES, "human"):
        if mode != "multi":
            raise ValueError(f"mode {mode!r} is only defined for model policies, not {spec!r}")
        if spec == "human":
            return HumanSeat(), {}
        return (scripted_policy(env_id) if spec == "scripted" else random_policy(seed)), {}
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    if spec.startswith("openai:"):
        model, _, base_url = spec[len("openai:"):].partition("@")
        if not model or not base_url:
            raise ValueError(f"seat spec {spec!r} lacks a model or a base url: the forms are {SEAT_FORMS}")
        client = OpenAIChatPolicy(base_url=base_url, model=model, max_tokens=max_tokens, usage=usage)
        complete: Callable[[Messages], str] = client.complete
        multi: Policy = client
    elif spec.startswith("hf:") and spec[3:]:
        if not Path(spec[3:]).is_dir():
            raise ValueError(f"seat spec {spec!r}: the model folder {spec[3:]} does not exist (hf: takes a local "
                             "Hugging Face causal LM folder, e.g. one written by pettingllm tiny-model)")
        complete = model_completer("hf", spec[3:], max_tokens, usage)

        def multi(observation: str, agent: str, info: dict[str, Any]) -> str:
            return complete(_chat(info, observation))
    else:
        raise ValueError(f"unknown policy spec {spec!r}: the forms are {SEAT_FORMS}")
    if mode == "multi":
        return multi, usage
    if episode_env is None:
        episode_env = make(env_id)
        episode_env.reset(seed=0)
    raw = episode_env.unwrapped
    instructions = {r: raw.role_instructions(r) for r in raw.possible_agents}
    return SingleAgentPolicy(complete, raw.possible_agents, instructions), usage


def make_seat(spec: str | Policy, env_id: str, *, seed: int = 0, max_tokens: int = 1024) -> Policy:
    """The seat ``spec`` names for a role of ``env_id`` (see the module docstring); a callable is
    returned as it is. ``seed`` seeds the random seat, ``max_tokens`` bounds a model seat's reply."""
    if callable(spec):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a seat is a spec string or a callable, got {type(spec).__name__}: the forms are {SEAT_FORMS}")
    return build_policy(spec, env_id, "multi", max_tokens, seed)[0]


def seat_assignments(value: Any) -> Any:
    """Role -> seat spec from the command line's ``role=SPEC[,role=SPEC]`` text (or a list of
    ``role=SPEC`` items, one per repeated option); a mapping or YAML text (``{role: SPEC}``) is
    returned unchanged for the caller's own checks. Raises ``ValueError`` naming a malformed item
    or a role given twice."""
    if isinstance(value, str):
        if value.lstrip().startswith("{") or "=" not in value:
            return value
        value = value.split(",")
    elif not isinstance(value, list | tuple):
        return value
    seats: dict[str, str] = {}
    for item in value:
        role, _, spec = str(item).partition("=")
        role, spec = role.strip(), spec.strip()
        if not role or not spec:
            raise ValueError(f"{str(item).strip()!r} is not role=SPEC (SPEC: {SEAT_SPECS})")
        if role in seats:
            raise ValueError(f"the role {role!r} is given two seats")
        seats[role] = spec
    return seats


def roles_compete(env: AECEnv) -> bool:
    """The env's roles are rewarded against each other (a zero-sum game): a sum of their returns
    cancels the outcome. Only pettingllm's envs say so (``roles_compete``); any other AEC env is
    taken as cooperative."""
    return bool(getattr(env.unwrapped, "roles_compete", False))


@dataclass(frozen=True)
class SeatTurn:
    """Where a :class:`SeatedEpisode` stopped: a learner's turn, or the end.

    While the episode runs, every field is about ``agent``, the learner to act next. When it is
    over (``agent`` is None) they are about the learner whose action (or reset) ended it: its final
    observation, info and the reward it was paid since its previous action."""

    agent: str | None
    observation: Any
    new_text: str
    """What is new for the learner since its previous turn (see :meth:`SeatedEpisode.new_text`)."""
    messages: Messages | None
    """``info["messages"]``: the learner's full chat prompt, when the env gives one."""
    reward: float
    """What the env paid the learner since its previous action, the seats' moves included
    (PettingZoo's ``last()``); on its first turn, what was paid before it acted."""
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)
    rewards: dict[str, float] = field(default_factory=dict)
    """What the env paid each learner since it was last reported: ``{agent: reward}`` while the
    episode runs; at the end, every learner's last payments (a loss the other learner's move
    dealt, a penalty), so each learner's ``rewards`` over the turns sum to its return."""

    @property
    def done(self) -> bool:
        return self.agent is None


class SeatedEpisode:
    """One episode of ``env`` in which the ``learners`` act when :meth:`act` is called and
    every other role is played by its seat (``seats[role]``) in between.

    Finished agents are stepped with None, as the AEC API requires. ``returns`` sums what the
    env paid each role (``env.rewards`` after every step), so it equals the AEC episode's
    return of every role."""

    def __init__(self, env: AECEnv, seats: Mapping[str, Policy], learners: Collection[str]) -> None:
        roles = list(env.possible_agents)
        learners = list(learners)
        unknown = [r for r in learners if r not in roles]
        if unknown or not learners:
            raise ValueError(f"learners must be roles of the env ({roles}), got {learners}")
        missing = [r for r in roles if r not in learners and r not in seats]
        if missing:
            raise ValueError(f"no seat for the roles {missing}: every role that is not a learner needs one "
                             f"({SEAT_FORMS})")
        self.env = env
        self.learners = learners
        self.seats: dict[str, Policy] = {r: seats[r] for r in roles if r not in learners}
        self.returns: dict[str, float] = dict.fromkeys(roles, 0.0)
        self.final_infos: dict[str, dict[str, Any]] = {}
        """Each role's info when it finished (``success`` among them), once the episode is over."""
        self._unpaid: dict[str, float] = dict.fromkeys(roles, 0.0)
        self._previous_prompt: dict[str, Any] = {}
        self._turn: SeatTurn | None = None

    @property
    def turn(self) -> SeatTurn | None:
        """What the latest ``reset`` or ``act`` returned (None before the first reset)."""
        return self._turn

    @property
    def agent(self) -> str | None:
        """The learner to act next; None when the episode is over (or was never reset)."""
        return None if self._turn is None else self._turn.agent

    @property
    def done(self) -> bool:
        """The episode is over (or was never reset)."""
        return self._turn is None or self._turn.agent is None

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> SeatTurn:
        """Reset the env and let the seats play until a learner's turn (or the end)."""
        self.env.reset(seed=seed, options=options)
        self.returns = dict.fromkeys(self.env.possible_agents, 0.0)
        self.final_infos = {}
        self._unpaid = dict.fromkeys(self.env.possible_agents, 0.0)
        self._previous_prompt = {}
        self._turn = self._advance(None)
        return self._turn

    def success(self, role: str) -> bool:
        """What the env reported as ``role``'s success when it finished (False while it plays)."""
        return bool(self.final_infos.get(role, {}).get("success", False))

    def act(self, action: Any) -> SeatTurn:
        """Apply the current learner's ``action``, then let the seats play until a learner's turn or the end."""
        if self.done:
            raise RuntimeError("the episode is over (or never started): call reset()")
        assert self._turn is not None and self._turn.agent is not None
        actor = self._turn.agent
        self._step(action)
        self._turn = self._advance(actor)
        return self._turn

    def _step(self, action: Any) -> None:
        self.env.step(action)
        for agent, reward in self.env.rewards.items():
            self.returns[agent] = self.returns.get(agent, 0.0) + float(reward)
            self._unpaid[agent] = self._unpaid.get(agent, 0.0) + float(reward)

    def _advance(self, actor: str | None) -> SeatTurn:
        """Step seats (and finished agents) until a live learner is selected or every agent is
        done; ``actor`` is the learner whose action led here (None after a reset)."""
        final: dict[str, tuple[Any, bool, bool, dict[str, Any]]] = {}
        while self.env.agents:
            agent = self.env.agent_selection
            observation, _, terminated, truncated, info = self.env.last()
            if terminated or truncated:
                self.final_infos[agent] = copy.deepcopy(info)
                if agent in self.learners:
                    final[agent] = (observation, bool(terminated), bool(truncated), self.final_infos[agent])
                self._step(None)
            elif agent in self.learners:
                return self._seat_turn(agent, agent, observation, False, False, info)
            else:
                self._step(self.seats[agent](observation, agent, info))
        learner = actor if actor in final else next(iter(final), actor or self.learners[0])
        observation, terminated, truncated, info = final.get(learner, ("", True, False, {}))
        return self._seat_turn(None, learner, observation, terminated, truncated, info)

    def _seat_turn(self, agent: str | None, learner: str, observation: Any, terminated: bool, truncated: bool,
                   info: dict[str, Any]) -> SeatTurn:
        paid = self.learners if agent is None else [learner]
        rewards = {role: self._unpaid.get(role, 0.0) for role in paid}
        self._unpaid.update(dict.fromkeys(paid, 0.0))
        info = copy.deepcopy(info)
        return SeatTurn(agent=agent, observation=observation, new_text=self.new_text(learner, observation, info),
                        messages=info.get("messages"), reward=rewards[learner], terminated=terminated,
                        truncated=truncated, info=info, rewards=rewards)

    def new_text(self, agent: str, observation: Any, info: dict[str, Any]) -> str:
        """What is new for ``agent`` since its previous turn, as text.

        With the env's incremental chat (``info["new_messages"]``, pettingllm's envs) it is the
        content of the new messages; otherwise (any other AEC env) the observation minus the
        previous one when that is its prefix, else the whole observation."""
        new_messages = info.get("new_messages")
        if isinstance(new_messages, list):
            return "\n\n".join(str(m.get("content", "")) for m in new_messages)
        text = str(observation)
        previous = self._previous_prompt.get(agent)
        self._previous_prompt[agent] = text
        if previous is not None and text.startswith(previous):
            return text[len(previous):]
        return text
