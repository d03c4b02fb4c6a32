"""A run's step profile (``--profile on|trace``): where every second of a step goes, tokens per second, peak memory.

:class:`StepProfile` wraps each step (:meth:`StepProfile.step`) in a fresh
:class:`~trainers.profiling.phases.PhaseTimer` made current for the step, so the phase boundaries in the
layers below (``with phase("backward")``, :func:`timed_rollout`) charge their seconds to it, and
appends one record per step to ``RUN_DIR/profile.jsonl``; :meth:`StepProfile.finish` writes
``RUN_DIR/profile_summary.json`` and prints the summary table on stderr. ``trace`` also records a
``torch.profiler`` trace of the first :data:`TRACE_STEPS` steps, each phase a named range in it, to
``RUN_DIR/profile_trace.json`` (open it in Perfetto or ``chrome://tracing``).

Off (the default) nothing is written and no timer is installed: every phase boundary is a call that
returns a shared do-nothing context manager. On, with CUDA in use, every phase boundary synchronises
the device so a phase is charged for its own kernels; that is the profile's only cost to the step.

A record: ``step``, ``seconds`` (the step's wall time), ``phases`` (exclusive seconds per phase of
:data:`PHASES`, all present), ``share`` (of ``seconds``, per phase and ``unattributed``),
``unattributed`` (seconds no phase measured), ``tokens_generated`` / ``tokens_trained`` and their
``..._per_s``, ``peak_rss_mb`` (the process's peak resident memory so far) and ``peak_cuda_mb``
(this step's peak allocated CUDA memory; null without CUDA). docs/training.md says what each phase covers.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from pettingllm_envs.sandbox import seconds_waited
from trainers.profiling.phases import PhaseTimer, current, installed, phase

ProfileMode = Literal["off", "on", "trace"]
PROFILE = "profile.jsonl"
SUMMARY = "profile_summary.json"
TRACE = "profile_trace.json"
#: Steps the ``trace`` mode records (a trace grows with every op; the first steps show the pattern).
TRACE_STEPS = 3
#: Every record's phases, in the order of a step (docs/training.md "Step profile" says what each covers).
PHASES = ("generation", "env", "sandbox", "tree", "rollout", "scoring", "backward", "optimizer", "update",
          "weight_sync", "eval", "logging", "checkpoint")
TOKENS_GENERATED = "tokens/generated"
TOKENS_TRAINED = "tokens/trained"


class RolloutTimes(Protocol):
    """What a rollout reports of its own time (:class:`trainers.rollout.episodes.RolloutResult`)."""

    seconds_generate: float
    seconds_env: float


R = TypeVar("R", bound=RolloutTimes)


def timed_rollout(run: Callable[[], R]) -> R:
    """Run a rollout under phase ``rollout`` and charge what it measured itself: ``generation``,
    ``tree`` (deep copies and selection), ``sandbox`` (the wall time of sandbox runs meanwhile, at most
    the env's) and ``env`` (the env's steps less those two); ``rollout`` keeps the rest."""
    if not current().enabled:
        return run()
    waited = seconds_waited()
    with phase("rollout"):
        result = run()
        timer = current()
        tree = getattr(result, "seconds_tree", 0.0)
        sandbox = min(max(seconds_waited() - waited, 0.0), max(result.seconds_env - tree, 0.0))
        timer.add("generation", result.seconds_generate)
        timer.add("tree", tree)
        timer.add("sandbox", sandbox)
        timer.add("env", max(result.seconds_env - tree - sandbox, 0.0))
    return result


@contextlib.contextmanager
def env_phase() -> Iterator[None]:
    """Phase ``env`` for env work timed here rather than by a rollout; the sandbox runs it waited for
    are charged to ``sandbox``."""
    timer = current()
    if not timer.enabled:
        yield
        return
    waited = seconds_waited()
    with timer.phase("env"):
        try:
            yield
        finally:
            timer.add("sandbox", max(seconds_waited() - waited, 0.0))


def _cuda() -> Any:
    """``torch.cuda`` when this process has started using CUDA, else None."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return torch.cuda


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class StepProfile:
    """A run's step profile (module docstring); with ``mode="off"`` every method does nothing. A resumed
    run (``resume``) appends to its ``profile.jsonl``; otherwise an earlier profile in ``run_dir`` is
    replaced. The summary covers the steps this process ran."""

    def __init__(self, run_dir: Path | str, mode: ProfileMode, *, resume: bool = False) -> None:
        self.enabled = mode != "off"
        self.run_dir = Path(run_dir)
        self.trace = mode == "trace"
        self.records: list[dict[str, Any]] = []
        self._torch_profiler: Any = None
        self._traced_steps = 0
        if self.enabled and not resume:
            for name in (PROFILE, SUMMARY, TRACE):
                (self.run_dir / name).unlink(missing_ok=True)

    @contextlib.contextmanager
    def step(self, step: int) -> Iterator[None]:
        """Profile the block as step ``step`` (1-based); a block that raises is not recorded."""
        if not self.enabled:
            yield
            return
        cuda = _cuda()
        if cuda is not None:
            cuda.reset_peak_memory_stats()
        annotate = self._start_trace() if self.trace and self._traced_steps < TRACE_STEPS else None
        timer = PhaseTimer(synchronize=cuda.synchronize if cuda is not None else None, annotate=annotate)
        if cuda is not None:
            cuda.synchronize()
        start = time.perf_counter()
        with installed(timer):
            yield
        if cuda is not None:
            cuda.synchronize()
        seconds = time.perf_counter() - start
        if annotate is not None:
            self._traced_steps += 1
            if self._traced_steps == TRACE_STEPS:
                self._stop_trace()
        record = self._record(step, seconds, timer, None if cuda is None else cuda.max_memory_allocated() / 2**20)
        self.records.append(record)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / PROFILE, "a") as f:
            f.write(json.dumps(record) + "\n")

    @staticmethod
    def _record(step: int, seconds: float, timer: PhaseTimer, peak_cuda_mb: float | None) -> dict[str, Any]:
        phases = {name: max(timer.seconds.get(name, 0.0), 0.0) for name in PHASES}
        phases.update({name: value for name, value in timer.seconds.items() if name not in phases})
        unattributed = max(seconds - sum(phases.values()), 0.0)
        generated, trained = timer.counts.get(TOKENS_GENERATED, 0.0), timer.counts.get(TOKENS_TRAINED, 0.0)
        return {
            "step": step, "seconds": seconds, "phases": phases,
            "share": {name: value / seconds for name, value in {**phases, "unattributed": unattributed}.items()},
            "unattributed": unattributed,
            "tokens_generated": generated, "tokens_trained": trained,
            "tokens_generated_per_s": generated / seconds, "tokens_trained_per_s": trained / seconds,
            "peak_rss_mb": _peak_rss_mb(), "peak_cuda_mb": peak_cuda_mb,
        }

    def _start_trace(self) -> Callable[[str], contextlib.AbstractContextManager[object]]:
        import torch.profiler

        if self._torch_profiler is None:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if _cuda() is not None:
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._torch_profiler = torch.profiler.profile(activities=activities, profile_memory=True)
            self._torch_profiler.start()
        return torch.profiler.record_function

    def _stop_trace(self) -> None:
        if self._torch_profiler is not None:
            self._torch_profiler.stop()
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._torch_profiler.export_chrome_trace(str(self.run_dir / TRACE))
            self._torch_profiler = None

    def summary(self) -> dict[str, Any]:
        """Totals over the steps profiled: seconds and share per phase, tokens per second, peak memory."""
        seconds = sum(r["seconds"] for r in self.records)
        names = list(dict.fromkeys(name for r in self.records for name in r["phases"]))
        totals = {name: sum(r["phases"].get(name, 0.0) for r in self.records) for name in names}
        totals["unattributed"] = sum(r["unattributed"] for r in self.records)
        generated = sum(r["tokens_generated"] for r in self.records)
        trained = sum(r["tokens_trained"] for r in self.records)
        cuda = [r["peak_cuda_mb"] for r in self.records if r["peak_cuda_mb"] is not None]
        return {
            "steps": len(self.records), "seconds": seconds,
            "phases": {name: {"seconds": total, "share": total / seconds if seconds else 0.0,
                              "per_step": total / len(self.records)} for name, total in totals.items()},
            "tokens_generated": generated, "tokens_trained": trained,
            "tokens_generated_per_s": generated / seconds if seconds else 0.0,
            "tokens_trained_per_s": trained / seconds if seconds else 0.0,
            "peak_rss_mb": max(r["peak_rss_mb"] for r in self.records), "peak_cuda_mb": max(cuda) if cuda else None,
            "trace": TRACE if (self.run_dir / TRACE).is_file() and self.trace else None,
        }

    def finish(self, label: str = "profile") -> None:
        """Write ``profile_summary.json`` and print its table on stderr (nothing when off or no step ran)."""
        self._stop_trace()
        if not self.enabled or not self.records:
            return
        summary = self.summary()
        (self.run_dir / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
        print(summary_table(summary, label, self.run_dir), file=sys.stderr)


#: The profile of a run that asked for none.
NO_PROFILE = StepProfile(".", "off")


def summary_table(summary: dict[str, Any], label: str, run_dir: Path) -> str:
    """The summary as the end of a run prints it: one line per phase that took any time."""
    lines = [f"[{label}] {summary['steps']} steps, {summary['seconds']:.2f} s "
             f"({run_dir / PROFILE}, {run_dir / SUMMARY})",
             f"  {'phase':<14}{'seconds':>10}{'per step':>10}{'share':>8}"]
    for name, row in sorted(summary["phases"].items(), key=lambda item: -item[1]["seconds"]):
        if row["seconds"] > 0:
            lines.append(f"  {name:<14}{row['seconds']:>10.3f}{row['per_step']:>10.3f}{row['share']:>8.1%}")
    cuda = summary["peak_cuda_mb"]
    lines.append(f"  tokens/s generated {summary['tokens_generated_per_s']:.1f}, trained "
                 f"{summary['tokens_trained_per_s']:.1f}; peak RSS {summary['peak_rss_mb']:.0f} MB"
                 + (f", peak CUDA {cuda:.0f} MB" if cuda is not None else ""))
    return "\n".join(lines)


__all__ = ["NO_PROFILE", "PHASES", "PROFILE", "SUMMARY", "TOKENS_GENERATED", "TOKENS_TRAINED", "TRACE", "TRACE_STEPS",
           "ProfileMode", "StepProfile", "env_phase", "summary_table", "timed_rollout"]
