"""M-GRPO on the run harness: ``--resume`` continues as if never stopped (one process and two)
and a seeded rerun repeats itself, both bit for bit (metrics and weights); a resume that
contradicts the run or a rerun over it is refused in one line, and ``metrics.jsonl`` is
appended to, never deleted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from run_configs import cli_args, small_config
from safetensors.torch import load_file

from pettingllm_envs.cli import main
from trainers.algorithms.mgrpo.run import resume_step
from trainers.algorithms.mgrpo.train import run_local
from trainers.harness.errors import ConfigError

#: Every step updates every trained policy: degenerate groups are kept and the KL term and the
#: weight decay move the weights even when all rewards are equal (most groups of the untrained
#: tiny model are), so resume has weights and AdamW moments to restore, not a model that never moved.
UPDATES_EVERY_STEP = {"drop_degenerate": False, "kl_coef": 0.05, "weight_decay": 0.1}


def metric_lines(run: Path) -> list[dict]:
    """``metrics.jsonl`` without the timings (wall-clock, never repeatable)."""
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/")}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def latest_weights(checkpoints: Path) -> dict[str, dict[str, torch.Tensor]]:
    """Every tensor of every policy of the latest checkpoint under ``checkpoints``, by policy name."""
    policies = checkpoints / (checkpoints / "latest").read_text() / "policies"
    return {p.name: load_file(str(p / "model.safetensors")) for p in sorted(policies.iterdir())}


def final_weights(run: Path, side: str) -> dict[str, dict[str, torch.Tensor]]:
    """:func:`latest_weights` of a side's checkpoints."""
    return latest_weights(run / "checkpoints" / side)


def assert_same_weights(a: dict[str, dict[str, torch.Tensor]], b: dict[str, dict[str, torch.Tensor]]) -> None:
    """The same policies and tensors, bit for bit (``torch.equal``)."""
    assert {n: sorted(w) for n, w in a.items()} == {n: sorted(w) for n, w in b.items()}
    differing = [f"{n}/{k}" for n in a for k in a[n] if not torch.equal(a[n][k], b[n][k])]
    assert not differing, differing


def assert_same_run(resumed: Path, straight: Path, sides: tuple[str, ...]) -> None:
    """The same metrics lines, timings aside, and bit-identical weights."""
    assert metric_lines(resumed) == metric_lines(straight)
    for side in sides:
        assert_same_weights(final_weights(resumed, side), final_weights(straight, side))


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pettingllm: error: ") and "\n" not in err, err
    return err.removeprefix("pettingllm: error: ")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["single", "mgrpo"])
def test_a_local_run_interrupted_after_step_2_ends_as_an_uninterrupted_one(tiny_model_dir, tmp_path, mode):
    """4 steps straight vs 2 steps, then ``resume`` to 4: the same metrics lines and weights
    (policies, optimisers, RNG states and the step all come back from the checkpoint)."""
    straight = tmp_path / "straight"
    run_local(small_config(tiny_model_dir, straight, mode=mode, steps=4, **UPDATES_EVERY_STEP))
    interrupted = tmp_path / "interrupted"
    assert len(run_local(small_config(tiny_model_dir, interrupted, mode=mode, steps=2, **UPDATES_EVERY_STEP))) == 2
    resumed = run_local(small_config(tiny_model_dir, interrupted, mode=mode, steps=4, resume=True,
                                     **UPDATES_EVERY_STEP))
    assert [m["step"] for m in resumed] == [3, 4] and all(m["samples/trained"] > 0 for m in resumed)
    assert resumed[-1]["kl"] > 0  # the policies moved away from the reference
    assert_same_run(interrupted, straight, ("local",))
    assert len({json.dumps(m["reward/mean"]) for m in metric_lines(straight)}) > 1  # the steps differ
    assert set(final_weights(straight, "local")) == ({"shared"} if mode == "single" else {"main", "sub"})
    starts = [json.loads(line) for line in (interrupted / "history.jsonl").read_text().splitlines()]
    assert [(s["resume"], s["from_step"], s["to_step"]) for s in starts] == [(False, 0, 2), (True, 2, 4)]


@pytest.mark.slow
def test_a_seeded_rerun_repeats_its_metrics_and_weights(tiny_model_dir, tmp_path):
    """The same command twice, each in a fresh process as a user reruns it."""
    updates = ["--drop-degenerate", "false", "--kl-coef", "0.05", "--weight-decay", "0.1"]
    for run in ("a", "b"):
        command(*cli_args(tiny_model_dir, tmp_path / run, "local", 2), *updates)
    assert all(m["samples/trained"] > 0 for m in metric_lines(tmp_path / "a"))
    assert_same_run(tmp_path / "a", tmp_path / "b", ("local",))


