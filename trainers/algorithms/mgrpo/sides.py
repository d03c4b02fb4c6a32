"""The sides of an M-GRPO run: :func:`run_local` (every policy in this process),
:func:`run_main_side` and :func:`run_sub_side` (the two processes of
:func:`~trainers.algorithms.mgrpo.train.run_two_process`).

The local and main sides are parts of the trainers' one loop
(:class:`~trainers.harness.loop.TrainingLoop`: the schedule, the step's time, the metrics log,
the profile): :class:`LocalSide` and :class:`MainSide` write only how a step collects and
updates, how the policies are evaluated and what a checkpoint holds. The sub side trains too,
but it is a server of the main side's steps: it serves delegations, learns from the outcomes
the main side posts, and must write its checkpoint before it posts its statistics (the main
side writes its own on reading them, so both checkpoints of a step exist before either side
goes on); its loop follows that order, with the same schedule.
"""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from pathlib import Path
from typing import Any

from pettingllm_envs.capabilities import Delegation
from trainers.algorithms.mgrpo.alignment import BatchStats, main_batch, single_agent_batch, sub_batch
from trainers.algorithms.mgrpo.config import MGRPOConfig
from trainers.algorithms.mgrpo.evaluation import eval_prefix, evaluate, evaluation_stream
from trainers.algorithms.mgrpo.policy import (
    RolePolicy,
    alignment_seed,
    env_delegation,
    env_maker,
    restore_side,
    save_side,
    seed_side,
    step_metrics,
    step_questions,
    sub_completions,
    token_count,
)
from trainers.algorithms.mgrpo.remote import RemoteSubSampler, serve_ticks
from trainers.algorithms.mgrpo.rollout import Outcome, hierarchical_rollout
from trainers.algorithms.mgrpo.run import RunStart, commit_start, open_run, resume_step, side_checkpoints
from trainers.algorithms.mgrpo.store import Store, open_store
from trainers.harness.loop import Metrics, Schedule, TrainingLoop
from trainers.harness.profile import TOKENS_GENERATED, TOKENS_TRAINED, StepProfile, timed_rollout
from trainers.harness.run_dir import METRICS, Checkpoints, append_jsonl
from trainers.learning.update import UpdateStats
from trainers.profiling.phases import count, phase


def schedule(cfg: MGRPOConfig) -> Schedule:
    return Schedule(cfg.run.steps, cfg.evaluation.eval_every, cfg.run.checkpoint_every)


def side_loop(cfg: MGRPOConfig, parts: LocalSide | MainSide) -> TrainingLoop:
    """The trainers' loop for a side that logs the run's ``metrics.jsonl``."""
    run_dir = Path(cfg.run.run_dir)
    return TrainingLoop(parts, schedule(cfg), profile=StepProfile(run_dir, cfg.run.profile, resume=cfg.run.resume),
                        log=partial(append_jsonl, run_dir / METRICS))


def count_tokens(metrics: Metrics, updates: dict[str, UpdateStats]) -> None:
    count(TOKENS_GENERATED, metrics["tokens"])
    count(TOKENS_TRAINED, sum(update.tokens for update in updates.values()))


