"""Step retries: a rollout worker or generation engine that dies mid-step costs the step, not the run.

A distributed step calls actors in three phases, and each can be run again without changing the
run's result:

* **the rollout** is a function of the step's seeds (request seeds and the selection RNG start
  over per step, the envs reset from their problems' seeds) and the policies' current weights,
  and writes nothing: run again, it gives the same samples;
* **pushing the updated weights** to the engines: the update itself has been applied on the
  training workers (running the step again would apply it twice), so only the push is repeated;
* **the held-out evaluation**, seeded by its own stream like the rollout.

Between two attempts :func:`revive` replaces every actor that no longer answers (killed, so a hung
one cannot come back, and re-created on its bundle); the trainer gives replaced engines the
current weights. A step's metrics and samples are logged once, after all three phases, so a
failed attempt leaves nothing in the run dir. ``DistributedConfig.step_retries`` bounds the
retries of one step; past it, or when a training worker fails (its torch.distributed group and
optimiser state cannot be rebuilt mid-step), the run stops with :class:`StepFailed`: one line
naming the actors that no longer answer and how to resume from the last checkpoint.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from trainers.distributed.cluster import ActorFailed, get, wait_started

if TYPE_CHECKING:
    from trainers.distributed.engine import RayGenerator
    from trainers.distributed.rollout import RolloutPool

T = TypeVar("T")

#: How long the message of a stopped run waits for each actor to answer: a dead actor answers at
#: once (with an error); this only bounds the wait for one that hangs.
NAMING_PROBE_S = 10.0


class StepFailed(ActorFailed):
    """A step could not be finished within ``step_retries``; the message (one line) names the
    actors that no longer answer, the last checkpoint and the command that resumes the run."""


def unanswered(actors: Sequence[Any], timeout_s: float) -> list[int]:
    """Indices of ``actors`` whose ``pid()`` call fails or does not return within ``timeout_s``
    (one deadline for all; an actor busy with an earlier call answers after it)."""
    refs = [actor.pid.remote() for actor in actors]
    deadline = time.monotonic() + timeout_s
    silent = []
    for index, ref in enumerate(refs):
        try:
            get(ref, max(0.0, deadline - time.monotonic()), f"actor {index}")
        except ActorFailed:
            silent.append(index)
    return silent


def revive(actors: Sequence[Any], respawn: Callable[[int], Any], timeout_s: float) -> list[int]:
    """Replace (``respawn(index)``: kill and re-create in place) every actor of ``actors`` that
    does not answer, wait until the replacements answer, and return their indices."""
    replaced = unanswered(actors, timeout_s)
    fresh = [respawn(index) for index in replaced]
    wait_started(fresh, "replacement actors")
    get([actor.pid.remote() for actor in fresh], timeout_s, "replacement actors")
    return replaced


def _pools(rollout: RolloutPool | None, generator: RayGenerator
           ) -> Iterator[tuple[Callable[[int], str], list[Any], Callable[[int], Any], str | None]]:
    """The replaceable actor pools of a run: (name of actor ``k``, the actors, their respawn, the
    policy whose engines they are, or None)."""
    if rollout is not None:
        yield (lambda k: f"rollout worker {k}"), rollout.workers, rollout.respawn, None
    for policy, engines in generator.engines.items():
        yield ((lambda k, p=policy: f"generation engine {k} of policy {p!r}"), engines,
               partial(generator.respawn, policy), policy)


def revive_actors(rollout: RolloutPool | None, generator: RayGenerator, push: Callable[[str], None],
                  timeout_s: float) -> list[str]:
    """:func:`revive` the rollout workers and every policy's engines; ``push(policy)`` gives a
    policy with a replaced engine its current weights. The names of the replaced actors."""
    names = []
    for name, actors, respawn, policy in _pools(rollout, generator):
        replaced = revive(actors, respawn, timeout_s)
        if replaced and policy is not None:
            push(policy)
        names += [name(k) for k in replaced]
    return names


def silent_actors(rollout: RolloutPool | None, generator: RayGenerator, timeout_s: float) -> list[str]:
    """The names of the rollout workers and engines that do not answer within ``timeout_s``."""
    return [name(k) for name, actors, _, _ in _pools(rollout, generator) for k in unanswered(actors, timeout_s)]


class StepRetries:
    """The retries one step has left (:meth:`begin` at each step) and the loop that spends them."""

    def __init__(self, limit: int, repair: Callable[[], list[str]]) -> None:
        self.limit = limit
        self.repair = repair
        """Replaces the dead actors; returns their names."""
        self.used = 0

    def begin(self) -> None:
        self.used = 0

    def run(self, what: str, action: Callable[[], T]) -> T:
        """``action()``; when an actor fails in it and retries are left, repair and run it again."""
        while True:
            try:
                return action()
            except ActorFailed as failure:
                if self.used >= self.limit:
                    raise
                self.used += 1
                replaced = self.repair()
                print(f"[train-ray] {what}: {failure}; replaced {', '.join(replaced) or 'no actor'}, retrying "
                      f"{what} ({self.used} of step_retries={self.limit})", file=sys.stderr)


def stopped_message(failure: ActorFailed, *, dead: Sequence[str], retries: StepRetries, note: str) -> str:
    """The one line of :class:`StepFailed`: which actors, which failure, what is kept (``note``:
    :func:`trainers.algorithms.atgrpo.train.interruption_note`)."""
    actors = f"no longer answering: {', '.join(dead)}" if dead else "every actor still answers"
    return (f"{failure} ({actors}; after {retries.used} of step_retries={retries.limit} retries); "
            f"{note}").replace("\n", " ")
