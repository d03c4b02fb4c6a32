"""M-GRPO training: main and sub as separate policies, optionally in separate processes.

``mode`` selects what is trained (the comparison of ``benchmarks/mgrpo_comparison.py``):

* ``mgrpo``: main and sub are separate models; the main agent learns from its per-question
  group advantages, the sub-agent from its aligned per-question group advantages;
* ``frozen_sub``: the same, but the sub-agent is never updated;
* ``single``: one policy plays both roles, single-agent GRPO (every action gets its
  rollout's main advantage).

:func:`run_local` runs everything in this process. :func:`run_two_process` is the
decoupled pipeline: the *main side* (this process: the env, the main policy) and the *sub
side* (a spawned process: the sub policy) share no weights, tensors or samples. The sub
side serves the main side's delegations like a remote tool (prompts in, action texts out,
through the store: the inference channel), and for training the two exchange only scalar
records keyed by ``(step, question, rollout)``: each rollout's outcome (main reward,
correctness, per-delegation rewards, which delegation each sub action served) and each
side's group statistics. ``python -m trainers.mgrpo.train --role main|sub`` runs one side,
e.g. on two machines sharing a Redis store.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import random
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

import pettingllm_envs
from pettingllm_envs.cli.checks import check_env_config, check_model
from pettingllm_envs.cli.errors import ArgumentParser, UsageError
from trainers.config import Aggregation, Normalize, TrainConfig
from trainers.loss import ppo_clip_loss
from trainers.mgrpo.alignment import BatchStats, Trim, main_batch, single_agent_batch, sub_batch
from trainers.mgrpo.rollout import HierarchicalRollout, Key, Outcome, hierarchical_rollout
from trainers.mgrpo.store import Store, open_store
from trainers.policy import Generation, PolicySet
from trainers.rollout import Messages

Mode = Literal["mgrpo", "frozen_sub", "single"]
MODES = ("mgrpo", "frozen_sub", "single")
METRICS = "metrics.jsonl"


@dataclass
class MGRPOConfig:
    """An M-GRPO run. Defaults fit a CPU smoke run with the tiny model."""

    model: str = ""
    """Main agent's model (local path); also the sub's and the single policy's unless ``sub_model``."""
    sub_model: str = ""
    """Sub-agent's model; empty: ``model``."""
    mode: Mode = "mgrpo"
    """``mgrpo``, ``frozen_sub`` or ``single`` (module docstring)."""
    env: str = "research_v0"
    """Registered env id with a ``main`` and a ``sub`` role (``pettingllm list``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed to ``pettingllm_envs.make(env, **env_kwargs)``, e.g. ``{"hops": 2}``."""
    split: str = "train"
    """Split the training questions come from; keep ``test`` for evaluation."""
    questions_per_step: int = 2
    """Questions per step; question ids are ``step * questions_per_step + j``."""
    rollouts: int = 4
    """K: rollouts per question, the group size of both levels."""
    d_max: int = 2
    """Sub-trajectories per rollout after alignment."""
    trim: Trim = "random"
    """How surplus sub-trajectories are dropped: ``random`` (seeded) or ``last``."""
    normalize: Normalize = "mean_std"
    """Group advantages: ``mean_std`` (r - mean) / (std + eps) as GRPO, or ``mean`` (r - mean)."""
    adv_eps: float = 1e-6
    """Added to the group std so that near-degenerate groups do not blow up."""
    prefill: dict[str, str] = field(default_factory=dict)
    """Role -> text the assistant turn starts with (part of the prompt, so updates stay
    on-policy), e.g. ``{"sub": "LOOKUP: "}``; the action is prefill + completion."""
    steps: int = 2
    """Training steps (one rollout of every question + one update per policy)."""
    seed: int = 0
    """Seeds python, numpy and torch on each side (each side derives its own stream)."""
    lr: float = 1e-3
    """AdamW learning rate of every policy (high: sized for the tiny model)."""
    max_new_tokens: int = 16
    """Completion budget per action."""
    temperature: float = 1.0
    """Sampling temperature (also used when scoring, so old and new log-probs match)."""
    max_prompt_tokens: int = 4096
    """Prompts keep their last tokens beyond this (the tiny byte-level model pays per byte)."""
    micro_batch_size: int = 16
    """Sequences per forward/backward; gradients accumulate, so this bounds memory only."""
    eps_low: float = 0.2
    """Lower PPO clip range: the ratio may fall to 1 - eps_low."""
    eps_high: float = 0.28
    """Upper PPO clip range (DAPO clip-higher)."""
    aggregation: Aggregation = "token_mean"
    """How token losses become one number: ``token_mean``, ``sequence_mean`` or ``dr_grpo`` (as ``train``)."""
    lora: bool = False
    """Train LoRA adapters instead of full copies of the model."""
    store: str = ""
    """Store URL (``sqlite:///file.db``, ``redis://host:port/0``); empty: ``run_dir/store.db``."""
    run_id: str = ""
    """The store namespace of this run, so runs never read each other's records; both sides
    must use the same one (:func:`run_two_process` draws one when empty)."""
    timeout_s: float = 300.0
    """How long a side waits for the other before :class:`~trainers.mgrpo.store.StoreTimeout`."""
    run_dir: str = "runs/mgrpo"
    """Where ``metrics.jsonl`` and (by default) the SQLite store go."""
    threads: int = 1
    """torch threads of the sub side's process that :func:`run_two_process` spawns (two processes
    share the machine). Code running in the caller's process (``run_local``, the main side)
    leaves its thread count alone: it is process-wide state (``OMP_NUM_THREADS`` sets it)."""
    device: str = "cpu"
    """``cpu``, ``cuda[:i]`` or ``auto``."""

    def validate(self) -> None:
        if not self.model:
            raise ValueError("model is required (pettingllm tiny-model DIR writes one)")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        for name in ("questions_per_step", "rollouts", "d_max", "max_new_tokens", "micro_batch_size", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    def train_config(self, model: str, roles: Sequence[str], name: str) -> TrainConfig:
        """The :class:`TrainConfig` of one policy (``name``) playing ``roles``."""
        return TrainConfig(env=self.env, model=model, policy_map=dict.fromkeys(roles, name), lr=self.lr,
                           max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                           max_prompt_tokens=self.max_prompt_tokens,
                           micro_batch_size=self.micro_batch_size, eps_low=self.eps_low, eps_high=self.eps_high,
                           aggregation=self.aggregation, lora=self.lora, device=self.device,
                           seed=self.seed, run_dir=self.run_dir, progress=False, tensorboard=False)

    def store_url(self) -> str:
        return self.store or str(Path(self.run_dir) / "store.db")


@dataclass
class Action:
    """A sampled action: the text the env receives (prefill + completion) and the generation."""

    generation: Generation
    text: str


class RolePolicy:
    """One policy of this process: batched sampling (with the role's prefill) and PPO updates."""

    def __init__(self, cfg: MGRPOConfig, roles: Sequence[str], name: str, model: str) -> None:
        self.cfg, self.name = cfg, name
        self.policies = PolicySet(cfg.train_config(model, roles, name), list(roles))
        tokenizer = self.policies.tokenizer
        self.prefill_ids = {role: list(tokenizer(text, add_special_tokens=False)["input_ids"])
                            for role, text in cfg.prefill.items()}

    def sample(self, agent: str, prompts: Sequence[Messages], keys: Sequence[Key] = ()) -> list[Action]:
        """One action per prompt, one batched generation."""
        prefill = self.prefill_ids.get(agent, [])
        ids = [self.policies.encode_prompt(messages)[1] + prefill for messages in prompts]
        generations = self.policies.generate(self.name, ids, 1)
        return [Action(g, self.cfg.prefill.get(agent, "") + g.text) for g in generations]

    def update(self, batch: Sequence[tuple[Action, float]]) -> dict[str, float]:
        """One PPO-clip step on (action, advantage) pairs; zero-advantage pairs carry no
        gradient (there is no KL term) and are skipped."""
        cfg = self.cfg
        batch = [(a.generation, adv) for a, adv in batch if adv != 0.0]
        out = {"samples": float(len(batch)), "loss": 0.0, "grad_norm": 0.0}
        if not batch:
            return out
        total_tokens = float(sum(len(g.completion_ids) for g, _ in batch))
        optimizer = self.policies.optimizers[self.name]
        optimizer.zero_grad(set_to_none=True)
        for i in range(0, len(batch), cfg.micro_batch_size):
            micro = batch[i:i + cfg.micro_batch_size]
            with self.policies.active(self.name) as model:
                logp, mask = self.policies.token_logprobs(model, [g.prompt_ids for g, _ in micro],
                                                          [g.completion_ids for g, _ in micro])
            old = torch.zeros_like(logp)
            for row, (g, _) in enumerate(micro):
                old[row, :len(g.logprobs)] = torch.tensor(g.logprobs)
            advantages = torch.tensor([adv for _, adv in micro], device=logp.device)
            loss, _ = ppo_clip_loss(logp, old, advantages, mask, eps_low=cfg.eps_low, eps_high=cfg.eps_high,
                                    aggregation=cfg.aggregation, total_tokens=total_tokens,
                                    total_sequences=float(len(batch)), max_len=cfg.max_new_tokens)
            loss.backward()
            out["loss"] += float(loss.detach())
        out["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.policies.parameters(self.name), 1.0))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return out


# --------------------------------------------------------------------- helpers
def _seed(cfg: MGRPOConfig, side: str) -> None:
    seed = cfg.seed * 1_000_003 + {"main": 0, "sub": 1, "local": 2}[side]
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _questions(cfg: MGRPOConfig, step: int) -> list[int]:
    return [step * cfg.questions_per_step + j for j in range(cfg.questions_per_step)]


def _env_fn(cfg: MGRPOConfig) -> Any:
    return lambda: pettingllm_envs.make(cfg.env, **cfg.env_kwargs)


def _sub_completions(rollout: HierarchicalRollout) -> dict[Key, list[Action]]:
    out: dict[Key, list[Action]] = defaultdict(list)
    for t in rollout.turns:
        if t.agent == "sub":
            out[t.question, t.rollout].append(t.completion)
    return out


def outcome_metrics(outcomes: dict[Key, Outcome]) -> dict[str, float]:
    """Mean main reward, mean delegation (sub) reward, success rate and delegations per rollout (pure)."""
    values = list(outcomes.values())
    delegations = [r for o in values for r in o.delegation_rewards]
    return {
        "reward/main": float(np.mean([o.main_reward for o in values])) if values else 0.0,
        "reward/sub": float(np.mean(delegations)) if delegations else 0.0,
        "success_rate": float(np.mean([o.correct for o in values])) if values else 0.0,
        "delegations/mean": len(delegations) / len(values) if values else 0.0,
    }


def _stats_metrics(prefix: str, stats: BatchStats, update: dict[str, float]) -> dict[str, float]:
    out = {f"{prefix}/groups": stats.groups,
           f"{prefix}/degenerate_frac": stats.degenerate / stats.groups if stats.groups else 0.0,
           f"{prefix}/samples": stats.samples, f"{prefix}/samples_trained": update["samples"],
           f"{prefix}/loss": update["loss"], f"{prefix}/grad_norm": update["grad_norm"]}
    if stats.slots:
        out.update({f"{prefix}/slots": stats.slots, f"{prefix}/padded": stats.padded,
                    f"{prefix}/empty": stats.empty, f"{prefix}/dropped": stats.dropped})
    return out


def _log(run_dir: Path, name: str, metrics: dict[str, float]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / name, "a") as f:
        f.write(json.dumps(metrics) + "\n")


_NO_UPDATE = {"samples": 0.0, "loss": 0.0, "grad_norm": 0.0}


# ----------------------------------------------------------------- in-process
def run_local(cfg: MGRPOConfig) -> list[dict[str, float]]:
    """Train every policy of ``cfg.mode`` in this process; returns per-step metrics (also
    appended to ``run_dir/metrics.jsonl``)."""
    cfg.validate()
    _seed(cfg, "local")
    run_dir = Path(cfg.run_dir)
    (run_dir / METRICS).unlink(missing_ok=True)
    if cfg.mode == "single":
        shared = RolePolicy(cfg, ["main", "sub"], "shared", cfg.model)
        samplers = {"main": shared.sample, "sub": shared.sample}
    else:
        main = RolePolicy(cfg, ["main"], "main", cfg.model)
        sub = RolePolicy(cfg, ["sub"], "sub", cfg.sub_model or cfg.model)
        samplers = {"main": main.sample, "sub": sub.sample}
    history = []
    for step in range(cfg.steps):
        start = time.perf_counter()
        rollout = hierarchical_rollout(_env_fn(cfg), _questions(cfg, step), cfg.rollouts, samplers, split=cfg.split)
        metrics: dict[str, float] = {"step": step + 1, **outcome_metrics(rollout.outcomes)}
        if cfg.mode == "single":
            batch, stats = single_agent_batch(rollout.turns, rollout.outcomes, normalize=cfg.normalize,
                                              eps=cfg.adv_eps)
            metrics.update(_stats_metrics("shared", stats, shared.update(batch)))
        else:
            batch, stats = main_batch(rollout.turns, rollout.outcomes, normalize=cfg.normalize, eps=cfg.adv_eps)
            metrics.update(_stats_metrics("main", stats, main.update(batch)))
            sbatch, sstats = sub_batch(_sub_completions(rollout), rollout.outcomes, cfg.d_max, trim=cfg.trim,
                                       seed=cfg.seed * 1_000_003 + step, normalize=cfg.normalize, eps=cfg.adv_eps)
            update = _NO_UPDATE if cfg.mode == "frozen_sub" else sub.update(sbatch)
            metrics.update(_stats_metrics("sub", sstats, update))
        metrics.update({"time/generate": rollout.seconds_generate, "time/env": rollout.seconds_env,
                        "time/step": time.perf_counter() - start})
        _log(run_dir, METRICS, metrics)
        history.append(metrics)
    return history


# ------------------------------------------------------------------ two sides
class RemoteSubSampler:
    """The main side's sampler for ``sub``: posts the prompts as tick ``t`` of the step and
    waits for the sub side's action texts."""

    def __init__(self, store: Store, prefix: str, timeout: float) -> None:
        self.store, self.prefix, self.timeout = store, prefix, timeout
        self.ticks = 0

    def __call__(self, agent: str, prompts: Sequence[Messages], keys: Sequence[Key]) -> list[Action]:
        tick = self.ticks
        self.store.put(f"{self.prefix}/tick/{tick}", {"kind": "generate", "items": [
            {"question": q, "rollout": r, "messages": list(m)} for (q, r), m in zip(keys, prompts, strict=True)]})
        self.store.heartbeat("main")
        texts = self.store.get(f"{self.prefix}/act/{tick}", timeout=self.timeout, waiting_for="sub")
        self.ticks += 1
        return [_RemoteAction(text) for text in texts]


@dataclass
class _RemoteAction:
    """A sub action as the main side sees it: text only (the tokens stay on the sub side)."""

    text: str


def run_main_side(cfg: MGRPOConfig) -> list[dict[str, float]]:
    """The main side of :func:`run_two_process`: env, rollouts, main policy; logs
    ``run_dir/metrics.jsonl`` with both sides' statistics."""
    cfg.validate()
    _seed(cfg, "main")
    run_dir = Path(cfg.run_dir)
    (run_dir / METRICS).unlink(missing_ok=True)
    main = RolePolicy(cfg, ["main"], "main", cfg.model)
    history = []
    with open_store(cfg.store_url(), namespace=cfg.run_id) as store:
        for step in range(cfg.steps):
            start = time.perf_counter()
            prefix = str(step)
            store.heartbeat("main")
            remote = RemoteSubSampler(store, prefix, cfg.timeout_s)
            rollout = hierarchical_rollout(_env_fn(cfg), _questions(cfg, step), cfg.rollouts,
                                           {"main": main.sample, "sub": remote}, split=cfg.split)
            batch, stats = main_batch(rollout.turns, rollout.outcomes, normalize=cfg.normalize, eps=cfg.adv_eps)
            records: dict[str, Any] = {f"{prefix}/outcome/{q}/{r}": o.to_json()
                                       for (q, r), o in rollout.outcomes.items()}
            records[f"{prefix}/main_stats"] = dataclasses.asdict(stats)
            records[f"{prefix}/tick/{remote.ticks}"] = {"kind": "done"}
            store.put_many(records)  # outcomes, statistics and "done" appear together
            update = main.update(batch)
            store.heartbeat("main")
            sub_stats = store.get(f"{prefix}/sub_stats", timeout=cfg.timeout_s, waiting_for="sub")
            metrics: dict[str, float] = {"step": step + 1, **outcome_metrics(rollout.outcomes)}
            metrics.update(_stats_metrics("main", stats, update))
            metrics.update({f"sub/{k}": v for k, v in sub_stats.items()})
            metrics.update({"time/generate": rollout.seconds_generate, "time/env": rollout.seconds_env,
                            "time/step": time.perf_counter() - start})
            _log(run_dir, METRICS, metrics)
            history.append(metrics)
    return history


def run_sub_side(cfg: MGRPOConfig) -> None:
    """The sub side of :func:`run_two_process`: serves delegations, then learns from the
    outcomes the main side posts; posts its group statistics."""
    cfg.validate()
    _seed(cfg, "sub")
    sub = RolePolicy(cfg, ["sub"], "sub", cfg.sub_model or cfg.model)
    with open_store(cfg.store_url(), namespace=cfg.run_id) as store:
        for step in range(cfg.steps):
            prefix = str(step)
            completions: dict[Key, list[Action]] = defaultdict(list)
            tick = 0
            while True:
                store.heartbeat("sub")
                message = store.get(f"{prefix}/tick/{tick}", timeout=cfg.timeout_s, waiting_for="main")
                if message["kind"] == "done":
                    break
                items = message["items"]
                actions = sub.sample("sub", [item["messages"] for item in items])
                for item, action in zip(items, actions, strict=True):
                    completions[item["question"], item["rollout"]].append(action)
                store.put(f"{prefix}/act/{tick}", [a.text for a in actions])
                tick += 1
            outcomes = {(q, r): Outcome.from_json(store.get(f"{prefix}/outcome/{q}/{r}", timeout=cfg.timeout_s,
                                                            waiting_for="main"))
                        for q in _questions(cfg, step) for r in range(cfg.rollouts)}
            batch, stats = sub_batch(completions, outcomes, cfg.d_max, trim=cfg.trim,
                                     seed=cfg.seed * 1_000_003 + step, normalize=cfg.normalize, eps=cfg.adv_eps)
            update = _NO_UPDATE if cfg.mode == "frozen_sub" else sub.update(batch)
            sub_stats = {k.removeprefix("sub/"): v for k, v in _stats_metrics("sub", stats, update).items()}
            store.put_many({f"{prefix}/sub_stats": sub_stats})
            store.heartbeat("sub")


def _sub_entry(config: dict[str, Any]) -> None:
    cfg = MGRPOConfig(**config)
    torch.set_num_threads(cfg.threads)  # a process of its own: its thread count is ours to set
    run_sub_side(cfg)


def run_two_process(cfg: MGRPOConfig) -> list[dict[str, float]]:
    """M-GRPO with the sub side in a spawned process and the main side in this one; they
    meet only in the store. Raises when either side fails (the other then times out or is
    stopped)."""
    if cfg.mode == "single":
        raise ValueError("mode 'single' has one policy: use run_local")
    cfg.validate()
    cfg = dataclasses.replace(cfg, run_id=cfg.run_id or uuid.uuid4().hex[:12])
    child = multiprocessing.get_context("spawn").Process(target=_sub_entry, args=(dataclasses.asdict(cfg),),
                                                         name="mgrpo-sub")
    child.start()
    try:
        history = run_main_side(cfg)
        child.join(cfg.timeout_s)
    finally:
        if child.is_alive():
            child.terminate()
            child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"the sub-agent process exited with code {child.exitcode}")
    return history


ROLES_OF_A_RUN = ("both", "main", "sub", "local")


def build_parser(prog: str = "pettingllm train-mgrpo") -> argparse.ArgumentParser:
    """``--role`` plus one ``--field-name VALUE`` option per :class:`MGRPOConfig` field, each
    with the field's docstring and default as its help."""
    from pettingllm_envs.cli.options import add_dataclass_options

    parser = ArgumentParser(prog=prog, description=__doc__.split("\n")[0] + " (research_v0; docs/design.md §6)")
    parser.add_argument("--role", choices=ROLES_OF_A_RUN, default="both",
                        help="both: the two sides as two processes here; main / sub: one side (start each with "
                             "the same --run-id and --store, e.g. on two machines sharing Redis); local: one "
                             "process, any --mode")
    add_dataclass_options(parser, MGRPOConfig)
    parser.add_argument("--overwrite", action="store_true",
                        help="start again in a --run-dir whose metrics.jsonl holds an earlier run (deleted); "
                             "without it such a run dir is refused")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``pettingllm train-mgrpo --model DIR [--role both|main|sub|local] [--store URL] ...``."""
    parser = build_parser()
    args = vars(parser.parse_args(list(argv) if argv is not None else None))
    role = args.pop("role")
    overwrite = args.pop("overwrite")
    try:
        cfg = MGRPOConfig(**args)
        cfg.validate()
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from error
    check_env_config(cfg.env, cfg.env_kwargs)
    check_model(cfg.model)
    if cfg.sub_model:
        check_model(cfg.sub_model, option="--sub-model")
    if role in ("main", "sub") and not cfg.run_id:
        raise UsageError("--role main/sub needs the same --run-id on both sides")
    if role == "both" and cfg.mode == "single":
        raise UsageError("--mode single has one policy, so no second process: use --role local")
    metrics = Path(cfg.run_dir) / METRICS
    if role != "sub" and metrics.exists() and not overwrite:  # the runners start it afresh
        raise UsageError(f"--run-dir {cfg.run_dir} already holds a run ({metrics.name}): pass --overwrite to "
                         "start again, or choose another --run-dir")
    if role == "sub":
        run_sub_side(cfg)
        return 0
    runner = {"both": run_two_process, "main": run_main_side, "local": run_local}[role]
    history = runner(cfg)
    if history:
        print(json.dumps(history[-1]), file=sys.stderr)
    return 0


if __name__ == "__main__":  # ``python -m trainers.mgrpo.train`` is ``pettingllm train-mgrpo``
    from pettingllm_envs.cli import main as cli_main

    raise SystemExit(cli_main(["train-mgrpo", *sys.argv[1:]]))
