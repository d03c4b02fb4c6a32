"""Held-out evaluation during training: the maths by hand, and the trainer's schedule, isolation
and honesty (the tree's best-of-N rate is not the policy's) with the tiny model."""

from __future__ import annotations

import json
import math

import pytest
import torch

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.train import Trainer
from trainers.maths.evaluation import Z95, evaluation_metrics, mean_half_width, wilson_interval

TOY = "toy_bytes_v0"
#: Half of the tiny model's byte tokens are right for either role: a policy near chance
#: succeeds (both roles right) about a quarter of the time.
HALF = "".join(chr(c) for c in range(128))


def config(model_dir, run_dir, **overrides) -> TrainConfig:
    values = {"env": TOY, "model": str(model_dir), "run_dir": str(run_dir), "max_new_tokens": 1,
              "problems_per_step": 2, "n_samples": 4, "lr": 5e-2, "progress": False, "checkpoint_every": 0,
              "tensorboard": False, "eval_problems": 8,
              "env_kwargs": {"targets": {"first": HALF, "second": HALF}}}
    values.update(overrides)
    return TrainConfig.from_flat(**values)


def test_wilson_interval_by_hand():
    z2 = Z95 ** 2
    assert wilson_interval(0, 10) == pytest.approx((0.0, z2 / (10 + z2)))  # upper: z^2 / (n + z^2)
    half = Z95 * math.sqrt(0.25 / 10 + z2 / 400) / (1 + z2 / 10)
    assert wilson_interval(5, 10) == pytest.approx((0.5 - half, 0.5 + half))
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((10 / (10 + z2), 1.0))
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(0, 0)


def test_evaluation_metrics_by_hand():
    returns = [{"a": 1.0, "b": 0.5}, {"a": 0.0}, {"a": 2.0, "b": 1.5}]
    metrics = evaluation_metrics([True, False, True], returns, ["a", "b"])
    assert metrics["eval/n_problems"] == 3 and metrics["eval/success_rate"] == pytest.approx(2 / 3)
    assert (metrics["eval/success_ci_low"], metrics["eval/success_ci_high"]) == pytest.approx(wilson_interval(2, 3))
    assert metrics["eval/return/a"] == pytest.approx(1.0) and metrics["eval/return/b"] == pytest.approx(2 / 3)
    assert metrics["eval/return_ci95/a"] == pytest.approx(Z95 * 1.0 / math.sqrt(3))  # sample std of 1, 0, 2 is 1
    assert mean_half_width([4.0]) == 0.0
    with pytest.raises(ValueError):
        evaluation_metrics([True], [], ["a"])


def test_eval_runs_every_k_steps_and_after_the_last(toy, tiny_model_dir, tmp_path):
    history = Trainer(config(tiny_model_dir, tmp_path, steps=5, eval_every=2)).train()
    assert [m["step"] for m in history if "eval/success_rate" in m] == [2, 4, 5]
    for m in history:
        assert "tree/success_rate" in m and "success_rate" not in m
    m = history[-1]
    assert m["eval/n_problems"] == 8
    assert 0 <= m["eval/success_ci_low"] <= m["eval/success_rate"] <= m["eval/success_ci_high"] <= 1
    assert {"eval/return/first", "eval/return/second", "eval/return_ci95/first"} <= set(m)
    assert all("eval/success_rate" not in m for m in Trainer(
        config(tiny_model_dir, tmp_path / "off", steps=2, eval_every=0)).train())


def test_evaluating_does_not_change_training(toy, tiny_model_dir, tmp_path):
    """The evaluation samples in an RNG stream of its own: a run that evaluates after every step
    trains exactly like one that never evaluates (same samples, metrics and weights)."""
    runs = {}
    for every in (0, 1):
        trainer = Trainer(config(tiny_model_dir, tmp_path / str(every), steps=3, eval_every=every,
                                 dump_samples=str(tmp_path / f"{every}.jsonl")))
        history = trainer.train()
        runs[every] = ([{k: v for k, v in m.items() if not k.startswith(("eval/", "time/"))} for m in history],
                       (tmp_path / f"{every}.jsonl").read_text(), trainer.policies.snapshot("shared"))
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    assert all(torch.equal(runs[0][2][k], runs[1][2][k]) for k in runs[0][2])


def test_eval_uses_the_held_out_split(toy, tiny_model_dir, tmp_path):
    trainer = Trainer(config(tiny_model_dir, tmp_path, steps=1, eval_every=1, eval_split="no_such_split"))
    with pytest.raises(ValueError, match="split must be one of"):  # the env, not the trainer, refuses it
        trainer.train_step()


def test_the_tree_success_rate_overstates_the_policy(toy, tiny_model_dir, tmp_path):
    """The defect in numbers: with the same weights, the tree keeps the best of 8 branches at
    every step and succeeds on nearly every problem, while the policy itself (one independent
    episode per held-out problem) succeeds about (1/2)^2 of the time. The held-out figure is
    the honest one; the tree's is far above its 95 % interval."""
    trainer = Trainer(config(tiny_model_dir, tmp_path, steps=1, lr=1e-9, n_samples=8, problems_per_step=16,
                             eval_every=1, eval_problems=64))
    metrics = trainer.train_step()
    print(f"\ntree/success_rate={metrics['tree/success_rate']:.3f} eval/success_rate="
          f"{metrics['eval/success_rate']:.3f} [{metrics['eval/success_ci_low']:.3f}, "
          f"{metrics['eval/success_ci_high']:.3f}]")
    assert metrics["tree/success_rate"] >= 0.9
    assert metrics["eval/success_ci_high"] < metrics["tree/success_rate"]
    assert 0.05 <= metrics["eval/success_rate"] <= 0.6
    logged = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert logged["eval/success_rate"] == metrics["eval/success_rate"]
