"""``python -m benchmarks.learning.sft``: a supervised warm start on the scripted oracle's demonstrations.

RL sharpens what a policy can already sometimes do: from a random model every group is
degenerate (docs/design.md §4). This command trains a policy (one shared, or one per role)
on :mod:`benchmarks.learning.demonstrations` (the oracle's actions on the train split, the
envs' :class:`~pettingllm_envs.capabilities.Demonstrations`, with mistakes injected at
``mistake_rate`` so the warm policy is imperfect) and writes a policy directory that
``pettingllm train`` starts from:

* ``regime: shared``: ``OUT`` is one model + tokenizer directory: ``--model OUT``.
* ``regime: per_role``: ``OUT/<role>/`` per role (and ``OUT/solo/`` with ``single_agent``),
  each a model directory, the layout of a checkpoint's ``policies/``: ``--model OUT/<role>``
  starts every policy of a run from one role's weights; starting each role from its own
  needs ``Trainer.make_policies(init_dir=OUT)`` (a subclass; ``pettingllm train`` has no
  option for it yet).

**Why not TRL's SFTTrainer.** The warm policy must be trained on exactly the token layout
the RL trainer samples from and scores: the prompt rendered and cut by
:meth:`trainers.models.prompts.PromptEncoder.encode_prompt` (chat template with the generation prompt;
an over-long prompt keeps the system message and the latest turn and loses the middle),
then the action's tokens and the model's stop id. ``SFTTrainer`` tokenizes on its own: with
the project's byte-level tokenizer it appends ``</s>`` after the prompt as well, and it
truncates from one end, so prompts longer than the budget would be cut differently than in
RL. So the loop here is a short plain one that scores with the RL trainer's own
:meth:`~trainers.models.policy_set.PolicySet.token_logprobs` (the loss is the negative mean
log-likelihood of the action tokens plus the stop token; the prompt carries no loss), with
AdamW, a linear warmup and a cosine decay to ``min_lr``.

``model`` may be empty: then a byte-level Llama-style model is built from scratch
(:func:`trainers.models.tiny_model.write_tiny_model` with ``scratch_*``), nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import sys
import time
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks.learning.demonstrations import Demonstration, multi_agent_demonstrations, single_agent_demonstrations
from benchmarks.learning.warm_cache import content_key, lookup, restore, store
from trainers.algorithms.atgrpo.config import Regime, TrainConfig


class SFTConfigError(ValueError):
    """A bad ``sft`` option or config value (one line, exit status 2 on the command line)."""


@dataclass
class SFTConfig:
    """Everything the warm start needs (``python -m benchmarks.learning.sft --help`` lists the fields)."""

    env: str = "plan_path_v0"
    """Env whose scripted oracle is imitated (``plan_path_v0`` or ``sudoku_v0``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed to ``pettingllm_envs.make`` (e.g. ``{rows: 4, cols: 4, max_turns: 2}``); use the
    same ones for the RL run, or the warm policy is trained on other prompts."""
    train_problems: int = 1000
    """Train-split problems whose oracle episodes are demonstrated (ids 0 .. K-1)."""
    mistake_rate: float = 0.3
    """Probability that a demonstrated answer is replaced by a well-formed wrong one
    (:mod:`benchmarks.learning.demonstrations`): the warm policy then fails some problems, which is
    what RL needs (every group degenerate otherwise)."""
    single_agent: bool = True
    """Also demonstrate the single-agent view (one ``### <role>`` section per role,
    :mod:`pettingllm_envs.evaluation.single_agent_env`), so the single-agent baseline starts
    from the same warm start as the multi-agent conditions."""
    brief_instructions: bool = True
    """Replace the envs' long system messages by one-line role tags
    (:class:`benchmarks.learning.demonstrations.BriefInstructions`): 3-4x shorter prompts for a model
    trained from scratch, which cannot read the English anyway. An RL run from this warm
    start must use the same prompts (:mod:`benchmarks.learning.experiment` does)."""
    scripted_roles: list[str] = field(default_factory=list)
    """Roles played by the oracle without mistakes during the demonstrations (and in the RL runs
    that start from this warm start): only the other roles are demonstrated, and they see the
    scripted roles' correct output."""
    regime: Regime = "shared"
    """``shared``: one model learns every role (and the single-agent view); ``per_role``: one
    model per role, each on its own role's demonstrations."""
    model: str = ""
    """Model directory to fine-tune; empty: a byte-level model built from scratch (``scratch_*``)."""
    scratch_hidden_size: int = 192
    """Hidden size of the from-scratch model (192 with 4 layers: 1.4M parameters)."""
    scratch_layers: int = 4
    """Decoder layers of the from-scratch model."""
    scratch_heads: int = 4
    """Attention heads of the from-scratch model (half as many key/value heads)."""
    steps: int = 300
    """Optimiser steps."""
    batch_size: int = 16
    """Demonstrations per step (drawn without replacement, reshuffled each pass)."""
    lr: float = 1e-3
    """Peak AdamW learning rate (a from-scratch model of this size; fine-tuning a pretrained one wants ~1e-5)."""
    min_lr: float = 1e-4
    """Learning rate at the end of the cosine decay."""
    warmup_steps: int = 10
    """Linear warmup from 0 to ``lr``."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    max_prompt_tokens: int = 512
    """Prompt budget, cut as the RL trainer cuts (:meth:`trainers.models.prompts.PromptEncoder.encode_prompt`);
    give the RL run the same value so the warm policy sees the prompts it was trained on."""
    device: str = "auto"
    """``auto``, ``cpu`` or ``cuda[:i]``."""
    seed: int = 0
    """Seeds the model init, the demonstrations' mistakes and the batch order."""
    out_dir: str = "runs/sft"
    """Where the policy directory is written (see the module docstring)."""
    overwrite: bool = False
    """Replace an existing ``out_dir``; without it one that holds files is refused."""
    cache_dir: str = ""
    """Keep finished warm starts here by content (:mod:`benchmarks.learning.warm_cache`) and reuse one
    trained before on the same settings, demonstrations, initial weights, loop and torch: a rerun
    copies it instead of training for minutes. Empty: always train."""

    def validate(self) -> None:
        problems = []
        if self.env not in ("plan_path_v0", "sudoku_v0"):
            problems.append(f"env: demonstrations exist for plan_path_v0 and sudoku_v0, got {self.env!r}")
        if not 0.0 <= self.mistake_rate <= 1.0:
            problems.append(f"mistake_rate: must be in [0, 1], got {self.mistake_rate}")
        for name in ("train_problems", "steps", "batch_size", "max_prompt_tokens", "scratch_hidden_size",
                     "scratch_layers", "scratch_heads"):
            if getattr(self, name) < 1:
                problems.append(f"{name}: must be >= 1, got {getattr(self, name)}")
        if not 0 < self.min_lr <= self.lr <= 1:
            problems.append(f"lr, min_lr: need 0 < min_lr <= lr <= 1, got lr={self.lr} min_lr={self.min_lr}")
        if self.warmup_steps < 0 or self.max_grad_norm <= 0:
            problems.append("warmup_steps must be >= 0 and max_grad_norm > 0")
        if self.regime not in typing.get_args(Regime):
            problems.append(f"regime: one of {', '.join(typing.get_args(Regime))}, got {self.regime!r}")
        if problems:
            raise SFTConfigError("; ".join(problems))


#: Where and whether a warm start is written changes nothing in its weights.
NOT_IN_CACHE_KEY = frozenset({"out_dir", "overwrite", "cache_dir"})


def learning_rate(step: int, cfg: SFTConfig) -> float:
    """Linear warmup to ``lr``, then a cosine decay to ``min_lr`` at the last step (pure)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    span = max(1, cfg.steps - cfg.warmup_steps - 1)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * progress))


def collect_demonstrations(cfg: SFTConfig) -> list[Demonstration]:
    problems = range(cfg.train_problems)
    brief = cfg.brief_instructions
    demos = multi_agent_demonstrations(cfg.env, cfg.env_kwargs, problems, cfg.mistake_rate, cfg.seed, brief=brief,
                                       scripted=tuple(cfg.scripted_roles))
    if cfg.single_agent:
        demos += single_agent_demonstrations(cfg.env, cfg.env_kwargs, problems, cfg.mistake_rate, cfg.seed + 1,
                                             brief=brief)
    return demos


def _base_model(cfg: SFTConfig, scratch_dir: Path) -> str:
    if cfg.model:
        return cfg.model
    from trainers.models.tiny_model import write_tiny_model

    write_tiny_model(scratch_dir, hidden_size=cfg.scratch_hidden_size, num_layers=cfg.scratch_layers,
                     num_heads=cfg.scratch_heads, seed=cfg.seed)
    return str(scratch_dir)


def train_sft(cfg: SFTConfig, *, log: Any = sys.stderr) -> dict[str, Any]:
    """Collect the demonstrations, train, write ``out_dir``; returns a summary (also in ``out_dir/sft.json``)."""
    from trainers.models.policy_set import PolicySet

    cfg.validate()
    out = Path(cfg.out_dir)
    if out.exists() and any(out.iterdir()) and not cfg.overwrite:
        raise SFTConfigError(f"out_dir {str(out)!r} already holds files: pass --overwrite or choose another")
    start = time.perf_counter()
    torch.manual_seed(cfg.seed)
    demos = collect_demonstrations(cfg)
    seconds_collect = time.perf_counter() - start
    roles = sorted({d.policy_role for d in demos})
    out.mkdir(parents=True, exist_ok=True)
    base = _base_model(cfg, out / "_scratch")
    train_config = TrainConfig.from_flat(model=base, regime=cfg.regime, max_prompt_tokens=cfg.max_prompt_tokens,
                                         device=cfg.device, lr=cfg.lr, weight_decay=cfg.weight_decay, temperature=1.0,
                                         max_grad_norm=cfg.max_grad_norm)
    policies = PolicySet(train_config.model, train_config.policy_for_roles(roles))
    examples = []
    for demo in demos:
        encoding = policies.encode_prompt(demo.messages)
        action_ids = policies.tokenizer(demo.action, add_special_tokens=False)["input_ids"]
        examples.append((policies.role_to_policy[demo.policy_role], encoding.ids,
                         [*action_ids, policies.eos_ids[0]]))
    key = None
    if cfg.cache_dir:
        key = content_key({k: v for k, v in dataclasses.asdict(cfg).items() if k not in NOT_IN_CACHE_KEY},
                          examples, Path(base), Path(__file__))
        entry = lookup(Path(cfg.cache_dir), key)
        if entry is not None:
            return _reuse(entry, cfg, out, key, log)
    rng = random.Random(cfg.seed)
    queues: dict[str, list[int]] = {}
    losses: list[float] = []
    for step in range(cfg.steps):
        for group in policies.optimizers.values():
            for param_group in group.param_groups:
                param_group["lr"] = learning_rate(step, cfg)
        step_loss = 0.0
        for name in policies.names:
            indices = [i for i, e in enumerate(examples) if e[0] == name]
            batch = _next_batch(queues, name, indices, cfg.batch_size, rng)
            step_loss += _sft_step(policies, name, [examples[i] for i in batch], cfg.max_grad_norm)
        losses.append(step_loss / len(policies.names))
        if (step + 1) % 25 == 0 or step + 1 == cfg.steps:
            print(f"[sft] step {step + 1}/{cfg.steps} loss {statistics_mean(losses[-25:]):.4f} "
                  f"{time.perf_counter() - start:.0f}s", file=log, flush=True)
    _save(policies, cfg, out)
    summary = {"config": dataclasses.asdict(cfg), "demonstrations": len(demos),
               "corrupted_share": sum(d.corrupted for d in demos) / len(demos),
               "demonstrations_per_policy": {n: sum(e[0] == n for e in examples) for n in policies.names},
               "parameters": sum(p.numel() for p in policies.parameters(policies.names[0])),
               "seconds_collect": seconds_collect, "seconds_total": time.perf_counter() - start,
               "final_loss": statistics_mean(losses[-25:]), "loss_curve": losses[::max(1, len(losses) // 50)],
               "cache_key": key}
    (out / "sft.json").write_text(json.dumps(summary, indent=2))
    if key is not None:
        store(Path(cfg.cache_dir), key, out)
    return summary


def _reuse(entry: Path, cfg: SFTConfig, out: Path, key: str, log: Any) -> dict[str, Any]:
    """The cached warm start ``entry`` copied into ``out``, its summary saying so (the stored
    training figures are the run that trained it)."""
    import shutil

    shutil.rmtree(out / "_scratch", ignore_errors=True)
    summary = restore(entry, out) | {"config": dataclasses.asdict(cfg), "reused_from_cache": str(entry)}
    (out / "sft.json").write_text(json.dumps(summary, indent=2))
    print(f"[sft] reused the warm start with the same content from {entry}", file=log, flush=True)
    return summary


def statistics_mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _next_batch(queues: dict[str, list[int]], name: str, indices: list[int], size: int,
                rng: random.Random) -> list[int]:
    batch: list[int] = []
    while len(batch) < size:
        if not queues.get(name):
            queues[name] = rng.sample(indices, len(indices))
        batch.append(queues[name].pop())
    return batch


def _sft_step(policies: Any, name: str, batch: Sequence[tuple[str, list[int], list[int]]],
              max_grad_norm: float) -> float:
    """One step: mean negative log-likelihood of the completion tokens (action + stop id)."""
    optimizer = policies.optimizers[name]
    optimizer.zero_grad(set_to_none=True)
    with policies.active(name) as model:
        logp, mask = policies.token_logprobs(model, [b[1] for b in batch], [b[2] for b in batch])
    loss = -(logp * mask).sum() / mask.sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policies.parameters(name), max_grad_norm)
    optimizer.step()
    return float(loss.detach())


def _save(policies: Any, cfg: SFTConfig, out: Path) -> None:
    import shutil

    if cfg.regime == "shared":
        policies.models["shared"].save_pretrained(out)
        policies.tokenizer.save_pretrained(out)
    else:
        policies.save(out)
    shutil.rmtree(out / "_scratch", ignore_errors=True)


def build_parser(prog: str = "python -m benchmarks.learning.sft") -> Any:
    """``--config FILE.yaml`` plus ``--field value`` per :class:`SFTConfig` field (values parsed as YAML)."""
    import argparse

    from pettingllm_envs.commandline.errors import ArgumentParser
    from pettingllm_envs.commandline.options import add_field_options

    parser = ArgumentParser(prog=prog, description="Warm-start a policy on the scripted oracle's demonstrations "
                            "(with injected mistakes) for AT-GRPO.", argument_default=argparse.SUPPRESS)
    parser.add_argument("--config", help="YAML file with SFTConfig fields (default: none)")
    add_field_options(parser, SFTConfig)
    return parser


def load_sft_config(argv: Sequence[str] | None = None) -> SFTConfig:
    """Defaults < ``--config`` YAML < command-line options; validated."""
    import yaml

    args = vars(build_parser().parse_args(list(argv or [])))
    values: dict[str, Any] = {}
    if "config" in args:
        config_file = Path(args.pop("config"))
        if not config_file.is_file():
            raise SFTConfigError(f"--config {config_file}: no such file")
        values.update(yaml.safe_load(config_file.read_text()) or {})
    types = {f.name: f.type for f in dataclasses.fields(SFTConfig)}
    for name, value in args.items():
        # numbers, booleans and mappings arrive as text; strings stay strings
        values[name] = value if types[name] == "str" else yaml.safe_load(value)
    unknown = sorted(set(values) - set(types))
    if unknown:
        raise SFTConfigError(f"unknown SFTConfig fields {unknown} (--help lists them)")
    config = SFTConfig(**values)
    config.validate()
    return config


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.learning.sft [--config FILE.yaml] [--field VALUE ...]``; a bad
    option or value is one line on stderr and exit status 2."""
    from pettingllm_envs.commandline.errors import UsageError

    try:
        cfg = load_sft_config(sys.argv[1:] if argv is None else argv)
    except (SFTConfigError, UsageError) as error:
        print(f"{build_parser().prog}: error: {error}", file=sys.stderr)
        return 2
    summary = train_sft(cfg)
    print(f"[sft] {summary['demonstrations']} demonstrations ({summary['corrupted_share']:.0%} corrupted), "
          f"final loss {summary['final_loss']:.4f}, {summary['seconds_total']:.0f}s -> {cfg.out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
