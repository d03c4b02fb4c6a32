"""Training tests on CPU with the tiny model: learning, exact resume, per-role policies, CLI."""

from __future__ import annotations

import json
import string
import subprocess
import sys
import time

import pytest
import torch

from pettingllm_envs import cli
from pettingllm_envs.registry import ENV_MODULES
from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.train import Trainer

TOY = "toy_bytes_v0"


def toy_config(model_dir, run_dir, **overrides) -> TrainConfig:
    values = {
        "env": TOY, "model": str(model_dir), "run_dir": str(run_dir), "max_new_tokens": 1,
        "problems_per_step": 8, "n_samples": 8, "micro_batch_size": 64, "lr": 1e-2, "progress": False,
        "checkpoint_every": 0, "tensorboard": False, "eval_every": 0,
        "env_kwargs": {"targets": {"first": string.digits, "second": string.ascii_lowercase}},
    }
    values.update(overrides)
    return TrainConfig.from_flat(**values)


@pytest.mark.slow
def test_at_grpo_learns_the_toy_task(toy, tiny_model_dir, tmp_path):
    """Chance is ~10/259 and ~26/259 per role; AT-GRPO with one policy per role must reach a
    mean reward >= 0.8 within 30 steps (about 10-15 steps, 10-30 s of CPU, in practice)."""
    trainer = Trainer(toy_config(tiny_model_dir, tmp_path, regime="per_role", steps=30))
    start_cpu, start = time.process_time(), time.perf_counter()
    history = []
    while trainer.step < trainer.config.run.steps:
        history.append(trainer.train_step())
        if len(history) >= 2 and min(m["reward/mean"] for m in history[-2:]) >= 0.8:
            break
    seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    print(f"\nlearning: reward {history[0]['reward/mean']:.3f} -> {history[-1]['reward/mean']:.3f} "
          f"in {len(history)} steps, {seconds:.1f} s wall, {cpu:.1f} s CPU")
    assert history[0]["reward/mean"] <= 0.3
    assert history[-1]["reward/mean"] >= 0.8, [round(m["reward/mean"], 3) for m in history]
    assert history[-1]["reward/agent/first"] >= 0.6 and history[-1]["reward/agent/second"] >= 0.6
    assert cpu < 240


def _weights(trainer: Trainer) -> dict[str, dict[str, torch.Tensor]]:
    return {name: trainer.policies.snapshot(name) for name in trainer.policies.names}


def _comparable(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.startswith("time/")}


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_resume_continues_exactly(toy, tiny_model_dir, tmp_path, lora):
    dump_a, dump_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    # eval_every=1: the held-out evaluation after every step must neither perturb training nor
    # differ between the runs (the interrupted run also evaluates after its last step, 2).
    half = "".join(chr(c) for c in range(128))  # ~50% success: some groups carry a gradient whatever the draws
    common = {"problems_per_step": 2, "n_samples": 4, "regime": "per_role", "lora": lora, "lr": 5e-2,
              "eval_every": 1, "eval_problems": 3, "env_kwargs": {"targets": {"first": half, "second": half}}}
    straight = Trainer(toy_config(tiny_model_dir, tmp_path / "a", steps=3, dump_samples=str(dump_a), **common))
    history_a = straight.train()

    first = Trainer(toy_config(tiny_model_dir, tmp_path / "b", steps=2, checkpoint_every=2,
                               dump_samples=str(dump_b), **common))
    first.train()
    resumed = Trainer(toy_config(tiny_model_dir, tmp_path / "b", steps=3, resume=True, dump_samples=str(dump_b),
                                 **common))
    assert resumed.step == 2
    history_b = resumed.train()

    assert _comparable(history_b[-1]) == _comparable(history_a[-1])
    logged = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [_comparable(m) for m in logged] == [_comparable(m) for m in history_a]
    assert dump_a.read_text() == dump_b.read_text()
    weights_a, weights_b = _weights(straight), _weights(resumed)
    assert any(m["samples/trained"] > 0 for m in history_a)
    for name in weights_a:
        for key in weights_a[name]:
            assert torch.equal(weights_a[name][key], weights_b[name][key])
    assert (tmp_path / "b" / "checkpoints" / "latest").read_text() == "step_000003"
    assert not list((tmp_path / "b" / "checkpoints").glob(".tmp*"))


