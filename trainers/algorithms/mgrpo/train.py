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

:func:`~trainers.algorithms.mgrpo.sides.run_local` runs everything in this process.
:func:`run_two_process` is the decoupled pipeline: the *main side* (this process: the env, the main policy) and the *sub
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from pettingllm_envs.capabilities import MissingCapability
from pettingllm_envs.commandline.checks import check_env_config, check_model
from pettingllm_envs.commandline.errors import UsageError
from trainers.algorithms.atgrpo.options import build_parser as config_parser
from trainers.algorithms.atgrpo.options import run_config_from_args
from trainers.algorithms.mgrpo.config import MODES, MGRPOConfig
from trainers.algorithms.mgrpo.policy import env_delegation
from trainers.algorithms.mgrpo.run import RunStart, commit_start, fresh_namespace, open_run, side_checkpoints
from trainers.algorithms.mgrpo.sides import run_local, run_main_side, run_sub_side
from trainers.harness.run_dir import METRICS, interruption_note


def _sub_entry(config: dict[str, Any], step: int, namespace: str) -> None:
    cfg = MGRPOConfig.from_flat(**config)
    torch.set_num_threads(cfg.mgrpo.threads)  # a process of its own: its thread count is ours to set
    run_sub_side(cfg, RunStart(step, namespace))


def run_two_process(cfg: MGRPOConfig) -> list[dict[str, float]]:
    """M-GRPO with the sub side in a spawned process and the main side in this one; they
    meet only in the store. Raises when either side fails (the other then times out or is
    stopped)."""
    if cfg.mgrpo.mode == "single":
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
        child.join(cfg.mgrpo.timeout_s)
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
    metrics = Path(cfg.run.run_dir) / METRICS
    logged = len(metrics.read_text().splitlines()) if metrics.exists() else 0
    checkpoint = side_checkpoints(cfg, "local" if role == "local" else "main").latest()
    note = interruption_note(checkpoint, step=logged, steps=cfg.run.steps, run_dir=Path(cfg.run.run_dir),
                             command="train-mgrpo")
    return note + ("" if role == "both" else f" --role {role}")


def main(argv: Sequence[str] | None = None) -> int:
    """``pettingllm train-mgrpo --model DIR [--role both|main|sub|local] [--store URL] [--resume] ...``."""
    parser = build_parser()
    args = vars(parser.parse_args(list(argv) if argv is not None else None))
    role = args.pop("role")
    cfg = run_config_from_args(args, prog=parser.prog, cls=MGRPOConfig)
    check_env_config(cfg.task.env, cfg.task.env_kwargs)
    try:
        env_delegation(cfg)
    except MissingCapability as error:
        raise UsageError(str(error)) from error
    check_model(cfg.model.model)
    if cfg.mgrpo.sub_model:
        check_model(cfg.mgrpo.sub_model, option="--sub-model")
    if role in ("main", "sub") and not cfg.mgrpo.run_id:
        raise UsageError("--role main/sub needs the same --run-id on both sides")
    if role == "both" and cfg.mgrpo.mode == "single":
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


__all__ = ["MODES", "MGRPOConfig", "build_parser", "env_delegation", "main", "run_local", "run_main_side",
           "run_sub_side", "run_two_process"]

