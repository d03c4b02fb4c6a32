"""The shared PPO update (trainers/learning/update.py) on the tiny model: its settings are honoured
(gradient clip, clip ranges, micro-batches, degenerate samples), the data-parallel hooks are
called as documented, and the metric vocabulary sums policies."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.generation.transformers_backend import generate
from trainers.learning.metrics import action_reward_metrics, update_metrics
from trainers.learning.settings import UpdateSettings
from trainers.learning.update import UpdateHooks, UpdateStats, ppo_update, trainable
from trainers.models.policy_set import PolicySet

PROMPTS = [[{"role": "user", "content": "pick a digit"}], [{"role": "user", "content": "pick a letter"}]]


@dataclass
class Scored:
    """A training sample as the update reads it."""

    completion: Any
    advantage: float
    degenerate: bool = False


def make_policies(model_dir, **overrides) -> PolicySet:
    values: dict[str, Any] = {"lr": 5e-2, **overrides}
    config = TrainConfig.from_flat(model=str(model_dir), env="toy", max_new_tokens=6, device="cpu", **values)
    return PolicySet(config.model, config.policy_for_roles(["a"]))


def make_samples(policies: PolicySet, n: int = 4) -> list[Scored]:
    """``n`` completions of each prompt with alternating advantages +1 / -1."""
    torch.manual_seed(0)
    ids = [policies.encode_prompt(p).ids for p in PROMPTS]
    generations = generate(policies, "shared", ids, n)
    return [Scored(g, 1.0 if i % 2 == 0 else -1.0) for i, g in enumerate(generations)]


def settings(**overrides) -> UpdateSettings:
    values: dict[str, Any] = {"eps_low": 0.2, "eps_high": 0.28, "aggregation": "token_mean", "micro_batch_size": 64,
                              "importance_sampling": "none"}
    values.update(overrides)
    return UpdateSettings(**values)


def weights(policies: PolicySet) -> dict[str, torch.Tensor]:
    return policies.snapshot("shared")


def delta(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: after[k] - before[k] for k in before}


def test_settings_come_from_the_trainer_config():
    config = TrainConfig.from_flat(model="m", eps_low=0.1, eps_high=0.3, max_grad_norm=0.5, ppo_epochs=3,
                                   micro_batch_size=2, kl_coef=0.01, aggregation="dr_grpo", max_new_tokens=7,
                                   generation_backend="transformers", importance_sampling="truncated", tis_cap=3.0)
    assert config.update_settings() == UpdateSettings(
        eps_low=0.1, eps_high=0.3, aggregation="dr_grpo", ppo_epochs=3, micro_batch_size=2,
        max_grad_norm=0.5, kl_coef=0.01, drop_degenerate=True, importance_sampling="truncated", tis_cap=3.0)
    # auto is decided by the backend: the trained model samples itself, so there is nothing to correct
    assert TrainConfig.from_flat(model="m").update_settings().importance_sampling == "none"
    assert TrainConfig.from_flat(model="m", generation_backend="vllm").update_settings().importance_sampling \
        == "truncated"


def test_the_gradient_clip_is_configurable_and_honoured(tiny_model_dir):
    """The norm the optimiser steps with is min(norm, max_grad_norm); the reported norm is the one before."""
    for max_norm in (1e-3, math.inf):
        policies = make_policies(tiny_model_dir)
        steps = stepped_gradients(policies)
        stats = ppo_update(policies, "shared", make_samples(policies), settings(max_grad_norm=max_norm))
        (gradients,) = steps
        stepped = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in gradients])))
        assert stats.grad_norm > 1e-2
        assert stepped == pytest.approx(min(stats.grad_norm, max_norm), rel=1e-4)


def test_the_clip_ranges_are_honoured(tiny_model_dir):
    """Later epochs move the ratio: tiny clip ranges clip tokens, wide ones do not; epoch 0
    alone never clips (its ratio is exactly 1)."""
    fractions = {}
    for eps in (1e-4, 10.0):
        policies = make_policies(tiny_model_dir, lr=1e-3)
        stats = ppo_update(policies, "shared", make_samples(policies),
                           settings(eps_low=min(eps, 0.99), eps_high=eps, ppo_epochs=3))
        fractions[eps] = stats.clipped_tokens / stats.tokens
    assert fractions[1e-4] > 0.1 and fractions[10.0] == 0
    policies = make_policies(tiny_model_dir)
    one_epoch = ppo_update(policies, "shared", make_samples(policies), settings(eps_low=1e-4, eps_high=1e-4))
    assert one_epoch.clipped_tokens == 0


def stepped_gradients(policies: PolicySet) -> list[list[torch.Tensor]]:
    """The gradients of every optimiser step, as the optimiser sees them (after clipping)."""
    steps: list[list[torch.Tensor]] = []
    params = policies.parameters("shared")
    policies.optimizers["shared"].register_step_pre_hook(
        lambda *_: steps.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]))
    return steps


def test_micro_batches_change_memory_not_the_gradient(tiny_model_dir):
    """Each micro-batch's loss carries the whole batch's normalisers, so the accumulated
    gradient is the full-batch one whatever the micro-batch size (up to float rounding)."""
    gradients = []
    for micro in (64, 3):
        policies = make_policies(tiny_model_dir)
        steps = stepped_gradients(policies)
        ppo_update(policies, "shared", make_samples(policies), settings(micro_batch_size=micro,
                                                                        aggregation="sequence_mean"))
        gradients.append(steps[0])
    for full, accumulated in zip(*gradients, strict=True):
        torch.testing.assert_close(accumulated, full, rtol=1e-4, atol=1e-7)


def test_degenerate_samples_are_dropped_unless_a_kl_term_applies(tiny_model_dir):
    policies = make_policies(tiny_model_dir)
    samples = make_samples(policies)
    samples[0] = dataclasses.replace(samples[0], advantage=0.0, degenerate=True)
    assert len(trainable(samples, settings())) == len(samples) - 1
    assert len(trainable(samples, settings(kl_coef=0.1))) == len(samples)
    assert len(trainable(samples, settings(drop_degenerate=False))) == len(samples)
    everything_degenerate = [dataclasses.replace(s, advantage=0.0, degenerate=True) for s in samples]
    before = weights(policies)
    stats = ppo_update(policies, "shared", everything_degenerate, settings())
    assert stats == UpdateStats()
    assert all(torch.equal(before[k], v) for k, v in weights(policies).items())


def test_data_parallel_hooks_see_the_totals_and_every_epochs_gradients(tiny_model_dir):
    """A wrapper's reduce_totals gets the local sums and its answer is the normaliser: doubling
    the totals halves the loss. reduce_gradients runs once per epoch, before the clip, and a
    rank with no samples still calls it (with zero gradients), so collectives never hang."""
    calls: list[str] = []

    def doubled(tokens: float, sequences: float) -> tuple[float, float]:
        calls.append(f"totals {tokens:g} {sequences:g}")
        return 2 * tokens, 2 * sequences

    def reduce_gradients(params) -> None:
        calls.append(f"grads {sum(float(p.grad.abs().sum()) > 0 for p in params)}")

    policies = make_policies(tiny_model_dir)
    samples = make_samples(policies)
    plain = ppo_update(make_policies(tiny_model_dir), "shared", samples, settings())
    hooked = ppo_update(policies, "shared", samples, settings(ppo_epochs=2),
                        hooks=UpdateHooks(reduce_totals=doubled, reduce_gradients=reduce_gradients))
    tokens = sum(len(s.completion.completion_ids) for s in samples)
    assert calls[0] == f"totals {tokens} {len(samples)}"
    assert [c.split()[0] for c in calls[1:]] == ["grads", "grads"] and int(calls[1].split()[1]) > 0
    assert hooked.samples == len(samples)
    one_epoch = ppo_update(make_policies(tiny_model_dir), "shared", samples, settings(),
                           hooks=UpdateHooks(reduce_totals=doubled))
    assert one_epoch.loss == pytest.approx(plain.loss / 2, rel=1e-5)

    calls.clear()
    empty = ppo_update(make_policies(tiny_model_dir), "shared", [], settings(),
                       hooks=UpdateHooks(reduce_totals=lambda t, s: (10.0, 2.0), reduce_gradients=reduce_gradients))
    assert calls == ["grads 0"] and empty.samples == 0


def test_update_metrics_sum_policies_and_name_each():
    stats = {"main": UpdateStats(samples=2, tokens=10, clipped_tokens=1, kl_sum=0.5, loss=0.25, grad_norm=3.0),
             "sub": UpdateStats(samples=1, tokens=30, clipped_tokens=3, kl_sum=1.5, loss=0.5, grad_norm=1.0)}
    metrics = update_metrics(stats)
    assert metrics == {"loss": 0.75, "kl": 0.05, "clip_frac": 0.1, "samples/trained": 3,
                       "loss/main": 0.25, "samples/trained/main": 2, "grad_norm/main": 3.0,
                       "loss/sub": 0.5, "samples/trained/sub": 1, "grad_norm/sub": 1.0}
    assert action_reward_metrics([("a", 1.0), ("b", 0.0), ("a", 0.5)]) == {
        "reward/mean": 0.5, "reward/agent/a": 0.75, "reward/agent/b": 0.0}
    weighted = update_metrics({"shared": UpdateStats(tokens=4, is_weight_sum=3.0, is_truncated_tokens=1, is_tokens=4)})
    assert weighted["tis/weight_mean"] == 0.75 and weighted["tis/clip_frac"] == 0.25


def test_trainer_and_mgrpo_make_the_same_update_from_the_same_samples(toy, tiny_model_dir, tmp_path):
    """AT-GRPO's Trainer.update and M-GRPO's RolePolicy.update run one update: from the same
    weights, samples and settings (two epochs, a binding gradient clip, micro-batches) the
    parameters they end with are identical, bit for bit."""
    from trainers.algorithms.atgrpo.train import Trainer
    from trainers.algorithms.mgrpo.alignment import PolicySample
    from trainers.algorithms.mgrpo.policy import Action, MGRPOConfig, RolePolicy
    from trainers.rollout.episodes import Sample

    shared = {"model": str(tiny_model_dir), "lr": 5e-2, "eps_low": 0.1, "eps_high": 0.15, "max_grad_norm": 0.05,
              "ppo_epochs": 2, "micro_batch_size": 3, "max_new_tokens": 6, "aggregation": "sequence_mean",
              "device": "cpu"}
    trainer = Trainer(TrainConfig.from_flat(env=toy, run_dir=str(tmp_path / "at_grpo"), progress=False,
                                            tensorboard=False, eval_every=0, **shared))
    mgrpo = RolePolicy(MGRPOConfig.from_flat(**shared), ["first"], "main", str(tiny_model_dir))
    samples = make_samples(trainer.policies)
    samples[1] = dataclasses.replace(samples[1], advantage=0.0, degenerate=True)  # dropped by both
    trainer_samples = [Sample(problem=0, branch=i, agent="first", turn=0, messages=[], completion=s.completion,
                              reward=s.advantage, reward_global=None, reward_local=None, advantage=s.advantage,
                              degenerate=s.degenerate) for i, s in enumerate(samples)]
    mgrpo_samples = [PolicySample(Action(s.completion, s.completion.text), s.advantage, s.degenerate)
                     for s in samples]
    before = trainer.policies.snapshot("shared")
    assert all(torch.equal(before[k], v) for k, v in mgrpo.policies.snapshot("main").items())

    at_grpo_stats = trainer.update("shared", trainer_samples)
    mgrpo_stats = mgrpo.update(mgrpo_samples)
    assert at_grpo_stats == mgrpo_stats and at_grpo_stats.samples == len(samples) - 1
    assert at_grpo_stats.grad_norm > 0.05  # the clip bound
    after_at_grpo, after_mgrpo = trainer.policies.snapshot("shared"), mgrpo.policies.snapshot("main")
    assert any(not torch.equal(before[k], after_at_grpo[k]) for k in before)
    for key, value in after_at_grpo.items():
        assert torch.equal(value, after_mgrpo[key]), key
