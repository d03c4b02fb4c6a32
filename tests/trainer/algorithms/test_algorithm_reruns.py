"""Every algorithm keeps the run harness's promises, each checked here or named below.

* **A seeded rerun repeats itself byte for byte**: the same command, run twice, each time in
  a fresh process as a user reruns it, writes the same ``metrics.jsonl`` (timings aside), the
  same sample dumps and bit-identical weights (``torch.equal``): ``train``, ``train-variants``
  and ``self-consistency`` here, ``train-mgrpo`` in ``tests/trainer/algorithms/test_mgrpo_resume.py``. The runs
  update with real gradients (the KL term, weight decay) and score a prompt that several rows
  share, the path whose CPU backward once added in a varying order
  (:func:`test_scoring_a_shared_prompt_back_propagates_the_same_bits_every_time`).
* **Resume continues exactly** (``torch.equal`` weights, the same metrics and samples):
  ``train-variants`` here, AT-GRPO in ``tests/trainer/algorithms/test_trainer_training.py``, M-GRPO in
  ``tests/trainer/algorithms/test_mgrpo_resume.py``.
* **An earlier run is never overwritten by accident**: ``train-variants`` and the report of
  ``self-consistency`` here (``train`` in ``tests/envs/cli/test_cli.py``, ``train-mgrpo`` in
  ``tests/trainer/algorithms/test_mgrpo_resume.py``).
* **Held-out evaluation** that changes nothing else: M-GRPO here (in two processes in
  ``tests/trainer/algorithms/test_mgrpo_resume.py``), AT-GRPO in
  ``tests/trainer/algorithms/test_trainer_eval.py``; ``train-variants``
  evaluates as AT-GRPO does (its rerun test above logs it every step); self-consistency is an
  evaluation on the test split itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from run_configs import small_config
from safetensors.torch import load_file
from test_mgrpo_resume import (
    UPDATES_EVERY_STEP,
    assert_same_weights,
    command,
    final_weights,
    latest_weights,
    metric_lines,
    one_line_error,
)
from test_trainer_training import toy_config

from pettingllm_envs.cli import main
from trainers.algorithms.mgrpo.train import run_local
from trainers.algorithms.variants import PromptConditionedTrainer
from trainers.models.scoring import token_logprobs

#: A two-step run that updates with real gradients: degenerate groups are kept, so the KL term
#: pulls on every sample once weight decay has moved the policy off its reference (step 2), and
#: in ``train`` four rows share each ~740-token prompt (``train-variants`` conditions each row on
#: a variant of its own). Held-out evaluation after every step.
TRAIN_ARGS = ["--env", "plan_path_v0", "--env-kwargs", "{max_turns: 1}", "--steps", "2", "--max-new-tokens", "4",
              "--n-samples", "4", "--problems-per-step", "1", "--lr", "0.01", "--kl-coef", "0.05",
              "--weight-decay", "0.1", "--drop-degenerate", "false", "--eval-every", "1", "--eval-problems", "2",
              "--progress", "false", "--tensorboard", "false"]


def assert_moved(weights: dict[str, dict[str, torch.Tensor]], model: Path) -> None:
    """Some weight of every policy differs from the initial model's: the runs compared did update."""
    initial = load_file(str(model / "model.safetensors"))
    for name, tensors in weights.items():
        assert any(not torch.equal(t, initial[k]) for k, t in tensors.items() if k in initial), name


@pytest.mark.slow
@pytest.mark.parametrize("cmd", ["train", "train-variants"])
def test_a_seeded_rerun_repeats_metrics_samples_and_weights_bit_for_bit(tiny_model_dir, tmp_path, cmd):
    for run in ("a", "b"):
        command(cmd, "--model", str(tiny_model_dir), "--run-dir", str(tmp_path / run),
                "--dump-samples", str(tmp_path / run / "samples.jsonl"), *TRAIN_ARGS)
    a, b = tmp_path / "a", tmp_path / "b"
    assert metric_lines(a) == metric_lines(b)
    assert metric_lines(a)[-1]["kl"] > 0 and all("eval/success_rate" in m for m in metric_lines(a))
    assert (a / "samples.jsonl").read_bytes() == (b / "samples.jsonl").read_bytes()
    weights = latest_weights(a / "checkpoints")
    assert_same_weights(weights, latest_weights(b / "checkpoints"))
    assert_moved(weights, tiny_model_dir)


@pytest.mark.slow
def test_train_variants_resumes_exactly(toy, tiny_model_dir, tmp_path):
    """3 steps straight vs 2, then ``resume`` to 3: the same metrics lines, sample dumps and
    weights, bit for bit (the variant-conditioned sampler draws from the checkpointed RNG)."""
    half = "".join(chr(c) for c in range(128))  # ~50% success: some groups carry a gradient whatever the draws
    common = {"problems_per_step": 2, "n_samples": 4, "lr": 5e-2, "eval_every": 1, "eval_problems": 2,
              "kl_coef": 0.05, "weight_decay": 0.1, "env_kwargs": {"targets": {"first": half, "second": half}}}
    straight = PromptConditionedTrainer(toy_config(tiny_model_dir, tmp_path / "a", steps=3,
                                                   dump_samples=str(tmp_path / "a.jsonl"), **common))
    history = straight.train()
    PromptConditionedTrainer(toy_config(tiny_model_dir, tmp_path / "b", steps=2, checkpoint_every=2,
                                        dump_samples=str(tmp_path / "b.jsonl"), **common)).train()
    resumed = PromptConditionedTrainer(toy_config(tiny_model_dir, tmp_path / "b", steps=3, resume=True,
                                                  dump_samples=str(tmp_path / "b.jsonl"), **common))
    assert resumed.step == 2
    resumed.train()
    assert any(m["samples/trained"] > 0 for m in history) and any(k.startswith("reward/variant/") for k in history[0])
    assert metric_lines(tmp_path / "b") == metric_lines(tmp_path / "a")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert_same_weights({n: straight.policies.snapshot(n) for n in straight.policies.names},
                        {n: resumed.policies.snapshot(n) for n in resumed.policies.names})


