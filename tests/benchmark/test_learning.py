"""Learning evidence (benchmarks.learning): the statistics, the warm start's views and
sft's loss masking, and the quick CI check that AT-GRPO raises held-out success over its warm
start by more than the seed-to-seed noise measured in the same run."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from repo_paths import REPO

from benchmarks.learning.demonstrations import make_view
from benchmarks.learning.experiment import quick_config, run_experiment
from benchmarks.learning.report import improvement_beyond_noise, mean_ci, pooled_rate
from benchmarks.learning.sft import SFTConfig, SFTConfigError, learning_rate

PLAN = {"rows": 4, "cols": 4, "max_turns": 2}


def test_improvement_must_exceed_the_seed_noise():
    assert improvement_beyond_noise([0.1, 0.1, 0.1], [0.5, 0.5, 0.5])["beyond"] == 1.0
    # a mean gain smaller than how much seeds disagree is not evidence
    noisy = improvement_beyond_noise([0.1, 0.3, 0.2], [0.6, 0.1, 0.2])
    assert noisy["mean_delta"] == pytest.approx(0.1) and noisy["beyond"] == 0.0
    assert improvement_beyond_noise([0.2, 0.2, 0.2], [0.2, 0.2, 0.2])["beyond"] == 0.0


def test_pooled_rate_and_t_interval():
    pooled = pooled_rate([0.25, 0.5], 8)
    assert pooled["rate"] == pytest.approx(6 / 16) and pooled["episodes"] == 16
    assert 0 < pooled["ci_low"] < pooled["rate"] < pooled["ci_high"] < 1
    mean, half = mean_ci([0.1, 0.2, 0.3])
    assert mean == pytest.approx(0.2) and half == pytest.approx(4.303 * 0.1 / 3 ** 0.5)


def test_learning_rate_warms_up_then_decays_to_min_lr():
    cfg = SFTConfig(steps=100, warmup_steps=10, lr=1e-3, min_lr=1e-4)
    assert learning_rate(0, cfg) == pytest.approx(1e-4)
    assert learning_rate(9, cfg) == pytest.approx(1e-3)
    assert learning_rate(99, cfg) == pytest.approx(1e-4)
    rates = [learning_rate(s, cfg) for s in range(10, 100)]
    assert all(a >= b for a, b in itertools.pairwise(rates))


def test_sft_config_refuses_bad_values():
    for bad in ({"mistake_rate": 1.5}, {"env": "code_v0"}, {"steps": 0}, {"lr": 1e-4, "min_lr": 1e-3}):
        with pytest.raises(SFTConfigError):
            SFTConfig(**bad).validate()


def test_brief_view_replaces_only_the_system_message():
    env = make_view("plan_path_v0", PLAN, single_agent=False, brief=True)
    plain = make_view("plan_path_v0", PLAN, single_agent=False, brief=False)
    env.reset(seed=5)
    plain.reset(seed=5)
    brief_messages = env.infos["tool"]["messages"]
    assert brief_messages[0]["content"].startswith("Role: tool.")
    assert brief_messages[1] == plain.infos["tool"]["messages"][1]
    assert len(brief_messages[0]["content"]) < len(plain.infos["tool"]["messages"][0]["content"]) / 3
    solo = make_view("plan_path_v0", PLAN, single_agent=True, brief=True)
    solo.reset(seed=5)
    assert solo.infos["solo"]["messages"][0]["content"].startswith("Role: solo.")


def test_sft_loss_is_the_nll_of_the_action_and_stop_tokens_only(tiny_model_dir):
    """The SFT step's loss equals the mean negative log-likelihood of the completion tokens
    (action + stop id) computed from one plain forward over prompt + completion: the prompt
    carries no loss and the stop token does."""
    import torch

    from benchmarks.learning.sft import _sft_step
    from trainers.models.policy_set import PolicySet
    from trainers.models.spec import ModelSpec

    policies = PolicySet(ModelSpec(model=str(tiny_model_dir), device="cpu", lr=1e-12), {"solo": "shared"})
    prompt = policies.encode_prompt([{"role": "user", "content": "Walker at (0, 0)"}]).ids
    completion = [*policies.tokenizer("MOVES: R", add_special_tokens=False)["input_ids"], policies.eos_ids[0]]
    model = policies.models["shared"]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt) - 1:-1], dim=-1)
    expected = -logp.gather(1, torch.tensor(completion)[:, None]).mean()
    loss = _sft_step(policies, "shared", [("shared", prompt, completion)], max_grad_norm=1.0)
    assert loss == pytest.approx(float(expected), rel=1e-4)


@pytest.mark.slow
def test_sft_loss_falls_and_writes_a_loadable_model(tmp_path):
    """A few steps on a tiny from-scratch model: the loss falls, the output loads as a model."""
    from transformers import AutoModelForCausalLM

    from benchmarks.learning.sft import train_sft

    cfg = SFTConfig(env="plan_path_v0", env_kwargs=PLAN, train_problems=20, steps=12, batch_size=4,
                    scratch_hidden_size=32, scratch_layers=1, max_prompt_tokens=256, lr=3e-3, min_lr=1e-3,
                    warmup_steps=0, device="cpu", out_dir=str(tmp_path / "warm"))
    summary = train_sft(cfg)
    curve = summary["loss_curve"]
    assert curve[-1] < curve[0]
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "warm") is not None
    with pytest.raises(SFTConfigError, match="already holds"):
        train_sft(cfg)


def test_a_warm_start_is_reused_only_for_the_same_content(tmp_path):
    """The second identical warm start is copied from the cache (same weights, no training); one
    demonstration more, or another mistake rate, trains anew."""
    import torch
    from safetensors.torch import load_file

    from benchmarks.learning.sft import train_sft

    cache = tmp_path / "cache"
    cfg = SFTConfig(env="plan_path_v0", env_kwargs=PLAN, train_problems=6, steps=2, batch_size=2,
                    scratch_hidden_size=32, scratch_layers=1, max_prompt_tokens=128, device="cpu",
                    out_dir=str(tmp_path / "first"), cache_dir=str(cache))
    first = train_sft(cfg)
    assert "reused_from_cache" not in first and [p.name for p in cache.iterdir()] == [first["cache_key"]]
    again = train_sft(replace(cfg, out_dir=str(tmp_path / "again")))
    assert again["reused_from_cache"] == str(cache / first["cache_key"])
    assert again["config"]["out_dir"] == str(tmp_path / "again") and not (tmp_path / "again" / "_scratch").exists()
    weights = [load_file(tmp_path / name / "model.safetensors") for name in ("first", "again")]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    for changed in (replace(cfg, train_problems=7), replace(cfg, mistake_rate=0.5)):
        summary = train_sft(replace(changed, out_dir=str(tmp_path / "changed"), overwrite=True))
        assert "reused_from_cache" not in summary and summary["cache_key"] != first["cache_key"]
    assert len(list(cache.iterdir())) == 3


@pytest.mark.slow
@pytest.mark.timeout(2400)  # ~8 minutes here with the warm start trained, ~2 reusing it (pyproject timeout: 900)
def test_quick_at_grpo_beats_its_warm_start_beyond_seed_noise(tmp_path):
    """The CI check of the issue: from one warm start, three seeds of AT-GRPO (per-role
    policies, tree rollouts, per-turn groups; the tool scripted, the planner trained) raise
    held-out success by more than the seed-to-seed noise measured in this run. It fails when
    training does not help: from warm starts that had not learned to copy the tool's answer (the
    full experiment's 90k-parameter model, an earlier hidden-128 quick mode) held-out success fell
    in every seed (docs/benchmarks/learning.md)."""
    import torch

    threads = torch.get_num_threads()
    try:
        results = run_experiment(quick_config(str(tmp_path)))
    finally:
        torch.set_num_threads(threads)
    summary = results["envs"]["plan_path_v0"]["conditions"]["at_grpo_per_role"]["summary"]
    assert summary["seeds"] == 3
    assert summary["mean_delta"] > summary["noise"], summary
    assert summary["after"]["rate"] > summary["before"]["rate"]


def test_scripted_partner_acts_inside_the_env_and_the_rollout_sees_only_the_planner():
    env = make_view("plan_path_v0", PLAN, single_agent=False, brief=True, scripted=("tool",))
    env.reset(seed=7)
    assert env.agent_selection == "planner"
    view = env.infos["planner"]["messages"][-1]["content"]
    assert "Program output:\nMOVES:" in view  # the oracle tool's answer, shown to the planner
    moves = view.split("Program output:\nMOVES:")[1].split("\n")[0]
    env.step("MOVES:" + moves)  # taking the tool's answer over solves the maze
    assert env.infos["planner"]["success"] and env.terminations["planner"]
    env.reset(seed=7)
    env.step("MOVES: nowhere")  # a planner format error: the tool acts again for turn 2
    assert env.agent_selection == "planner" and env.infos["tool"]["turn"] == 1


@pytest.mark.slow
def test_per_role_sft_writes_one_loadable_model_per_role(tmp_path):
    from transformers import AutoModelForCausalLM

    from benchmarks.learning.sft import train_sft

    cfg = SFTConfig(env="plan_path_v0", env_kwargs=PLAN, train_problems=8, steps=2, batch_size=2, regime="per_role",
                    scratch_hidden_size=32, scratch_layers=1, max_prompt_tokens=128, device="cpu",
                    out_dir=str(tmp_path / "warm"))
    summary = train_sft(cfg)
    assert set(summary["demonstrations_per_policy"]) == {"tool", "planner", "solo"}
    for role in ("tool", "planner", "solo"):
        assert AutoModelForCausalLM.from_pretrained(tmp_path / "warm" / role) is not None
    assert not (tmp_path / "warm" / "_scratch").exists()


@pytest.mark.slow
def test_warm_start_stages_chain_and_are_reused(tmp_path):
    """``sft_continue`` trains each stage from the previous one's weights; a rerun with the same
    settings reuses every stage instead of training again, and the summary lists the ancestry."""
    import io

    from benchmarks.learning.experiment import EnvSetting, ExperimentConfig, warm_start

    setting = EnvSetting("plan_path_v0", PLAN, sft_steps=2, sft_problems=4, sft_continue=((2, 2e-3),),
                         max_prompt_tokens=128, single_agent_demonstrations=False)
    cfg = ExperimentConfig(envs=[setting], scratch_hidden_size=32, scratch_layers=1, work_dir=str(tmp_path))
    first = io.StringIO()
    out, summary = warm_start(setting, cfg, first)
    assert out == tmp_path / "warm_plan_path_v0_cont"
    assert summary["config"]["model"] == str(tmp_path / "warm_plan_path_v0") and summary["config"]["lr"] == 2e-3
    assert [s["config"]["out_dir"] for s in summary["continued_from"]] == [str(tmp_path / "warm_plan_path_v0")]
    again = io.StringIO()
    assert warm_start(setting, cfg, again)[0] == out
    assert again.getvalue().count("reusing") == 2 and "SFT steps" not in again.getvalue()


def test_combine_merges_conditions_of_one_env_run_in_separate_processes(tmp_path):
    import json

    from benchmarks.learning.experiment import combine
    from benchmarks.learning.report import summarize

    def part(conditions: list[str], warm_lr: float = 1e-3) -> dict:
        run = {"before": 0.25, "after": 0.5, "returns_before": {"planner": 0.0}, "returns_after": {"planner": 1.0},
               "degenerate_frac": 0.1, "completions": 64, "completion_tokens": 640, "seconds": 1.0,
               "train_reward_first": 0.0, "train_reward_last": 1.0,
               "curve": [{"completions": 0, "success": 0.25}, {"completions": 64, "success": 0.5}]}
        return {"config": {}, "seconds_total": 2.0, "envs": {"plan_path_v0": {
            "warm_start": {"config": {"lr": warm_lr}},
            "conditions": {name: {"runs": [run, run], "summary": summarize([run, run], 64)} for name in conditions}}}}

    for name, conditions in (("a", ["at_grpo_per_role"]), ("b", ["pooled_groups", "independent"])):
        (tmp_path / f"{name}.json").write_text(json.dumps(part(conditions)))
    merged = combine([tmp_path / "a.json", tmp_path / "b.json"], tmp_path / "out")
    assert list(merged["envs"]["plan_path_v0"]["conditions"]) == ["at_grpo_per_role", "pooled_groups", "independent"]
    assert merged["seconds_total"] == 4.0 and (tmp_path / "out" / "learning.png").exists()
    (tmp_path / "c.json").write_text(json.dumps(part(["single_agent"], warm_lr=3e-3)))
    with pytest.raises(ValueError, match="another warm start"):
        combine([tmp_path / "a.json", tmp_path / "c.json"], tmp_path / "out2")


def test_the_experiment_commands_run_from_a_checkout_and_refuse_bad_options_in_one_line(capsys):
    """``python -m benchmarks.learning`` and ``python -m benchmarks.learning.sft`` are the
    documented commands: they start from the repository root, and a bad option or value is one
    line on stderr with exit status 2, not a traceback."""
    import subprocess
    import sys

    from benchmarks.learning import experiment, sft

    root = REPO
    for module in ("benchmarks.learning", "benchmarks.learning.sft"):
        proc = subprocess.run([sys.executable, "-m", module, "--help"], cwd=root, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0 and proc.stdout.startswith(f"usage: python -m {module} "), proc.stderr
    for main, argv in ((sft.main, ["--env", "code_v0"]), (sft.main, ["--nonsense", "1"]),
                       (experiment.main, ["--seeds", "x"])):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("python -m benchmarks.learning") and err.count("\n") == 1, err
