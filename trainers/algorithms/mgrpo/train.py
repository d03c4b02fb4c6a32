"""M-GRPO training: main and sub as separate policies, optionally in separate processes.

``mode`` selects what is trained (:class:`~trainers.algorithms.mgrpo.config.MGRPOConfig`, the comparison
of ``benchmarks/mgrpo_comparison.py``):

* ``mgrpo``: main and sub are separate models; the main agent learns from its per-question
  group advantages, the sub-agent from its aligned per-question group advantages;
* ``frozen_sub``: the same, but the sub-agent is never updated;
* ``single``: one policy plays both roles, single-agent GRPO (every action gets its
  rollout's main advantage).

The env names its main agent and sub-agent through its
:class:`~pettingllm_envs.capabilities.Delegation` capability (:func:`env_delegation`, checked
before a model loads). Every policy is updated by the trainers' one PPO update
(:func:`trainers.learning.update.ppo_update`, the same rules, settings and old log-probs as AT-GRPO's
``Trainer``), and a step's ``metrics.jsonl`` line uses :mod:`trainers.learning.metrics`' names, with
``<level>`` ``main`` / ``sub`` (or ``shared``; ``reward/agent/<role>`` uses the env's role
names), plus M-GRPO's own: ``reward/main`` (mean final reward of the main agent per
rollout), ``reward/sub`` (mean delegation reward),
``delegations/mean`` (per rollout) and ``alignment/slots|padded|empty|dropped``.

:func:`run_local` runs everything in this process. :func:`run_two_process` is the
decoupled pipeline: the *main side* (this process: the env, the main policy) and the *sub
side* (a spawned process: the sub policy) share no weights, tensors or samples. The sub
side serves the main side's delegations like a remote tool (prompts in, action texts out,
through the store: the inference channel, :mod:`trainers.algorithms.mgrpo.remote`), and for
training the two exchange only scalar records keyed by ``(step, question, rollout)``: each
rollout's outcome (main reward, correctness, per-delegation rewards, which delegation each sub
action served) and each side's batch and update statistics.
``pettingllm train-mgrpo --role main|sub`` runs one side, e.g. on two
machines sharing a Redis store.

Every run has the run harness's guarantees (:mod:`trainers.harness.run_dir`, :mod:`trainers.algorithms.mgrpo.run`):
an earlier run in ``run_dir`` is refused without ``--resume`` or ``--overwrite``, ``--resume``
restores and checks the saved config and continues exactly from the latest checkpoint (both
sides of a two-process run from the same step), ``metrics.jsonl`` is appended to, and with
``eval_every`` the policies are evaluated on held-out questions (:mod:`trainers.algorithms.mgrpo.evaluation`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

import pettingllm_envs
from pettingllm_envs.capabilities import Delegation, MissingCapability, capability
from pettingllm_envs.commandline.checks import check_env_config, check_model
from pettingllm_envs.commandline.errors import UsageError
from trainers.algorithms.atgrpo.options import build_parser as config_parser
from trainers.algorithms.atgrpo.options import run_config_from_args
from trainers.algorithms.mgrpo.alignment import BatchStats, PolicySample, main_batch, single_agent_batch, sub_batch
from trainers.algorithms.mgrpo.config import MODES, MGRPOConfig
from trainers.algorithms.mgrpo.evaluation import due as evaluation_is_due
from trainers.algorithms.mgrpo.evaluation import eval_prefix, evaluate, evaluation_stream
from trainers.algorithms.mgrpo.remote import RemoteSubSampler, serve_ticks
from trainers.algorithms.mgrpo.rollout import HierarchicalRollout, Key, Outcome, hierarchical_rollout
from trainers.algorithms.mgrpo.run import (
    RunStart,
    commit_start,
    fresh_namespace,
    open_run,
    resume_step,
    side_checkpoints,
)
from trainers.algorithms.mgrpo.store import open_store
from trainers.generation.protocol import Generation
from trainers.generation.transformers_backend import TransformersGenerator
from trainers.harness.errors import ConfigError
from trainers.harness.profile import TOKENS_GENERATED, TOKENS_TRAINED, StepProfile, timed_rollout
from trainers.harness.run_dir import (
    METRICS,
    Checkpoints,
    append_jsonl,
    checkpoint_due,
    interruption_note,
    restore_training_state,
    save_training_state,
)
from trainers.learning.metrics import action_reward_metrics, group_metrics, update_metrics
from trainers.learning.update import UpdateStats, ppo_update
from trainers.maths.seeding import derive_seed, seed_everything
from trainers.models.policy_set import PolicySet
from trainers.profiling.phases import count, phase
from trainers.rollout.episodes import Messages


@dataclass
class Action:
    """A sampled action: the text the env receives (prefill + completion) and the generation."""

    generation: Generation
    text: str


class RolePolicy:
    """One policy of this process: batched sampling (with the role's prefill) and PPO updates."""

    def __init__(self, cfg: MGRPOConfig, roles: Sequence[str], name: str, model: str, *,
                 checkpoint: Path | None = None) -> None:
        """``checkpoint``: the checkpoint a resumed run starts from (its ``policies/<name>``)."""
        self.cfg, self.name = cfg, name
        self.policies = PolicySet(dataclasses.replace(cfg.model_spec(), model=model), dict.fromkeys(roles, name),
                                  init_dir=checkpoint / "policies" if checkpoint else None)
        self.generator = TransformersGenerator(self.policies)  # it samples the policies' own, restored, weights
        tokenizer = self.policies.tokenizer
        self.prefill_ids = {role: list(tokenizer(text, add_special_tokens=False)["input_ids"])
                            for role, text in cfg.prefill.items()}

    def sample(self, agent: str, prompts: Sequence[Messages], keys: Sequence[Key] = ()) -> list[Action]:
        """One action per prompt, one batched generation."""
        prefill = self.prefill_ids.get(agent, [])
        ids = [self.policies.encode_prompt(messages)[1] + prefill for messages in prompts]
        generations = self.generator.generate(self.name, ids, 1)
        return [Action(g, self.cfg.prefill.get(agent, "") + g.text) for g in generations]

    def update(self, batch: Sequence[PolicySample]) -> UpdateStats:
        """The trainers' PPO update (:func:`trainers.learning.update.ppo_update`) on a level's batch."""
        samples = [dataclasses.replace(s, completion=s.completion.generation) for s in batch]
        with phase("update"):
            stats = ppo_update(self.policies, self.name, samples, self.cfg.update_settings())
        if stats.samples:
            with self.policies.active(self.name) as model, phase("weight_sync"):
                self.generator.sync(self.name, model)  # the next rollout samples the updated policy
        return stats


# --------------------------------------------------------------------- helpers
def env_delegation(cfg: MGRPOConfig) -> Delegation:
    """The env's :class:`~pettingllm_envs.capabilities.Delegation`, checked against its roles and
    ``prefill``: a run on an env without it fails here, at its start, with one message naming
    what is missing (:class:`~pettingllm_envs.capabilities.MissingCapability` or
    :class:`~trainers.harness.errors.ConfigError`), never with a ``KeyError`` after a whole rollout."""
    declared = capability(cfg.env, Delegation)
    env = pettingllm_envs.make(cfg.env, **cfg.env_kwargs)
    roles = list(env.possible_agents)
    env.close()
    if declared.manager == declared.worker or sorted(roles) != sorted((declared.manager, declared.worker)):
        raise ConfigError(f"{cfg.env} declares delegation from {declared.manager!r} to {declared.worker!r}, but its "
                          f"roles are {roles}: M-GRPO needs exactly those two roles")
    unknown = sorted(set(cfg.prefill) - set(roles))
    if unknown:
        raise ConfigError(f"config field 'prefill': roles {unknown} are not roles of {cfg.env} ({', '.join(roles)})")
    return declared


def _seed(cfg: MGRPOConfig, side: str) -> None:
    seed_everything(derive_seed(cfg.seed, "mgrpo", side))


def _questions(cfg: MGRPOConfig, step: int) -> list[int]:
    return [step * cfg.questions_per_step + j for j in range(cfg.questions_per_step)]


def _alignment_seed(cfg: MGRPOConfig, step: int) -> int:
    return derive_seed(cfg.seed, "alignment", step)


def _env_fn(cfg: MGRPOConfig) -> Any:
    return lambda: pettingllm_envs.make(cfg.env, **cfg.env_kwargs)


def _sub_completions(rollout: HierarchicalRollout) -> dict[Key, list[Action]]:
    out: dict[Key, list[Action]] = defaultdict(list)
    for t in rollout.turns:
        if t.delegation is not None:
            out[t.question, t.rollout].append(t.completion)
    return out


def _tokens(actions: Sequence[Any]) -> int:
    """Completion tokens of the actions sampled in this process (remote ones carry text only)."""
    return sum(len(a.generation.completion_ids) for a in actions if isinstance(a, Action))


def outcome_metrics(outcomes: dict[Key, Outcome]) -> dict[str, float]:
    """Mean main reward, mean delegation (sub) reward, success rate and delegations per rollout (pure)."""
    values = list(outcomes.values())
    delegations = [r for o in values for r in o.delegation_rewards]
    return {
        "reward/main": float(np.mean([o.main_reward for o in values])) if values else 0.0,
        "reward/sub": float(np.mean(delegations)) if delegations else 0.0,
        "rollout/success_rate": float(np.mean([o.correct for o in values])) if values else 0.0,
        "delegations/mean": len(delegations) / len(values) if values else 0.0,
    }


def step_metrics(step: int, rollout: HierarchicalRollout, levels: Mapping[str, BatchStats],
                 updates: Mapping[str, UpdateStats], *, tokens: int, seconds: Mapping[str, float]) -> dict[str, float]:
    """One ``metrics.jsonl`` line (module docstring): ``levels`` is each level's batch
    statistics, ``updates`` each updated policy's (a frozen sub-agent has none), ``seconds``
    the step's ``time/<name>`` figures (pure)."""
    metrics: dict[str, float] = {"step": step, **outcome_metrics(rollout.outcomes),
                                 **action_reward_metrics((t.agent, t.reward) for t in rollout.turns)}
    metrics.update(group_metrics(sum(s.groups for s in levels.values()), sum(s.degenerate for s in levels.values())))
    for level, s in levels.items():
        metrics.update(group_metrics(s.groups, s.degenerate, level=level))
        metrics[f"samples/{level}"] = s.samples
        if s.slots:
            metrics.update({"alignment/slots": s.slots, "alignment/padded": s.padded, "alignment/empty": s.empty,
                            "alignment/dropped": s.dropped})
    metrics["samples"] = sum(s.samples for s in levels.values())
    metrics["tokens"] = tokens
    metrics.update(update_metrics(updates))
    metrics.update({f"time/{name}": value for name, value in seconds.items()})
    return metrics


def _restore(checkpoint: Path | None, trained: Sequence[RolePolicy]) -> None:
    """Optimisers and RNG states of a resumed side (its weights were loaded with its policies)."""
    if checkpoint is not None:
        restore_training_state(checkpoint, [p.policies for p in trained])


def _checkpoint(cfg: MGRPOConfig, checkpoints: Checkpoints, step: int, trained: Sequence[RolePolicy]) -> None:
    """After step ``step``, when due: the side's policies, optimisers, RNG states and step."""
    if checkpoint_due(step, every=cfg.checkpoint_every, last=cfg.steps):
        checkpoints.save(step, lambda folder: save_training_state(folder, [p.policies for p in trained],
                                                                  {"step": step}))


# ----------------------------------------------------------------- in-process
def run_local(cfg: MGRPOConfig) -> list[dict[str, float]]:
    """Train every policy of ``cfg.mode`` in this process; returns per-step metrics (also
    appended to ``run_dir/metrics.jsonl``)."""
    cfg.validate()
    delegation = env_delegation(cfg)
    roles = [delegation.manager, delegation.worker]
    run_start = open_run(cfg, "local")
    _seed(cfg, "local")
    checkpoints = side_checkpoints(cfg, "local")
    checkpoint = checkpoints.at(run_start.step) if run_start.step else None
    if cfg.mode == "single":
        shared = RolePolicy(cfg, roles, "shared", cfg.model, checkpoint=checkpoint)
        samplers = dict.fromkeys(roles, shared.sample)
        trained = [shared]
    else:
        main = RolePolicy(cfg, [delegation.manager], "main", cfg.model, checkpoint=checkpoint)
        sub = RolePolicy(cfg, [delegation.worker], "sub", cfg.sub_model or cfg.model, checkpoint=checkpoint)
        samplers = {delegation.manager: main.sample, delegation.worker: sub.sample}
        trained = [main, sub]
    _restore(checkpoint, trained)
    commit_start(cfg, run_start)
    run_dir = Path(cfg.run_dir)
    profile = StepProfile(run_dir, cfg.profile, resume=cfg.resume)
    history = []
    for step in range(run_start.step, cfg.steps):
        with profile.step(step + 1):
            start = time.perf_counter()
            rollout = timed_rollout(partial(hierarchical_rollout, _env_fn(cfg), _questions(cfg, step), cfg.rollouts,
                                            samplers, delegation=delegation, split=cfg.split))
            update_start = time.perf_counter()
            if cfg.mode == "single":
                batch, stats = single_agent_batch(rollout.turns, rollout.outcomes, normalize=cfg.normalize,
                                                  eps=cfg.adv_eps)
                levels, updates = {"shared": stats}, {"shared": shared.update(batch)}
            else:
                batch, stats = main_batch(rollout.turns, rollout.outcomes, normalize=cfg.normalize, eps=cfg.adv_eps)
                sbatch, sstats = sub_batch(_sub_completions(rollout), rollout.outcomes, cfg.d_max, trim=cfg.trim,
                                           seed=_alignment_seed(cfg, step), normalize=cfg.normalize, eps=cfg.adv_eps)
                levels, updates = {"main": stats, "sub": sstats}, {"main": main.update(batch)}
                if cfg.mode != "frozen_sub":
                    updates["sub"] = sub.update(sbatch)
            seconds = {"generate": rollout.seconds_generate, "env": rollout.seconds_env,
                       "update": time.perf_counter() - update_start, "step": time.perf_counter() - start}
            metrics = step_metrics(step + 1, rollout, levels, updates,
                                   tokens=_tokens([t.completion for t in rollout.turns]), seconds=seconds)
            count(TOKENS_GENERATED, metrics["tokens"])
            count(TOKENS_TRAINED, sum(update.tokens for update in updates.values()))
            if evaluation_is_due(cfg, step + 1):
                with phase("eval"):
                    metrics.update(evaluate(cfg, samplers, delegation, side="local", step=step + 1))
            with phase("logging"):
                append_jsonl(run_dir / METRICS, metrics)
            history.append(metrics)
            with phase("checkpoint"):
                _checkpoint(cfg, checkpoints, step + 1, trained)
    profile.finish()
    return history


# ------------------------------------------------------------------ two sides
def run_main_side(cfg: MGRPOConfig, run_start: RunStart | None = None) -> list[dict[str, float]]:
    """The main side of :func:`run_two_process`: env, rollouts, main policy; logs
    ``run_dir/metrics.jsonl`` with both sides' statistics. ``run_start``: the start
    :func:`run_two_process` opened; without it (``--role main``) this side opens it."""
    cfg.validate()
    delegation = env_delegation(cfg)
    opened_here = run_start is None
    if run_start is None:
        run_start = open_run(cfg, "two_process")
    _seed(cfg, "main")
    checkpoints = side_checkpoints(cfg, "main")
    checkpoint = checkpoints.at(run_start.step) if run_start.step else None
    main = RolePolicy(cfg, [delegation.manager], "main", cfg.model, checkpoint=checkpoint)
    _restore(checkpoint, [main])
    if opened_here:
        commit_start(cfg, run_start)
    run_dir = Path(cfg.run_dir)
    profile = StepProfile(run_dir, cfg.profile, resume=cfg.resume)
    history = []
    with open_store(cfg.store_url(), namespace=run_start.namespace) as store:
        for step in range(run_start.step, cfg.steps):
            with profile.step(step + 1):
                start = time.perf_counter()
                prefix = str(step)
                store.heartbeat("main")
                remote = RemoteSubSampler(store, prefix, cfg.timeout_s)
                rollout = timed_rollout(partial(hierarchical_rollout, _env_fn(cfg), _questions(cfg, step),
                                                cfg.rollouts, {delegation.manager: main.sample,
                                                               delegation.worker: remote},
                                                delegation=delegation, split=cfg.split))
                batch, stats = main_batch(rollout.turns, rollout.outcomes, normalize=cfg.normalize, eps=cfg.adv_eps)
                records: dict[str, Any] = {f"{prefix}/outcome/{q}/{r}": o.to_json()
                                           for (q, r), o in rollout.outcomes.items()}
                records.update(remote.done_record())
                store.put_many(records)  # outcomes and "done" appear together
                update_start = time.perf_counter()
                updates = {"main": main.update(batch)}
                seconds_update = time.perf_counter() - update_start
                store.heartbeat("main")
                with phase("sub_side"):  # the sub side's update, as this side waits for it
                    side = store.get(f"{prefix}/sub_stats", timeout=cfg.timeout_s, waiting_for="sub")
                if side["update"] is not None:
                    updates["sub"] = UpdateStats(**side["update"])
                seconds = {"generate": rollout.seconds_generate, "env": rollout.seconds_env,
                           "update": seconds_update + side["seconds_update"], "step": time.perf_counter() - start}
                metrics = step_metrics(step + 1, rollout, {"main": stats, "sub": BatchStats(**side["batch"])},
                                       updates, tokens=_tokens([t.completion for t in rollout.turns]) + side["tokens"],
                                       seconds=seconds)
                count(TOKENS_GENERATED, metrics["tokens"])
                count(TOKENS_TRAINED, sum(update.tokens for update in updates.values()))
                if evaluation_is_due(cfg, step + 1):  # the sub side serves its delegations
                    with phase("eval"):
                        remote = RemoteSubSampler(store, eval_prefix(step + 1), cfg.timeout_s)
                        metrics.update(evaluate(cfg, {delegation.manager: main.sample, delegation.worker: remote},
                                                delegation, side="main", step=step + 1))
                        store.put_many(remote.done_record())
                with phase("logging"):
                    append_jsonl(run_dir / METRICS, metrics)
                history.append(metrics)
                with phase("checkpoint"):  # the sub side has written its own of this step
                    _checkpoint(cfg, checkpoints, step + 1, [main])
    profile.finish()
    return history


def run_sub_side(cfg: MGRPOConfig, run_start: RunStart | None = None) -> None:
    """The sub side of :func:`run_two_process`: serves delegations, then learns from the
    outcomes the main side posts; posts its batch and update statistics. ``run_start``: the
    main side's (:func:`run_two_process`); without it (``--role sub``) this side derives the
    same step and namespace from the run dir and the run id (:func:`trainers.algorithms.mgrpo.run.open_run`)."""
    cfg.validate()
    delegation = env_delegation(cfg)
    if run_start is None:
        step = resume_step(cfg, "two_process")
        run_start = RunStart(step, f"{cfg.run_id}/from-{step}")
    _seed(cfg, "sub")
    checkpoints = side_checkpoints(cfg, "sub")
    checkpoint = checkpoints.at(run_start.step) if run_start.step else None
    sub = RolePolicy(cfg, [delegation.worker], "sub", cfg.sub_model or cfg.model, checkpoint=checkpoint)
    _restore(checkpoint, [sub])
    with open_store(cfg.store_url(), namespace=run_start.namespace) as store:
        for step in range(run_start.step, cfg.steps):
            prefix = str(step)
            completions = serve_ticks(store, prefix, delegation.worker, sub.sample, cfg.timeout_s)
            outcomes = {(q, r): Outcome.from_json(store.get(f"{prefix}/outcome/{q}/{r}", timeout=cfg.timeout_s,
                                                            waiting_for="main"))
                        for q in _questions(cfg, step) for r in range(cfg.rollouts)}
            batch, stats = sub_batch(completions, outcomes, cfg.d_max, trim=cfg.trim, seed=_alignment_seed(cfg, step),
                                     normalize=cfg.normalize, eps=cfg.adv_eps)
            update_start = time.perf_counter()
            update = None if cfg.mode == "frozen_sub" else sub.update(batch)
            _checkpoint(cfg, checkpoints, step + 1, [sub])  # before the main side, which writes its own on reading
            store.put_many({f"{prefix}/sub_stats": {
                "batch": dataclasses.asdict(stats),
                "update": dataclasses.asdict(update) if update is not None else None,
                "tokens": _tokens([a for actions in completions.values() for a in actions]),
                "seconds_update": time.perf_counter() - update_start}})
            if evaluation_is_due(cfg, step + 1):
                with evaluation_stream(cfg, "sub", step + 1):
                    serve_ticks(store, eval_prefix(step + 1), delegation.worker, sub.sample, cfg.timeout_s)
            store.heartbeat("sub")


def _sub_entry(config: dict[str, Any], step: int, namespace: str) -> None:
    cfg = MGRPOConfig(**config)
    torch.set_num_threads(cfg.threads)  # a process of its own: its thread count is ours to set
    run_sub_side(cfg, RunStart(step, namespace))


def run_two_process(cfg: MGRPOConfig) -> list[dict[str, float]]:
    """M-GRPO with the sub side in a spawned process and the main side in this one; they
    meet only in the store. Raises when either side fails (the other then times out or is
    stopped)."""
    if cfg.mode == "single":
        raise ValueError("mode 'single' has one policy: use run_local")
    cfg.validate()
    env_delegation(cfg)  # before a process is spawned
    run_start = open_run(cfg, "two_process", namespace=fresh_namespace(cfg))
    commit_start(cfg, run_start)  # before the sub side starts writing into the run dir
    child = multiprocessing.get_context("spawn").Process(
        target=_sub_entry, args=(dataclasses.asdict(cfg), run_start.step, run_start.namespace), name="mgrpo-sub")
    child.start()
    try:
        history = run_main_side(cfg, run_start)
        child.join(cfg.timeout_s)
    finally:
        if child.is_alive():
            child.terminate()
            child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"the sub-agent process exited with code {child.exitcode}")
    return history


