"""The trainer and ``pettingllm bench`` with a real pretrained instruct model (SmolLM2-135M-Instruct,
the ``smollm2_dir`` fixture of tests/conftest.py): one AT-GRPO step with full fine-tuning and one
with LoRA, checkpointed and resumed, and one bench episode with ``--policy hf:``.

The model is far too weak to play the envs, so these tests check the real-model code paths,
not learning: a BPE tokenizer and chat template in the prompts, completions that stop on the
model's end-of-turn ids, a finite loss, the right parameters updated, and checkpoints that
load back. The training env is tests/uneven_env.py (a plain PettingZoo env whose reward varies
with the text), so the GRPO groups carry a gradient whatever the model writes.
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from pettingllm_envs.registry import ENV_MODULES  # noqa: E402
from trainers.algorithms.atgrpo.config import TrainConfig  # noqa: E402
from trainers.algorithms.atgrpo.train import Trainer  # noqa: E402
from trainers.generation.vllm_backend import sampling_kwargs  # noqa: E402
from trainers.models.prompts import stop_token_ids  # noqa: E402

MAX_NEW_TOKENS = 32
pytestmark = pytest.mark.slow


@pytest.fixture
def uneven(monkeypatch):
    monkeypatch.setitem(ENV_MODULES, "uneven_v0", "uneven_env")


def real_config(model_dir, run_dir, **overrides) -> TrainConfig:
    values = {"env": "uneven_v0", "env_kwargs": {"laps": 1}, "model": str(model_dir), "run_dir": str(run_dir),
              "steps": 1, "problems_per_step": 1, "n_samples": 4, "max_new_tokens": MAX_NEW_TOKENS, "lr": 1e-5,
              "device": "cpu", "progress": False, "tensorboard": False, "checkpoint_every": 1, "keep_checkpoints": 1,
              "eval_every": 0, "eval_problems": 1, "micro_batch_size": 8}
    values.update(overrides)
    return TrainConfig.from_flat(**values)


def record_generations(trainer: Trainer) -> list:
    """Keep every completion the trainer's real sampler returns (the rollout calls ``trainer.sampler``)."""
    seen: list = []
    sample = trainer.sampler

    def recording(agent, prompts, n):
        out = sample(agent, prompts, n)
        seen.extend(g for row in out for g in row)
        return out

    trainer.sampler = recording
    return seen


def assert_stops_on_the_end_of_turn(generations, stops: set[int]) -> None:
    """A completion ends at its first stop id (which it keeps, so the model learns to stop) or
    at the token budget; no stop id ever appears inside one, and the text holds no special token."""
    assert generations
    for g in generations:
        ids = g.completion_ids
        assert 1 <= len(ids) <= MAX_NEW_TOKENS and len(g.logprobs) == len(ids)
        assert not stops & set(ids[:-1]), ids
        assert len(ids) == MAX_NEW_TOKENS or ids[-1] in stops, ids
        assert "<|im_end|>" not in g.text and "<|im_start|>" not in g.text


def test_smollm2_stops_on_the_union_of_its_eos_ids_in_both_backends(smollm2_dir):
    from transformers import AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    union = stop_token_ids(tokenizer, GenerationConfig.from_pretrained(smollm2_dir))
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in union
    # what the trainer hands the vLLM engine per request: the same ids as PolicySet stops on
    assert sampling_kwargs(temperature=1.0, max_new_tokens=8, stop_token_ids=union, seed=0)["stop_token_ids"] \
        == sorted(set(union))


def test_one_at_grpo_step_full_fine_tuning_then_resume(uneven, smollm2_dir, tmp_path):
    trainer = Trainer(real_config(smollm2_dir, tmp_path / "run"))
    generations = record_generations(trainer)
    before = trainer.policies.snapshot("shared")
    metrics = trainer.train_step()
    trainer.save_checkpoint()

    assert math.isfinite(metrics["loss"]) and metrics["samples/trained"] > 0
    assert math.isfinite(metrics["grad_norm/shared"]) and metrics["grad_norm/shared"] > 0
    assert_stops_on_the_end_of_turn(generations, set(trainer.policies.eos_ids))
    assert all("<|im_start|>assistant" in trainer.policies.tokenizer.decode(g.prompt_ids) for g in generations)
    after = trainer.policies.snapshot("shared")
    changed = sum(not torch.equal(before[k], after[k]) for k in before)
    assert changed == len(before), f"{changed} of {len(before)} parameter tensors changed"  # fp32: every one moves

    checkpoint = trainer.latest_checkpoint()
    assert (checkpoint / "policies" / "shared" / "model.safetensors").is_file()
    resumed = Trainer(real_config(smollm2_dir, tmp_path / "run", steps=2, resume=True))
    assert resumed.step == 1
    loaded = resumed.policies.snapshot("shared")
    assert all(torch.equal(after[k], loaded[k]) for k in after)
    second = resumed.train_step()
    assert second["step"] == 2 and math.isfinite(second["loss"])


def test_one_at_grpo_step_with_lora_updates_only_the_adapters(uneven, smollm2_dir, tmp_path):
    trainer = Trainer(real_config(smollm2_dir, tmp_path / "run", lora=True, lr=1e-3, eval_every=1))
    generations = record_generations(trainer)
    model = trainer.policies.peft_model
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    adapters_before = trainer.policies.snapshot("shared")
    metrics = trainer.train_step()
    trainer.save_checkpoint()

    assert math.isfinite(metrics["loss"]) and metrics["samples/trained"] > 0
    assert metrics["eval/n_problems"] == 1 and "eval/return/marathoner" in metrics  # the held-out episode ran
    assert_stops_on_the_end_of_turn(generations, set(trainer.policies.eos_ids))
    for name, p in model.named_parameters():
        if "lora_" not in name:
            assert torch.equal(p, base_before[name]), name
    adapters_after = trainer.policies.snapshot("shared")
    assert any(not torch.equal(adapters_before[k], adapters_after[k]) for k in adapters_before)

    shared = trainer.latest_checkpoint() / "policies" / "shared"
    assert (shared / "adapter_model.safetensors").is_file() and not (shared / "model.safetensors").exists()
    resumed = Trainer(real_config(smollm2_dir, tmp_path / "run", steps=2, resume=True, lora=True, lr=1e-3))
    assert resumed.step == 1
    loaded = resumed.policies.snapshot("shared")
    assert all(torch.equal(adapters_after[k], loaded[k]) for k in adapters_after)
    moments = resumed.policies.optimizer_state()["shared"]["state"]
    assert moments and all(v["step"] == 1 for v in moments.values())  # AdamW's state came back too


def test_one_bench_episode_with_the_real_model(smollm2_dir, tmp_path, capsys):
    from pettingllm_envs.cli import main

    out = tmp_path / "bench"
    code = main(["bench", "plan_path_v0", "--policy", f"hf:{smollm2_dir}", "--episodes", "1",
                 "--max-tokens", str(MAX_NEW_TOKENS), "--env-kwargs", "{max_turns: 1}", "--out", str(out)])
    assert code == 0
    (row,) = json.loads((out / "summary.json").read_text())
    assert (row["env"], row["policy"], row["episodes"]) == ("plan_path_v0", f"hf:{smollm2_dir}", 1)
    assert 0 < row["completion_tokens"] <= 2 * MAX_NEW_TOKENS  # two roles, one turn, at most the budget each
    assert set(row["return_per_role"]) == {"tool", "planner"}
    assert "| plan_path_v0 |" in capsys.readouterr().out
