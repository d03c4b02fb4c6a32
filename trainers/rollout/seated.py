"""Seated roles in the trainer's rollouts: some roles are played by seats, the others train.

A *seat* (:mod:`pettingllm_envs.seats`: the env's oracle, random text, an OpenAI-compatible
endpoint, a local model, any ``(observation, agent, info) -> action`` callable) plays a role
that is not trained: a scripted tester next to a trained coder, a frozen model as the
opponent. The rollouts act for a seated role through its seat and record no sample for it:

* **independent** rollouts play the seats with :func:`play_seats`, the ``advance`` hook of
  :func:`trainers.rollout.episodes.independent_rollout`;
* **tree** rollouts (:func:`seated_tree_rollout`, a :class:`~trainers.rollout.episodes.LocalTree`
  with seats): a seat's turn is *not branched*. After every expansion the seats act once each on
  the selected branch, which stays the live state, until a trained role is to move. There is
  nothing to choose between at a seat's turn: no sample of it is trained. So that every branch of
  a trained role's group is valued on the same footing, the seats also play every *sibling*
  branch forward to that role's next turn (:mod:`trainers.rollout.continuation`): a seat makes
  one move per turn on the live path plus one per sibling, and what those moves pay the trained
  role reaches the sibling's sample as the live path's reaches the selected one's.

Credit. A seat is part of the environment from the trained roles' point of view: whatever a
seat's move pays a trained role, shared team credit included, goes to that role's latest
sample (``Sample.reward_later``), or to ``paid_before_acting`` before its first action. (Team
credit that a *trained* actor's move pays a trained bystander stays out of the bystander's
sample, :func:`trainers.rollout.aec.bystander_credit`, because the actor's sample carries
it; a seat has no sample to carry it.) So every trained role's samples, plus what it was paid
before its first action, sum to everything the env paid it: exactly in independent rollouts and
in tree rollouts where only seats move between the role's turns (its selected branch's
continuation *is* the live path); where another trained role moves in between, the selected
sample carries its own continuation's payments and the live path's reach the returns. The returns of every role, the
seated ones included, are kept per episode (``RolloutResult.returns``), so a run logs
"trained coder vs scripted tester".
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence

from pettingzoo import AECEnv

from pettingllm_envs.policies import Policy
from pettingllm_envs.seats import make_seat
from trainers.rollout.aec import Advance, Sampler
from trainers.rollout.continuation import play_seats
from trainers.rollout.episodes import LocalTree, RolloutResult, Selection, drive_tree

#: Seat specs that :func:`make_seat` builds cheaply and that draw from a seed: rebuilt for every
#: rollout from that rollout's seed, so a resumed run plays the same seat moves as an uninterrupted one.
SEEDED_SPECS = ("scripted", "random")


def seated_tree_rollout(env_fn: Callable[[], AECEnv], problems: Sequence[int], n: int, sampler: Sampler,
                        seats: Mapping[str, Policy], *, split: str = "train", selection: Selection = "greedy",
                        rng: random.Random | None = None, max_steps: int = 10_000) -> RolloutResult:
    """AT-GRPO's tree rollout with the ``seats`` roles played by their seats (module docstring)."""
    return drive_tree(LocalTree(env_fn, problems, split, seats), n, sampler, selection=selection, rng=rng,
                      max_steps=max_steps)


def check_seats(seats: Mapping[str, str], roles: Sequence[str], policy_map: Mapping[str, str]) -> None:
    """Raise ``ValueError`` (one line) unless ``seats`` (role -> seat spec) leaves a trained role,
    names only roles of the env, takes no role that ``policy_map`` gives a policy, and every spec
    is one the trainer can play: any :func:`make_seat` spec but ``human`` (a person cannot keep
    up with thousands of tree moves; ``pettingllm play`` is the way to play a role by hand)."""
    from pettingllm_envs.commandline.errors import did_you_mean

    for role, spec in seats.items():
        if role not in roles:
            raise ValueError(f"seats: the env has no role {role!r}{did_you_mean(role, roles)} "
                             f"(roles: {', '.join(roles)})")
        if spec == "human":
            raise ValueError(f"seats: {role}=human cannot train: a person cannot play the thousands of moves of a "
                             "run (pettingllm play lets a person play a role)")
    if all(role in seats for role in roles):
        raise ValueError(f"seats: every role ({', '.join(roles)}) is seated, so nothing is left to train; "
                         "seat only the roles that do not train")
    taken = sorted(role for role in policy_map if role in seats)
    if taken:
        raise ValueError(f"seats: the roles {taken} are seated, so policy_map cannot give them a policy: "
                         "drop them from policy_map")


def return_metrics(returns: Sequence[Mapping[str, float]], roles: Sequence[str]) -> dict[str, float]:
    """``rollout/return/<role>``: every role's mean episode return over ``returns`` (one mapping per
    episode), the seated roles' included (pure)."""
    if not returns:
        return {}
    return {f"rollout/return/{role}": statistics.fmean(float(r.get(role, 0.0)) for r in returns) for role in roles}


class TrainerSeats:
    """The seats of a training run: role -> spec (:func:`make_seat`'s language). Model seats
    (``openai:``, ``hf:``) are built once; the seeded ones (:data:`SEEDED_SPECS`) per rollout
    with that rollout's seed (:meth:`policies`)."""

    def __init__(self, specs: Mapping[str, str], env_id: str, *, max_tokens: int) -> None:
        self.specs = dict(specs)
        self.env_id = env_id
        self.max_tokens = max_tokens
        self._models = {role: make_seat(spec, env_id, max_tokens=max_tokens)
                        for role, spec in self.specs.items() if spec not in SEEDED_SPECS}

    @classmethod
    def checked(cls, specs: Mapping[str, str], env_id: str, roles: Sequence[str], policy_map: Mapping[str, str], *,
                max_tokens: int) -> TrainerSeats:
        """The seats after :func:`check_seats`; raises ``ValueError`` (one line) for a spec
        :func:`make_seat` does not know too."""
        check_seats(specs, roles, policy_map)
        return cls(specs, env_id, max_tokens=max_tokens)

    @property
    def roles(self) -> list[str]:
        return list(self.specs)

    def policies(self, seed: int) -> dict[str, Policy]:
        """Every seated role's seat for one rollout seeded with ``seed``."""
        return {role: self._models[role] if role in self._models
                else make_seat(spec, self.env_id, seed=seed, max_tokens=self.max_tokens)
                for role, spec in self.specs.items()}

    def advance(self, seed: int) -> Advance:
        """The ``advance`` hook of an independent rollout seeded with ``seed`` (:func:`play_seats`)."""
        seats = self.policies(seed)
        return lambda env, returns, pay: play_seats(seats, env, returns, pay)