ROLES_OF_A_RUN = ("both", "main", "sub", "local")
DESCRIPTION = __doc__.split("\n")[0] + " (docs/design.md §6)"


def build_parser(prog: str = "pettingllm train-mgrpo") -> argparse.ArgumentParser:
    """``--role``, ``--config FILE.yaml`` and one ``--field-name VALUE`` option per
    :class:`MGRPOConfig` field, ``--resume`` and ``--overwrite`` among them
    (:func:`trainers.algorithms.atgrpo.options.build_parser`: the same checks and errors as ``pettingllm train``)."""
    parser = config_parser(prog, DESCRIPTION, cls=MGRPOConfig)
    parser.add_argument("--role", choices=ROLES_OF_A_RUN, default="both",
                        help="both: the two sides as two processes here; main / sub: one side (start each with "
                             "the same --run-id and --store, e.g. on two machines sharing Redis); local: one "
                             "process, any --mode")
    parser.set_defaults(overwrite=False)  # the start flags read like --role: always present, off by default
    return parser


def _interrupted(cfg: MGRPOConfig, role: str) -> str:
    """:func:`trainers.harness.run_dir.interruption_note` for an M-GRPO run (the main or local side's
    checkpoint: the step a resume continues from at most)."""
    metrics = Path(cfg.run_dir) / METRICS
    logged = len(metrics.read_text().splitlines()) if metrics.exists() else 0
    checkpoint = side_checkpoints(cfg, "local" if role == "local" else "main").latest()
    note = interruption_note(checkpoint, step=logged, steps=cfg.steps, run_dir=Path(cfg.run_dir),
                             command="train-mgrpo")
    return note + ("" if role == "both" else f" --role {role}")


