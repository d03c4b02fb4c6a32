"""Prompt-conditioned training, logit-averaging decoding and the degenerate-group maths."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchmarks.degenerate_groups import (
    analytic_degenerate,
    beta_binomial_degenerate,
    independent_degenerate,
    intraclass_correlation,
    simulate_degenerate,
)
from pettingllm_envs import cli
from pettingllm_envs.registry import ENV_MODULES
from trainers.algorithms.atgrpo.config import DEFAULT_PROMPT_VARIANTS, TrainConfig
from trainers.algorithms.atgrpo.options import load_config
from trainers.algorithms.variants import (
    PromptConditionedTrainer,
    condition,
    ensemble_generate,
    round_robin,
    variant_metrics,
)
from trainers.models.policy_set import PolicySet
from trainers.models.spec import ModelSpec

TOY = "toy_bytes_v0"


# ------------------------------------------------------------------ pure parts


def test_round_robin_splits_g_across_k():
    assert round_robin(8, 4) == [0, 1, 2, 3, 0, 1, 2, 3]
    assert round_robin(5, 3) == [0, 1, 2, 0, 1]
    with pytest.raises(ValueError):
        round_robin(4, 0)


def test_condition_appends_to_the_system_message_and_keeps_the_input():
    messages = [{"role": "system", "content": "You are the reasoner."}, {"role": "user", "content": "2+2?"}]
    out = condition(messages, "work backwards")
    assert out[0]["content"] == "You are the reasoner.\nApproach: work backwards."
    assert out[1] == messages[1] and messages[0]["content"] == "You are the reasoner."
    assert condition([{"role": "user", "content": "q"}], "x")[0] == {"role": "system", "content": "Approach: x."}


def test_config_parses_variant_lists_and_the_empty_baseline():
    assert TrainConfig().rollout.prompt_variants == list(DEFAULT_PROMPT_VARIANTS)
    assert load_config(["--model", "m", "--prompt-variants", "[a b, c]"]).rollout.prompt_variants == ["a b", "c"]
    assert load_config(["--model", "m", "--prompt-variants", "[]"]).rollout.prompt_variants == []


def test_degenerate_probability_formulas():
    assert analytic_degenerate(0.5, 4) == pytest.approx(2 / 16)
    assert independent_degenerate([0.5, 0.5], 4) == pytest.approx(analytic_degenerate(0.5, 4))
    assert independent_degenerate([0.2, 0.3, 0.5], 2) == pytest.approx(0.04 + 0.09 + 0.25)
    # correlation only ever makes degenerate groups more likely, up to certainty as rho -> 1
    values = [beta_binomial_degenerate(0.5, rho, 8) for rho in (0.0, 1e-9, 0.1, 0.3, 0.6, 0.9, 0.999)]
    assert values[1] == pytest.approx(values[0], abs=1e-6)
    assert values == sorted(values) and values[-1] > 0.99
    # G = 2: Pr[agree] = p^2 + (1-p)^2 + 2 rho p (1-p) exactly, the definition of the correlation
    assert beta_binomial_degenerate(0.3, 0.25, 2) == pytest.approx(0.09 + 0.49 + 2 * 0.25 * 0.21)
    rng = np.random.default_rng(0)
    for rho in (0.0, 0.3, 0.7):
        assert simulate_degenerate(0.4, rho, 8, 40_000, rng) == pytest.approx(
            beta_binomial_degenerate(0.4, rho, 8), abs=0.01)


def test_intraclass_correlation():
    assert intraclass_correlation([[1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]]) == pytest.approx(1.0)
    assert intraclass_correlation([[1, 0], [1, 0], [0, 1]]) < 0  # less alike within groups than across
    assert math.isnan(intraclass_correlation([[1, 1], [1, 1]]))


def test_variant_metrics_average_per_variant():
    class C:
        def __init__(self, variant):
            self.variant = variant

    class S:
        def __init__(self, variant, reward):
            self.completion, self.reward = C(variant), reward

    samples = [S(0, 1.0), S(1, 0.0), S(0, 0.0), S(1, 0.0), S(-1, 5.0)]
    assert variant_metrics(samples, ["a", "b", "c"]) == {"reward/variant/0": 0.5, "reward/variant/1": 0.0}


# -------------------------------------------------------- training (tiny model)


def test_variant_rollouts_share_one_group_per_question(tiny_model_dir, tmp_path, monkeypatch):
    """G = 8 rollouts, K = 4 variants: two per variant, each with its own conditioned prompt,
    and one advantage group per question (never per variant)."""
    monkeypatch.setitem(ENV_MODULES, TOY, "toy_env")
    half = "".join(chr(c) for c in range(128))  # about half the byte tokens are right: groups vary
    dump = tmp_path / "samples.jsonl"
    trainer = PromptConditionedTrainer(TrainConfig.from_flat(
        env=TOY, model=str(tiny_model_dir), run_dir=str(tmp_path), steps=1, problems_per_step=3, n_samples=8,
        max_new_tokens=1, progress=False, tensorboard=False, checkpoint_every=0, dump_samples=str(dump),
        env_kwargs={"targets": {"first": half, "second": half}}))
    metrics = trainer.train_step()
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    assert len(rows) == 3 * 8 and {r["agent"] for r in rows} == {"first"}
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    assert len(groups) == metrics["groups/count"] == 3
    for members in groups.values():
        assert len({m["problem_id"] for m in members}) == 1 and len(members) == 8
        variants = [next(k for k, v in enumerate(DEFAULT_PROMPT_VARIANTS) if f"Approach: {v}." in m["prompt"])
                    for m in members]
        assert variants == round_robin(8, 4)
        if len({m["reward"] for m in members}) > 1:  # normalised over the whole question
            assert sum(m["advantage"] for m in members) == pytest.approx(0.0, abs=1e-5)
    assert metrics["groups/degenerate_frac"] < 1.0
    for k in range(4):
        rewards = [r["reward"] for r in rows if f"Approach: {DEFAULT_PROMPT_VARIANTS[k]}." in r["prompt"]]
        assert metrics[f"reward/variant/{k}"] == pytest.approx(sum(rewards) / len(rewards))


def test_temperature_baseline_and_cli_on_math(tiny_model_dir, tmp_path):
    """The baseline (no variants) on math_v0's reasoner, run from the CLI: same G, no
    per-variant metrics, prompts without an approach line."""
    run = tmp_path / "run"
    code = cli.main(["train-variants", "--env", "math_v0", "--model", str(tiny_model_dir), "--steps", "1",
                     "--run-dir", str(run), "--n-samples", "4", "--problems-per-step", "2", "--max-new-tokens", "2",
                     "--prompt-variants", "[]", "--dump-samples", str(run / "s.jsonl"), "--progress", "false"])
    assert code == 0
    (metrics,) = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics["samples"] == 8 and "groups/degenerate_frac" in metrics
    assert not any(k.startswith("reward/variant/") for k in metrics)
    rows = [json.loads(line) for line in (run / "s.jsonl").read_text().splitlines()]
    assert {r["agent"] for r in rows} == {"reasoner"} and not any("Approach:" in r["prompt"] for r in rows)


# ------------------------------------------------------------ logit averaging


@pytest.fixture(scope="module")
def policies(tiny_model_dir):
    return PolicySet(ModelSpec(model=str(tiny_model_dir), max_new_tokens=6, temperature=0.9, device="cpu"),
                     {"a": "shared"})


def _ids(policies, text):
    return policies.encode_prompt([{"role": "user", "content": text}])[1]


def test_identical_variants_reproduce_single_prompt_sampling(policies):
    prompt = _ids(policies, "What is 6 times 7?")
    torch.manual_seed(3)
    single = ensemble_generate(policies, "shared", [[prompt]], 4)
    torch.manual_seed(3)
    triple = ensemble_generate(policies, "shared", [[prompt, prompt, prompt]], 4)
    assert [g.completion_ids for g in triple] == [g.completion_ids for g in single]
    for a, b in zip(triple, single, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    # single-prompt decoding is the policy's own distribution: its log-probs are the scored ones
    with policies.active("shared") as model, torch.no_grad():
        logp, _ = policies.token_logprobs(model, [g.prompt_ids for g in single], [g.completion_ids for g in single])
    for row, g in enumerate(single):
        assert logp[row, :len(g.logprobs)].tolist() == pytest.approx(g.logprobs, abs=1e-4)


def test_ensemble_averages_the_variants_log_probs(policies):
    a, b = _ids(policies, "Approach: set up an equation."), _ids(policies, "Approach: work backwards!")
    (greedy,) = ensemble_generate(policies, "shared", [[a, b]], 1, greedy=True)
    with policies.active("shared") as model, torch.no_grad():
        first = [F.log_softmax(model(input_ids=torch.tensor([p])).logits[0, -1] / 0.9, dim=-1) for p in (a, b)]
    mixed = F.log_softmax((first[0] + first[1]) / 2, dim=-1)
    assert greedy.completion_ids[0] == int(mixed.argmax())
    assert greedy.logprobs[0] == pytest.approx(float(mixed.max()), abs=1e-4)
    assert greedy.prompt_ids == a
    with pytest.raises(ValueError):
        ensemble_generate(policies, "shared", [[a, b], [a]], 1)

