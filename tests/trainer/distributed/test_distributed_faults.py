"""A rollout worker or a generation engine killed (SIGKILL by PID) in the middle of a distributed
step (trainers/distributed/faults.py): the step is retried and the run ends as an uninterrupted
one does, or, with no retries left, the run stops with one line naming the actor and how to
resume, its checkpoint intact, and ``--resume`` finishes it to the uninterrupted result."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

from test_distributed_training import config, steady  # noqa: E402

from trainers.distributed.config import DistributedConfig  # noqa: E402
from trainers.distributed.faults import StepFailed  # noqa: E402
from trainers.distributed.trainer import DistributedTrainer  # noqa: E402

pytestmark = pytest.mark.slow

STEPS = 3
#: Every step checkpointed, no held-out evaluation: three short steps.
COMMON = {"steps": STEPS, "checkpoint_every": 1}


def layout(**overrides: Any) -> DistributedConfig:
    """Two rollout workers (one to kill, one to keep), one engine and one training rank."""
    values = {"rollout_workers": 2, "rollout_worker_cpus": 0.5, "engines_per_policy": 1, "engine_cpus": 0.5,
              "train_workers_per_policy": 1, "train_worker_cpus": 0.5, "call_timeout_s": 60}
    values.update(overrides)
    return DistributedConfig(**values)


def kill_process(pid: int) -> None:
    """SIGKILL ``pid`` and wait (at most 10 s) until it is gone."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


class KillingTrainer(DistributedTrainer):
    """The distributed trainer that, at the second sampler call of step ``at_step`` (the envs have
    stepped on the rollout workers and the engine has generated once), kills the process of the
    actor ``victim`` picks; once."""

    def __init__(self, train_config: Any, dist: DistributedConfig, victim: Callable[[DistributedTrainer], Any],
                 at_step: int) -> None:
        self.victim, self.at_step = victim, at_step
        self.calls = 0
        self.killed: list[int] = []
        super().__init__(train_config, dist)

    def sampler(self, agent: str, prompts: Any, n: int) -> Any:
        if self.step + 1 == self.at_step and not self.killed:
            self.calls += 1
            if self.calls == 2:
                pid = ray.get(self.victim(self).pid.remote())
                kill_process(pid)
                self.killed.append(pid)
        return super().sampler(agent, prompts, n)


def rollout_worker(trainer: DistributedTrainer) -> Any:
    assert trainer.rollout_pool is not None
    return trainer.rollout_pool.workers[0]


def engine(trainer: DistributedTrainer) -> Any:
    return trainer.generator.engines["shared"][0]


@pytest.fixture(scope="module")
def uninterrupted(ray_cluster, tiny_model_dir, tmp_path_factory):
    """The uninterrupted run of the same config and layout: its run dir and final weights. (Its
    actors train with one thread, this process with several: the single-process run's weights
    differ from it by float summation order, test_distributed_training.WEIGHT_ATOL.)"""
    run = tmp_path_factory.mktemp("faults") / "uninterrupted"
    with DistributedTrainer(config(tiny_model_dir, run, **COMMON), layout()) as trainer:
        trainer.train()
        return run, trainer.policies.snapshot("shared")


def assert_same_as(uninterrupted: tuple, run, trainer: DistributedTrainer) -> None:
    """Samples, metrics (one line per step) and weights of ``run`` are the uninterrupted run's."""
    local, weights = uninterrupted
    assert (run / "samples.jsonl").read_text() == (local / "samples.jsonl").read_text()
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    expected = [json.loads(line) for line in (local / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged] == list(range(1, STEPS + 1))
    assert [steady(m) for m in logged] == [steady(m) for m in expected]
    here = trainer.policies.snapshot("shared")
    assert here.keys() == weights.keys() and all(torch.equal(here[k], weights[k]) for k in here)
    checkpoints = run / "checkpoints"
    assert (checkpoints / "latest").read_text() == f"step_{STEPS:06d}" and not list(checkpoints.glob(".tmp*"))


@pytest.mark.parametrize(("victim", "restarts"), [(rollout_worker, 0), (rollout_worker, 3), (engine, 3)],
                         ids=["rollout-worker-step-retried", "rollout-worker-replaced-in-rollout", "engine"])
def test_an_actor_killed_mid_step_costs_a_retried_step_and_changes_nothing(
        ray_cluster, tiny_model_dir, tmp_path, uninterrupted, victim, restarts, capsys):
    """Step 2 loses an actor's process: a rollout worker with no in-rollout replacements allowed
    (``max_worker_restarts: 0``: the step is retried), one with them (replaced and its problems
    replayed within the rollout), or the engine (replaced, given the current weights, the step's
    rollout run again). The run finishes with the uninterrupted run's samples, metrics and
    weights, exactly, and one metrics line per step."""
    run = tmp_path / "run"
    with KillingTrainer(config(tiny_model_dir, run, **COMMON), layout(max_worker_restarts=restarts, step_retries=1),
                        victim, at_step=2) as trainer:
        trainer.train()
        assert trainer.killed and ray.get(victim(trainer).pid.remote()) not in trainer.killed
        assert_same_as(uninterrupted, run, trainer)
    retried = "retrying step 2" in capsys.readouterr().err
    assert retried == (victim is engine or restarts == 0)


def test_without_retries_the_run_stops_with_one_line_and_resumes_to_the_same_result(
        ray_cluster, tiny_model_dir, tmp_path, uninterrupted):
    """``step_retries: 0`` and the engine killed in step 2: the run stops with one line naming the
    engine and the resume command; the run dir holds step 1's checkpoint and metrics, nothing of
    step 2; ``--resume`` runs steps 2-3 to the uninterrupted run's samples, metrics and weights."""
    run = tmp_path / "run"
    with pytest.raises(StepFailed) as stopped, KillingTrainer(config(tiny_model_dir, run, **COMMON),
                                                              layout(step_retries=0), engine, at_step=2) as trainer:
        trainer.train()
    message = str(stopped.value)
    assert "\n" not in message
    assert "generation engine 0 of policy 'shared'" in message and "step 2" in message
    assert f"--run-dir {run} --resume" in message and "holds step 1" in message
    checkpoints = run / "checkpoints"
    assert (checkpoints / "latest").read_text() == "step_000001" and not list(checkpoints.glob(".tmp*"))
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]
    assert {json.loads(line)["step"] for line in (run / "samples.jsonl").read_text().splitlines()} == {1}
    with DistributedTrainer(config(tiny_model_dir, run, resume=True, **COMMON), layout()) as resumed:
        assert resumed.step == 1
        resumed.train()
        assert_same_as(uninterrupted, run, resumed)