def main(argv: Sequence[str] | None = None) -> int:
    """``pettingllm train-mgrpo --model DIR [--role both|main|sub|local] [--store URL] [--resume] ...``."""
    parser = build_parser()
    args = vars(parser.parse_args(list(argv) if argv is not None else None))
    role = args.pop("role")
    cfg = run_config_from_args(args, prog=parser.prog, cls=MGRPOConfig)
    check_env_config(cfg.env, cfg.env_kwargs)
    try:
        env_delegation(cfg)
    except MissingCapability as error:
        raise UsageError(str(error)) from error
    check_model(cfg.model)
    if cfg.sub_model:
        check_model(cfg.sub_model, option="--sub-model")
    if role in ("main", "sub") and not cfg.run_id:
        raise UsageError("--role main/sub needs the same --run-id on both sides")
    if role == "both" and cfg.mode == "single":
        raise UsageError("--mode single has one policy, so no second process: use --role local")
    if role == "sub":
        run_sub_side(cfg)
        return 0
    runner = {"both": run_two_process, "main": run_main_side, "local": run_local}[role]
    try:
        history = runner(cfg)
    except KeyboardInterrupt:
        print(f"[train-mgrpo] {_interrupted(cfg, role)}", file=sys.stderr)
        raise  # the command line reports it and exits with status 130
    if history:
        print(json.dumps(history[-1]), file=sys.stderr)
    return 0


__all__ = ["MODES", "MGRPOConfig", "RolePolicy", "env_delegation", "main", "run_local", "run_main_side",
           "run_sub_side", "run_two_process", "step_metrics"]

