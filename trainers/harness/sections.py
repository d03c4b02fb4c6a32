"""The config sections every trainer shares: :class:`TaskConfig`, :class:`EvaluationConfig`,
:class:`RunConfig`, and :data:`BOUNDS`, the ranges of the shared sections' numeric settings.

An algorithm's config (:class:`~trainers.harness.config_tree.ConfigTree`) takes these sections
with its own defaults (M-GRPO's task is ``research_v0``), beside the components' own sections
(``model``, ``generation``, ``update``) and its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from trainers.harness.fields import Bound
from trainers.harness.profile import ProfileMode


@dataclass(frozen=True)
class TaskConfig:
    """What is learned: the env and the split its problems come from."""

    env: str = "plan_path_v0"
    """Registered env id (``pettingllm list``). Any PettingZoo AEC env that deep-copies works."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed to ``pettingllm_envs.make(env, **env_kwargs)`` (e.g. ``{max_turns: 2, alpha: 0.5}``)."""
    split: str = "train"
    """Split the training problems come from; keep ``test`` for evaluation (docs/design.md trap 6)."""


@dataclass(frozen=True)
class EvaluationConfig:
    """How often and on what the current policy is measured, apart from training."""

    eval_every: int = 10
    """Evaluate the current policy every K steps and after the last step; 0: never. The rollout's
    own success figure cannot stand in for this: in tree mode it is the best-of-N search's
    (``tree/success_rate``), which on the same weights can be 100x the policy's."""
    eval_problems: int = 32
    """Problems of ``eval_split`` per evaluation: always ids 0 .. K-1, so successive evaluations
    are comparable. One independent episode each, sampled at ``temperature`` (the policy that is
    trained, not its greedy mode); ``eval/success_ci_low``/``_high`` give the 95 % Wilson interval."""
    eval_split: str = "test"
    """Split the evaluation problems come from: held out from ``split`` (docs/design.md trap 6)."""


@dataclass(frozen=True)
class RunConfig:
    """How long a run goes on, where it writes, and how it starts, stops and continues."""

    steps: int = 100
    """Training steps (one rollout + one update per step)."""
    seed: int = 0
    """Seeds python, numpy and torch (:func:`trainers.maths.seeding.seed_everything`): a run repeats
    exactly under the same seed and config; with ``resume`` the RNG states come from the checkpoint."""
    run_dir: str = "runs/at_grpo"
    """Where ``config.json``, ``history.jsonl``, ``metrics.jsonl``, checkpoints and plots go
    (:mod:`trainers.harness.run_dir`)."""
    checkpoint_every: int = 50
    """Write a checkpoint every K steps (and after the last step); 0: only after the last step."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk."""
    resume: bool = False
    """Continue from the latest checkpoint in ``run_dir`` exactly as if never stopped (the saved
    config is restored and checked: :mod:`trainers.harness.run_history`)."""
    overwrite: bool = False
    """Delete what an earlier run left in ``run_dir`` (and the ``dump_samples`` file) and start
    again. Without this or ``resume`` a run dir that holds files is refused, so that a second
    run never silently mixes with or destroys the first."""
    profile: ProfileMode = "off"
    """``on``: the seconds of every phase of every step, tokens per second and peak memory, to the run
    dir's ``profile.jsonl`` and ``profile_summary.json``, with a table at the end (docs/training.md
    "Step profile"); ``trace`` adds a torch profiler trace of the first steps. ``off`` costs nothing."""


_POSITIVE = Bound(0, low_open=True)
_NON_NEGATIVE = Bound(0)
_AT_LEAST_ONE = Bound(1)

#: The allowed range of every numeric setting of the shared sections (these three and the model,
#: generation and update sections), with the reason where it is not obvious.
#: ``tests/trainer/algorithms/test_trainer_config.py`` checks that every int and float setting is listed.
BOUNDS: dict[str, Bound] = {
    # model
    "temperature": _POSITIVE,  # the trainer needs sampling and log-probs at T, not argmax
    "max_new_tokens": _AT_LEAST_ONE,
    "max_prompt_tokens": _AT_LEAST_ONE,
    "lr": Bound(0, 1, low_open=False, high_open=False),  # 0: a control run, every part run, no weight moved
    "weight_decay": _NON_NEGATIVE,
    "lora_r": _AT_LEAST_ONE,
    "lora_alpha": _AT_LEAST_ONE,
    "logprob_chunk_size": _NON_NEGATIVE,  # 0: one chunk
    # generation
    "vllm_gpu_memory_utilization": Bound(0, 1, low_open=True, high_open=False),
    "vllm_max_model_len": _NON_NEGATIVE,  # 0: the model's own limit
    "vllm_kv_cache_gib": _NON_NEGATIVE,  # 0: vLLM's default
    "openai_concurrency": _AT_LEAST_ONE,
    # update
    "adv_eps": _NON_NEGATIVE,  # a negative eps can cancel the std and divide by ~0
    "eps_low": Bound(0, 1),  # the ratio's lower clip 1 - eps_low must stay > 0
    "eps_high": _NON_NEGATIVE,
    "kl_coef": _NON_NEGATIVE,  # a negative weight would reward moving away from the reference
    "ppo_epochs": _AT_LEAST_ONE,
    "micro_batch_size": _AT_LEAST_ONE,
    # clip_grad_norm_ scales by max_norm / norm: a negative value flips the update into ascent,
    # 0 zeroes it; infinity disables clipping.
    "max_grad_norm": Bound(0, math.inf, low_open=True, high_open=False),
    "tis_cap": Bound(1),  # a cap below 1 would down-weight every token, on-policy ones included
    # evaluation
    "eval_every": _NON_NEGATIVE,
    "eval_problems": _AT_LEAST_ONE,
    # run
    "steps": _NON_NEGATIVE,
    "seed": _NON_NEGATIVE,
    "checkpoint_every": _NON_NEGATIVE,
    "keep_checkpoints": _AT_LEAST_ONE,
}

__all__ = ["BOUNDS", "EvaluationConfig", "RunConfig", "TaskConfig"]
