"""The step profile (``--profile on|trace``, :mod:`trainers.harness.profile`) on every algorithm.

Each command runs with the tiny model for one or two steps and must write ``profile.jsonl`` (one
record per step, every phase of :data:`~trainers.harness.profile.PHASES` present and non-negative, the
phases adding up to at most the step's wall time and covering most of it) and ``profile_summary.json``,
and print the summary table; the phases that command runs must have taken time. Without ``--profile``
nothing is written and no timer is installed. Timings themselves are never asserted: the overhead of
an unprofiled phase boundary is measured in the report of the change, not here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_configs import cli_args

from pettingllm_envs.cli import main
from trainers.harness.profile import PHASES, PROFILE, SUMMARY, TRACE, StepProfile
from trainers.profiling.phases import NO_TIMER, add_seconds, current, phase

#: The toy env's two-step AT-GRPO run that trains every step (degenerate groups kept), checkpoints
#: and evaluates every step: every phase of a step runs.
TRAIN_ARGS = ["--steps", "2", "--max-new-tokens", "2", "--n-samples", "2", "--problems-per-step", "2",
              "--drop-degenerate", "false", "--eval-every", "1", "--eval-problems", "1", "--checkpoint-every", "1",
              "--progress", "false", "--tensorboard", "false"]
#: The least share of a step's wall time its phases must account for (measured: 0.99 and more).
COVERED = 0.9


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / PROFILE).read_text().splitlines()]


def check_profile(folder: Path, steps: int, ran: set[str], stderr: str) -> list[dict]:
    """The files of a profiled run of ``steps`` steps whose phases ``ran`` took time; the table printed."""
    found = records(folder)
    assert [r["step"] for r in found] == list(range(1, steps + 1))
    for record in found:
        phases = record["phases"]
        assert set(PHASES) <= set(phases) and all(v >= 0 for v in phases.values()), phases
        assert sum(phases.values()) <= record["seconds"] * (1 + 1e-9)
        assert sum(phases.values()) >= COVERED * record["seconds"], record["share"]
        assert sum(record["share"].values()) == pytest.approx(1.0)
        assert record["peak_rss_mb"] > 0 and record["tokens_generated"] > 0
    took = {name for name in PHASES if any(r["phases"][name] > 0 for r in found)}
    assert ran <= took, ran - took
    summary = json.loads((folder / SUMMARY).read_text())
    assert summary["steps"] == steps
    assert summary["seconds"] == pytest.approx(sum(r["seconds"] for r in found))
    assert summary["tokens_generated_per_s"] > 0
    assert "profile_summary.json" in stderr and "generation" in stderr
    return found


# ---------------------------------------------------------------------------- without a profile
def test_without_a_profile_no_timer_is_installed_and_nothing_is_written(tmp_path):
    profile = StepProfile(tmp_path, "off")
    with profile.step(1):
        assert current() is NO_TIMER
        assert phase("backward") is phase("generation")  # one shared do-nothing context manager
        with phase("backward"):
            add_seconds("env", 1.0)
    profile.finish()
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- every algorithm
def test_train_profiles_every_phase_of_its_steps(toy, tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--env", toy, "--model", str(tiny_model_dir), "--run-dir", str(run), "--profile", "on",
                 *TRAIN_ARGS]) == 0
    found = check_profile(run, 2, {"generation", "env", "tree", "rollout", "scoring", "backward", "optimizer",
                                   "weight_sync", "eval", "logging", "checkpoint"}, capsys.readouterr().err)
    assert all(r["tokens_trained"] > 0 and r["tokens_trained_per_s"] > 0 for r in found)
    assert not (run / TRACE).exists()


def test_train_without_profile_writes_no_profile(toy, tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--env", toy, "--model", str(tiny_model_dir), "--run-dir", str(run),
                 *TRAIN_ARGS[:-2], "--steps", "1"]) == 0
    assert (run / "metrics.jsonl").is_file()
    assert not {PROFILE, SUMMARY, TRACE} & {p.name for p in run.iterdir()}
    assert "profile_summary" not in capsys.readouterr().err


def test_train_variants_profile_trace_names_the_phases(toy, tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train-variants", "--env", toy, "--model", str(tiny_model_dir), "--run-dir", str(run),
                 "--profile", "trace", *TRAIN_ARGS]) == 0
    check_profile(run, 2, {"generation", "env", "scoring", "backward", "optimizer", "eval", "checkpoint"},
                  capsys.readouterr().err)
    names = {event.get("name") for event in json.loads((run / TRACE).read_text())["traceEvents"]}
    assert {"rollout", "backward", "optimizer", "checkpoint"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("role", ["local", "both"])
def test_train_mgrpo_profiles_its_steps(tiny_model_dir, tmp_path, capsys, role):
    """In one process, and on the main side of two (the sub side's update is what it waits for)."""
    run = tmp_path / "run"
    assert main([*cli_args(tiny_model_dir, run, role, 2), "--drop-degenerate", "false", "--profile", "on"]) == 0
    ran = {"generation", "env", "scoring", "backward", "optimizer", "weight_sync", "logging", "checkpoint"}
    found = check_profile(run, 2, ran, capsys.readouterr().err)
    assert all(r["phases"].get("sub_side", 0.0) > 0 for r in found) == (role == "both")


def test_self_consistency_profiles_each_problem_and_its_sandbox_runs(tiny_model_dir, tmp_path, capsys):
    folder = tmp_path / "profile"
    assert main(["self-consistency", "--model", str(tiny_model_dir), "--env", "code_v0", "--problems", "2",
                 "--g", "2", "--max-new-tokens", "8", "--variants", "[]", "--profile", "on",
                 "--profile-dir", str(folder)]) == 0
    # code_v0 votes on each program's behaviour on the public examples: sandbox runs
    check_profile(folder, 2, {"generation", "env", "sandbox"}, capsys.readouterr().err)


def test_self_consistency_profile_needs_a_folder(tiny_model_dir, capsys):
    assert main(["self-consistency", "--model", str(tiny_model_dir), "--profile", "on"]) == 2
    assert "--profile-dir" in capsys.readouterr().err


@pytest.mark.slow
def test_train_ray_profiles_its_steps(ray_cluster, tiny_model_dir, tmp_path, capsys):
    """On Ray the update runs in the training groups' actors: the driver charges it to ``update``."""
    from run_configs import distributed_toy_config as config
    from run_configs import layout

    from trainers.algorithms.atgrpo.train import run
    from trainers.distributed.trainer import DistributedTrainer

    folder = tmp_path / "run"
    settings = config(tiny_model_dir, folder, steps=2, profile="on", checkpoint_every=1, eval_every=1, eval_problems=1)
    with DistributedTrainer(settings, layout(rollout_workers=1, train_workers_per_policy=1)) as trainer:
        assert run(trainer, "train-ray") == 0
    check_profile(folder, 2, {"generation", "env", "update", "eval", "logging", "checkpoint"},
                  capsys.readouterr().err)
