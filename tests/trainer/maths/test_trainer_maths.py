"""Unit tests of the trainer's pure maths: grouping, advantages, the PPO-clip loss, config."""

from __future__ import annotations

import math

import pytest
import torch

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.options import load_config
from trainers.harness.errors import ConfigError
from trainers.maths.advantages import group_advantages, group_key
from trainers.maths.loss import aggregate, k3_kl, ppo_clip_loss


def test_group_keys_always_contain_the_problem():
    assert group_key(3, "coder", 1, "problem_agent_turn") == "p3/coder/t1"
    assert group_key(3, "coder", 1, "problem_agent") == "p3/coder"
    assert group_key(3, "coder", 1, "problem") == "p3"
    assert group_key(3, "coder", 1, "problem") != group_key(4, "coder", 1, "problem")
    with pytest.raises(ValueError):
        group_key(3, "coder", 1, "agent")


def test_mean_std_advantages_by_hand():
    rewards = [1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 2.0, 4.0]
    keys = ["a", "a", "a", "a", "b", "b", "c", "c"]
    adv, degenerate, stats = group_advantages(rewards, keys, normalize="mean_std", eps=0.0)
    # group a: mean 0.5, population std 0.5 -> +-1; group b: degenerate; group c: mean 3, std 1 -> -1, +1
    assert adv == pytest.approx([1, -1, -1, 1, 0, 0, -1, 1])
    assert degenerate == [False] * 4 + [True, True] + [False, False]
    assert (stats.groups, stats.degenerate) == (3, 1)
    assert stats.degenerate_frac == pytest.approx(1 / 3)


def test_mean_only_advantages_and_eps():
    adv, _, _ = group_advantages([2.0, 4.0, 6.0], ["g"] * 3, normalize="mean")
    assert adv == pytest.approx([-2.0, 0.0, 2.0])
    adv, _, _ = group_advantages([0.0, 1.0], ["g"] * 2, normalize="mean_std", eps=0.5)
    assert adv == pytest.approx([-0.5, 0.5])  # (r - 0.5) / (0.5 + 0.5)


def test_singleton_groups_are_degenerate():
    adv, degenerate, stats = group_advantages([5.0, 1.0], ["x", "y"])
    assert adv == [0.0, 0.0] and all(degenerate) and stats.degenerate == 2


def test_advantages_reject_mismatched_inputs():
    with pytest.raises(ValueError):
        group_advantages([1.0], ["a", "b"])
    with pytest.raises(ValueError):
        group_advantages([1.0], ["a"], normalize="median")


def test_ppo_clip_loss_matches_a_hand_computation():
    # Two sequences: lengths 2 and 1 (second row's last token is padding).
    old = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    logp = torch.tensor([[math.log(1.5), math.log(0.9)], [math.log(0.5), 7.0]], requires_grad=True)
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, stats = ppo_clip_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.3, aggregation="token_mean",
                                total_tokens=3.0, total_sequences=2.0, max_len=2)
    # token 1: r=1.5, A=2: min(3.0, clip(1.5)=1.3 * 2 = 2.6) = 2.6 (clipped)
    # token 2: r=0.9, A=2: min(1.8, 1.8) = 1.8
    # token 3: r=0.5, A=-1: min(-0.5, clip(0.5)=0.8 * -1 = -0.8) = -0.8 (clipped)
    expected = -(2.6 + 1.8 - 0.8) / 3
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-6)
    assert stats.clipped_tokens == 2 and stats.tokens == 3 and stats.kl_sum == 0.0
    loss.backward()
    # Clipped tokens get no gradient; token 2's gradient is -A * r / 3; padding none.
    assert logp.grad[0, 0] == 0 and logp.grad[1, 0] == 0 and logp.grad[1, 1] == 0
    assert float(logp.grad[0, 1]) == pytest.approx(-2 * 0.9 / 3, rel=1e-6)