# ----------------------------------------------------------------- in-process
class LocalSide:
    """Every policy of ``cfg.mgrpo.mode`` in this process (``trained``: by level, in checkpoint order)."""

    def __init__(self, cfg: MGRPOConfig, delegation: Delegation, checkpoints: Checkpoints,
                 checkpoint: Path | None) -> None:
        self.cfg, self.delegation, self.checkpoints = cfg, delegation, checkpoints
        if cfg.mgrpo.mode == "single":
            roles = [delegation.manager, delegation.worker]
            shared = RolePolicy(cfg, roles, "shared", cfg.model.model, checkpoint=checkpoint)
            self.samplers = dict.fromkeys(roles, shared.sample)
            self.trained = {"shared": shared}
        else:
            main = RolePolicy(cfg, [delegation.manager], "main", cfg.model.model, checkpoint=checkpoint)
            sub = RolePolicy(cfg, [delegation.worker], "sub", cfg.mgrpo.sub_model or cfg.model.model,
                             checkpoint=checkpoint)
            self.samplers = {delegation.manager: main.sample, delegation.worker: sub.sample}
            self.trained = {"main": main, "sub": sub}
        restore_side(checkpoint, list(self.trained.values()))

    def run_step(self, step: int) -> Metrics:
        cfg = self.cfg
        rollout = timed_rollout(partial(hierarchical_rollout, env_maker(cfg), step_questions(cfg, step - 1),
                                        cfg.mgrpo.rollouts, self.samplers, delegation=self.delegation,
                                        split=cfg.task.split))
        update_start = time.perf_counter()
        levels: dict[str, BatchStats]
        if cfg.mgrpo.mode == "single":
            batch, stats = single_agent_batch(rollout.turns, rollout.outcomes, normalize=cfg.update.normalize,
                                              eps=cfg.update.adv_eps)
            levels, updates = {"shared": stats}, {"shared": self.trained["shared"].update(batch)}
        else:
            batch, stats = main_batch(rollout.turns, rollout.outcomes, normalize=cfg.update.normalize,
                                       eps=cfg.update.adv_eps)
            sbatch, sstats = sub_batch(sub_completions(rollout), rollout.outcomes, cfg.mgrpo.d_max, trim=cfg.mgrpo.trim,
                                       seed=alignment_seed(cfg, step - 1), normalize=cfg.update.normalize,
                                       eps=cfg.update.adv_eps)
            levels, updates = {"main": stats, "sub": sstats}, {"main": self.trained["main"].update(batch)}
            if cfg.mgrpo.mode != "frozen_sub":
                updates["sub"] = self.trained["sub"].update(sbatch)
        seconds = {"generate": rollout.seconds_generate, "env": rollout.seconds_env,
                   "update": time.perf_counter() - update_start}
        tokens = token_count([t.completion for t in rollout.turns])
        metrics = step_metrics(step, rollout, levels, updates, tokens=tokens, seconds=seconds)
        count_tokens(metrics, updates)
        return metrics

    def evaluate(self, step: int) -> Metrics:
        return evaluate(self.cfg, self.samplers, self.delegation, side="local", step=step)

    def save_checkpoint(self, step: int) -> None:
        save_side(self.checkpoints, step, list(self.trained.values()))


def run_local(cfg: MGRPOConfig) -> list[dict[str, float]]:
    """Train every policy of ``cfg.mgrpo.mode`` in this process; returns per-step metrics (also
    appended to ``run_dir/metrics.jsonl``)."""
    cfg.validate()
    delegation = env_delegation(cfg)
    run_start = open_run(cfg, "local")
    seed_side(cfg, "local")
    checkpoints = side_checkpoints(cfg, "local")
    side = LocalSide(cfg, delegation, checkpoints, checkpoints.at(run_start.step) if run_start.step else None)
    commit_start(cfg, run_start)
    return side_loop(cfg, side).run(run_start.step)


# ------------------------------------------------------------------ two sides
class MainSide:
    """The env, the rollouts and the main policy; the sub-agent answers through ``store``."""

    def __init__(self, cfg: MGRPOConfig, delegation: Delegation, checkpoints: Checkpoints, checkpoint: Path | None,
                 store: Store) -> None:
        self.cfg, self.delegation, self.checkpoints, self.store = cfg, delegation, checkpoints, store
        self.main = RolePolicy(cfg, [delegation.manager], "main", cfg.model.model, checkpoint=checkpoint)
        restore_side(checkpoint, [self.main])

    def run_step(self, step: int) -> Metrics:
        cfg, store = self.cfg, self.store
        prefix = str(step - 1)
        store.heartbeat("main")
        remote = RemoteSubSampler(store, prefix, cfg.mgrpo.timeout_s)
        rollout = timed_rollout(partial(hierarchical_rollout, env_maker(cfg), step_questions(cfg, step - 1),
                                        cfg.mgrpo.rollouts, {self.delegation.manager: self.main.sample,
                                                       self.delegation.worker: remote},
                                        delegation=self.delegation, split=cfg.task.split))
        batch, stats = main_batch(rollout.turns, rollout.outcomes, normalize=cfg.update.normalize,
                                       eps=cfg.update.adv_eps)
        records: dict[str, Any] = {f"{prefix}/outcome/{q}/{r}": o.to_json() for (q, r), o in rollout.outcomes.items()}
        records.update(remote.done_record())
        store.put_many(records)  # outcomes and "done" appear together
        update_start = time.perf_counter()
        updates = {"main": self.main.update(batch)}
        seconds_update = time.perf_counter() - update_start
        store.heartbeat("main")
        with phase("sub_side"):  # the sub side's update, as this side waits for it
            side = store.get(f"{prefix}/sub_stats", timeout=cfg.mgrpo.timeout_s, waiting_for="sub")
        if side["update"] is not None:
            updates["sub"] = UpdateStats(**side["update"])
        seconds = {"generate": rollout.seconds_generate, "env": rollout.seconds_env,
                   "update": seconds_update + side["seconds_update"]}
        metrics = step_metrics(step, rollout, {"main": stats, "sub": BatchStats(**side["batch"])}, updates,
                               tokens=token_count([t.completion for t in rollout.turns]) + side["tokens"],
                               seconds=seconds)
        count_tokens(metrics, updates)
        return metrics

    def evaluate(self, step: int) -> Metrics:
        """The held-out evaluation; the sub side serves its delegations."""
        remote = RemoteSubSampler(self.store, eval_prefix(step), self.cfg.mgrpo.timeout_s)
        metrics = evaluate(self.cfg, {self.delegation.manager: self.main.sample, self.delegation.worker: remote},
                           self.delegation, side="main", step=step)
        self.store.put_many(remote.done_record())
        return metrics

    def save_checkpoint(self, step: int) -> None:
        save_side(self.checkpoints, step, [self.main])  # the sub side has written its own of this step