def test_train_variants_refuses_to_start_over_an_earlier_run(capsys, tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    err = one_line_error(capsys, ["train-variants", "--model", str(tiny_model_dir), "--run-dir", str(run)])
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl"]
    assert (run / "metrics.jsonl").read_text() == '{"step": 1}\n'


@pytest.mark.slow
def test_mgrpo_evaluates_held_out_questions_and_trains_as_without(tiny_model_dir, tmp_path):
    plain = run_local(small_config(tiny_model_dir, tmp_path / "plain", steps=2, **UPDATES_EVERY_STEP))
    evaluated = run_local(small_config(tiny_model_dir, tmp_path / "eval", steps=2, eval_every=1, eval_problems=2,
                                       **UPDATES_EVERY_STEP))
    assert [m["eval/n_problems"] for m in evaluated] == [2, 2]
    assert {"eval/success_rate", "eval/success_ci_low", "eval/success_ci_high", "eval/return/main",
            "eval/return/sub", "time/eval"} <= set(evaluated[-1])
    assert not any(k.startswith("eval/") for m in plain for k in m)  # eval_every 0 (the default): never

    def training(metrics: dict) -> dict:
        return {k: v for k, v in metrics.items() if not k.startswith(("eval/", "time/"))}

    assert [training(m) for m in evaluated] == [training(m) for m in plain]
    assert_same_weights(final_weights(tmp_path / "eval", "local"), final_weights(tmp_path / "plain", "local"))


def self_consistency(model: Path, out: Path, *extra: str) -> list[str]:
    return ["self-consistency", "--model", str(model), "--env", "math_v0", "--g", "3", "--problems", "2",
            "--max-new-tokens", "4", "--out", str(out), *extra]


@pytest.mark.slow
def test_a_seeded_self_consistency_rerun_repeats_its_report_byte_for_byte(tiny_model_dir, tmp_path):
    """Self-consistency trains nothing: its promise is the same report from the same command."""
    printed = []
    for run in ("a", "b"):
        done = subprocess.run([sys.executable, "-m", "pettingllm_envs",
                               *self_consistency(tiny_model_dir, tmp_path / f"{run}.json")],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        printed.append(done.stdout)
    assert printed[0] == printed[1]
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["problems"] == 2 and report["ensemble"] is not None  # the ensemble decode ran too


def test_self_consistency_refuses_to_overwrite_a_report(capsys, tiny_model_dir, tmp_path):
    out = tmp_path / "report.json"
    out.write_text("an earlier report")
    err = one_line_error(capsys, self_consistency(tiny_model_dir, out, "--variants", "[]"))
    assert err == f"--out {str(out)!r} already exists: pass --overwrite to replace it or choose another file"
    assert out.read_text() == "an earlier report"
    assert main(self_consistency(tiny_model_dir, out, "--variants", "[]", "--g", "2", "--problems", "1",
                                 "--overwrite")) == 0
    assert json.loads(out.read_text())["problems"] == 1


def test_scoring_a_shared_prompt_back_propagates_the_same_bits_every_time(tiny_model_dir):
    """Rows that share a prompt share its KV cache (:func:`trainers.models.prompt_cache.encode_prompts`);
    the gradient that flows back into the shared rows must be summed in a fixed order. Expanded
    by advanced indexing, its backward (an accumulating ``index_put``) added with atomics on
    more than one CPU thread once the cache held 32768 floats or more, and about every other
    backward differed in the last bits: the cause of M-GRPO's reruns and resumes drifting."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    prompt = [3 + (i * 7) % 250 for i in range(300)]  # 4 rows x 2 kv heads x 300 x 16 > 32768 floats
    completions = [[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33], [40, 41, 42, 43]]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = []
        for _ in range(12):
            model.zero_grad(set_to_none=True)
            logp, mask = token_logprobs(model, [prompt] * 4, completions, pad_id=0, device=torch.device("cpu"),
                                        compute_dtype=torch.float32, temperature=1.0, chunk_size=0,
                                        checkpointed=False)
            (logp * mask * torch.tensor([[1.0], [-2.0], [3.0], [-4.0]])).sum().backward()
            grads.append([p.grad.clone() for p in model.parameters()])
    finally:
        torch.set_num_threads(threads)
    varied = sum(any(not torch.equal(g, h) for g, h in zip(run, grads[0], strict=True)) for run in grads[1:])
    assert varied == 0, f"{varied} of {len(grads) - 1} backwards differed from the first"
