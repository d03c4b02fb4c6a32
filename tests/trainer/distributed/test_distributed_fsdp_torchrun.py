"""``torchrun -m trainers.distributed.torchrun_train`` (trainers/distributed/torchrun_train.py): two AT-GRPO
steps on 2 gloo ranks (FSDP2, one policy per role) give the single-process run's samples and, within
float noise, its weights; the checkpoint is the single-process layout and resumes under ``pettingllm
train`` on one process."""

from __future__ import annotations

import json
import string
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from repo_paths import TESTS

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.train import Trainer
from trainers.models.policy_set import PolicySet

pytestmark = pytest.mark.slow

#: As test_distributed_training.py: Adam turns float-noise gradients into steps of up to lr (5e-2).
WEIGHT_ATOL = 1e-3

#: torchrun runs this file on every rank: the toy env registered, then the entry point.
LAUNCHER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from pettingllm_envs.registry import ENV_MODULES
ENV_MODULES["toy_bytes_v0"] = "toy_env"
from trainers.distributed.torchrun_train import main
raise SystemExit(main())
"""


def options(model_dir: Path, run_dir: Path, **overrides: object) -> dict[str, object]:
    half = "".join(chr(c) for c in range(128))  # ~50 % chance per role: groups are rarely degenerate
    values: dict[str, object] = {
        "env": "toy_bytes_v0", "model": str(model_dir), "run_dir": str(run_dir), "max_new_tokens": 2,
        "problems_per_step": 4, "n_samples": 4, "micro_batch_size": 3, "lr": 5e-2, "progress": False,
        "checkpoint_every": 1, "tensorboard": False, "eval_every": 0, "device": "cpu", "regime": "per_role",
        # the sharded ranks score through the model's own forward (the shared-prefix path takes no
        # DTensor), so the single-process run takes it too: the distribution is compared, not two
        # kernels' float summation orders, which Adam amplifies past WEIGHT_ATOL
        "shared_prefix": False,
        "steps": 2, "dump_samples": str(run_dir / "samples.jsonl"),
        "env_kwargs": {"targets": {"first": half[:64] + string.digits, "second": half[64:]}, "max_turns": 2}}
    values.update(overrides)
    return values


def command_line(values: dict[str, object]) -> list[str]:
    args = []
    for key, value in values.items():
        args += [f"--{key.replace('_', '-')}", json.dumps(value) if isinstance(value, dict) else str(value)]
    return args


def test_torchrun_two_ranks_equal_the_single_process_run_and_resume_on_one(
        tiny_model_dir, tmp_path, monkeypatch):
    from pettingllm_envs.registry import ENV_MODULES

    monkeypatch.setitem(ENV_MODULES, "toy_bytes_v0", "toy_env")
    monkeypatch.syspath_prepend(str(TESTS))
    local = Trainer(TrainConfig.from_flat(**options(tiny_model_dir, tmp_path / "local")))  # type: ignore[arg-type]
    local_history = local.train()
    assert any(m["samples/trained"] > 0 for m in local_history)

    run = tmp_path / "torchrun"
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", str(launcher), "--data-parallel", "fsdp",
                           *command_line(options(tiny_model_dir, run))],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "data_parallel=fsdpx2" in done.stderr
    assert (run / "samples.jsonl").read_text() == (tmp_path / "local" / "samples.jsonl").read_text()
    checkpoint = run / "checkpoints" / "step_000002"
    assert (run / "checkpoints" / "latest").read_text() == "step_000002"
    for name in local.policies.names:
        saved = PolicySet(local.config.model, {"x": name}, init_dir=checkpoint / "policies").snapshot(name)
        here = local.policies.snapshot(name)
        assert all(torch.allclose(here[k], saved[k], atol=WEIGHT_ATOL, rtol=0) for k in here), name

    resumed = Trainer(TrainConfig.from_flat(**options(tiny_model_dir, run, steps=3, resume=True)))  # type: ignore[arg-type]
    assert resumed.step == 2
    resumed.train()
    optimizer = torch.load(run / "checkpoints" / "step_000003" / "optimizer.pt", weights_only=False)
    assert sorted(optimizer) == ["first", "second"]
