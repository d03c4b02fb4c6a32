"""Small runs shared by test files in different folders: the toy AT-GRPO run with its 2-worker
distributed layout (tests/trainer/distributed) and the tiny M-GRPO run (tests/trainer/algorithms),
each as a config and, for M-GRPO, as ``pettingllm train-mgrpo`` options. Torch-free to import: the
configs are built on call."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

#: The research env of the tiny M-GRPO run: one delegation, two main-agent steps, no tools.
ENV = {"max_delegations": 1, "max_main_steps": 2, "max_tool_calls": 0}


def distributed_toy_config(model_dir, run_dir, **overrides) -> Any:
    """The toy env run that the distributed tests compare with the single-process trainer."""
    from trainers.algorithms.atgrpo.config import TrainConfig

    half = "".join(chr(c) for c in range(128))  # ~50 % chance per role: groups are rarely degenerate
    values = {
        "env": "toy_bytes_v0", "model": str(model_dir), "run_dir": str(run_dir), "max_new_tokens": 2,
        "problems_per_step": 4, "n_samples": 4, "micro_batch_size": 3, "lr": 5e-2, "progress": False,
        "checkpoint_every": 0, "tensorboard": False, "eval_every": 0, "device": "cpu",
        "dump_samples": str(run_dir / "samples.jsonl"),
        "env_kwargs": {"targets": {"first": half[:64] + string.digits, "second": half[64:]}, "max_turns": 2},
    }
    values.update(overrides)
    return TrainConfig.from_flat(**values)


def layout(**overrides) -> Any:
    """A distributed layout small enough for 2 cores: 2 rollout workers, 2 gloo train ranks per policy."""
    from trainers.distributed.config import DistributedConfig

    values = {"rollout_workers": 2, "rollout_worker_cpus": 0.5, "engines_per_policy": 1, "engine_cpus": 0.5,
              "train_workers_per_policy": 2, "train_worker_cpus": 0.5, "call_timeout_s": 120}
    values.update(overrides)
    return DistributedConfig(**values)


def small_config(model_dir, run_dir, **overrides) -> Any:
    """A one-step M-GRPO run on the research env that the tiny model finishes in seconds."""
    from trainers.algorithms.mgrpo.train import MGRPOConfig

    values = {"model": str(model_dir), "run_dir": str(run_dir), "env_kwargs": ENV, "prefill": {"main": "DELEGATE: "},
              "questions_per_step": 1, "rollouts": 3, "d_max": 2, "max_new_tokens": 4, "max_prompt_tokens": 256,
              "steps": 1, "lr": 1e-2, "timeout_s": 90}
    values.update(overrides)
    return MGRPOConfig.from_flat(**values)


def cli_args(model: Path, run: Path, role: str, steps: int) -> list[str]:
    """``train-mgrpo`` options of :func:`small_config`'s run."""
    return ["train-mgrpo", "--role", role, "--model", str(model), "--run-dir", str(run), "--steps", str(steps),
            "--env-kwargs", json.dumps(ENV), "--prefill", json.dumps({"main": "DELEGATE: "}),
            "--questions-per-step", "1", "--rollouts", "3", "--max-new-tokens", "4", "--max-prompt-tokens", "256",
            "--lr", "0.01", "--timeout-s", "90"]
