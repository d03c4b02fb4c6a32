"""The GPU recipes (recipes/*.yaml): valid TrainConfigs of the paper's setting, and a clear
failure on a machine without the GPU, vLLM or the weights (this one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPO

from trainers.algorithms.atgrpo.options import load_config

RECIPES = sorted((REPO / "recipes").glob("*.yaml"))


def test_there_are_recipes_for_both_regimes():
    assert len(RECIPES) >= 3
    regimes = {load_config(["--config", str(r)]).rollout.regime for r in RECIPES}
    assert regimes == {"shared", "per_role"}


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_recipe_is_a_valid_config_of_the_papers_setting(recipe):
    config = load_config(["--config", str(recipe)])
    assert config.model.model.startswith("Qwen/")
    assert config.rollout.rollout == "tree" and config.rollout.group_by == "problem_agent_turn"
    assert config.rollout.n_samples == 8 and config.rollout.problems_per_step == 32
    assert config.task.env_kwargs["max_turns"] == 5
    assert config.model.device == "cuda" and config.model.dtype == "bfloat16"
    assert "Expected cost per step" in recipe.read_text()


def _train(recipe: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", "pettingllm_envs", "train", "--config", str(recipe),
                           "--run-dir", str(tmp_path / "run"), *extra],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES[:1], ids=lambda p: p.stem)
def test_recipe_starts_and_fails_clearly_without_the_weights(recipe, tmp_path):
    result = _train(recipe, tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("pettingllm: error:") and "Qwen/Qwen3-1.7B" in lines[-1]
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_recipe_with_local_weights_fails_clearly_without_a_gpu(tiny_model_dir, tmp_path):
    """With weights present (the tiny model stands in) the next missing piece is named: the
    CUDA device (or vLLM), in one line, before any training starts."""
    shared = next(r for r in RECIPES if load_config(["--config", str(r)]).generation.generation_backend == "vllm")
    result = _train(shared, tmp_path, "--model", str(tiny_model_dir))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("pettingllm: error:")
    assert "cuda" in last.lower() or "gpu" in last.lower() or "vllm" in last.lower()
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
