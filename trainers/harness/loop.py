"""The training loop every trainer runs, read top to bottom in :meth:`TrainingLoop.run`.

An algorithm supplies its parts (:class:`StepParts`): how one step collects and updates, how
the current policies are evaluated, how a checkpoint is written. The loop owns the rest, once
for every algorithm: the step range a resumed run continues from, the evaluation and
checkpoint schedule (:func:`~trainers.harness.run_dir.evaluation_due`,
:func:`~trainers.harness.run_dir.checkpoint_due`), the step's wall time, the metrics log, the
per-step profile (:class:`~trainers.harness.profile.StepProfile`), the progress bar and its
notes. AT-GRPO (and the prompt-variant and data-parallel trainers built on it) and both sides
of M-GRPO run through it; a new algorithm writes its parts and an entry point.

Seeding and the run dir's checks happen before the loop starts (they depend on what the
algorithm builds); step retries belong to the parts that can fail and be retried (the
distributed trainer's rollout and weight pushes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from trainers.harness.profile import StepProfile
from trainers.harness.run_dir import Progress, checkpoint_due, evaluation_due
from trainers.profiling.phases import phase

Metrics = dict[str, float]


class StepParts(Protocol):
    """What an algorithm gives the loop. ``step`` is always the 1-based number of the step the
    call belongs to (the step being run, or the one just finished)."""

    def run_step(self, step: int) -> Metrics:
        """Collect and update for step ``step``; the step's metrics (``step`` among them)."""
        ...

    def evaluate(self, step: int) -> Metrics:
        """Held-out metrics of the current policies, after step ``step``."""
        ...

    def save_checkpoint(self, step: int) -> None:
        """Write the checkpoint that holds step ``step``."""
        ...


@dataclass(frozen=True)
class Schedule:
    """When things happen: ``steps`` in all, held-out evaluation every ``eval_every`` steps and after
    the last (0: never), a checkpoint every ``checkpoint_every`` steps and after the last."""

    steps: int
    eval_every: int
    checkpoint_every: int

    def evaluation_due(self, step: int) -> bool:
        return evaluation_due(step, every=self.eval_every, last=self.steps)

    def checkpoint_due(self, step: int) -> bool:
        return checkpoint_due(step, every=self.checkpoint_every, last=self.steps)


def no_gradient(metrics: Metrics) -> bool:
    """Every group of the step was degenerate (equal rewards, zero advantages), so the update changed
    nothing (pure; metrics without group statistics never say so)."""
    return metrics.get("groups/degenerate_frac") == 1.0 and metrics.get("samples/trained") == 0


class TrainingLoop:
    """Runs ``parts`` on ``schedule``. ``log`` writes one step's metrics; ``progress_fields`` gives
    the progress bar's figures for a step's metrics."""

    def __init__(self, parts: StepParts, schedule: Schedule, *, profile: StepProfile,
                 log: Callable[[Metrics], None],
                 progress_fields: Callable[[Metrics], dict[str, str]] | None = None) -> None:
        self.parts = parts
        self.schedule = schedule
        self.profile = profile
        self.log = log
        self.progress_fields = progress_fields

    def one_step(self, step: int) -> Metrics:
        """Step ``step`` (1-based): collect and update, evaluate when due, time it, log it."""
        start = time.perf_counter()
        metrics = self.parts.run_step(step)
        if self.schedule.evaluation_due(step):
            eval_start = time.perf_counter()
            with phase("eval"):
                metrics.update(self.parts.evaluate(step))
            metrics["time/eval"] = time.perf_counter() - eval_start
        metrics["time/step"] = time.perf_counter() - start
        with phase("logging"):
            self.log(metrics)
        return metrics

    def run(self, start: int, *, progress: Progress | None = None,
            on_step: Callable[[Metrics], None] | None = None) -> list[Metrics]:
        """Every step after ``start`` (the steps a resumed run already holds) to the last; returns
        their metrics. A checkpoint is written when due, after its step is logged: a checkpoint
        never holds a step that ``metrics.jsonl`` lacks."""
        history = []
        for step in range(start + 1, self.schedule.steps + 1):
            with self.profile.step(step):  # the step's profile, when asked for: collection to checkpoint
                metrics = self.one_step(step)
                history.append(metrics)
                if on_step is not None:
                    on_step(metrics)
                if progress is not None:
                    self._report(progress, step, metrics)
                if self.schedule.checkpoint_due(step):
                    with phase("checkpoint"):
                        self.parts.save_checkpoint(step)
        if progress is not None:
            progress.close()
        self.profile.finish()
        return history

    def _report(self, progress: Progress, step: int, metrics: Metrics) -> None:
        if no_gradient(metrics):
            progress.note(f"step {step}: all {int(metrics['groups/count'])} groups degenerate: no gradient this step")
        progress.advance(**(self.progress_fields(metrics) if self.progress_fields is not None else {}))


__all__ = ["Metrics", "Schedule", "StepParts", "TrainingLoop", "no_gradient"]
