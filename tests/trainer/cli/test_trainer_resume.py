"""``--resume`` continues the run its run dir holds, for every trainer command with a run dir
(``train``, ``train-variants``, ``train-ray``): the saved configuration is restored, options
that contradict it are refused in one line, a run dir without a run is refused, and each start
is appended to ``history.jsonl`` while ``config.json`` keeps describing the run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pettingllm_envs.cli import main
from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.options import load_run_config
from trainers.cli.train_ray import parse as parse_train_ray
from trainers.harness.errors import ConfigError
from trainers.harness.run_history import check_resume


def first_run_args(model: Path, run: Path, command: str = "train") -> list[str]:
    """A one-step run whose options all differ from the defaults where it matters."""
    return [command, "--env", "plan_path_v0", "--model", str(model), "--steps", "1", "--run-dir", str(run),
            "--max-new-tokens", "4", "--n-samples", "2", "--problems-per-step", "1", "--lr", "0.001",
            "--env-kwargs", "{max_turns: 1}", "--eval-every", "0", "--progress", "false", "--tensorboard", "false"]


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pettingllm: error: ") and "\n" not in err, err
    return err.removeprefix("pettingllm: error: ")


def history(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]


@pytest.fixture
def finished_run(tiny_model_dir, tmp_path, capsys) -> Path:
    """The run dir of a finished one-step ``pettingllm train`` run."""
    run = tmp_path / "run"
    assert main(first_run_args(tiny_model_dir, run)) == 0
    capsys.readouterr()
    return run


@pytest.mark.parametrize("command", ["train", "train-variants"])
def test_resuming_a_run_dir_that_holds_no_run_is_refused(capsys, tmp_path, tiny_model_dir, command):
    missing = tmp_path / "never_ran"
    err = one_line_error(capsys, [*first_run_args(tiny_model_dir, missing, command), "--resume"])
    assert err == (f"resume: run_dir {str(missing)!r} does not exist, so there is no run to resume "
                   "(leave out --resume to start a new run there)")
    assert not missing.exists()  # no fresh run was started instead
    (tmp_path / "empty").mkdir()
    err = one_line_error(capsys, [command, "--run-dir", str(tmp_path / "empty"), "--resume"])
    assert err == f"resume: run_dir {str(tmp_path / 'empty')!r} holds no run to resume (it has no config.json)"


@pytest.mark.slow  # trains a run first
def test_options_left_out_on_resume_take_the_runs_values_not_the_defaults(finished_run):
    config = load_run_config(["--run-dir", str(finished_run), "--resume"])
    assert (config.run.steps, config.model.lr, config.rollout.n_samples, config.model.max_new_tokens,
            config.task.env_kwargs, config.model.model) == (
        1, 0.001, 2, 4, {"max_turns": 1}, json.loads((finished_run / "config.json").read_text())["model"]["model"])
    defaults = TrainConfig()
    assert (defaults.run.steps, defaults.model.lr) != (1, 0.001)  # the defaults would have differed
    assert config.run.resume and not config.run.overwrite


@pytest.mark.slow  # trains a run first
def test_options_that_contradict_the_run_are_refused_naming_them(capsys, finished_run):
    before = {p.name: p.read_bytes() for p in finished_run.glob("*.json*")}
    err = one_line_error(capsys, ["train", "--run-dir", str(finished_run), "--resume", "--env", "sudoku_v0",
                                  "--lr", "0.1", "--steps", "3"])
    assert err == (f"resume: --env 'sudoku_v0' (the run's: 'plan_path_v0'), --lr 0.1 (the run's: 0.001) contradict "
                   f"the run in {str(finished_run)!r}; leave them out to continue the run as it was started, or "
                   "start a new run in another run_dir")
    assert {p.name: p.read_bytes() for p in finished_run.glob("*.json*")} == before  # nothing written
    # the same option given with the run's own value is no contradiction
    assert load_run_config(["--run-dir", str(finished_run), "--resume", "--lr", "1e-3", "--env", "plan_path_v0"])


@pytest.mark.slow  # trains a run first
def test_a_yaml_section_that_contradicts_the_run_is_refused_naming_the_setting(capsys, finished_run, tmp_path):
    yaml_file = tmp_path / "resume.yaml"
    yaml_file.write_text("model: {lr: 0.1}\nrun: {steps: 2}\n")
    err = one_line_error(capsys, ["train", "--run-dir", str(finished_run), "--resume", "--config", str(yaml_file)])
    assert err.startswith("resume: --lr 0.1 (the run's: 0.001) contradicts the run in"), err


@pytest.mark.slow  # trains a run first
def test_a_resumed_run_appends_to_its_history_and_config_json_stays_the_runs(capsys, finished_run):
    first_config = json.loads((finished_run / "config.json").read_text())
    assert main(["train", "--run-dir", str(finished_run), "--resume", "--steps", "2"]) == 0
    assert [json.loads(line)["step"] for line in (finished_run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert json.loads((finished_run / "config.json").read_text()) == {
        **first_config, "run": {**first_config["run"], "steps": 2}}
    starts = history(finished_run)
    assert [(s["resume"], s["from_step"], s["to_step"], s["changed"]) for s in starts] == [
        (False, 0, 1, {}), (True, 1, 2, {"steps": {"from": 1, "to": 2}})]
    # a resume without options continues the run to its (now) last step: nothing left to do
    assert main(["train", "--run-dir", str(finished_run), "--resume"]) == 0
    assert len((finished_run / "metrics.jsonl").read_text().splitlines()) == 2
    assert history(finished_run)[-1]["changed"] == {} and len(history(finished_run)) == 3
    assert json.loads((finished_run / "config.json").read_text()) == {
        **first_config, "run": {**first_config["run"], "steps": 2}}


@pytest.mark.slow  # trains a run first
def test_a_run_dir_with_a_flat_config_json_from_before_the_sections_resumes(capsys, finished_run):
    """Run dirs written before the config had sections hold every setting at the top level of
    ``config.json``: they resume by the same rules, and a resume that changes a setting writes
    the config back by section."""
    tree = json.loads((finished_run / "config.json").read_text())
    flat = {name: value for section in tree.values() for name, value in section.items()}
    (finished_run / "config.json").write_text(json.dumps(flat))
    err = one_line_error(capsys, ["train", "--run-dir", str(finished_run), "--resume", "--lr", "0.1"])
    assert err.startswith("resume: --lr 0.1 (the run's: 0.001) contradicts the run in")
    assert main(["train", "--run-dir", str(finished_run), "--resume", "--steps", "2"]) == 0
    assert json.loads((finished_run / "config.json").read_text()) == {**tree, "run": {**tree["run"], "steps": 2}}
    assert history(finished_run)[-1]["changed"] == {"steps": {"from": 1, "to": 2}}


@pytest.mark.slow  # trains a run first
def test_the_trainer_itself_refuses_a_config_that_contradicts_its_run(finished_run):
    """Programmatic use (``Trainer(TrainConfig.from_flat(...))``) gets the same checks: every field is given."""
    saved = TrainConfig().with_values(json.loads((finished_run / "config.json").read_text()))
    other = saved.replace(env="sudoku_v0", steps=5, resume=True)
    other.validate()
    with pytest.raises(ConfigError, match=r"^resume: env 'sudoku_v0' \(the run's: 'plan_path_v0'\) contradicts"):
        check_resume(Path(other.run.run_dir), other, resume=other.run.resume)
    same = saved.replace(steps=5, checkpoint_every=1, resume=True)
    same.validate()
    assert check_resume(Path(same.run.run_dir), same, resume=same.run.resume) == {
        "steps": (1, 5), "checkpoint_every": (50, 1)}
    missing = saved.replace(run_dir=str(finished_run / "elsewhere"), resume=True)
    with pytest.raises(ConfigError, match="does not exist, so there is no run to resume"):
        check_resume(Path(missing.run.run_dir), missing, resume=missing.run.resume)


@pytest.mark.slow  # trains a run first
def test_train_variants_resumes_its_own_run_by_the_same_rules(capsys, tiny_model_dir, tmp_path):
    run = tmp_path / "variants"
    assert main(first_run_args(tiny_model_dir, run, "train-variants")) == 0
    capsys.readouterr()
    err = one_line_error(capsys, ["train-variants", "--run-dir", str(run), "--resume", "--n-samples", "4"])
    assert err.startswith("resume: --n-samples 4 (the run's: 2) contradicts the run in")
    assert main(["train-variants", "--run-dir", str(run), "--resume", "--steps", "2"]) == 0
    assert [s["from_step"] for s in history(run)] == [0, 1]


@pytest.mark.slow  # trains a run first
def test_train_ray_resumes_by_the_same_rules(finished_run, tmp_path):
    """``train-ray`` reads its options through the same loader (checked without starting Ray)."""
    config, _ = parse_train_ray(["--run-dir", str(finished_run), "--resume"])
    assert (config.run.steps, config.model.lr, config.task.env) == (1, 0.001, "plan_path_v0")
    with pytest.raises(ConfigError, match=r"--env 'sudoku_v0' \(the run's: 'plan_path_v0'\) contradicts"):
        parse_train_ray(["--run-dir", str(finished_run), "--resume", "--env", "sudoku_v0"])
    with pytest.raises(ConfigError, match="does not exist, so there is no run to resume"):
        parse_train_ray(["--run-dir", str(tmp_path / "nothing"), "--resume", "--model", "m"])


@pytest.mark.slow
def test_ctrl_c_says_which_step_the_checkpoint_holds_and_how_to_resume(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    args = first_run_args(tiny_model_dir, run)
    args[args.index("--steps") + 1] = "100000"
    proc = subprocess.Popen([sys.executable, "-m", "pettingllm_envs", *args, "--checkpoint-every", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not (run / "checkpoints" / "latest").exists():  # wait for the first checkpoint
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    lines = err.strip().splitlines()
    assert lines[-1] == "pettingllm: interrupted"
    note = next(line for line in lines if line.startswith("[train] interrupted in step "))
    latest = (run / "checkpoints" / "latest").read_text()
    held = int(json.loads((run / "checkpoints" / latest / "state.json").read_text())["step"])
    assert held >= 1
    assert note.endswith(f"of 100000; the last checkpoint holds step {held} ({run / 'checkpoints' / latest}); "
                         f"continue with: pettingllm train --run-dir {run} --resume")


class _WritesAFile:
    """A pickle payload: unpickling it with a full unpickler creates ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


@pytest.mark.parametrize("name", ["rng.pt", "optimizer.pt"])
def test_a_crafted_checkpoint_file_is_refused_in_one_line_and_runs_nothing(capsys, finished_run, tmp_path, name):
    """A run dir may come from anyone: its checkpoint files load with ``weights_only=True``, so a
    file that names code to run is refused before anything in it runs (the genuine files of every
    exact-resume test load the same way)."""
    import torch

    marker = tmp_path / "payload_ran"
    checkpoint = finished_run / "checkpoints" / (finished_run / "checkpoints" / "latest").read_text()
    torch.save({"python": _WritesAFile(marker)}, checkpoint / name)
    err = one_line_error(capsys, ["train", "--run-dir", str(finished_run), "--resume", "--steps", "2"])
    assert err.startswith(f"checkpoint file {checkpoint / name} holds objects other than tensors"), err
    assert "not loaded" in err
    assert not marker.exists()
