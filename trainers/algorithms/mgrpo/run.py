"""M-GRPO on the run harness (:mod:`trainers.harness.run_dir`): where a start of a run continues from.

An M-GRPO run dir holds what an AT-GRPO one does (``config.json``, ``history.jsonl``,
``metrics.jsonl``, checkpoints), with one checkpoint folder per *side*:
``checkpoints/local/`` for a run in one process (``--role local``: every policy of the mode),
``checkpoints/main/`` and ``checkpoints/sub/`` for the two sides of a two-process run, each
holding its own policy, optimiser, RNG states and step, written at the same steps. The sub
side writes its checkpoint of a step before it posts the step's statistics, and the main side
writes its own only after reading them, so the sides are at most one checkpoint apart; each
side keeps at least two, and a resumed two-process run continues from the newest step both
sides hold (:func:`resume_step`), both sides restarting from their checkpoint of that step.

The store's position needs no checkpoint: every start exchanges its records under a
namespace of its own (:class:`RunStart`), so a resumed side never reads a record an earlier,
interrupted start wrote.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trainers.algorithms.mgrpo.config import MGRPOConfig
from trainers.harness.errors import ConfigError
from trainers.harness.run_dir import CHECKPOINTS, METRICS, Checkpoints, check_run_dir, read_state, start_logs
from trainers.harness.run_history import check_resume, record_start

Side = Literal["local", "main", "sub"]
Layout = Literal["local", "two_process"]
#: The sides whose checkpoints a layout writes; the ``--role`` that resumes it.
LAYOUT_SIDES: dict[Layout, tuple[Side, ...]] = {"local": ("local",), "two_process": ("main", "sub")}
LAYOUT_ROLE: dict[Layout, str] = {"local": "local", "two_process": "both (or main and sub)"}


def store_files(cfg: MGRPOConfig) -> frozenset[str]:
    """The default SQLite store's files in the run dir: not a run of their own (the sub side of
    a two-process run may open the store before the main side starts), so kept on overwrite."""
    if cfg.mgrpo.store:
        return frozenset()
    name = Path(cfg.store_url()).name
    return frozenset({name, f"{name}-wal", f"{name}-shm", f"{name}-journal"})


def side_checkpoints(cfg: MGRPOConfig, side: Side) -> Checkpoints:
    """A side's checkpoints; a side of a two-process run keeps at least two, so that the step
    both sides hold survives one side running a checkpoint ahead of the other."""
    keep = cfg.run.keep_checkpoints if side == "local" else max(cfg.run.keep_checkpoints, 2)
    return Checkpoints(Path(cfg.run.run_dir) / CHECKPOINTS / side, keep)


def resume_step(cfg: MGRPOConfig, layout: Layout) -> int:
    """The step a start continues from: 0 for a new run (or a resumed one that wrote no
    checkpoint yet); on resume, the ``local`` side's latest checkpoint, or the newest step
    both sides of a two-process run hold. A run trained in the other layout is refused."""
    if not cfg.run.resume:
        return 0
    run_dir = Path(cfg.run.run_dir)
    for other, sides in LAYOUT_SIDES.items():
        if other != layout and any(side_checkpoints(cfg, side).steps() for side in sides):
            raise ConfigError(f"resume: the run in {str(run_dir)!r} was trained with --role {LAYOUT_ROLE[other]}, "
                              f"so it resumes only that way")
    if layout == "local":
        latest = side_checkpoints(cfg, "local").latest()
        return int(read_state(latest)["step"]) if latest is not None else 0
    main, sub = (set(side_checkpoints(cfg, side).steps()) for side in ("main", "sub"))
    if bool(main) != bool(sub):
        held, missing = ("main", "sub") if main else ("sub", "main")
        raise ConfigError(f"resume: {str(run_dir / CHECKPOINTS)!r} holds checkpoints of the {held} side but none "
                          f"of the {missing} side: a two-process run resumes from a run dir both sides write "
                          "(one machine, or a shared disk)")
    return max(main & sub, default=0)


@dataclass
class RunStart:
    """One start of a run: the step it continues from, the options that changed since the
    run's last start (:func:`trainers.harness.run_history.check_resume`) and the store namespace of
    this start's records."""

    step: int
    namespace: str
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)


def open_run(cfg: MGRPOConfig, layout: Layout, *, namespace: str | None = None) -> RunStart:
    """Check the run dir for a start of ``cfg`` (before any model loads): an earlier run is
    refused without ``resume``/``overwrite``, a resumed run's saved config is checked, and the
    step to continue from found. ``namespace``: this start's store namespace, by default one
    that both sides of a run started separately derive alike (the run id and the step)."""
    check_run_dir(Path(cfg.run.run_dir), resume=cfg.run.resume, overwrite=cfg.run.overwrite, ignore=store_files(cfg))
    changed = check_resume(Path(cfg.run.run_dir), cfg, resume=cfg.run.resume)
    step = resume_step(cfg, layout)
    return RunStart(step, namespace or f"{cfg.mgrpo.run_id}/from-{step}", changed)


def fresh_namespace(cfg: MGRPOConfig) -> str:
    """A namespace no earlier start used, for a start that hands it to both sides."""
    drawn = uuid.uuid4().hex[:12]
    return f"{cfg.mgrpo.run_id}/{drawn}" if cfg.mgrpo.run_id else drawn


def commit_start(cfg: MGRPOConfig, start: RunStart) -> None:
    """Once setup has succeeded: drop the metrics logged after the step the start continues
    from (resume) or the earlier run (overwrite), then write ``config.json`` and the start's
    ``history.jsonl`` record."""
    run_dir = Path(cfg.run.run_dir)
    start_logs(run_dir, [run_dir / METRICS], resume=cfg.run.resume, overwrite=cfg.run.overwrite, step=start.step,
               keep=store_files(cfg))
    run_dir.mkdir(parents=True, exist_ok=True)
    record_start(run_dir, cfg, resume=cfg.run.resume, step=start.step, to_step=cfg.run.steps,
                 changed=start.changed)


__all__ = ["Layout", "RunStart", "Side", "commit_start", "fresh_namespace", "open_run", "resume_step",
           "side_checkpoints", "store_files"]