@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_each_role_updates_only_its_own_policy(toy, tiny_model_dir, tmp_path, lora):
    half = "".join(chr(c) for c in range(128))  # ~50% chance: groups are rarely degenerate
    trainer = Trainer(toy_config(tiny_model_dir, tmp_path, regime="per_role", lora=lora, lr=1e-2, steps=1,
                                 problems_per_step=2, n_samples=8,
                                 env_kwargs={"targets": {"first": half, "second": half}}))
    assert trainer.policies.names == ["first", "second"]
    result = trainer.rollout(0)
    from trainers.maths.advantages import group_advantages, group_key

    for s in result.samples:
        s.group = group_key(s.problem, s.agent, s.turn, "problem_agent_turn")
    advantages, degenerate, _ = group_advantages([s.reward for s in result.samples],
                                                 [s.group for s in result.samples])
    for s, adv, deg in zip(result.samples, advantages, degenerate, strict=True):
        s.advantage, s.degenerate = adv, deg
    assert {s.agent for s in result.samples if not s.degenerate} == {"first", "second"}
    base = None
    if lora:
        base = {n: p.detach().clone() for n, p in trainer.policies.peft_model.named_parameters() if "lora_" not in n}
    before = _weights(trainer)
    stats = trainer.update("first", result.samples)
    after_first = _weights(trainer)
    assert stats.samples > 0
    assert any(not torch.equal(before["first"][k], after_first["first"][k]) for k in before["first"])
    assert all(torch.equal(before["second"][k], after_first["second"][k]) for k in before["second"])
    trainer.update("second", result.samples)
    after_second = _weights(trainer)
    assert all(torch.equal(after_first["first"][k], after_second["first"][k]) for k in before["first"])
    assert any(not torch.equal(after_first["second"][k], after_second["second"][k]) for k in before["second"])
    if lora:  # the shared base model stays frozen
        for n, p in trainer.policies.peft_model.named_parameters():
            if "lora_" not in n:
                assert torch.equal(p, base[n]), n


def test_kl_to_the_reference_is_logged(toy, tiny_model_dir, tmp_path):
    half = "".join(chr(c) for c in range(128))  # ~50% success: the policy moves whatever the draws
    trainer = Trainer(toy_config(tiny_model_dir, tmp_path, steps=3, kl_coef=0.1, lr=5e-2, problems_per_step=2,
                                 n_samples=4, aggregation="dr_grpo",
                                 env_kwargs={"targets": {"first": half, "second": half}}))
    history = trainer.train()
    assert history[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # step 1 scores the initial policy == reference
    assert history[-1]["kl"] > 0


def test_more_epochs_make_the_clip_ranges_bind(toy, tiny_model_dir, tmp_path):
    trainer = Trainer(toy_config(tiny_model_dir, tmp_path, steps=2, lr=5e-2, problems_per_step=2, n_samples=8,
                                 ppo_epochs=4, aggregation="sequence_mean", normalize="mean"))
    history = trainer.train()
    assert all(0.0 <= m["clip_frac"] <= 1.0 for m in history)
    assert max(m["clip_frac"] for m in history) > 0


def test_cli_smoke_on_plan_path_with_dump_and_plot(tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    code = cli.main(["train", "--env", "plan_path_v0", "--model", str(tiny_model_dir), "--steps", "1",
                     "--run-dir", str(run), "--dump-samples", str(run / "samples.jsonl"), "--max-new-tokens", "4",
                     "--n-samples", "2", "--problems-per-step", "1", "--env-kwargs", "{max_turns: 1}",
                     "--eval-problems", "3"])
    assert code == 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 1
    for key in ("reward/mean", "reward/agent/tool", "reward/agent/planner", "reward/turn/0", "tree/success_rate",
                "eval/success_rate", "eval/success_ci_low", "eval/success_ci_high", "eval/return/tool",
                "eval/return/planner", "eval/n_problems",
                "groups/degenerate_frac", "kl", "clip_frac", "tokens", "time/generate", "time/env", "time/update"):
        assert key in metrics[0], key
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 * 2  # 2 agents x 2 branches
    for key in ("step", "problem_id", "branch", "agent", "turn", "group", "prompt", "completion", "reward",
                "reward_global", "reward_local", "advantage"):
        assert key in samples[0], key
    assert "<|assistant|>" in samples[0]["prompt"]
    assert (run / "checkpoints" / "step_000001" / "policies" / "shared" / "config.json").exists()
    assert cli.main(["plot", str(run)]) == 0
    assert (run / "curves.png").stat().st_size > 1000


def test_the_env_package_stays_light():
    code = ("import sys, pettingllm_envs, pettingllm_envs.cli; "
            "assert not {'torch', 'transformers', 'trainers'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_agents_finishing_at_different_times_are_all_trained(monkeypatch, tiny_model_dir, tmp_path):
    """A plain PettingZoo env (tests/uneven_env.py) where one agent terminates after its first
    action: the other agent's later turns are sampled, get advantages and enter the update."""
    monkeypatch.setitem(ENV_MODULES, "uneven_v0", "uneven_env")
    dump = tmp_path / "samples.jsonl"
    trainer = Trainer(TrainConfig.from_flat(env="uneven_v0", env_kwargs={"laps": 3}, model=str(tiny_model_dir),
                                            run_dir=str(tmp_path / "run"), steps=1, problems_per_step=2, n_samples=4,
                                            max_new_tokens=3, lr=1e-2, progress=False, tensorboard=False, eval_every=0,
                                            dump_samples=str(dump)))
    before = trainer.policies.snapshot("shared")
    metrics = trainer.train_step()
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    later = [r for r in rows if r["agent"] == "marathoner" and r["turn"] >= 1]
    assert {r["turn"] for r in later} == {1, 2}
    assert len(later) == 2 * 2 * 4  # 2 problems x 2 later turns x 4 branches
    assert any(r["advantage"] != 0 and not r["degenerate"] for r in later)
    assert metrics["samples/trained"] >= sum(not r["degenerate"] for r in later) > 0
    assert "reward/turn/2" in metrics
    after = trainer.policies.snapshot("shared")
    assert any(not torch.equal(before[k], after[k]) for k in before)