def test_aggregation_modes_by_hand():
    per_token = torch.tensor([[1.0, 3.0, 5.0], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    common = {"total_tokens": 4.0, "total_sequences": 2.0, "max_len": 4}
    assert float(aggregate(per_token, mask, "token_mean", **common)) == pytest.approx(11 / 4)
    assert float(aggregate(per_token, mask, "sequence_mean", **common)) == pytest.approx((3 + 2) / 2)
    assert float(aggregate(per_token, mask, "dr_grpo", **common)) == pytest.approx(11 / 8)
    with pytest.raises(ValueError):
        aggregate(per_token, mask, "sum", **common)


def test_micro_batches_add_up_to_the_full_batch_loss():
    torch.manual_seed(0)
    logp, old = torch.randn(4, 5) * 0.1, torch.randn(4, 5) * 0.1
    adv, mask = torch.randn(4), (torch.rand(4, 5) > 0.3).float()
    for mode in ("token_mean", "sequence_mean", "dr_grpo"):
        kw = {"eps_low": 0.2, "eps_high": 0.28, "aggregation": mode, "total_tokens": float(mask.sum()),
              "total_sequences": 4.0, "max_len": 5}
        full, _ = ppo_clip_loss(logp, old, adv, mask, **kw)
        halves = sum(ppo_clip_loss(logp[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2], **kw)[0]
                     for i in (0, 2))
        assert float(full) == pytest.approx(float(halves), rel=1e-6)


def test_k3_kl_is_zero_at_equality_and_positive_otherwise():
    logp = torch.tensor([-1.0, -2.0])
    assert torch.allclose(k3_kl(logp, logp), torch.zeros(2))
    ref = torch.tensor([-1.5, -1.0])
    d = ref - logp
    assert torch.allclose(k3_kl(logp, ref), torch.exp(d) - d - 1)
    assert bool((k3_kl(logp, ref) > 0).all())
    loss, stats = ppo_clip_loss(logp[None], logp[None], torch.zeros(1), torch.ones(1, 2), eps_low=0.2,
                                eps_high=0.2, aggregation="token_mean", total_tokens=2.0, total_sequences=1.0,
                                max_len=2, ref_logp=ref[None], kl_coef=0.5)
    assert float(loss) == pytest.approx(0.5 * float(k3_kl(logp, ref).sum()) / 2)
    assert stats.kl_sum == pytest.approx(float(k3_kl(logp, ref).sum()))


def test_config_yaml_then_cli_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("model: some/dir\nn_samples: 6\nenv_kwargs: {max_turns: 2}\nlora: true\n")
    cfg = load_config(["--config", str(path), "--n-samples", "3", "--resume", "--kl-coef", "0.1",
                       "--policy-map", "{tool: a, planner: b}"])
    assert (cfg.model.model, cfg.rollout.n_samples, cfg.task.env_kwargs, cfg.model.lora, cfg.run.resume,
            cfg.update.kl_coef) == (
        "some/dir", 3, {"max_turns": 2}, True, True, 0.1)
    assert cfg.policy_for_roles(["tool", "planner"]) == {"tool": "a", "planner": "b"}
    with pytest.raises(ConfigError, match=r"'aggregation': got 'sum'.*token_mean, sequence_mean, dr_grpo"):
        load_config(["--model", "m", "--aggregation", "sum"])
    with pytest.raises(ValueError, match="model is required"):
        load_config([])
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: m\nnot_a_field: 1\n")
    with pytest.raises(ValueError, match="not_a_field"):
        load_config(["--config", str(bad)])


def test_regimes_map_roles_to_policies():
    assert TrainConfig.from_flat(model="m").policy_for_roles(["a", "b"]) == {"a": "shared", "b": "shared"}
    assert TrainConfig.from_flat(model="m", regime="per_role").policy_for_roles(["a", "b"]) == {"a": "a", "b": "b"}
    with pytest.raises(ValueError, match="no entry"):
        TrainConfig.from_flat(model="m", policy_map={"a": "x"}).policy_for_roles(["a", "b"])


def test_the_vllm_backend_takes_every_regime_and_only_known_backends_are_accepted():
    from trainers.algorithms.atgrpo.config import TrainConfig

    TrainConfig.from_flat(model="m", generation_backend="vllm", regime="per_role").validate()
    with pytest.raises(ValueError, match="generation_backend"):
        TrainConfig.from_flat(model="m", generation_backend="tgi").validate()
    TrainConfig.from_flat(model="m", generation_backend="vllm").validate()


def test_truncated_is_weights_by_hand():
    """w = min(exp(logp_trainer - logp_engine), C) on real tokens, 0 on padding, no gradient."""
    from trainers.maths.importance_sampling import padded_engine_logprobs, truncated_is_weights

    trainer = torch.tensor([[-1.0, -2.0, -0.5], [-0.1, -0.2, -0.3]], requires_grad=True)
    engine = padded_engine_logprobs([[-1.5, -1.0], [-3.1, -0.2, -0.3]], 3, "cpu")
    assert torch.allclose(engine, torch.tensor([[-1.5, -1.0, 0.0], [-3.1, -0.2, -0.3]]))
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    weights, stats = truncated_is_weights(trainer, engine, mask, cap=2.0)
    # exp(0.5) = 1.6487, exp(-1) = 0.3679, padding 0; exp(3) = 20.09 -> cap 2; exp(0) = 1 twice
    assert torch.allclose(weights, torch.tensor([[math.exp(0.5), math.exp(-1.0), 0.0], [2.0, 1.0, 1.0]]))
    assert not weights.requires_grad
    assert (stats.tokens, stats.truncated_tokens) == (5.0, 1.0)
    assert stats.weight_sum == pytest.approx(math.exp(0.5) + math.exp(-1.0) + 4.0)
    with pytest.raises(ValueError, match=">= 1"):
        truncated_is_weights(trainer, engine, mask, cap=0.5)
    with pytest.raises(ValueError, match="more log-probs"):
        padded_engine_logprobs([[-1.0, -1.0, -1.0, -1.0]], 3, "cpu")


def test_token_weights_scale_each_tokens_policy_gradient_term_by_hand():
    # One sequence of two tokens, ratio 1 (on-policy), advantage 2; IS weights 1.5 and 0.5.
    logp = torch.tensor([[math.log(0.5), math.log(0.25)]], requires_grad=True)
    weights = torch.tensor([[1.5, 0.5]])
    loss, stats = ppo_clip_loss(logp, logp.detach(), torch.tensor([2.0]), torch.ones(1, 2), eps_low=0.2,
                                eps_high=0.2, aggregation="token_mean", total_tokens=2.0, total_sequences=1.0,
                                max_len=2, token_weights=weights)
    assert float(loss) == pytest.approx(-(1.5 * 2 + 0.5 * 2) / 2)  # -(w1 r A + w2 r A) / tokens
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-1.5 * 2 / 2, -0.5 * 2 / 2]]))  # d(-w r A)/dlogp = -w r A
    assert stats.clipped_tokens == 0
    # the KL term is not weighted
    ref = torch.tensor([[math.log(0.4), math.log(0.3)]])
    with_kl, _ = ppo_clip_loss(logp.detach(), logp.detach(), torch.zeros(1), torch.ones(1, 2), eps_low=0.2,
                               eps_high=0.2, aggregation="token_mean", total_tokens=2.0, total_sequences=1.0,
                               max_len=2, ref_logp=ref, kl_coef=1.0, token_weights=weights)
    assert float(with_kl) == pytest.approx(float(k3_kl(logp.detach(), ref).sum()) / 2)