def command(*args: str) -> None:
    """``pettingllm ARGS`` in a process of its own; it must succeed."""
    done = subprocess.run([sys.executable, "-m", "pettingllm_envs", *args], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_a_two_process_run_resumes_both_sides_exactly(tiny_model_dir, tmp_path):
    """``--role both``: each side checkpoints its own policy at the same steps, and a resume
    restarts both from there, exchanging records under a new store namespace (each run a
    command of its own, so that each side's process starts afresh as a user's would). The
    held-out evaluation after steps 2 and 4 plays the sub side's delegations through the store."""
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    evaluation = ["--eval-every", "2", "--eval-problems", "2"]
    command(*cli_args(tiny_model_dir, straight, "both", 4), *evaluation)
    command(*cli_args(tiny_model_dir, interrupted, "both", 2), *evaluation)
    assert [p.name for p in sorted((interrupted / "checkpoints").iterdir())] == ["main", "sub"]
    command("train-mgrpo", "--role", "both", "--run-dir", str(interrupted), "--resume", "--steps", "4")
    assert_same_run(interrupted, straight, ("main", "sub"))
    assert [m["samples/trained/main"] > 0 for m in metric_lines(straight)] == [False, False, False, True]
    assert [m.get("eval/n_problems") for m in metric_lines(straight)] == [None, 2, None, 2]


@pytest.mark.slow  # trains a run first
def test_resume_with_a_contradicting_option_is_refused_in_one_line(capsys, tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    assert main(cli_args(tiny_model_dir, run, "local", 1)) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in run.glob("*.json*")}
    err = one_line_error(capsys, ["train-mgrpo", "--role", "local", "--run-dir", str(run), "--resume",
                                  "--rollouts", "4", "--steps", "2"])
    assert err == (f"resume: --rollouts 4 (the run's: 3) contradicts the run in {str(run)!r}; leave it out to "
                   "continue the run as it was started, or start a new run in another run_dir")
    assert {p.name: p.read_bytes() for p in run.glob("*.json*")} == before
    # options left out take the run's values: the run goes on to step 2 with its own settings
    assert main(["train-mgrpo", "--role", "local", "--run-dir", str(run), "--resume", "--steps", "2"]) == 0
    assert [m["step"] for m in metric_lines(run)] == [1, 2] and metric_lines(run)[1]["samples/main"] == 3 * 2
    capsys.readouterr()
    err = one_line_error(capsys, ["train-mgrpo", "--role", "local", "--run-dir", str(tmp_path / "none"), "--resume"])
    assert "does not exist, so there is no run to resume" in err


def test_a_rerun_over_a_run_is_refused_and_its_metrics_stay(capsys, tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(ConfigError, match=r"already holds a run \(metrics.jsonl\): pass --resume .* --overwrite"):
        run_local(small_config(tiny_model_dir, run))
    for role in ("local", "both"):
        err = one_line_error(capsys, ["train-mgrpo", "--role", role, "--model", str(tiny_model_dir),
                                      "--run-dir", str(run)])
        assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert (run / "metrics.jsonl").read_text() == '{"step": 1}\n'
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl"]


def test_a_run_resumes_only_in_the_layout_it_was_trained_in(tmp_path):
    """Checkpoints of ``--role local`` hold every policy; a two-process resume needs both sides'."""
    cfg = small_config("m", tmp_path, resume=True)
    local = tmp_path / "checkpoints" / "local" / "step_000002"
    local.mkdir(parents=True)
    (local / "state.json").write_text('{"step": 2}')
    with pytest.raises(ConfigError, match=r"was trained with --role local, so it resumes only that way"):
        resume_step(cfg, "two_process")
    (tmp_path / "checkpoints" / "local" / "latest").write_text("step_000002")
    assert resume_step(cfg, "local") == 2
    cfg = small_config("m", tmp_path / "two", resume=True)
    for side, steps in (("main", (2, 3)), ("sub", (3, 4))):
        for step in steps:
            folder = tmp_path / "two" / "checkpoints" / side / f"step_{step:06d}"
            folder.mkdir(parents=True)
            (folder / "state.json").write_text(json.dumps({"step": step}))
    assert resume_step(cfg, "two_process") == 3  # the newest step both sides hold
    for folder in (tmp_path / "two" / "checkpoints" / "sub").iterdir():
        (folder / "state.json").unlink()
    with pytest.raises(ConfigError, match="holds checkpoints of the main side but none of the sub side"):
        resume_step(cfg, "two_process")
