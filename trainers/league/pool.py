"""A league: the opponents a learner trains against, how often each is drawn, and a rating per player.

Members are seats (:mod:`pettingllm_envs.seats` specs) of three kinds:

=============  ====================================================================================
``snapshot``   the trained policy as it was at some step (a LoRA adapter or a model folder)
``fixed``      an opponent that never changes: ``scripted``, ``random``, ``hf:<dir>``, ``openai:...``
``current``    the policy being trained (plain self-play)
=============  ====================================================================================

:meth:`League.sample` draws the next opponent by the rule of :mod:`trainers.maths.opponent_sampling`
from the learner's recent results against each (the last ``window`` games), :meth:`League.record`
books a game's outcome from the learner's side and updates the ratings of both players with
openskill's Plackett-Luce model (a draw is a tie of ranks). A snapshot starts at the learner's rating
of the moment it was taken: it is the same policy. Games against ``current`` are counted but rate no
one (a policy against itself carries no information about its strength).

The whole league, its sampling RNG included, is one JSON document (:meth:`League.state_dict`), written
atomically to the run dir (:meth:`League.save`), so a resumed run draws the same opponents as one that
never stopped.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pettingllm_envs.extras import extra_hint
from trainers.maths.opponent_sampling import RULES, loss_rate, opponent_weights

Outcome = Literal["win", "draw", "loss"]
OUTCOMES: tuple[Outcome, ...] = ("win", "draw", "loss")
KINDS = ("snapshot", "fixed", "current")
LEARNER = "learner"
"""The rating name of the policy being trained."""
STATE_FILE = "league.json"


class LeagueError(ValueError):
    """A league asked to do something it cannot: one line naming what and why."""


@dataclass(frozen=True)
class Member:
    """One opponent of the pool."""

    name: str
    seat: str
    """The seat spec that plays it (``pettingllm_envs.seats``), or ``current`` for the learner itself."""
    kind: str
    step: int | None = None
    """The training step a snapshot was taken at; None for the others."""


@dataclass
class Record:
    """A member's games against the learner: totals and the recent window PFSP reads."""

    wins: int = 0
    draws: int = 0
    losses: int = 0
    recent: list[str] = field(default_factory=list)
    """The learner's outcomes of the latest games, oldest first."""


@dataclass
class Rating:
    mu: float
    sigma: float


def _model() -> Any:
    try:
        from openskill.models import PlackettLuce
    except ImportError as missing:  # the train extra installs it
        raise LeagueError(f"ratings need openskill, {extra_hint('train')}") from missing
    return PlackettLuce()


