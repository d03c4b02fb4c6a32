"""The GPU recipe (recipes/gpu/): its run and layout files are the ones the memory table
(benchmarks/gpu_memory.py, tested in tests/benchmark/test_gpu_memory.py) has rows for, the configs load,
and the GPU smoke script refuses a machine without CUDA with exit status 2 and one clear line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from repo_paths import REPO as ROOT

from benchmarks.gpu_memory import QWEN3_1_7B, QWEN25_1_5B, RECIPE_DIR, RECIPE_ROWS, SHAPES
from trainers.algorithms.atgrpo.options import load_config
from trainers.distributed.config import distributed_config


def test_recipe_files_exist_for_both_models_and_layouts():
    runs = sorted(RECIPE_DIR.glob("plan_path_*.yaml"))
    assert {p.name for p in runs} == {row.run for row in RECIPE_ROWS}
    for layout in ("layout_1node.yaml", "layout_2nodes.yaml"):
        config = distributed_config(file=str(RECIPE_DIR / layout))
        assert config.data_parallel == "fsdp" and config.engine_gpus == 1 and config.train_worker_gpus == 1
        assert 2 * (config.engines_per_policy + config.train_workers_per_policy) == (8 if "1node" in layout else 16)
    assert {row.run.split("_")[2] for row in RECIPE_ROWS} == {"qwen2.5", "qwen3"}
    assert set(SHAPES) == {QWEN25_1_5B.name, QWEN3_1_7B.name}


def as_options(overrides: tuple[tuple[str, object], ...]) -> list[str]:
    """The command-line options that set ``overrides`` (a true flag is the bare option, as the README writes it)."""
    options: list[str] = []
    for key, value in overrides:
        options += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return options


@pytest.mark.parametrize("run", sorted({row.run for row in RECIPE_ROWS}))
def test_recipe_run_configs_validate(run):
    """The run configs pass TrainConfig's checks, with each table row's overrides too."""
    config = load_config(["--config", str(RECIPE_DIR / run)])
    assert config.rollout.regime == "per_role" and config.generation.generation_backend == "vllm"
    assert config.model.model in SHAPES
    assert config.generation.vllm_max_model_len == config.model.max_prompt_tokens + config.model.max_new_tokens
    for row in (r for r in RECIPE_ROWS if r.run == run):
        overridden = load_config(["--config", str(RECIPE_DIR / run), *as_options(row.overrides)])
        assert all(overridden.flat()[key] == value for key, value in row.overrides)


def test_smoke_script_needs_cuda():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_smoke.py"), "--quick"], capture_output=True,
                            text=True, timeout=300, env=env, cwd=ROOT)
    assert result.returncode == 2
    assert "gpu_smoke: needs a CUDA GPU" in result.stderr and "Traceback" not in result.stderr
    assert not result.stdout