def run_main_side(cfg: MGRPOConfig, run_start: RunStart | None = None) -> list[dict[str, float]]:
    """The main side of :func:`~trainers.algorithms.mgrpo.train.run_two_process`: env, rollouts,
    main policy; logs ``run_dir/metrics.jsonl`` with both sides' statistics. ``run_start``: the
    start ``run_two_process`` opened; without it (``--role main``) this side opens it."""
    cfg.validate()
    delegation = env_delegation(cfg)
    opened_here = run_start is None
    if run_start is None:
        run_start = open_run(cfg, "two_process")
    seed_side(cfg, "main")
    checkpoints = side_checkpoints(cfg, "main")
    checkpoint = checkpoints.at(run_start.step) if run_start.step else None
    with open_store(cfg.store_url(), namespace=run_start.namespace) as store:
        side = MainSide(cfg, delegation, checkpoints, checkpoint, store)
        if opened_here:
            commit_start(cfg, run_start)
        return side_loop(cfg, side).run(run_start.step)


def run_sub_side(cfg: MGRPOConfig, run_start: RunStart | None = None) -> None:
    """The sub side of :func:`~trainers.algorithms.mgrpo.train.run_two_process`: serves delegations,
    then learns from the outcomes the main side posts; posts its batch and update statistics.
    ``run_start``: the main side's; without it (``--role sub``) this side derives the same step
    and namespace from the run dir and the run id (:func:`trainers.algorithms.mgrpo.run.open_run`)."""
    cfg.validate()
    delegation = env_delegation(cfg)
    if run_start is None:
        step = resume_step(cfg, "two_process")
        run_start = RunStart(step, f"{cfg.mgrpo.run_id}/from-{step}")
    seed_side(cfg, "sub")
    checkpoints = side_checkpoints(cfg, "sub")
    checkpoint = checkpoints.at(run_start.step) if run_start.step else None
    sub = RolePolicy(cfg, [delegation.worker], "sub", cfg.mgrpo.sub_model or cfg.model.model, checkpoint=checkpoint)
    restore_side(checkpoint, [sub])
    due = schedule(cfg)
    with open_store(cfg.store_url(), namespace=run_start.namespace) as store:
        for step in range(run_start.step + 1, cfg.run.steps + 1):
            prefix = str(step - 1)
            completions = serve_ticks(store, prefix, delegation.worker, sub.sample, cfg.mgrpo.timeout_s)
            outcomes = {(q, r): Outcome.from_json(store.get(f"{prefix}/outcome/{q}/{r}", timeout=cfg.mgrpo.timeout_s,
                                                            waiting_for="main"))
                        for q in step_questions(cfg, step - 1) for r in range(cfg.mgrpo.rollouts)}
            batch, stats = sub_batch(completions, outcomes, cfg.mgrpo.d_max, trim=cfg.mgrpo.trim,
                                     seed=alignment_seed(cfg, step - 1), normalize=cfg.update.normalize,
                                       eps=cfg.update.adv_eps)
            update_start = time.perf_counter()
            update = None if cfg.mgrpo.mode == "frozen_sub" else sub.update(batch)
            if due.checkpoint_due(step):  # before the main side, which writes its own on reading
                save_side(checkpoints, step, [sub])
            store.put_many({f"{prefix}/sub_stats": {
                "batch": dataclasses.asdict(stats),
                "update": dataclasses.asdict(update) if update is not None else None,
                "tokens": token_count([a for actions in completions.values() for a in actions]),
                "seconds_update": time.perf_counter() - update_start}})
            if due.evaluation_due(step):
                with evaluation_stream(cfg, "sub", step):
                    serve_ticks(store, eval_prefix(step), delegation.worker, sub.sample, cfg.mgrpo.timeout_s)
            store.heartbeat("sub")


__all__ = ["LocalSide", "MainSide", "run_local", "run_main_side", "run_sub_side"]