class League:
    """The pool, its statistics, its ratings and its sampling RNG (see the module docstring)."""

    def __init__(self, members: Iterable[Member], *, rule: str = "prioritised", window: int = 50,
                 power: float = 2.0, min_weight: float = 0.01, seed: int = 0) -> None:
        if rule not in RULES:
            raise LeagueError(f"league rule {rule!r}: choose one of {RULES}")
        if window < 1:
            raise LeagueError(f"league window must be >= 1 game, got {window}")
        self.rule, self.window, self.power, self.min_weight = rule, window, power, min_weight
        self.model = _model()
        start = self.model.rating()
        self.members: list[Member] = []
        self.records: dict[str, Record] = {}
        self.ratings: dict[str, Rating] = {LEARNER: Rating(start.mu, start.sigma)}
        self.rng = random.Random(seed)
        for member in members:
            self._add(member, Rating(start.mu, start.sigma))

    # ------------------------------------------------------------ membership
    def _add(self, member: Member, rating: Rating) -> None:
        if member.kind not in KINDS:
            raise LeagueError(f"league member {member.name!r}: kind {member.kind!r} is not one of {KINDS}")
        if member.name in self.records or member.name == LEARNER:
            raise LeagueError(f"league member name {member.name!r} is taken")
        if member.kind == "current" and member.seat != "current":
            raise LeagueError(f"league member {member.name!r}: the current policy's seat is 'current'")
        self.members.append(member)
        self.records[member.name] = Record()
        self.ratings[member.name] = rating

    def add_snapshot(self, name: str, seat: str, step: int) -> Member:
        """Add the learner as it is now (its weights saved where ``seat`` points), rated as the learner."""
        member = Member(name, seat, "snapshot", step)
        learner = self.ratings[LEARNER]
        self._add(member, Rating(learner.mu, learner.sigma))
        return member

    def member(self, name: str) -> Member:
        for member in self.members:
            if member.name == name:
                return member
        raise LeagueError(f"no league member {name!r}; members: {[m.name for m in self.members]}")

    # -------------------------------------------------------------- sampling
    def weights(self) -> list[float]:
        """This moment's probability of drawing each member, in ``members`` order."""
        rates = []
        for member in self.members:
            recent = self.records[member.name].recent
            rates.append(loss_rate(recent.count("loss"), recent.count("draw"), len(recent)))
        snapshots = [i for i, m in enumerate(self.members) if m.kind == "snapshot"]
        latest = max(snapshots, key=lambda i: self.members[i].step or 0) if snapshots else None
        return opponent_weights(self.rule, rates, latest=latest, power=self.power, min_weight=self.min_weight)

    def sample(self) -> Member:
        """The next opponent, drawn from the league's own RNG."""
        return self.rng.choices(self.members, weights=self.weights())[0]

    # --------------------------------------------------------------- results
    def record(self, opponent: str, outcome: Outcome) -> None:
        """Book one game of the learner against ``opponent``; ``outcome`` is the learner's."""
        if outcome not in OUTCOMES:
            raise LeagueError(f"outcome {outcome!r}: one of {OUTCOMES}, from the learner's side")
        member = self.member(opponent)
        record = self.records[opponent]
        total = {"win": "wins", "draw": "draws", "loss": "losses"}[outcome]
        setattr(record, total, getattr(record, total) + 1)
        record.recent = [*record.recent, outcome][-self.window:]
        if member.kind != "current":
            self.rate(LEARNER, opponent, outcome)

    def rate(self, first: str, second: str, outcome: Outcome) -> None:
        """Update two players' ratings after a game; ``outcome`` is ``first``'s. Also used between
        members (``pettingllm league eval``), which leaves the learner's statistics alone."""
        if first == second:
            raise LeagueError(f"{first!r} cannot be rated against itself")
        ranks = {"win": [0, 1], "draw": [0, 0], "loss": [1, 0]}[outcome]
        a, b = self.ratings[first], self.ratings[second]
        (new_a,), (new_b,) = self.model.rate([[self.model.rating(mu=a.mu, sigma=a.sigma)],
                                              [self.model.rating(mu=b.mu, sigma=b.sigma)]], ranks=ranks)
        self.ratings[first], self.ratings[second] = Rating(new_a.mu, new_a.sigma), Rating(new_b.mu, new_b.sigma)

    def table(self) -> list[dict[str, Any]]:
        """One row per player, the learner first: rating (mu, sigma, the conservative mu - 3 sigma) and
        the learner's wins / draws / losses against each member."""
        rows = [{"name": LEARNER, "kind": "learner", **asdict(self.ratings[LEARNER])}]
        for member in self.members:
            record = self.records[member.name]
            rows.append({"name": member.name, "kind": member.kind, "step": member.step,
                         **asdict(self.ratings[member.name]),
                         "wins": record.wins, "draws": record.draws, "losses": record.losses})
        for row in rows:
            row["ordinal"] = row["mu"] - 3 * row["sigma"]
        return rows

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"rule": self.rule, "window": self.window, "power": self.power, "min_weight": self.min_weight,
                "members": [asdict(m) for m in self.members],
                "records": {name: asdict(r) for name, r in self.records.items()},
                "ratings": {name: asdict(r) for name, r in self.ratings.items()},
                "rng": [version, list(internal), gauss]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> League:
        league = cls([], rule=state["rule"], window=state["window"], power=state["power"],
                     min_weight=state["min_weight"])
        for values in state["members"]:
            member = Member(**values)
            league._add(member, Rating(**state["ratings"][member.name]))
            league.records[member.name] = Record(**state["records"][member.name])
        league.ratings[LEARNER] = Rating(**state["ratings"][LEARNER])
        version, internal, gauss = state["rng"]
        league.rng.setstate((version, tuple(internal), gauss))
        return league

    def save(self, run_dir: str | Path) -> Path:
        """Write the league to ``run_dir/league.json`` atomically (a crash leaves the previous file whole)."""
        path = Path(run_dir) / STATE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(self.state_dict(), indent=1))
        os.replace(partial, path)
        return path

    @classmethod
    def load(cls, run_dir: str | Path) -> League:
        path = Path(run_dir) / STATE_FILE
        if not path.is_file():
            raise LeagueError(f"no league in {run_dir}: {STATE_FILE} is missing")
        return cls.from_state(json.loads(path.read_text()))


def members_from_specs(specs: Sequence[str]) -> list[Member]:
    """Fixed members from seat specs (``scripted``, ``random``, ``hf:DIR``, ...), named by their spec;
    ``current`` is the current policy."""
    return [Member(spec, spec, "current" if spec == "current" else "fixed") for spec in specs]
